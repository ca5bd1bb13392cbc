/**
 * The size an upload claims, read from its first header bytes in TypeScript, before libvips sees it
 * (docs/contract.md, "Boundaries, exactly"). Decoders refuse sizes past their own integer limits
 * (libpng and libvips at 10,000,000 px, libjpeg at 65,500 px), and a header followed by garbage
 * never reaches their size check: both would come back as invalid_image, where the contract wants
 * image_too_large for any claimed side over 6000 px. So the claim is read here, and checked first.
 *
 * Every read is bounds-checked against the buffer. The reader is strict only where every decoder
 * is strict too (a header cut short, a PNG whose IHDR is not first or fails its CRC, a JPEG with
 * no scan data); where a decoder may tolerate oddities (bytes between JPEG segments, an unknown
 * first WebP chunk) it gives up and leaves the verdict to the decoder (undefined).
 */
import { BgoneError } from './errors.js';

export type SniffedFormat = 'jpg' | 'png' | 'webp';

export interface ClaimedSize {
  format: SniffedFormat;
  /** As stored, before any EXIF orientation. */
  width: number;
  height: number;
}

const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];

/** The same sniff as native/image_io.cc sniff_format: by the bytes, whatever the name or type. */
export function sniffFormat(b: Uint8Array): SniffedFormat {
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return 'jpg';
  if (b.length >= 8 && PNG_SIGNATURE.every((v, i) => b[i] === v)) return 'png';
  if (b.length >= 12 && ascii(b, 0, 4) === 'RIFF' && ascii(b, 8, 4) === 'WEBP') return 'webp';
  throw new BgoneError('unsupported_media_type', undefined, undefined, 'not a JPEG, PNG or WebP file');
}

/**
 * Reads the claimed size and throws image_too_large as soon as a side over `maxSide` is read, even
 * when what follows is broken. Throws invalid_image for a header that no decoder would accept, and
 * unsupported_media_type for bytes that are none of the three formats. Returns undefined when the
 * header takes a form this reader does not follow: the decoder then decides.
 */
export function checkClaimedSize(bytes: Uint8Array, maxSide: number): ClaimedSize | undefined {
  const format = sniffFormat(bytes);
  const check = (width: number, height: number): void => {
    if (width > maxSide || height > maxSide) {
      throw new BgoneError('image_too_large', undefined, { width, height, max_side: maxSide }, `header claims ${width}x${height}`);
    }
  };
  const size = format === 'png' ? readPng(bytes, check) : format === 'jpg' ? readJpeg(bytes, check) : readWebp(bytes, check);
  return size && { format, ...size };
}

type Check = (width: number, height: number) => void;
type Size = { width: number; height: number } | undefined;

/** A header no decoder would accept; `dimensions`: its size is what cannot be read (none, or 0). */
function broken(detail: string, dimensions = false): never {
  throw new BgoneError('invalid_image', dimensions ? DIMENSIONS_MESSAGE : undefined, dimensions ? { reason: 'dimensions' } : undefined, detail);
}

const DIMENSIONS_MESSAGE = "The image's dimensions could not be read from its header: it is cut short or claims no pixels.";

function ascii(b: Uint8Array, at: number, length: number): string {
  return String.fromCharCode(...b.subarray(at, at + length));
}

const u16be = (b: Uint8Array, at: number) => (b[at]! << 8) | b[at + 1]!;
const u32be = (b: Uint8Array, at: number) => ((b[at]! << 24) | (b[at + 1]! << 16) | (b[at + 2]! << 8) | b[at + 3]!) >>> 0;
const u16le = (b: Uint8Array, at: number) => b[at]! | (b[at + 1]! << 8);
const u24le = (b: Uint8Array, at: number) => b[at]! | (b[at + 1]! << 8) | (b[at + 2]! << 16);
const u32le = (b: Uint8Array, at: number) => u24le(b, at) + b[at + 3]! * 0x1000000;

// PNG: the signature, then IHDR (length 13, "IHDR", width, height, 5 more bytes, CRC-32).

let crcTable: Uint32Array | undefined;

/** CRC-32 as PNG defines it (ISO 3309, reflected polynomial 0xEDB88320); node:zlib's crc32 needs Node 20.15. */
export function crc32(b: Uint8Array): number {
  if (!crcTable) {
    crcTable = new Uint32Array(256);
    for (let n = 0; n < 256; n++) {
      let c = n;
      for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
      crcTable[n] = c >>> 0;
    }
  }
  let c = 0xffffffff;
  for (const byte of b) c = crcTable[(c ^ byte) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

function readPng(b: Uint8Array, check: Check): Size {
  if (b.length < 24) broken('PNG cut short before the IHDR size', true);
  if (u32be(b, 8) !== 13 || ascii(b, 12, 4) !== 'IHDR') broken('PNG without a 13-byte IHDR first');
  const width = u32be(b, 16);
  const height = u32be(b, 20);
  check(width, height);
  if (b.length < 33) broken('PNG cut short inside IHDR');
  if (width === 0 || height === 0) broken('PNG of zero width or height', true);
  if (crc32(b.subarray(12, 29)) !== u32be(b, 29)) broken('PNG IHDR fails its CRC');
  return { width, height };
}

// JPEG: SOI, then segments (0xFF, a marker byte, a 16-bit length counting itself) up to the first
// SOS; the frame header (SOFn) holds precision, height, width. A marker may be preceded by any
// number of 0xFF fill bytes; SOI, EOI, RSTn and TEM have no length.

const isSof = (m: number) => m >= 0xc0 && m <= 0xcf && m !== 0xc4 && m !== 0xc8 && m !== 0xcc;

function readJpeg(b: Uint8Array, check: Check): Size {
  let size: Size;
  let at = 2;
  for (;;) {
    if (at >= b.length) broken(size ? 'JPEG cut short before its scan' : 'JPEG cut short before its frame header');
    // libjpeg skips (with a warning) bytes that are not a marker; we do not guess where it resyncs.
    if (b[at] !== 0xff) return size;
    while (at < b.length && b[at] === 0xff) at++;
    if (at >= b.length) broken('JPEG cut short inside a marker');
    const marker = b[at++]!;
    if (marker === 0xd9) broken(size ? 'JPEG without scan data (EOI before SOS)' : 'JPEG without a frame header (EOI before SOF)');
    if (marker === 0xd8) broken('JPEG with a second SOI');
    if ((marker >= 0xd0 && marker <= 0xd7) || marker === 0x01) continue;
    if (marker === 0x00) return size; // a stuffed zero outside a scan: as above, not ours to resync
    if (at + 2 > b.length) broken('JPEG cut short inside a segment length');
    const length = u16be(b, at);
    if (length < 2) broken('JPEG segment shorter than its own length field');
    if (isSof(marker)) {
      if (size) broken('JPEG with two frame headers');
      if (at + 7 > b.length) broken('JPEG cut short inside its frame header', true);
      const height = u16be(b, at + 3);
      const width = u16be(b, at + 5);
      check(width, height);
      // Height 0 would defer it to a DNL marker, which libjpeg does not support.
      if (width === 0 || height === 0) broken('JPEG frame of zero width or height', true);
      size = { width, height };
    } else if (marker === 0xda) {
      if (!size) broken('JPEG scan before its frame header');
      const data = at + length;
      // Entropy-coded data never starts with a marker: a 0xFF there is either a stuffed 0xFF 0x00 or
      // the next marker, i.e. a scan with no data (which libjpeg would "decode" as a flat grey image).
      if (data >= b.length || (b[data] === 0xff && (data + 1 >= b.length || b[data + 1] !== 0x00))) broken('JPEG scan without data');
      return size;
    }
    at += length;
  }
}

// WebP: "RIFF", size, "WEBP", then the first chunk: "VP8 " (lossy: a key frame's start code
// 9d 01 2a, then 14-bit width and height), "VP8L" (lossless: signature 0x2f, then 14-bit width-1 and
// height-1) or "VP8X" (extended: 24-bit canvas width-1 and height-1 at offset 24).

function readWebp(b: Uint8Array, check: Check): Size {
  if (b.length < 20) broken('WebP cut short before its first chunk');
  const chunk = ascii(b, 12, 4);
  let width: number;
  let height: number;
  if (chunk === 'VP8 ') {
    if (b.length < 30) broken('WebP (lossy) cut short before its size', true);
    if (b[23] !== 0x9d || b[24] !== 0x01 || b[25] !== 0x2a) broken('WebP (lossy) without a key frame start code');
    width = u16le(b, 26) & 0x3fff;
    height = u16le(b, 28) & 0x3fff;
  } else if (chunk === 'VP8L') {
    if (b.length < 25) broken('WebP (lossless) cut short before its size', true);
    if (b[20] !== 0x2f) broken('WebP (lossless) without its signature');
    const bits = u32le(b, 21);
    width = (bits & 0x3fff) + 1;
    height = ((bits >>> 14) & 0x3fff) + 1;
  } else if (chunk === 'VP8X') {
    if (b.length < 30) broken('WebP (extended) cut short before its canvas size', true);
    width = u24le(b, 24) + 1;
    height = u24le(b, 27) + 1;
  } else {
    return undefined;
  }
  check(width, height);
  if (width === 0 || height === 0) broken('WebP of zero width or height', true);
  return { width, height };
}

/**
 * Bits per sample of the decoded image, from the header: a 16-bit PNG decodes to twice the memory
 * of an 8-bit one (admission by memory counts it). 8 for everything else, and for bytes too short
 * to say.
 */
export function bitsPerSample(b: Uint8Array): number {
  if (b.length >= 25 && PNG_SIGNATURE.every((v, i) => b[i] === v) && b[24] === 16) return 16;
  return 8;
}
