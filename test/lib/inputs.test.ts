/**
 * Input decoding: EXIF orientation, colour spaces, bit depths, palettes, alpha, progressive JPEG,
 * animation. Every variant is the same photo (the llama), so every result is compared with the
 * result for the plain upright JPEG: same size, same mask, and (where the colours survive the
 * conversion) the same colours.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { expectBgoneError } from '../helpers/assert.js';
import { removeBackground } from '../helpers/bgone.js';
import { ALPHA_BAND, PHOTOS } from '../helpers/constants.js';
import { alphaOf, count, gtMask, iou, type Raw, rgbDiffWhereOpaque } from '../helpers/image.js';
import { readFixture } from '../helpers/paths.js';
import { type Output, run, runAll } from '../helpers/run.js';

const UPRIGHT = { width: 513, height: 371 };
let reference: Output; // orient-1.jpg: the upright photo, orientation tag 1

/** Pixels opaque in both outputs. */
function bothOpaque(a: Raw, b: Raw): Uint8Array {
  const aa = alphaOf(a);
  const ab = alphaOf(b);
  return aa.map((v, i) => (v === 255 && ab[i] === 255 ? 255 : 0));
}

function expectSameSize(o: Output) {
  expect({ width: o.result.width, height: o.result.height }).toEqual(UPRIGHT);
  expect({ width: o.image.width, height: o.image.height }).toEqual(UPRIGHT);
}

beforeAll(async () => {
  reference = await run(readFixture('orient-1.jpg'));
});

describe('EXIF orientation', () => {
  let out: Record<string, Output>;

  beforeAll(async () => {
    out = await runAll(Object.fromEntries([2, 3, 4, 5, 6, 7, 8].map((n) => [String(n), [readFixture(`orient-${n}.jpg`)]])) as Record<string, [Buffer]>);
  });

  it('orientation 1 (the reference for this file): upright size and a good cut-out', async () => {
    expectSameSize(reference);
    // Comparing with a bad reference would prove nothing.
    const gt = await gtMask(PHOTOS.llama);
    expect(iou(alphaOf(reference.image), gt.mask)).toBeGreaterThan(0.9);
  });

  it.each([2, 3, 4, 5, 6, 7, 8])('orientation %i: upright size, same mask as the upright photo', (n) => {
    const o = out[String(n)]!;
    expectSameSize(o);
    expect(iou(alphaOf(o.image), alphaOf(reference.image))).toBeGreaterThanOrEqual(0.95);
    // The colours are upright too (not just the mask).
    expect(rgbDiffWhereOpaque(o.image, reference.image, bothOpaque(o.image, reference.image))).toBeLessThan(4);
  });
});

describe('colour spaces, bit depths, palettes, alpha', () => {
  let out: Record<'cmyk' | 'greyJpeg' | 'greyPng' | 'rgb16' | 'palette' | 'alpha' | 'progressive', Output>;

  beforeAll(async () => {
    out = await runAll({
      cmyk: [readFixture('cmyk.jpg')],
      greyJpeg: [readFixture('grey.jpg')],
      greyPng: [readFixture('grey.png')],
      rgb16: [readFixture('rgb16.png')],
      palette: [readFixture('palette.png')],
      alpha: [readFixture('alpha.png')],
      progressive: [readFixture('progressive.jpg')],
    });
  });

  it('CMYK JPEG: converted to sRGB (same mask, colours not inverted or shifted)', () => {
    const o = out.cmyk;
    expectSameSize(o);
    expect(o.result.channels).toBe(4);
    expect(iou(alphaOf(o.image), alphaOf(reference.image))).toBeGreaterThanOrEqual(0.95);
    expect(rgbDiffWhereOpaque(o.image, reference.image, bothOpaque(o.image, reference.image))).toBeLessThan(8);
  });

  it.each(['greyJpeg', 'greyPng'] as const)('greyscale (%s): an RGBA cut-out with grey colours', (key) => {
    const o = out[key];
    expectSameSize(o);
    expect(o.result.channels).toBe(4);
    expect(o.image.channels).toBe(4);
    // The model is less sure of itself on grey photos: a looser bound than for colour inputs.
    expect(iou(alphaOf(o.image), alphaOf(reference.image))).toBeGreaterThanOrEqual(0.8);
    const alpha = alphaOf(o.image);
    let coloured = 0;
    for (let i = 0; i < alpha.length; i++) {
      if (alpha[i] !== 255) continue;
      const [r, g, b] = [o.image.data[i * 4]!, o.image.data[i * 4 + 1]!, o.image.data[i * 4 + 2]!];
      if (Math.max(r, g, b) - Math.min(r, g, b) > 2) coloured++;
    }
    expect(coloured).toBe(0);
  });

  it('16-bit PNG: converted to 8 bits with the right scale (same colours)', () => {
    const o = out.rgb16;
    expectSameSize(o);
    expect(iou(alphaOf(o.image), alphaOf(reference.image))).toBeGreaterThanOrEqual(0.95);
    expect(rgbDiffWhereOpaque(o.image, reference.image, bothOpaque(o.image, reference.image))).toBeLessThan(4);
  });

  it('palette PNG: expanded to RGB (same mask, close colours)', () => {
    const o = out.palette;
    expectSameSize(o);
    expect(iou(alphaOf(o.image), alphaOf(reference.image))).toBeGreaterThanOrEqual(0.95);
    expect(rgbDiffWhereOpaque(o.image, reference.image, bothOpaque(o.image, reference.image))).toBeLessThan(8);
  });

  it('PNG with alpha: what was transparent in the upload stays transparent, the rest is cut out', () => {
    const o = out.alpha;
    expectSameSize(o);
    const alpha = alphaOf(o.image);
    const ref = alphaOf(reference.image);
    const { width } = UPRIGHT;
    // Every pixel of the transparent band is transparent in the output...
    let inBand = 0;
    let refInBand = 0;
    for (let y = 0; y < UPRIGHT.height; y++) {
      for (let x = 0; x < ALPHA_BAND; x++) {
        if (alpha[y * width + x] !== 0) inBand++;
        if (ref[y * width + x]! >= 128) refInBand++;
      }
    }
    expect(inBand).toBe(0);
    // ...though the band crosses the subject (the reference has subject there).
    expect(refInBand).toBeGreaterThan(1000);
    // The head, away from the band, is cut out as without the alpha channel. (The neck is not
    // compared: the model sees the band flattened on white, which changes its view of the white neck.)
    const head: number[] = [];
    const refHead: number[] = [];
    for (let y = 0; y < 240; y++) {
      for (let x = ALPHA_BAND + 20; x < width; x++) {
        head.push(alpha[y * width + x]!);
        refHead.push(ref[y * width + x]!);
      }
    }
    expect(count(Uint8Array.from(head), (v) => v >= 128)).toBeGreaterThan(1000);
    expect(iou(Uint8Array.from(head), Uint8Array.from(refHead))).toBeGreaterThanOrEqual(0.9);
  });

  it('progressive JPEG: same result as the baseline JPEG', () => {
    const o = out.progressive;
    expectSameSize(o);
    expect(iou(alphaOf(o.image), alphaOf(reference.image))).toBeGreaterThanOrEqual(0.95);
    expect(rgbDiffWhereOpaque(o.image, reference.image, bothOpaque(o.image, reference.image))).toBeLessThan(4);
  });
});

describe('animation', () => {
  it('animated WebP: the first frame only (frame size, the upright llama, not the mirrored second frame)', async () => {
    const o = await run(readFixture('animated.webp'));
    expectSameSize(o);
    expect(iou(alphaOf(o.image), alphaOf(reference.image))).toBeGreaterThanOrEqual(0.9);
    expect(rgbDiffWhereOpaque(o.image, reference.image, bothOpaque(o.image, reference.image))).toBeLessThan(8);
  });

  it('animated GIF is not accepted (GIF is not an input format)', async () => {
    for (let i = 0; i < 2; i++) await expectBgoneError(removeBackground(readFixture('animated.gif')), 'unsupported_media_type');
  });
});

describe('input containers', () => {
  it('a Uint8Array view into a larger buffer gives the same bytes as a Buffer', async () => {
    const bytes = readFixture('orient-1.jpg');
    const backing = new Uint8Array(bytes.length + 100);
    backing.fill(0xee);
    backing.set(bytes, 37);
    const view = backing.subarray(37, 37 + bytes.length);
    const result = await removeBackground(view);
    expect(result.data.equals(reference.result.data)).toBe(true);
  });
});
