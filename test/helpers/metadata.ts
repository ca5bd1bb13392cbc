/**
 * Metadata in image files, read and written by hand for the metadata tests: PNG chunks, JPEG
 * segments, WebP's RIFF chunks, TIFF (EXIF) blocks with the tags the tests look at, XMP packets.
 */
import { inflateSync } from 'node:zlib';

export interface Chunk {
  type: string;
  data: Buffer;
}

/** Every chunk of a PNG, in order. */
export function pngChunks(png: Buffer): Chunk[] {
  const out: Chunk[] = [];
  for (let at = 8; at + 12 <= png.length; ) {
    const length = png.readUInt32BE(at);
    out.push({ type: png.toString('latin1', at + 4, at + 8), data: png.subarray(at + 8, at + 8 + length) });
    at += 12 + length;
  }
  return out;
}

/** The JPEG's marker segments before its scan: marker (0xE1 for APP1) and payload. */
export function jpegSegments(jpeg: Buffer): Array<{ marker: number; data: Buffer }> {
  const out: Array<{ marker: number; data: Buffer }> = [];
  for (let at = 2; at + 4 <= jpeg.length && jpeg[at] === 0xff; ) {
    const marker = jpeg[at + 1]!;
    if (marker === 0xda) break;
    const length = jpeg.readUInt16BE(at + 2);
    out.push({ marker, data: jpeg.subarray(at + 4, at + 2 + length) });
    at += 2 + length;
  }
  return out;
}

/** A WebP's chunks (after RIFF....WEBP). */
export function webpChunks(webp: Buffer): Chunk[] {
  const out: Chunk[] = [];
  for (let at = 12; at + 8 <= webp.length; ) {
    const length = webp.readUInt32LE(at + 4);
    out.push({ type: webp.toString('latin1', at, at + 4), data: webp.subarray(at + 8, at + 8 + length) });
    at += 8 + length + (length & 1);
  }
  return out;
}

const XMP_ID = 'http://ns.adobe.com/xap/1.0/\0';

/** Inserts APP1 segments (EXIF with its "Exif\0\0", XMP with its namespace) and an APP2 ICC profile after the JPEG's SOI. */
export function jpegWith(jpeg: Buffer, add: { exif?: Buffer; xmp?: string }): Buffer {
  const segment = (marker: number, payload: Buffer) => {
    const head = Buffer.from([0xff, marker, 0, 0]);
    head.writeUInt16BE(payload.length + 2, 2);
    return Buffer.concat([head, payload]);
  };
  const parts = [jpeg.subarray(0, 2)];
  if (add.exif) parts.push(segment(0xe1, Buffer.concat([Buffer.from('Exif\0\0', 'latin1'), add.exif])));
  if (add.xmp !== undefined) parts.push(segment(0xe1, Buffer.concat([Buffer.from(XMP_ID, 'latin1'), Buffer.from(add.xmp, 'utf8')])));
  parts.push(jpeg.subarray(2));
  return Buffer.concat(parts);
}

/** The XMP packet of a JPEG's APP1, if any. */
export function jpegXmp(jpeg: Buffer): string | undefined {
  const seg = jpegSegments(jpeg).find((s) => s.marker === 0xe1 && s.data.toString('latin1', 0, XMP_ID.length) === XMP_ID);
  return seg?.data.subarray(XMP_ID.length).toString('utf8');
}

/** The TIFF block of a JPEG's APP1 Exif, if any. */
export function jpegExif(jpeg: Buffer): Buffer | undefined {
  const seg = jpegSegments(jpeg).find((s) => s.marker === 0xe1 && s.data.toString('latin1', 0, 6) === 'Exif\0\0');
  return seg?.data.subarray(6);
}

/** The iTXt XMP of a PNG (keyword XML:com.adobe.xmp, not compressed), if any. */
export function pngXmp(png: Buffer): string | undefined {
  const chunk = pngChunks(png).find((c) => c.type === 'iTXt' && c.data.toString('latin1', 0, 18) === 'XML:com.adobe.xmp\0');
  if (!chunk) return undefined;
  const rest = chunk.data.subarray(18);
  if (rest[0] !== 0 || rest[1] !== 0) throw new Error('the iTXt is compressed');
  const lang = rest.indexOf(0, 2);
  const translated = rest.indexOf(0, lang + 1);
  return rest.subarray(translated + 1).toString('utf8');
}

/** A PNG's iCCP profile, inflated, with its name. */
export function pngIcc(png: Buffer): { name: string; profile: Buffer } | undefined {
  const chunk = pngChunks(png).find((c) => c.type === 'iCCP');
  if (!chunk) return undefined;
  const nul = chunk.data.indexOf(0);
  if (chunk.data[nul + 1] !== 0) throw new Error('iCCP method is not deflate');
  return { name: chunk.data.toString('latin1', 0, nul), profile: inflateSync(chunk.data.subarray(nul + 2)) };
}

export interface TiffEntry {
  tag: number;
  type: number;
  value: Buffer;
}

/** The entries of a TIFF block's IFD0 and of its Exif IFD (tag 0x8769), values as bytes. */
export function readTiff(block: Buffer): { ifd0: TiffEntry[]; exif: TiffEntry[] } {
  const tiff = block.toString('latin1', 0, 6) === 'Exif\0\0' ? block.subarray(6) : block;
  const le = tiff.toString('latin1', 0, 2) === 'II';
  const u16 = (o: number) => (le ? tiff.readUInt16LE(o) : tiff.readUInt16BE(o));
  const u32 = (o: number) => (le ? tiff.readUInt32LE(o) : tiff.readUInt32BE(o));
  const SIZES: Record<number, number> = { 1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 7: 1, 9: 4, 10: 8, 13: 4 };
  const ifd = (offset: number): TiffEntry[] => {
    const entries: TiffEntry[] = [];
    for (let i = 0; i < u16(offset); i++) {
      const at = offset + 2 + i * 12;
      const type = u16(at + 2);
      const size = u32(at + 4) * (SIZES[type] ?? 1);
      const start = size <= 4 ? at + 8 : u32(at + 8);
      entries.push({ tag: u16(at), type, value: tiff.subarray(start, start + size) });
    }
    return entries;
  };
  const ifd0 = ifd(u32(4));
  const pointer = ifd0.find((e) => e.tag === 0x8769);
  return { ifd0, exif: pointer ? ifd(le ? pointer.value.readUInt32LE(0) : pointer.value.readUInt32BE(0)) : [] };
}

/**
 * A TIFF block (big- or little-endian): IFD0 with Make (a tag that must never be kept), Orientation
 * 1, Copyright, and an Exif IFD with UserComment (ASCII) and DateTimeOriginal.
 */
export function exifBlock(o: { copyright?: string; comment?: string; bigEndian?: boolean; unicodeComment?: string }): Buffer {
  const be = o.bigEndian ?? false;
  const w16 = (b: Buffer, v: number, at: number) => (be ? b.writeUInt16BE(v, at) : b.writeUInt16LE(v, at));
  const w32 = (b: Buffer, v: number, at: number) => (be ? b.writeUInt32BE(v, at) : b.writeUInt32LE(v, at));
  type E = { tag: number; type: number; count: number; bytes: Buffer };
  const ascii = (s: string) => Buffer.from(`${s}\0`, 'latin1');
  const ifd0: E[] = [{ tag: 0x010f, type: 2, count: 8, bytes: ascii('LeakCo!') }];
  const short = Buffer.alloc(2);
  w16(short, 1, 0);
  ifd0.push({ tag: 0x0112, type: 3, count: 1, bytes: short });
  if (o.copyright !== undefined) ifd0.push({ tag: 0x8298, type: 2, count: o.copyright.length + 1, bytes: ascii(o.copyright) });
  const exif: E[] = [];
  if (o.comment !== undefined) {
    const bytes = Buffer.concat([Buffer.from('ASCII\0\0\0', 'latin1'), Buffer.from(o.comment, 'latin1')]);
    exif.push({ tag: 0x9286, type: 7, count: bytes.length, bytes });
  }
  if (o.unicodeComment !== undefined) {
    const text = Buffer.from(o.unicodeComment, 'utf16le');
    if (be) text.swap16();
    const bytes = Buffer.concat([Buffer.from('UNICODE\0', 'latin1'), text]);
    exif.push({ tag: 0x9286, type: 7, count: bytes.length, bytes });
  }
  exif.unshift({ tag: 0x9003, type: 2, count: 20, bytes: ascii('2020:01:02 03:04:05') });
  if (exif.length > 0) ifd0.push({ tag: 0x8769, type: 4, count: 1, bytes: Buffer.alloc(4) });
  const parts: Buffer[] = [];
  let size = 8;
  const header = Buffer.from(be ? 'MM\0\x2a\0\0\0\x08' : 'II\x2a\0\x08\0\0\0', 'latin1');
  parts.push(header);
  const layout = (entries: E[], patch?: (table: Buffer, at: number) => void) => {
    const table = Buffer.alloc(2 + entries.length * 12 + 4);
    w16(table, entries.length, 0);
    let data = size + table.length;
    const values: Buffer[] = [];
    entries.forEach((e, i) => {
      const at = 2 + i * 12;
      w16(table, e.tag, at);
      w16(table, e.type, at + 2);
      w32(table, e.count, at + 4);
      if (e.tag === 0x8769) patch?.(table, at + 8);
      else if (e.bytes.length <= 4) e.bytes.copy(table, at + 8);
      else {
        w32(table, data, at + 8);
        const padded = e.bytes.length % 2 ? Buffer.concat([e.bytes, Buffer.alloc(1)]) : e.bytes;
        values.push(padded);
        data += padded.length;
      }
    });
    parts.push(table, ...values);
    size = data;
    return table;
  };
  const table0 = layout(ifd0);
  if (exif.length > 0) {
    const index = ifd0.findIndex((e) => e.tag === 0x8769);
    w32(table0, size, 2 + index * 12 + 8);
    layout(exif);
  }
  return Buffer.concat(parts);
}

/** An XMP packet with a marker text that says where it came from. */
export function xmpPacket(marker: string): string {
  return (
    '<?xpacket begin="\uFEFF" id="W5M0MpCehiHzreSzNTczkc9d"?><x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">' +
    `<rdf:Description rdf:about="" xmlns:xmp="http://ns.adobe.com/xap/1.0/"><xmp:Label>${marker}</xmp:Label></rdf:Description></rdf:RDF></x:xmpmeta><?xpacket end="w"?>`
  );
}
