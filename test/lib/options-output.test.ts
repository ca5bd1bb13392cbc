/**
 * What each option does to the output, with the real model on real photos: formats, channels,
 * bg_color, size presets and cropping. Results are computed once per group and shared.
 */
import sharp from 'sharp';
import { beforeAll, describe, expect, it } from 'vitest';
import { MEDIA_TYPES, SIZE_PIXELS } from '../helpers/bgone.js';
import { BIG, PHOTOS } from '../helpers/constants.js';
import { alphaOf, type Box, bbox, count, decode, gtMask, iou, MAGIC, pixel, type Raw, shift } from '../helpers/image.js';
import { readFixture, readPhoto } from '../helpers/paths.js';
import { type Output, runAll } from '../helpers/run.js';

const teddy = readPhoto(PHOTOS.teddy); // 284x398, background in all four corners
const TEDDY = { width: 284, height: 398 };

function corners(image: Raw): number[][] {
  const { width: w, height: h } = image;
  return [pixel(image, 0, 0), pixel(image, w - 1, 0), pixel(image, 0, h - 1), pixel(image, w - 1, h - 1)];
}

/** A point well inside the teddy (ground truth is subject there). */
const TEDDY_INSIDE = { x: 145, y: 190 };

describe('formats and channels', () => {
  let out: Record<'png' | 'jpg' | 'webp' | 'alphaPng' | 'alphaJpg' | 'alphaWebp', Output>;
  let gt: Uint8Array;

  beforeAll(async () => {
    gt = (await gtMask(PHOTOS.teddy)).mask;
    expect(gt[TEDDY_INSIDE.y * TEDDY.width + TEDDY.width - 1]).toBe(0);
    expect(gt[TEDDY_INSIDE.y * TEDDY.width + TEDDY_INSIDE.x]).toBe(255);
    out = await runAll({
      png: [teddy],
      jpg: [teddy, { format: 'jpg' }],
      webp: [teddy, { format: 'webp' }],
      alphaPng: [teddy, { channels: 'alpha', bgColor: 'red' }],
      alphaJpg: [teddy, { channels: 'alpha', format: 'jpg', bgColor: '#00ff00' }],
      alphaWebp: [teddy, { channels: 'alpha', format: 'webp' }],
    });
  });

  it('the media types are the documented ones', () => {
    expect(MEDIA_TYPES).toEqual({ png: 'image/png', jpg: 'image/jpeg', webp: 'image/webp', avif: 'image/avif', zip: 'application/zip' });
  });

  it('png (the default): PNG bytes, RGBA, the input size, transparent background, opaque subject', async () => {
    const { result, image } = out.png;
    expect(result.format).toBe('png');
    expect(MAGIC.png(result.data)).toBe(true);
    const meta = await sharp(result.data).metadata();
    expect(meta).toMatchObject({ format: 'png', channels: 4, hasAlpha: true, width: TEDDY.width, height: TEDDY.height, depth: 'uchar' });
    expect(result).toMatchObject({ width: TEDDY.width, height: TEDDY.height, channels: 4 });
    for (const corner of corners(image)) expect(corner[3]).toBe(0);
    expect(pixel(image, TEDDY_INSIDE.x, TEDDY_INSIDE.y)[3]).toBe(255);
    expect(iou(alphaOf(image), gt)).toBeGreaterThan(0.9);
  });

  it('the result carries the per-stage timings of the native core', () => {
    const { timings } = out.png.result;
    for (const key of ['decode', 'preprocess', 'queue', 'inference', 'inferenceCpu', 'resize', 'matting', 'encode', 'effects', 'total']) {
      expect(typeof timings[key as keyof typeof timings], key).toBe('number');
      expect(timings[key as keyof typeof timings], key).toBeGreaterThanOrEqual(0);
    }
    expect(timings.total).toBeGreaterThan(0);
  });

  it('jpg: JPEG bytes, 3 channels, white where the background was', async () => {
    const { result, image } = out.jpg;
    expect(result.format).toBe('jpg');
    expect(MAGIC.jpg(result.data)).toBe(true);
    const meta = await sharp(result.data).metadata();
    expect(meta).toMatchObject({ format: 'jpeg', channels: 3, hasAlpha: false, width: TEDDY.width, height: TEDDY.height });
    expect(result.channels).toBe(3);
    for (const corner of corners(image)) for (const c of corner) expect(c).toBeGreaterThanOrEqual(250);
    // The subject keeps its colours (the teddy is brown, far from white).
    const inside = pixel(image, TEDDY_INSIDE.x, TEDDY_INSIDE.y);
    expect(Math.min(...inside)).toBeLessThan(200);
  });

  it('webp: WebP bytes with an alpha channel, transparent background', async () => {
    const { result, image } = out.webp;
    expect(result.format).toBe('webp');
    expect(MAGIC.webp(result.data)).toBe(true);
    const meta = await sharp(result.data).metadata();
    expect(meta).toMatchObject({ format: 'webp', channels: 4, hasAlpha: true, width: TEDDY.width, height: TEDDY.height });
    expect(result.channels).toBe(4);
    for (const corner of corners(image)) expect(corner[3]).toBeLessThanOrEqual(2);
    expect(pixel(image, TEDDY_INSIDE.x, TEDDY_INSIDE.y)[3]).toBeGreaterThanOrEqual(253);
    expect(iou(alphaOf(image), gt)).toBeGreaterThan(0.9);
  });

  it('channels=alpha: a one-channel grey PNG equal to the cut-out alpha; bg_color is ignored', async () => {
    const { result, image } = out.alphaPng;
    expect(result).toMatchObject({ format: 'png', channels: 1, width: TEDDY.width, height: TEDDY.height });
    const meta = await sharp(result.data).metadata();
    expect(meta).toMatchObject({ format: 'png', channels: 1, hasAlpha: false });
    expect(image.channels).toBe(1);
    // Not red: the background is 0 (no subject), not the bg_color.
    for (const corner of corners(image)) expect(corner).toEqual([0]);
    expect(pixel(image, TEDDY_INSIDE.x, TEDDY_INSIDE.y)).toEqual([255]);
    const mask = alphaOf(image);
    const cutoutAlpha = alphaOf(out.png.image);
    let maxDiff = 0;
    for (let i = 0; i < mask.length; i++) maxDiff = Math.max(maxDiff, Math.abs(mask[i]! - cutoutAlpha[i]!));
    expect(maxDiff).toBeLessThanOrEqual(1);
    expect(iou(mask, gt)).toBeGreaterThan(0.9);
  });

  it('channels=alpha with format=jpg: a one-channel grey JPEG mask, bg_color ignored', async () => {
    const { result, image } = out.alphaJpg;
    expect(MAGIC.jpg(result.data)).toBe(true);
    const meta = await sharp(result.data).metadata();
    expect(meta).toMatchObject({ format: 'jpeg', channels: 1, width: TEDDY.width, height: TEDDY.height });
    for (const corner of corners(image)) expect(corner[0]).toBeLessThanOrEqual(4);
    expect(iou(alphaOf(image), gt)).toBeGreaterThan(0.9);
  });

  it('channels=alpha with format=webp: a grey WebP mask (R = G = B = alpha)', async () => {
    const { result, image } = out.alphaWebp;
    expect(MAGIC.webp(result.data)).toBe(true);
    expect((await sharp(result.data).metadata()).format).toBe('webp');
    expect({ width: image.width, height: image.height }).toEqual(TEDDY);
    let notGrey = 0;
    const mask = new Uint8Array(image.width * image.height);
    for (let i = 0; i < mask.length; i++) {
      const [r, g, b] = [image.data[i * image.channels]!, image.data[i * image.channels + 1]!, image.data[i * image.channels + 2]!];
      if (Math.max(r, g, b) - Math.min(r, g, b) > 8) notGrey++;
      mask[i] = g;
      if (image.channels === 4) expect(image.data[i * 4 + 3]).toBe(255);
    }
    expect(notGrey).toBe(0);
    expect(iou(mask, gt)).toBeGreaterThan(0.9);
  });
});

describe('bg_color', () => {
  let out: Record<'green' | 'translucent' | 'namedJpg', Output>;

  beforeAll(async () => {
    out = await runAll({
      green: [teddy, { bgColor: '#00ff00' }],
      translucent: [teddy, { bgColor: '#ff000080' }],
      namedJpg: [teddy, { bgColor: 'rebeccapurple', format: 'jpg' }],
    });
  });

  it('an opaque colour: no alpha channel, the background pixels are exactly that colour', async () => {
    const { result, image } = out.green;
    expect(result.channels).toBe(3);
    const meta = await sharp(result.data).metadata();
    expect(meta).toMatchObject({ format: 'png', channels: 3, hasAlpha: false });
    for (const corner of corners(image)) expect(corner).toEqual([0, 255, 0]);
    const inside = pixel(image, TEDDY_INSIDE.x, TEDDY_INSIDE.y);
    expect(inside).not.toEqual([0, 255, 0]);
    expect(inside[1]! - inside[0]!).toBeLessThan(100); // the subject is not tinted green
  });

  it('#RRGGBBAA keeps an alpha channel: background = the colour at that alpha, subject opaque', async () => {
    const { result, image } = out.translucent;
    expect(result.channels).toBe(4);
    expect((await sharp(result.data).metadata()).hasAlpha).toBe(true);
    for (const corner of corners(image)) expect(corner).toEqual([255, 0, 0, 0x80]);
    expect(pixel(image, TEDDY_INSIDE.x, TEDDY_INSIDE.y)[3]).toBe(255);
  });

  it('a CSS colour name with jpg: the background is that colour', async () => {
    const { image } = out.namedJpg;
    expect(image.channels).toBe(3);
    for (const corner of corners(image)) {
      expect(Math.abs(corner[0]! - 102)).toBeLessThanOrEqual(8);
      expect(Math.abs(corner[1]! - 51)).toBeLessThanOrEqual(8);
      expect(Math.abs(corner[2]! - 153)).toBeLessThanOrEqual(8);
    }
  });
});

describe('size presets', () => {
  const big = readFixture('swan-big.jpg'); // 2989x1680, ~5.0 MP
  const small = readPhoto(PHOTOS.swan); // 854x480
  let out: Record<'preview' | 'medium' | 'hd' | 'full' | 'smallHd' | 'smallFull', Output>;

  beforeAll(async () => {
    out = await runAll({
      preview: [big, { size: 'preview' }],
      medium: [big, { size: 'medium' }],
      hd: [big, { size: 'hd' }],
      full: [big, { size: 'full' }],
      smallHd: [small, { size: 'hd' }],
      smallFull: [small, { size: 'full' }],
    });
  });

  it.each(['preview', 'medium', 'hd'] as const)('%s: fits the pixel budget, fills it, keeps the aspect ratio', (size) => {
    const { result, image } = out[size];
    const budget = SIZE_PIXELS[size];
    expect({ width: image.width, height: image.height }).toEqual({ width: result.width, height: result.height });
    const pixels = result.width * result.height;
    expect(pixels).toBeLessThanOrEqual(budget);
    expect(pixels).toBeGreaterThanOrEqual(0.98 * budget);
    expect(Math.abs(result.height - (result.width * BIG.height) / BIG.width)).toBeLessThanOrEqual(1);
  });

  it('full: an image under 16 MP keeps its size', () => {
    expect({ width: out.full.result.width, height: out.full.result.height }).toEqual(BIG);
  });

  it('a downscaled result is still aligned with the subject', async () => {
    const { image } = out.preview;
    const gt = await gtMask(PHOTOS.swan, image.width, image.height);
    expect(iou(alphaOf(image), gt.mask)).toBeGreaterThan(0.85);
  });

  it('never upscales: 854x480 with size=hd and size=full stays 854x480', () => {
    for (const o of [out.smallHd, out.smallFull]) {
      expect({ width: o.result.width, height: o.result.height }).toEqual({ width: 854, height: 480 });
      expect({ width: o.image.width, height: o.image.height }).toEqual({ width: 854, height: 480 });
    }
  });
});

/**
 * Where the ground-truth subject of `gtBox` (in photo pixels) landed in a cropped output, found by
 * matching the output's alpha bbox; checks the whole mask lines up (IoU) at that offset.
 */
async function alignedWithGt(name: string, image: Raw): Promise<{ box: Box; iou: number }> {
  const gt = await gtMask(name);
  const gtBox = bbox(gt.mask, gt.width, gt.height)!;
  const alpha = alphaOf(image);
  const box = bbox(alpha, image.width, image.height)!;
  expect(box).not.toBeNull();
  const moved = shift(gt.mask, gt.width, gt.height, box.x0 - gtBox.x0, box.y0 - gtBox.y0, image.width, image.height);
  return { box, iou: iou(alpha, moved) };
}

describe('crop', () => {
  // Ground truth of the teddy: bbox x 58..233, y 57..325 (176 x 269 px); all margins > 20 % of 176.
  const SUBJECT = { width: 176, height: 269 };
  const tol = (n: number) => Math.max(4, Math.ceil(0.03 * n));
  let out: Record<'subject' | 'pad0' | 'pad20' | 'square' | 'wide', Output>;

  beforeAll(async () => {
    const gt = await gtMask(PHOTOS.teddy);
    const gtBox = bbox(gt.mask, gt.width, gt.height)!;
    expect({ width: gtBox.x1 - gtBox.x0 + 1, height: gtBox.y1 - gtBox.y0 + 1 }).toEqual(SUBJECT);
    out = await runAll({
      subject: [teddy, { crop: true }],
      pad0: [teddy, { crop: true, padding: 0 }],
      pad20: [teddy, { crop: 'true', padding: '20%' }],
      square: [teddy, { crop: '1:1' }],
      wide: [teddy, { crop: '16:9' }],
    });
  });

  /** Checks the output is the subject bbox plus `pad` px on every side, and lines up with the GT. */
  async function expectPaddedSubject(o: Output, pad: number) {
    const { result, image } = o;
    expect({ width: image.width, height: image.height }).toEqual({ width: result.width, height: result.height });
    expect(Math.abs(result.width - (SUBJECT.width + 2 * pad))).toBeLessThanOrEqual(tol(SUBJECT.width));
    expect(Math.abs(result.height - (SUBJECT.height + 2 * pad))).toBeLessThanOrEqual(tol(SUBJECT.height));
    const { box, iou: fit } = await alignedWithGt(PHOTOS.teddy, image);
    const margins = { left: box.x0, top: box.y0, right: image.width - 1 - box.x1, bottom: image.height - 1 - box.y1 };
    for (const [side, margin] of Object.entries(margins)) expect(Math.abs(margin - pad), `${side} margin ${margin}, padding ${pad}`).toBeLessThanOrEqual(4);
    expect(fit).toBeGreaterThan(0.9);
  }

  it('crop=true: the subject bbox plus 10 % of its width on every side', async () => {
    await expectPaddedSubject(out.subject, Math.round(0.1 * SUBJECT.width));
  });

  it('padding 0: the bare subject bbox', async () => {
    await expectPaddedSubject(out.pad0, 0);
  });

  it('padding 20%: 20 % of the subject width on every side, larger than 10 % and 0', async () => {
    await expectPaddedSubject(out.pad20, Math.round(0.2 * SUBJECT.width));
    expect(out.pad20.result.width).toBeGreaterThan(out.subject.result.width);
    expect(out.pad20.result.height).toBeGreaterThan(out.subject.result.height);
    expect(out.subject.result.width).toBeGreaterThan(out.pad0.result.width);
    expect(out.subject.result.height).toBeGreaterThan(out.pad0.result.height);
  });

  it('crop=1:1: a square holding the padded subject, centred on it', async () => {
    const { result, image } = out.square;
    expect(result.width).toBe(result.height);
    // The padded subject is 212 x 305: the square is as tall as it.
    expect(Math.abs(result.height - (SUBJECT.height + 2 * 18))).toBeLessThanOrEqual(tol(SUBJECT.height));
    const { box, iou: fit } = await alignedWithGt(PHOTOS.teddy, image);
    expect(Math.abs((box.x0 + box.x1 + 1) / 2 - image.width / 2)).toBeLessThanOrEqual(3);
    expect(Math.abs((box.y0 + box.y1 + 1) / 2 - image.height / 2)).toBeLessThanOrEqual(3);
    expect(fit).toBeGreaterThan(0.9);
  });

  it('crop=16:9: that ratio (within 1 px), centred on the subject, extended past the photo with transparency', async () => {
    const { result, image } = out.wide;
    expect(Math.abs(result.width - (result.height * 16) / 9)).toBeLessThanOrEqual(1);
    expect(Math.abs(result.height - (SUBJECT.height + 2 * 18))).toBeLessThanOrEqual(tol(SUBJECT.height));
    expect(result.width).toBeGreaterThan(TEDDY.width); // wider than the photo itself
    const { box, iou: fit } = await alignedWithGt(PHOTOS.teddy, image);
    expect(Math.abs((box.x0 + box.x1 + 1) / 2 - image.width / 2)).toBeLessThanOrEqual(3);
    expect(fit).toBeGreaterThan(0.9);
    // Columns beyond the photo on both sides are fully transparent.
    const alpha = alphaOf(image);
    const beyond = Math.floor((result.width - TEDDY.width) / 2) - 2;
    for (let y = 0; y < image.height; y++) {
      for (let x = 0; x < beyond; x++) {
        expect(alpha[y * image.width + x]).toBe(0);
        expect(alpha[y * image.width + image.width - 1 - x]).toBe(0);
      }
    }
  });
});

describe('crop where the subject touches the edge of the photo', () => {
  // The llama's legs reach the bottom row of the photo: the padded box extends below the photo.
  const llama = readPhoto(PHOTOS.llama);
  let out: Record<'transparent' | 'coloured', Output>;
  let pad: number;

  beforeAll(async () => {
    const gt = await gtMask(PHOTOS.llama);
    const gtBox = bbox(gt.mask, gt.width, gt.height)!;
    expect(gtBox.y1).toBe(gt.height - 1);
    pad = Math.round(0.1 * (gtBox.x1 - gtBox.x0 + 1));
    out = await runAll({
      transparent: [llama, { crop: true }],
      coloured: [llama, { crop: true, bgColor: '#0000ff' }],
    });
  });

  /** Rows at the bottom of the output that lie below the photo: the subject ends just above them. */
  function extension(image: Raw): { first: number; rows: number } {
    const alpha = alphaOf(image);
    const box = bbox(alpha, image.width, image.height)!;
    return { first: box.y1 + 1, rows: image.height - 1 - box.y1 };
  }

  it('the canvas is extended below the photo by the padding, and the extension is transparent', () => {
    const { image } = out.transparent;
    const alpha = alphaOf(image);
    const { first, rows } = extension(image);
    expect(Math.abs(rows - pad)).toBeLessThanOrEqual(3);
    // The legs are cut by the photo's edge: the last row inside the photo is still subject...
    const lastRow = alpha.subarray((first - 1) * image.width, first * image.width);
    expect(count(lastRow, (v) => v >= 128)).toBeGreaterThan(10);
    // ...and every pixel below it is fully transparent (nothing of the repeated edge leaks in).
    const below = alpha.subarray(first * image.width);
    expect(below.length).toBeGreaterThan(0);
    expect(count(below, (v) => v !== 0)).toBe(0);
  });

  it('with bg_color the extension is filled with that colour', () => {
    const { result, image } = out.coloured;
    expect(result.channels).toBe(3);
    expect({ width: image.width, height: image.height }).toEqual({ width: out.transparent.image.width, height: out.transparent.image.height });
    const { first } = extension(out.transparent.image);
    let wrong = 0;
    for (let y = first; y < image.height; y++) {
      for (let x = 0; x < image.width; x++) {
        const [r, g, b] = pixel(image, x, y);
        if (r !== 0 || g !== 0 || b !== 255) wrong++;
      }
    }
    expect(wrong).toBe(0);
  });
});

describe('crop happens before size', () => {
  it('crop=true with size=preview fills the 0.25 MP budget with the cropped subject', async () => {
    const big = readFixture('swan-big.jpg');
    const { crop } = await runAll({ crop: [big, { crop: true, size: 'preview' }] });
    const { width, height } = crop.result;
    expect(width * height).toBeLessThanOrEqual(SIZE_PIXELS.preview);
    // Cropping a 0.25 MP downscale instead would give far fewer pixels.
    expect(width * height).toBeGreaterThanOrEqual(0.98 * SIZE_PIXELS.preview);
    // The aspect ratio is the padded subject's (GT bbox 379 x 313 at 854x480, + 10 % of 379 per
    // side: 455 x 389, i.e. 1.17), not the photo's (1.78).
    expect(Math.abs(width / height - 455 / 389)).toBeLessThan(0.05);
    const image = await decode(crop.result.data);
    expect(count(alphaOf(image), (v) => v >= 128)).toBeGreaterThan(0.2 * width * height);
  });
});
