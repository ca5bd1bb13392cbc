/**
 * Reads the size and channel layout of a PNG, JPEG or WebP from its headers, without a decoder
 * (sharp is kept out of the server test processes: it would share libvips with the addon), and
 * crafts tiny PNGs whose header claims any size.
 */
import { crc32, deflateSync } from 'node:zlib';

export interface ImageInfo {
  format: 'png' | 'jpg' | 'webp';
  width: number;
  height: number;
  /** 1 grey, 2 grey+alpha, 3 colour, 4 colour+alpha (PNG, JPEG; WebP: 3 or 4). */
  channels: number;
}

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
const PNG_CHANNELS: Record<number, number> = { 0: 1, 2: 3, 3: 3, 4: 2, 6: 4 };

function png(b: Buffer): ImageInfo {
  if (b.toString('latin1', 12, 16) !== 'IHDR') throw new Error('PNG without IHDR first');
  const colourType = b[25]!;
  let channels = PNG_CHANNELS[colourType];
  if (channels === undefined) throw new Error(`PNG colour type ${colourType}`);
  // A palette image is RGBA when it has a tRNS chunk.
  if (colourType === 3 && b.includes(Buffer.from('tRNS', 'latin1'))) channels = 4;
  return { format: 'png', width: b.readUInt32BE(16), height: b.readUInt32BE(20), channels };
}

function jpeg(b: Buffer): ImageInfo {
  let i = 2;
  while (i + 4 <= b.length) {
    if (b[i] !== 0xff) throw new Error(`JPEG: no marker at ${i}`);
    const marker = b[i + 1]!;
    if (marker === 0xff) {
      i++;
      continue;
    }
    const length = b.readUInt16BE(i + 2);
    const isSof = marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc;
    if (isSof) return { format: 'jpg', height: b.readUInt16BE(i + 5), width: b.readUInt16BE(i + 7), channels: b[i + 9]! };
    i += 2 + length;
  }
  throw new Error('JPEG without a frame header');
}

function webp(b: Buffer): ImageInfo {
  const chunk = b.toString('latin1', 12, 16);
  if (chunk === 'VP8X') {
    const alpha = (b[20]! & 0x10) !== 0;
    return { format: 'webp', width: 1 + b.readUIntLE(24, 3), height: 1 + b.readUIntLE(27, 3), channels: alpha ? 4 : 3 };
  }
  if (chunk === 'VP8L') {
    if (b[20] !== 0x2f) throw new Error('VP8L without signature');
    const bits = b.readUInt32LE(21);
    return { format: 'webp', width: 1 + (bits & 0x3fff), height: 1 + ((bits >>> 14) & 0x3fff), channels: ((bits >>> 28) & 1) === 1 ? 4 : 3 };
  }
  if (chunk === 'VP8 ') {
    if (b[23] !== 0x9d || b[24] !== 0x01 || b[25] !== 0x2a) throw new Error('VP8 without start code');
    return { format: 'webp', width: b.readUInt16LE(26) & 0x3fff, height: b.readUInt16LE(28) & 0x3fff, channels: 3 };
  }
  throw new Error(`WebP chunk ${JSON.stringify(chunk)}`);
}

/** Format, size and channels of an encoded image, from its headers. Throws when it is none of the three. */
export function imageInfo(b: Buffer): ImageInfo {
  if (b.length >= 33 && b.subarray(0, 8).equals(PNG_SIGNATURE)) return png(b);
  if (b.length >= 4 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return jpeg(b);
  if (b.length >= 30 && b.toString('latin1', 0, 4) === 'RIFF' && b.toString('latin1', 8, 12) === 'WEBP') return webp(b);
  throw new Error(`not a PNG, JPEG or WebP (starts ${b.subarray(0, 8).toString('hex')})`);
}

function chunk(type: string, body: Buffer): Buffer {
  const out = Buffer.alloc(12 + body.length);
  out.writeUInt32BE(body.length, 0);
  out.write(type, 4, 'latin1');
  body.copy(out, 8);
  out.writeUInt32BE(crc32(out.subarray(4, 8 + body.length)) >>> 0, 8 + body.length);
  return out;
}

/** A well-formed 8-bit RGB PNG header claiming width x height, followed by a tiny IDAT and IEND. */
export function pngClaiming(width: number, height: number): Buffer {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8;
  ihdr[9] = 2;
  return Buffer.concat([PNG_SIGNATURE, chunk('IHDR', ihdr), chunk('IDAT', deflateSync(Buffer.alloc(256))), chunk('IEND', Buffer.alloc(0))]);
}

/** A PNG padded to exactly `total` bytes by a private ancillary chunk ("prVt") right after IHDR: decoders skip it. */
export function padPng(png: Buffer, total: number): Buffer {
  const body = total - png.length - 12;
  if (body < 0) throw new Error(`the PNG is already ${png.length} bytes`);
  return Buffer.concat([png.subarray(0, 33), chunk('prVt', Buffer.alloc(body, 0x2a)), png.subarray(33)]);
}

/** The PNG with one bit of its IHDR's CRC flipped (the chunk itself intact). */
export function pngWithBadIhdrCrc(png: Buffer): Buffer {
  if (png.toString('latin1', 12, 16) !== 'IHDR') throw new Error('PNG without IHDR first');
  const out = Buffer.from(png);
  out[32] = out[32]! ^ 0x01;
  return out;
}

/** Where the first SOS segment of a JPEG starts, and where its header ends (the scan data begins). */
export function jpegScanStart(jpeg: Buffer): { sos: number; data: number } {
  let i = 2;
  while (i + 4 <= jpeg.length) {
    if (jpeg[i] !== 0xff) throw new Error(`JPEG: no marker at ${i}`);
    if (jpeg[i + 1] === 0xff) {
      i++;
      continue;
    }
    const length = jpeg.readUInt16BE(i + 2);
    if (jpeg[i + 1] === 0xda) return { sos: i, data: i + 2 + length };
    i += 2 + length;
  }
  throw new Error('JPEG without a scan');
}

/** The JPEG's headers up to and including its SOS segment, then EOI: a scan with no data. */
export function jpegWithoutScanData(jpeg: Buffer): Buffer {
  return Buffer.concat([jpeg.subarray(0, jpegScanStart(jpeg).data), Buffer.from([0xff, 0xd9])]);
}

/** A JPEG marker: where it starts, its byte and, for SOS, where its scan data begin and end (at the next marker). */
export interface JpegMarker {
  at: number;
  marker: number;
  scan?: { data: number; end: number };
}

/** The markers of a JPEG in order, up to its EOI; a scan's data end at the first marker that is not RSTn. */
export function jpegMarkers(jpeg: Buffer): JpegMarker[] {
  const markers: JpegMarker[] = [];
  let i = 2;
  while (i + 2 <= jpeg.length) {
    if (jpeg[i] !== 0xff) throw new Error(`JPEG: no marker at ${i}`);
    if (jpeg[i + 1] === 0xff) {
      i++;
      continue;
    }
    const marker = jpeg[i + 1]!;
    if (marker === 0xd9) {
      markers.push({ at: i, marker });
      return markers;
    }
    const length = jpeg.readUInt16BE(i + 2);
    if (marker !== 0xda) {
      markers.push({ at: i, marker });
      i += 2 + length;
      continue;
    }
    const data = i + 2 + length;
    let end = data;
    while (end + 1 < jpeg.length && !(jpeg[end] === 0xff && jpeg[end + 1] !== 0x00 && (jpeg[end + 1]! & 0xf8) !== 0xd0)) end++;
    markers.push({ at: i, marker, scan: { data, end } });
    i = end;
  }
  throw new Error('JPEG without EOI');
}

const EOI = Buffer.from([0xff, 0xd9]);

/** The JPEG cut inside the data of its scan number `scan` (from 0), at `share` of them, and closed with EOI. */
export function jpegCutInScan(jpeg: Buffer, share: number, scan = 0): Buffer {
  const { data, end } = jpegMarkers(jpeg).filter((m) => m.scan)[scan]!.scan!;
  return Buffer.concat([jpeg.subarray(0, data + Math.floor((end - data) * share)), EOI]);
}

/** The JPEG cut right after the data of its scan number `scan` (from 0), and closed with EOI: whole scans, but not all of them. */
export function jpegCutAfterScan(jpeg: Buffer, scan: number): Buffer {
  const { end } = jpegMarkers(jpeg).filter((m) => m.scan)[scan]!.scan!;
  return Buffer.concat([jpeg.subarray(0, end), EOI]);
}

/** The JPEG with its frame header (SOF0, SOF1 or SOF2) claiming `rows` more rows than its scans hold. */
export function jpegWithMoreRows(jpeg: Buffer, rows: number): Buffer {
  const sof = jpegMarkers(jpeg).find((m) => m.marker >= 0xc0 && m.marker <= 0xc2);
  if (!sof) throw new Error('JPEG without SOF0, SOF1 or SOF2');
  const out = Buffer.from(jpeg);
  out.writeUInt16BE(out.readUInt16BE(sof.at + 5) + rows, sof.at + 5);
  return out;
}

/** The JPEG without its DHT segments: a decoder then takes the standard tables (as Motion JPEG frames expect). */
export function jpegWithoutHuffmanTables(jpeg: Buffer): Buffer {
  const markers = jpegMarkers(jpeg);
  const parts: Buffer[] = [jpeg.subarray(0, markers[0]!.at)];
  markers.forEach((m, i) => {
    if (m.marker !== 0xc4) parts.push(jpeg.subarray(m.at, markers[i + 1]?.at ?? jpeg.length));
  });
  return Buffer.concat(parts);
}

/**
 * The JPEG with three zero bytes before its second marker (between two header segments) and after
 * each scan's data: bytes libjpeg skips with a warning ("extraneous bytes before marker"), as in
 * some camera files.
 */
export function jpegWithBytesBeforeMarkers(jpeg: Buffer): Buffer {
  const cuts = [jpegMarkers(jpeg)[1]!.at, ...jpegMarkers(jpeg).flatMap((m) => (m.scan ? [m.scan.end] : []))];
  const parts: Buffer[] = [];
  let from = 0;
  for (const at of cuts) {
    parts.push(jpeg.subarray(from, at), Buffer.alloc(3));
    from = at;
  }
  parts.push(jpeg.subarray(from));
  return Buffer.concat(parts);
}

/**
 * SOI, a baseline SOF0 claiming width x height (3 components), then `tail` (default: garbage). The
 * frame header's fields are 16-bit, so 65535 is the largest claim.
 */
export function jpegClaiming(width: number, height: number, tail: Buffer = Buffer.alloc(64, 0x5a)): Buffer {
  const sof = Buffer.from([0xff, 0xc0, 0, 17, 8, height >> 8, height & 0xff, width >> 8, width & 0xff, 3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1]);
  return Buffer.concat([Buffer.from([0xff, 0xd8]), sof, tail]);
}

function riff(fourcc: string, payload: Buffer, tail: Buffer): Buffer {
  const head = Buffer.alloc(20);
  head.write('RIFF', 0, 'latin1');
  head.writeUInt32LE(12 + payload.length + tail.length, 4);
  head.write('WEBP', 8, 'latin1');
  head.write(fourcc, 12, 'latin1');
  head.writeUInt32LE(payload.length + tail.length, 16);
  return Buffer.concat([head, payload, tail]);
}

/** A lossless WebP (VP8L) header claiming width x height (each 1..16384), then garbage. */
export function webpLosslessClaiming(width: number, height: number, tail: Buffer = Buffer.alloc(64, 0x5a)): Buffer {
  const bits = Buffer.alloc(5);
  bits[0] = 0x2f;
  bits.writeUInt32LE(((width - 1) & 0x3fff) | (((height - 1) & 0x3fff) << 14) | (1 << 28), 1);
  return riff('VP8L', bits, tail);
}

/** A lossy WebP (VP8 key frame) header claiming width x height (each up to 16383), then garbage. */
export function webpLossyClaiming(width: number, height: number, tail: Buffer = Buffer.alloc(64, 0x5a)): Buffer {
  const frame = Buffer.from([0x50, 0x2a, 0x00, 0x9d, 0x01, 0x2a, 0, 0, 0, 0]);
  frame.writeUInt16LE(width & 0x3fff, 6);
  frame.writeUInt16LE(height & 0x3fff, 8);
  return riff('VP8 ', frame, tail);
}

/** An extended WebP (VP8X) header whose canvas claims width x height (each up to 2^24), then garbage. */
export function webpExtendedClaiming(width: number, height: number, tail: Buffer = Buffer.alloc(64, 0x5a)): Buffer {
  const vp8x = Buffer.alloc(10);
  vp8x.writeUIntLE(width - 1, 4, 3);
  vp8x.writeUIntLE(height - 1, 7, 3);
  return riff('VP8X', vp8x, tail);
}
