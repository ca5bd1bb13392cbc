/**
 * The model input's resampler on its own (native/model_resample.cc): Lanczos-3, separable, edges
 * repeated, RGBA flattened on white. Checked against a float64 reference written here from the
 * definition (every source pixel within the kernel's reach, weights normalised), on shrinking,
 * enlarging, stretching one axis and not the other, and the smallest images. The addon's fixed
 * point may round a value near .5 the other way: at most 1 apart, and rarely.
 */
import { describe, expect, it } from 'vitest';
import { native } from '../../src/lib/native.js';
import { removeBackground } from '../helpers/bgone.js';
import { readFixture } from '../helpers/paths.js';

function lanczos3(t: number): number {
  const a = Math.abs(t);
  if (a < 1e-9) return 1;
  if (a >= 3) return 0;
  const p = Math.PI * a;
  return (3 * Math.sin(p) * Math.sin(p / 3)) / (p * p);
}

/** Output sample o of an axis of n inputs resampled to m: its source indices (edges repeated) and weights. */
function taps(n: number, m: number, o: number): Array<[number, number]> {
  const scale = n / m;
  const stretch = Math.max(1, scale);
  const support = 3 * stretch;
  const centre = (o + 0.5) * scale - 0.5;
  const out: Array<[number, number]> = [];
  let sum = 0;
  for (let k = Math.ceil(centre - support); k <= Math.floor(centre + support); k++) {
    const w = lanczos3((k - centre) / stretch);
    out.push([Math.min(n - 1, Math.max(0, k)), w]);
    sum += w;
  }
  return out.map(([i, w]) => [i, w / sum]);
}

function reference(pixels: Buffer, width: number, height: number, bands: number, outW: number, outH: number): Uint8Array {
  // RGBA is flattened on white to bytes first (rounded), as libvips' flatten did.
  const flat = new Float64Array(width * height * 3);
  for (let i = 0; i < width * height; i++) {
    const a = bands === 4 ? pixels[i * 4 + 3] : 255;
    for (let c = 0; c < 3; c++) flat[i * 3 + c] = Math.floor((pixels[i * bands + c] * a + 255 * (255 - a) + 127) / 255);
  }
  const across = new Float64Array(outW * height * 3);
  for (let x = 0; x < outW; x++) {
    const t = taps(width, outW, x);
    for (let y = 0; y < height; y++) {
      for (let c = 0; c < 3; c++) {
        let v = 0;
        for (const [i, w] of t) v += w * flat[(y * width + i) * 3 + c];
        across[(y * outW + x) * 3 + c] = v;
      }
    }
  }
  const out = new Uint8Array(outW * outH * 3);
  for (let y = 0; y < outH; y++) {
    const t = taps(height, outH, y);
    for (let x = 0; x < outW; x++) {
      for (let c = 0; c < 3; c++) {
        let v = 0;
        for (const [j, w] of t) v += w * across[(j * outW + x) * 3 + c];
        out[(y * outW + x) * 3 + c] = Math.min(255, Math.max(0, Math.trunc(v + 0.5)));
      }
    }
  }
  return out;
}

/** Smooth content with edges and every value: a gradient, a ring and a hard-edged block. */
function image(width: number, height: number, bands: number): Buffer {
  const out = Buffer.alloc(width * height * bands);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const i = (y * width + x) * bands;
      const ring = Math.hypot(x - width / 2, y - height / 3) % 17 < 3;
      const block = x > width / 3 && x < width / 2 && y > height / 4;
      out[i] = Math.round((255 * x) / Math.max(1, width - 1));
      out[i + 1] = ring ? 240 : Math.round((255 * y) / Math.max(1, height - 1));
      out[i + 2] = block ? 0 : (x * 7 + y * 13) % 256;
      if (bands === 4) out[i + 3] = block ? 255 : (x * 3 + y * 5) % 256;
    }
  }
  return out;
}

function compare(actual: Buffer, expected: Uint8Array): { maxDiff: number; differing: number } {
  let maxDiff = 0;
  let differing = 0;
  for (let i = 0; i < expected.length; i++) {
    const d = Math.abs(actual[i] - expected[i]);
    if (d > 0) differing++;
    maxDiff = Math.max(maxDiff, d);
  }
  return { maxDiff, differing };
}

describe('the model input resampler', () => {
  const cases: Array<[string, number, number, number, number, number]> = [
    ['shrinks both axes (a 2 MP photo to the model)', 301, 227, 3, 190, 190],
    ['enlarges both axes (a small upload)', 97, 61, 3, 160, 160],
    ['shrinks one axis and enlarges the other', 250, 80, 3, 128, 128],
    ['flattens RGBA on white', 143, 119, 4, 96, 96],
    ['keeps the size (a copy)', 64, 48, 3, 64, 48],
    ['takes a 1 x 1 image', 1, 1, 3, 32, 32],
    ['takes a one-pixel-wide image', 1, 57, 4, 24, 24],
    ['takes an image narrower than the kernel', 5, 3, 3, 64, 64],
  ];
  for (const [what, w, h, bands, outW, outH] of cases) {
    it(what, () => {
      const input = image(w, h, bands);
      const actual = native().resampleForModel(input, w, h, bands, outW, outH);
      expect(actual.length).toBe(outW * outH * 3);
      const { maxDiff, differing } = compare(actual, reference(input, w, h, bands, outW, outH));
      expect(maxDiff).toBeLessThanOrEqual(1);
      expect(differing / actual.length).toBeLessThan(0.01);
    });
  }

  it('keeps a flat colour exactly, edges included', () => {
    const w = 211;
    const h = 97;
    const input = Buffer.alloc(w * h * 3);
    for (let i = 0; i < input.length; i += 3) input.set([200, 13, 255], i);
    const out = native().resampleForModel(input, w, h, 3, 128, 300);
    for (let i = 0; i < out.length; i += 3) {
      if (out[i] !== 200 || out[i + 1] !== 13 || out[i + 2] !== 255) throw new Error(`pixel ${i / 3} is ${out.subarray(i, i + 3).join()}`);
    }
  });

  it('makes a fully transparent image white', () => {
    const input = image(40, 30, 4);
    for (let i = 3; i < input.length; i += 4) input[i] = 0;
    const out = native().resampleForModel(input, 40, 30, 4, 64, 64);
    expect(out.every((v) => v === 255)).toBe(true);
  });

  it('refuses sizes that do not match the pixels', () => {
    expect(() => native().resampleForModel(Buffer.alloc(10), 2, 2, 3, 8, 8)).toThrow(RangeError);
    expect(() => native().resampleForModel(Buffer.alloc(12), 2, 2, 3, 0, 8)).toThrow(RangeError);
    expect(() => native().resampleForModel(Buffer.alloc(8), 2, 2, 2, 8, 8)).toThrow(RangeError);
  });
});

describe('the model input resampled behind the decode', () => {
  it('a JPEG under twice the model side gives the same cut-out as a lossless PNG of its decoded pixels (resampled after the decode)', async () => {
    // The JPEG's model input is resampled row by row while its decode runs on another thread; the
    // PNG's from the whole decoded image, on the free cores. The same pixels must give the same bytes.
    const fromJpeg = await removeBackground(readFixture('swan-big.jpg'), { format: 'png' });
    const fromPng = await removeBackground(readFixture('swan-big-decoded.png'), { format: 'png' });
    expect([fromJpeg.width, fromJpeg.height]).toEqual([2989, 1680]);
    expect([fromPng.width, fromPng.height]).toEqual([2989, 1680]);
    expect(Buffer.compare(fromJpeg.data, fromPng.data)).toBe(0);
  }, 60_000);
});
