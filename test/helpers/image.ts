/** Decoding results with sharp, and the mask arithmetic the tests share. */
import sharp from 'sharp';
import { gtPath } from './paths.js';

export interface Raw {
  data: Buffer;
  width: number;
  height: number;
  channels: number;
}

/** Decodes to raw 8-bit pixels, keeping the channel count (1, 3 or 4) of the encoded image. */
export async function decode(input: Buffer | string): Promise<Raw> {
  const meta = await sharp(input).metadata();
  let pipeline = sharp(input);
  if (meta.channels === 1) pipeline = pipeline.toColourspace('b-w'); // sharp would expand grey to RGB
  const { data, info } = await pipeline.raw().toBuffer({ resolveWithObject: true });
  if (info.channels !== meta.channels) throw new Error(`decoded ${info.channels} channels from a ${meta.channels}-channel image`);
  return { data, width: info.width, height: info.height, channels: info.channels };
}

/** The alpha plane of an RGBA/GA image, or the single plane of a one-channel mask. */
export function alphaOf(image: Raw): Uint8Array {
  const { data, width, height, channels } = image;
  if (channels === 1) return new Uint8Array(data.buffer, data.byteOffset, width * height);
  if (channels !== 2 && channels !== 4) throw new Error(`image has no alpha channel (${channels} channels)`);
  const out = new Uint8Array(width * height);
  for (let i = 0; i < out.length; i++) out[i] = data[i * channels + channels - 1]!;
  return out;
}

export function pixel(image: Raw, x: number, y: number): number[] {
  const i = (y * image.width + x) * image.channels;
  return [...image.data.subarray(i, i + image.channels)];
}

/** The ground-truth mask of a test photo, optionally resized (bilinear) to the given size. */
export async function gtMask(name: string, width?: number, height?: number): Promise<{ mask: Uint8Array; width: number; height: number }> {
  let pipeline = sharp(gtPath(name)).extractChannel(0);
  if (width !== undefined && height !== undefined) pipeline = pipeline.resize(width, height, { fit: 'fill', kernel: 'linear' });
  const { data, info } = await pipeline.raw().toBuffer({ resolveWithObject: true });
  return { mask: new Uint8Array(data.buffer, data.byteOffset, info.width * info.height), width: info.width, height: info.height };
}

/** Intersection over union of two same-sized masks thresholded at value >= 128. */
export function iou(a: Uint8Array, b: Uint8Array): number {
  if (a.length !== b.length) throw new Error(`masks differ in size: ${a.length} vs ${b.length}`);
  let inter = 0;
  let union = 0;
  for (let i = 0; i < a.length; i++) {
    const p = a[i]! >= 128;
    const q = b[i]! >= 128;
    if (p && q) inter++;
    if (p || q) union++;
  }
  return union === 0 ? 1 : inter / union;
}

export interface Box {
  x0: number;
  y0: number;
  /** inclusive */
  x1: number;
  /** inclusive */
  y1: number;
}

/** Bounding box of the pixels >= threshold, or null if there are none. */
export function bbox(mask: Uint8Array, width: number, height: number, threshold = 128): Box | null {
  let x0 = width;
  let y0 = height;
  let x1 = -1;
  let y1 = -1;
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      if (mask[y * width + x]! < threshold) continue;
      if (x < x0) x0 = x;
      if (x > x1) x1 = x;
      if (y < y0) y0 = y;
      if (y > y1) y1 = y;
    }
  }
  return x1 < 0 ? null : { x0, y0, x1, y1 };
}

export function count(mask: Uint8Array, predicate: (v: number) => boolean): number {
  let n = 0;
  for (let i = 0; i < mask.length; i++) if (predicate(mask[i]!)) n++;
  return n;
}

/**
 * Mask `src` (sw x sh) moved by (dx, dy) onto a dw x dh canvas: out(x, y) = src(x - dx, y - dy),
 * 0 outside. Used to compare a cropped output with the ground truth of the uncropped photo.
 */
export function shift(src: Uint8Array, sw: number, sh: number, dx: number, dy: number, dw: number, dh: number): Uint8Array {
  const out = new Uint8Array(dw * dh);
  for (let y = 0; y < dh; y++) {
    const sy = y - dy;
    if (sy < 0 || sy >= sh) continue;
    for (let x = 0; x < dw; x++) {
      const sx = x - dx;
      if (sx >= 0 && sx < sw) out[y * dw + x] = src[sy * sw + sx]!;
    }
  }
  return out;
}

/**
 * Mean absolute difference of the RGB channels of two same-sized images, over the pixels where
 * `where` is >= 255 (fully opaque subject), in 0..255.
 */
export function rgbDiffWhereOpaque(a: Raw, b: Raw, where: Uint8Array): number {
  if (a.width !== b.width || a.height !== b.height) throw new Error('images differ in size');
  let sum = 0;
  let n = 0;
  for (let i = 0; i < where.length; i++) {
    if (where[i]! < 255) continue;
    for (let c = 0; c < 3; c++) sum += Math.abs(a.data[i * a.channels + c]! - b.data[i * b.channels + c]!);
    n++;
  }
  if (n === 0) throw new Error('no opaque pixels to compare');
  return sum / (3 * n);
}

export const MAGIC = {
  png: (b: Buffer) => b.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])),
  jpg: (b: Buffer) => b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff,
  webp: (b: Buffer) => b.toString('latin1', 0, 4) === 'RIFF' && b.toString('latin1', 8, 12) === 'WEBP',
};
