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
