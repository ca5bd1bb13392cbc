/**
 * The canvas and what goes on it, in the native core (native/pipeline.cc layout): per-side padding,
 * scale and position of the subject, an exact canvas, a region of interest, format auto, a
 * background image and the subject's box in the result. The addon is called directly with the
 * options object normaliseOptions builds and the fields under test set; real model, real photos.
 */
import sharp from 'sharp';
import { beforeAll, describe, expect, it } from 'vitest';
import { fromNativeError } from '../../src/lib/errors.js';
import { planJob } from '../../src/lib/job-plan.js';
import { getModel, modelContract, resolveModel } from '../../src/lib/models.js';
import { type ModelHandle, type NativeResult, native } from '../../src/lib/native.js';
import type { NativeOptions } from '../../src/lib/options.js';
import { normaliseOptions, prepareJob } from '../helpers/bgone.js';
import { PHOTOS } from '../helpers/constants.js';
import { pngClaiming } from '../helpers/http-images.js';
import { alphaOf, type Box, bbox, decode, MAGIC, pixel, type Raw } from '../helpers/image.js';
import { readPhoto } from '../helpers/paths.js';

const teddy = readPhoto(PHOTOS.teddy); // 284x398, the subject well inside the frame
const TEDDY = { width: 284, height: 398 };
let model: ModelHandle;

beforeAll(async () => {
  model = await getModel();
});

interface Output {
  result: NativeResult;
  image: Raw;
  /** The alpha's box (alpha >= 128), x1 and y1 inclusive. */
  box: Box;
}

async function job(overrides: Partial<NativeOptions>, background: Buffer | null = null, input = teddy): Promise<Output> {
  const probe = native().probe(input, 6000);
  const { options } = planJob(
    { ...normaliseOptions({}).native, ...overrides },
    { bytes: input, ...probe },
    modelContract(resolveModel().entry),
    'standard',
    'cpu',
  );
  const result = await native().removeBackground(input, options, model, background);
  const image = await decode(result.data);
  const box = image.channels === 3 ? { x0: 0, y0: 0, x1: image.width - 1, y1: image.height - 1 } : bbox(alphaOf(image), image.width, image.height)!;
  return { result, image, box };
}

/** A solid colour image of w x h, RGB or RGBA, as PNG (the addon's own writer). */
function solidPng(w: number, h: number, colour: number[]): Buffer {
  const pixels = Buffer.alloc(w * h * colour.length);
  for (let i = 0; i < w * h; i++) pixels.set(colour, i * colour.length);
  return native().encodePng(pixels, w, h, colour.length, 1);
}

/** 128 x 128 RGB of noise: its compressed data are long enough to cut in the middle. */
function noisyPng(): Buffer {
  const pixels = Buffer.alloc(128 * 128 * 3);
  let seed = 1;
  for (let i = 0; i < pixels.length; i++) {
    seed = (seed * 1103515245 + 12345) >>> 0;
    pixels[i] = seed >>> 24;
  }
  return native().encodePng(pixels, 128, 128, 3, 1);
}

async function rejection(promise: Promise<unknown>): Promise<{ code: string; input?: string; message: string }> {
  try {
    await promise;
  } catch (error) {
    return error as { code: string; input?: string; message: string };
  }
  throw new Error('expected a rejection');
}

describe('per-side padding', () => {
  it('each side adds its share of the subject width plus its pixels, exactly', async () => {
    const none = await job({ crop: 'subject', paddingShare: [0, 0, 0, 0], paddingPx: [0, 0, 0, 0] });
    const px = await job({ crop: 'subject', paddingShare: [0, 0, 0, 0], paddingPx: [5, 11, 17, 23] });
    const mixed = await job({ crop: 'subject', paddingShare: [0.1, 0, 0.05, 0.2], paddingPx: [5, 11, 17, 23] });
    const w = none.result.width;
    const h = none.result.height;
    expect(w).toBeLessThan(TEDDY.width); // a crop, not scaled by the size preset
    expect({ width: px.result.width, height: px.result.height }).toEqual({ width: w + 11 + 23, height: h + 5 + 17 });
    const share = (s: number) => Math.round(s * w);
    expect({ width: mixed.result.width, height: mixed.result.height }).toEqual({
      width: w + share(0.2) + 23 + 11,
      height: h + share(0.1) + 5 + share(0.05) + 17,
    });
    // The left margin (23 px) is wider than the right (11 px) around the same subject.
    expect(px.box.x0 - none.box.x0).toBeGreaterThanOrEqual(22);
    expect(px.box.x0 - none.box.x0).toBeLessThanOrEqual(24);
  });
});

describe('scale and position', () => {
  it('scale 0.5, centred: the subject takes half the canvas on its larger side, in the middle', async () => {
    const { result, box } = await job({ scale: 0.5, position: [0.5, 0.5] });
    expect({ width: result.width, height: result.height }).toEqual(TEDDY);
    const bw = box.x1 - box.x0 + 1;
    const bh = box.y1 - box.y0 + 1;
    expect(Math.abs(Math.max(bw / result.width, bh / result.height) - 0.5)).toBeLessThanOrEqual(0.03);
    expect(Math.abs((box.x0 + box.x1 + 1) / 2 / result.width - 0.5)).toBeLessThanOrEqual(0.03);
    expect(Math.abs((box.y0 + box.y1 + 1) / 2 / result.height - 0.5)).toBeLessThanOrEqual(0.03);
  });

  it('scale without a position: the subject centre stays where it was in the frame', async () => {
    const plain = await job({});
    const scaled = await job({ scale: 0.3 });
    const centre = (b: Box, w: number, h: number) => [(b.x0 + b.x1 + 1) / 2 / w, (b.y0 + b.y1 + 1) / 2 / h];
    const [px, py] = centre(plain.box, plain.result.width, plain.result.height);
    const [sx, sy] = centre(scaled.box, scaled.result.width, scaled.result.height);
    expect(Math.abs(sx! - px!)).toBeLessThanOrEqual(0.03);
    expect(Math.abs(sy! - py!)).toBeLessThanOrEqual(0.03);
    const ratio = Math.max((scaled.box.x1 - scaled.box.x0 + 1) / TEDDY.width, (scaled.box.y1 - scaled.box.y0 + 1) / TEDDY.height);
    expect(Math.abs(ratio - 0.3)).toBeLessThanOrEqual(0.03);
  });

  it('position [0, 1]: the scaled subject touches the left and bottom edges', async () => {
    const { result, box } = await job({ scale: 0.4, position: [0, 1] });
    expect(box.x0).toBeLessThanOrEqual(3);
    expect(box.y1).toBeGreaterThanOrEqual(result.height - 4);
  });
});

describe('exact canvas', () => {
  it('1000 x 1000 is exactly 1000 x 1000, the image fitted inside and centred, transparent around it', async () => {
    const { result, image } = await job({ canvasWidth: 1000, canvasHeight: 1000 });
    expect({ width: result.width, height: result.height }).toEqual({ width: 1000, height: 1000 });
    // 284 x 398 contained: 714 x 1000, centred: columns 0..142 and 857.. are outside the image.
    for (const y of [0, 500, 999]) {
      expect(pixel(image, 100, y)[3]).toBe(0);
      expect(pixel(image, 900, y)[3]).toBe(0);
    }
    expect(pixel(image, 500, 480)[3]).toBe(255);
  });

  it('with scale: the subject scaled against the canvas (odd sizes stay exact)', async () => {
    const { result, box } = await job({ canvasWidth: 777, canvasHeight: 333, scale: 0.9, position: [0.5, 0.5] });
    expect({ width: result.width, height: result.height }).toEqual({ width: 777, height: 333 });
    const ratio = Math.max((box.x1 - box.x0 + 1) / 777, (box.y1 - box.y0 + 1) / 333);
    expect(Math.abs(ratio - 0.9)).toBeLessThanOrEqual(0.03);
  });
});

describe('region of interest', () => {
  it('roi = the left half: alpha 0 everywhere right of it, the subject found inside it', async () => {
    const half = TEDDY.width / 2;
    const { result, image } = await job({ roi: [0, 0, half, TEDDY.height] });
    expect({ width: result.width, height: result.height }).toEqual(TEDDY);
    const alpha = alphaOf(image);
    let right = 0;
    let left = 0;
    for (let y = 0; y < image.height; y++) {
      for (let x = 0; x < image.width; x++) {
        if (x >= half) right = Math.max(right, alpha[y * image.width + x]!);
        else if (alpha[y * image.width + x] === 255) left++;
      }
    }
    expect(right).toBe(0);
    expect(left).toBeGreaterThan(1000);
  });
});

describe('format auto', () => {
  it('PNG with no background, JPEG on an opaque colour and on a background image', async () => {
    const none = await job({ format: 'auto' });
    expect(none.result.format).toBe('png');
    expect(MAGIC.png(none.result.data)).toBe(true);
    const colour = await job({ format: 'auto', background: [255, 0, 0, 255] });
    expect(colour.result.format).toBe('jpg');
    expect(MAGIC.jpg(colour.result.data)).toBe(true);
    expect(colour.result.channels).toBe(3);
    const translucent = await job({ format: 'auto', background: [255, 0, 0, 128] });
    expect(translucent.result.format).toBe('png');
    const image = await job({ format: 'auto' }, solidPng(40, 30, [30, 140, 200]));
    expect(image.result.format).toBe('jpg');
    expect(MAGIC.jpg(image.result.data)).toBe(true);
    const mask = await job({ format: 'auto', channels: 'alpha', background: null });
    expect(mask.result.format).toBe('png');
  });
});

describe('background image', () => {
  it('covers the canvas: an opaque result with the background colour far from the subject', async () => {
    const { result, image } = await job({ format: 'png' }, solidPng(40, 30, [30, 140, 200]));
    expect(result.channels).toBe(3);
    for (const [x, y] of [
      [0, 0],
      [TEDDY.width - 1, 0],
      [0, TEDDY.height - 1],
      [TEDDY.width - 1, TEDDY.height - 1],
    ]) {
      for (const [c, v] of pixel(image, x!, y!).entries()) expect(Math.abs(v - [30, 140, 200][c]!)).toBeLessThanOrEqual(1);
    }
    // The subject is on top of it.
    expect(pixel(image, 145, 190)).not.toEqual([30, 140, 200]);
  });

  it('scaled to cover, centred: a two-colour JPEG background keeps its halves on an exact canvas', async () => {
    const halves = await sharp({ create: { width: 200, height: 100, channels: 3, background: { r: 0, g: 0, b: 255 } } })
      .composite([{ input: { create: { width: 100, height: 100, channels: 3, background: { r: 255, g: 255, b: 0 } } }, left: 100, top: 0 }])
      .jpeg({ quality: 95 })
      .toBuffer();
    const { result, image } = await job({ format: 'jpg', canvasWidth: 400, canvasHeight: 400 }, halves);
    expect({ width: result.width, height: result.height }).toEqual({ width: 400, height: 400 });
    // Cover: 800 x 400 cropped about its centre, so the seam is at x = 200.
    expect(pixel(image, 5, 5)[2]).toBeGreaterThan(200);
    expect(pixel(image, 5, 5)[0]).toBeLessThan(50);
    expect(pixel(image, 394, 5)[0]).toBeGreaterThan(200);
    expect(pixel(image, 394, 5)[2]).toBeLessThan(50);
  });

  it('a background with alpha keeps its alpha in PNG', async () => {
    const { result, image } = await job({ format: 'png' }, solidPng(20, 20, [0, 255, 0, 100]));
    expect(result.channels).toBe(4);
    expect(pixel(image, 0, 0)).toEqual([0, 255, 0, 100]);
    expect(pixel(image, 145, 190)[3]).toBe(255);
  });

  it.each([
    ['bytes that are no image', () => Buffer.from('this is not an image at all'), 'unsupported_media_type'],
    ['a truncated JPEG', () => teddy.subarray(0, Math.floor(teddy.length / 2)), 'invalid_image'],
    ['a decompression bomb (a PNG claiming 100000 x 100000)', () => pngClaiming(100_000, 100_000), 'image_too_large'],
    ['a truncated PNG', () => noisyPng().subarray(0, 20_000), 'invalid_image'],
  ])('%s: a coded error with input background, and the process stays up', async (_, bytes, code) => {
    const error = await rejection(job({}, bytes()));
    expect(error.code).toBe(code);
    expect(error.input).toBe('background');
    expect(fromNativeError(error).details).toEqual({ field: 'bg_image_file' });
    const after = await job({ maxPixels: 250_000 });
    expect(after.result.width).toBeGreaterThan(0);
  });

  it('an error of the input itself carries no input field', async () => {
    const options = { ...prepareJob(teddy).options, inferenceSize: 512 };
    const error = await rejection(native().removeBackground(Buffer.from('garbage bytes'), options, model, solidPng(4, 4, [0, 0, 0])));
    expect(error.code).toBe('unsupported_media_type');
    expect(error.input).toBeUndefined();
  });
});

describe('foreground box', () => {
  it.each<[string, Partial<NativeOptions>]>([
    ['plain', {}],
    ['crop 1:1', { crop: 'aspect' }],
    ['scale and an exact canvas', { scale: 0.6, position: [0.3, 0.7], canvasWidth: 600, canvasHeight: 500 }],
  ])('%s: the alpha box, in the result pixels (within 2 px)', async (_, overrides) => {
    const { result, box } = await job(overrides);
    const f = result.foreground;
    expect(Math.abs(f.left - box.x0)).toBeLessThanOrEqual(2);
    expect(Math.abs(f.top - box.y0)).toBeLessThanOrEqual(2);
    expect(Math.abs(f.left + f.width - (box.x1 + 1))).toBeLessThanOrEqual(2);
    expect(Math.abs(f.top + f.height - (box.y1 + 1))).toBeLessThanOrEqual(2);
  });
});
