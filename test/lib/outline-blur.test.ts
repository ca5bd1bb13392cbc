/**
 * The outline under the subject (outline_color, outline_width, outline_blur), the blurred original
 * behind it (bg_blur, bg_blur_mode) and the background image's fit (bg_fit), with the real model on
 * real photos, by their numbers: the outline's width measured on the result against an exact
 * Euclidean distance from the subject, its colour and its edge; the blur's strength and its
 * kernel, the photo's place under the subject and its edge repeated past it; contain's
 * transparent bands. Left out, none of them changes a byte.
 */
import sharp from 'sharp';
import { beforeAll, describe, expect, it } from 'vitest';
import { removeBackground } from '../helpers/bgone.js';
import { PHOTOS } from '../helpers/constants.js';
import { alphaOf, decode, pixel, type Raw } from '../helpers/image.js';
import { readPhoto } from '../helpers/paths.js';
import { type Output, run, runAll } from '../helpers/run.js';

const teddy = readPhoto(PHOTOS.teddy); // 284x398, the subject well inside the frame
const llama = readPhoto(PHOTOS.llama); // 513x371, its neck cut by the bottom edge

/** One line of the exact squared Euclidean distance transform (Felzenszwalb and Huttenlocher). */
function line(f: Float64Array, n: number): Float64Array {
  const d = new Float64Array(n);
  const v = new Int32Array(n);
  const z = new Float64Array(n + 1);
  let k = 0;
  z[0] = -Infinity;
  z[1] = Infinity;
  const meet = (q: number, p: number) => (f[q]! + q * q - (f[p]! + p * p)) / (2 * q - 2 * p);
  for (let q = 1; q < n; q++) {
    let s = meet(q, v[k]!);
    while (s <= z[k]!) s = meet(q, v[--k]!);
    k++;
    v[k] = q;
    z[k] = s;
    z[k + 1] = Infinity;
  }
  k = 0;
  for (let q = 0; q < n; q++) {
    while (z[k + 1]! < q) k++;
    d[q] = (q - v[k]!) ** 2 + f[v[k]!]!;
  }
  return d;
}

/** Each pixel's Euclidean distance (pixel centres) to the nearest pixel where `inside` holds (0 there). */
function distanceFrom(inside: (i: number) => boolean, w: number, h: number): Float64Array {
  const sq = new Float64Array(w * h);
  for (let i = 0; i < w * h; i++) sq[i] = inside(i) ? 0 : 1e20;
  const col = new Float64Array(h);
  for (let x = 0; x < w; x++) {
    for (let y = 0; y < h; y++) col[y] = sq[y * w + x]!;
    const d = line(col, h);
    for (let y = 0; y < h; y++) sq[y * w + x] = d[y]!;
  }
  for (let y = 0; y < h; y++) {
    const d = line(sq.subarray(y * w, (y + 1) * w), w);
    for (let x = 0; x < w; x++) sq[y * w + x] = Math.sqrt(d[x]!);
  }
  return sq;
}

/** The pixel indices of a w x h image for which `keep(x, y, i)` holds. */
function where(w: number, h: number, keep: (x: number, y: number, i: number) => boolean): number[] {
  const out: number[] = [];
  for (let y = 0; y < h; y++) for (let x = 0; x < w; x++) if (keep(x, y, y * w + x)) out.push(y * w + x);
  return out;
}

const mean = (values: number[]) => values.reduce((s, v) => s + v, 0) / Math.max(1, values.length);
const rgbAt = (image: Raw, i: number) => [...image.data.subarray(i * image.channels, i * image.channels + 3)];

/** The mean absolute difference between horizontal neighbours' channels over `pixels` (a measure of detail). */
function detail(image: Raw, pixels: number[]): number {
  let [sum, n] = [0, 0];
  for (const i of pixels) {
    if ((i + 1) % image.width === 0) continue;
    for (let c = 0; c < 3; c++) sum += Math.abs(image.data[(i + 1) * image.channels + c]! - image.data[i * image.channels + c]!);
    n += 3;
  }
  return sum / n;
}

/** The mean absolute difference of two images' colours over `pixels`. */
function difference(a: Raw, b: Raw, pixels: number[]): number {
  let sum = 0;
  for (const i of pixels) for (let c = 0; c < 3; c++) sum += Math.abs(a.data[i * a.channels + c]! - b.data[i * b.channels + c]!);
  return sum / (3 * pixels.length);
}

describe('outline_color', () => {
  const { width: W, height: H } = { width: 284, height: 398 };
  const R = 0.05 * Math.max(W, H); // outline_width 0.05 of the larger side: 19.9 px
  let plain: Output;
  let crisp: Output;
  let soft: Output;
  let onColour: Output;
  let halfAlpha: Output;
  let distance: Float64Array;
  let alpha: Uint8Array;

  beforeAll(async () => {
    ({ plain, crisp, soft, onColour, halfAlpha } = await runAll({
      plain: [teddy],
      crisp: [teddy, { outlineColor: '#ff0000', outlineWidth: 0.05 }],
      soft: [teddy, { outlineColor: '#ff0000', outlineWidth: 0.05, outlineBlur: 0.01 }],
      onColour: [teddy, { outlineColor: 'white', bgColor: '#0000ff' }],
      halfAlpha: [teddy, { outlineColor: '#ff000080', outlineWidth: 0.05 }],
    }));
    alpha = alphaOf(plain.image);
    // The subject as the outline sees it: the finished matte at least 0.5.
    distance = distanceFrom((i) => alpha[i]! >= 128, W, H);
  });

  it('reaches outline_width × the larger side from the subject, round (a disc): opaque within it, nothing past it', () => {
    const out = alphaOf(crisp.image);
    const near = where(W, H, (_x, _y, i) => distance[i]! <= R - 2);
    const far = where(W, H, (_x, _y, i) => distance[i]! >= R + 2);
    expect(near.length).toBeGreaterThan(20_000);
    expect(far.length).toBeGreaterThan(20_000);
    expect(near.filter((i) => out[i] !== 255)).toEqual([]);
    expect(far.filter((i) => out[i] !== 0)).toEqual([]);
    // Its outer edge, measured: the farthest pixel it covers lies at the width, within a pixel or two.
    const covered = where(W, H, (_x, _y, i) => out[i]! >= 128).map((i) => distance[i]!);
    const reach = covered.reduce((m, d) => Math.max(m, d), 0);
    expect(Math.abs(reach - R)).toBeLessThanOrEqual(1.5);
  });

  it('is the outline colour where the subject is not, and antialiased: its partial pixels all on the edge', () => {
    const out = alphaOf(crisp.image);
    const outline = where(W, H, (_x, _y, i) => alpha[i] === 0 && out[i] === 255);
    expect(outline.length).toBeGreaterThan(10_000);
    for (const i of outline) expect(rgbAt(crisp.image, i)).toEqual([255, 0, 0]);
    const partial = where(W, H, (_x, _y, i) => alpha[i] === 0 && out[i]! > 0 && out[i]! < 255);
    expect(partial.length).toBeGreaterThan(200);
    for (const i of partial) expect(Math.abs(distance[i]! - R)).toBeLessThanOrEqual(2);
  });

  it('leaves the subject as it is', () => {
    expect(crisp.result.foreground).toEqual(plain.result.foreground);
    const opaque = where(W, H, (_x, _y, i) => alpha[i] === 255);
    expect(opaque.length).toBeGreaterThan(10_000);
    for (const i of opaque) expect(crisp.image.data.subarray(i * 4, i * 4 + 4)).toEqual(plain.image.data.subarray(i * 4, i * 4 + 4));
  });

  it('outline_blur softens its outer edge: half opaque at the width, fading over a few standard deviations', () => {
    const out = alphaOf(soft.image);
    const sigma = 0.01 * H;
    const at = (lo: number, hi: number) => mean(where(W, H, (_x, _y, i) => alpha[i] === 0 && distance[i]! >= lo && distance[i]! < hi).map((i) => out[i]!));
    expect(at(R - 0.5, R + 0.5)).toBeGreaterThan(0.35 * 255);
    expect(at(R - 0.5, R + 0.5)).toBeLessThan(0.65 * 255);
    expect(at(R + sigma - 0.5, R + sigma + 0.5)).toBeLessThan(0.3 * 255);
    expect(at(R + sigma - 0.5, R + sigma + 0.5)).toBeGreaterThan(0.05 * 255);
    expect(at(R - 2 * sigma - 0.5, R - 2 * sigma + 0.5)).toBeGreaterThan(0.9 * 255);
    // Far more partial pixels than the crisp edge's.
    const partial = (image: Raw) => {
      const a = alphaOf(image);
      return where(W, H, (_x, _y, i) => alpha[i] === 0 && a[i]! > 12 && a[i]! < 243).length;
    };
    expect(partial(soft.image)).toBeGreaterThan(4 * partial(crisp.image));
  });

  it('lies over bg_color: its colour near the subject, the background beyond (width 0.03 by default)', () => {
    expect(onColour.image.channels).toBe(3);
    const r = 0.03 * H;
    const band = where(W, H, (_x, _y, i) => alpha[i] === 0 && distance[i]! <= r - 2);
    const beyond = where(W, H, (_x, _y, i) => distance[i]! >= r + 2);
    expect(band.length).toBeGreaterThan(5000);
    for (const i of band) expect(rgbAt(onColour.image, i)).toEqual([255, 255, 255]);
    for (const i of beyond) expect(rgbAt(onColour.image, i)).toEqual([0, 0, 255]);
  });

  it("takes the colour's own alpha", () => {
    const out = alphaOf(halfAlpha.image);
    const outline = where(W, H, (_x, _y, i) => alpha[i] === 0 && distance[i]! <= R - 2);
    for (const i of outline) expect(out[i]).toBe(128);
  });

  it('format=zip: alpha.png holds the outline, as format=png has it', async () => {
    const zip = await removeBackground(teddy, { format: 'zip', outlineColor: '#ff0000', outlineWidth: 0.05 });
    const { unzipStored } = await import('../helpers/zip.js');
    const [, alphaPng] = unzipStored(zip.data).map((e) => e.data);
    expect(Buffer.from(alphaOf(await decode(alphaPng!))).equals(Buffer.from(alphaOf(crisp.image)))).toBe(true);
  });

  it('outline_width 0 draws nothing: the same bytes as no outline', async () => {
    const [none, zero] = await Promise.all([removeBackground(teddy), removeBackground(teddy, { outlineColor: 'white', outlineWidth: 0 })]);
    expect(zero.data.equals(none.data)).toBe(true);
  });
});

describe('bg_blur', () => {
  // The llama at twice its size on an exact canvas: the photo behind it must be placed by the same map.
  const [W, H] = [1026, 742];
  const sigma = 0.01 * W;
  let plain: Output;
  let gaussian: Output;
  let bokeh: Output;
  let reference: Raw;
  let enlarged: Raw;
  let alpha: Uint8Array;
  let background: number[];

  beforeAll(async () => {
    ({ plain, gaussian, bokeh } = await runAll({
      plain: [llama, { outputSize: `${W}x${H}` }],
      gaussian: [llama, { outputSize: `${W}x${H}`, bgBlur: 0.01 }],
      bokeh: [llama, { outputSize: `${W}x${H}`, bgBlur: 0.01, bgBlurMode: 'bokeh' }],
    }));
    enlarged = await decode(await sharp(llama).resize(W, H).png().toBuffer());
    reference = await decode(await sharp(llama).resize(W, H).blur(sigma).png().toBuffer());
    alpha = alphaOf(plain.image);
    // The background away from the subject (where its own colours are blurred in) and the canvas' edge.
    const fromSubject = distanceFrom((i) => alpha[i]! > 0, W, H);
    const margin = Math.ceil(3 * sigma);
    background = where(W, H, (x, y, i) => fromSubject[i]! > margin && x >= margin && y >= margin && x < W - margin && y < H - margin);
  });

  it('is opaque and keeps the canvas; the subject keeps its place', () => {
    for (const out of [gaussian, bokeh]) {
      expect(out.image).toMatchObject({ width: W, height: H, channels: 3 });
      expect(out.result.foreground).toEqual(plain.result.foreground);
    }
    expect(background.length).toBeGreaterThan(100_000);
  });

  it('is the photo, placed as the subject is, blurred as a Gaussian of bg_blur × the larger side', () => {
    expect(detail(gaussian.image, background)).toBeLessThan(0.4 * detail(enlarged, background));
    // Against the photo enlarged the same way and blurred by sharp: a few levels apart at most.
    expect(difference(gaussian.image, reference, background)).toBeLessThan(3);
    expect(difference(enlarged, reference, background)).toBeGreaterThan(2 * difference(gaussian.image, reference, background));
  });

  it('bokeh: as blurred, another kernel (a flat disc)', () => {
    expect(detail(bokeh.image, background)).toBeLessThan(0.5 * detail(enlarged, background));
    expect(difference(bokeh.image, gaussian.image, background)).toBeGreaterThan(0.5);
    expect(difference(bokeh.image, reference, background)).toBeLessThan(6);
  });

  it("leaves the subject's own pixels as the plain cut-out has them", () => {
    const opaque = where(W, H, (_x, _y, i) => alpha[i] === 255);
    expect(opaque.length).toBeGreaterThan(50_000);
    for (const out of [gaussian, bokeh]) {
      for (const i of opaque) expect(rgbAt(out.image, i)).toEqual(rgbAt(plain.image, i));
    }
  });

  it("repeats the photo's edge where the canvas reaches past it", async () => {
    // The teddy fitted into a wider canvas: 158 columns each side lie past the photo.
    const wide = await run(teddy, { outputSize: '600x398', bgBlur: 0.01 });
    expect(wide.image).toMatchObject({ width: 600, height: 398, channels: 3 });
    let worst = 0;
    for (let y = 0; y < 398; y++) {
      const [a, b] = [pixel(wide.image, 0, y), pixel(wide.image, 100, y)];
      for (let c = 0; c < 3; c++) worst = Math.max(worst, Math.abs(a[c]! - b[c]!));
    }
    expect(worst).toBeLessThanOrEqual(2);
    // ...and the rows there differ from each other, as the photo's edge does.
    const column = [...Array(398).keys()].map((y) => pixel(wide.image, 0, y)[1]!);
    expect(Math.max(...column) - Math.min(...column)).toBeGreaterThan(8);
  });
});

describe('bg_fit', () => {
  it('contain: the background image fitted inside the canvas, centred, transparent bands beside it; cover fills it', async () => {
    const { contain, cover } = await runAll({
      contain: [teddy, { bgImageFile: llama, bgFit: 'contain', outputSize: '600x300' }],
      cover: [teddy, { bgImageFile: llama, outputSize: '600x300' }],
    });
    expect(cover.image.channels).toBe(3);
    expect(contain.image).toMatchObject({ width: 600, height: 300, channels: 4 });
    // 513x371 fitted into 600x300: 415x300, from column 92 to 507.
    const row = [...Array(600).keys()].map((x) => pixel(contain.image, x, 5)[3]!);
    expect(row.slice(0, 91).every((a) => a === 0)).toBe(true);
    expect(row.slice(93, 506).every((a) => a === 255)).toBe(true);
    expect(row.slice(509).every((a) => a === 0)).toBe(true);
    // The whole image shows: its left edge is the photo's, not a crop of it.
    const photo = await decode(await sharp(llama).resize(415, 300).png().toBuffer());
    const diff = [...Array(300).keys()].map((y) => Math.abs(pixel(contain.image, 95, y)[1]! - pixel(photo, 3, y)[1]!));
    expect(mean(diff)).toBeLessThan(8);
  });

  it('cover, given, gives the bytes of leaving it out', async () => {
    const [left, given] = await Promise.all([removeBackground(teddy, { bgImageFile: llama }), removeBackground(teddy, { bgImageFile: llama, bgFit: 'cover' })]);
    expect(given.data.equals(left.data)).toBe(true);
  });
});
