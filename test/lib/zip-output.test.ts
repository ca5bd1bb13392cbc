/**
 * format=zip with the real model: one native call gives color.jpg (the colours, RGB, at the
 * result's size) and alpha.png (the mask channels=alpha gives for the same options) in a ZIP of
 * stored entries.
 */
import sharp from 'sharp';
import { beforeAll, describe, expect, it } from 'vitest';
import { type RemoveBackgroundOptions, type RemoveBackgroundResult, removeBackground } from '../helpers/bgone.js';
import { PHOTOS } from '../helpers/constants.js';
import { alphaOf, decode, MAGIC, pixel, type Raw } from '../helpers/image.js';
import { readPhoto } from '../helpers/paths.js';
import { unzipStored } from '../helpers/zip.js';

const teddy = readPhoto(PHOTOS.teddy); // 284x398, background in all four corners
const TEDDY = { width: 284, height: 398 };

interface Unzipped {
  result: RemoveBackgroundResult;
  colorBytes: Buffer;
  alphaBytes: Buffer;
  color: Raw;
  alpha: Raw;
}

async function zipped(options: RemoveBackgroundOptions): Promise<Unzipped> {
  const result = await removeBackground(teddy, { ...options, format: 'zip' });
  const entries = unzipStored(result.data);
  expect(entries.map((e) => e.name)).toEqual(['color.jpg', 'alpha.png']);
  const [colorBytes, alphaBytes] = [entries[0]!.data, entries[1]!.data];
  return { result, colorBytes, alphaBytes, color: await decode(colorBytes), alpha: await decode(alphaBytes) };
}

/** Mean absolute difference of the RGB of `a` and `b` over the pixels where `mask` is 255. */
function meanDiffWhereOpaque(a: Raw, b: Raw, mask: Uint8Array): number {
  let sum = 0;
  let n = 0;
  for (let i = 0; i < mask.length; i++) {
    if (mask[i] !== 255) continue;
    for (let c = 0; c < 3; c++) sum += Math.abs(a.data[i * a.channels + c]! - b.data[i * b.channels + c]!);
    n += 3;
  }
  expect(n).toBeGreaterThan(1000);
  return sum / n;
}

describe('format=zip', () => {
  let plain: Unzipped;
  let onRed: Unzipped;
  let cutout: Raw;
  let mask: RemoveBackgroundResult;
  let maskOnRed: RemoveBackgroundResult;
  let jpg: Raw;

  beforeAll(async () => {
    let cutoutResult: RemoveBackgroundResult;
    let jpgResult: RemoveBackgroundResult;
    [plain, onRed, cutoutResult, mask, maskOnRed, jpgResult] = await Promise.all([
      zipped({}),
      zipped({ bgColor: 'red' }),
      removeBackground(teddy, { format: 'png' }),
      removeBackground(teddy, { channels: 'alpha', format: 'png' }),
      removeBackground(teddy, { channels: 'alpha', format: 'png', bgColor: 'red' }),
      removeBackground(teddy, { format: 'jpg' }),
    ]);
    cutout = await decode(cutoutResult.data);
    jpg = await decode(jpgResult.data);
  });

  it('is a ZIP of color.jpg and alpha.png, stored, with right CRCs; the result says zip', () => {
    const { result } = plain;
    expect(result.data.readUInt32LE(0)).toBe(0x04034b50);
    expect(result).toMatchObject({ format: 'zip', width: TEDDY.width, height: TEDDY.height, channels: 4 });
    expect(result.foreground.width).toBeGreaterThan(0);
  });

  it('color.jpg: a JPEG of the result size, 3 channels', async () => {
    expect(MAGIC.jpg(plain.colorBytes)).toBe(true);
    const meta = await sharp(plain.colorBytes).metadata();
    expect(meta).toMatchObject({ format: 'jpeg', channels: 3, width: TEDDY.width, height: TEDDY.height });
  });

  it('alpha.png: a one-channel PNG, the same bytes as channels=alpha for the same options', async () => {
    expect(MAGIC.png(plain.alphaBytes)).toBe(true);
    expect(plain.alpha).toMatchObject({ channels: 1, width: TEDDY.width, height: TEDDY.height });
    const alone = await decode(mask.data);
    expect(Buffer.compare(plain.alpha.data, alone.data)).toBe(0);
    expect(plain.alphaBytes.equals(mask.data)).toBe(true);
    expect(alphaOf(cutout)).toEqual(alphaOf(plain.alpha));
  });

  it('color.jpg holds the foreground colours: the cut-out’s colours where it is opaque, not flattened on white elsewhere', () => {
    const alpha = alphaOf(plain.alpha);
    expect(meanDiffWhereOpaque(plain.color, cutout, alpha)).toBeLessThan(4);
    // The corners are background (alpha 0): format=jpg flattens them on white, color.jpg keeps colours there.
    const { width: w, height: h } = plain.color;
    for (const [x, y] of [
      [0, 0],
      [w - 1, 0],
      [0, h - 1],
      [w - 1, h - 1],
    ] as const) {
      expect(alpha[y * w + x]).toBe(0);
      expect(pixel(jpg, x, y)).toEqual([255, 255, 255]);
      expect(pixel(plain.color, x, y)).not.toEqual([255, 255, 255]);
    }
  });

  it('with bg_color, color.jpg is composed on it, and alpha.png is still the subject’s mask', async () => {
    const corner = pixel(onRed.color, 0, 0);
    expect(corner[0]).toBeGreaterThan(230);
    expect(corner[1]).toBeLessThan(25);
    expect(corner[2]).toBeLessThan(25);
    expect(onRed.alphaBytes.equals(maskOnRed.data)).toBe(true);
    expect(onRed.alphaBytes.equals(plain.alphaBytes)).toBe(true);
  });

  it('a subject placed smaller on its canvas: black colours and alpha 0 where no image is, the mask still that of channels=alpha', async () => {
    const options: RemoveBackgroundOptions = { scale: '30%', position: 'center' };
    const [placed, alone] = await Promise.all([zipped(options), removeBackground(teddy, { ...options, channels: 'alpha', format: 'png' })]);
    expect(placed.result).toMatchObject({ width: TEDDY.width, height: TEDDY.height });
    expect(placed.alphaBytes.equals(alone.data)).toBe(true);
    const alpha = alphaOf(placed.alpha);
    expect(alpha[0]).toBe(0);
    for (const c of pixel(placed.color, 0, 0)) expect(c).toBeLessThan(8);
  });

  it('a background image: color.jpg is the cut-out composed on it, alpha.png the subject’s mask', async () => {
    const background = await sharp({ create: { width: 64, height: 64, channels: 3, background: { r: 0, g: 0, b: 255 } } })
      .png()
      .toBuffer();
    const onBlue = await zipped({ bgImageFile: background });
    const corner = pixel(onBlue.color, 0, 0);
    expect(corner[2]).toBeGreaterThan(230);
    expect(corner[0]).toBeLessThan(25);
    expect(onBlue.alphaBytes.equals(plain.alphaBytes)).toBe(true);
  });

  it('channels=alpha with format=zip: color.jpg the mask as grey, alpha.png opaque (test/lib/effects.test.ts has the pixels)', async () => {
    const withMask = await zipped({ channels: 'alpha' });
    expect(withMask.result).toMatchObject({ format: 'zip', width: TEDDY.width, height: TEDDY.height });
    expect(withMask.color.channels).toBe(3);
    expect(withMask.alpha.channels).toBe(1);
    expect(withMask.alpha.data.every((v) => v === 255)).toBe(true);
    const alone = alphaOf(await decode(mask.data));
    let sum = 0;
    for (let i = 0; i < alone.length; i++) sum += Math.abs(withMask.color.data[i * 3 + 1]! - alone[i]!);
    expect(sum / alone.length).toBeLessThan(1);
  });
});
