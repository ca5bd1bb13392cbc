/**
 * The effects, with the real model on real photos, by their numbers: the drop and contact shadows
 * (shadow, shadow_opacity), semitransparency=false, despill on a green-screen photo made from a test
 * photo and its ground truth (bench/helpers/green-screen.ts), the zip layouts with a shadow and with
 * channels=alpha, and the uncertainty score. Defaults leave the output as it is.
 */
import sharp from 'sharp';
import { beforeAll, describe, expect, it } from 'vitest';
import { greenExcess, greenScreen } from '../../bench/helpers/green-screen.js';
import { TUNING } from '../../src/lib/options.js';
import { removeBackground } from '../helpers/bgone.js';
import { PHOTOS } from '../helpers/constants.js';
import { alphaOf, decode, pixel, type Raw } from '../helpers/image.js';
import { gtPath, photoPath, readPhoto } from '../helpers/paths.js';
import { type Output, run, runAll } from '../helpers/run.js';
import { unzipStored } from '../helpers/zip.js';

const teddy = readPhoto(PHOTOS.teddy); // 284x398, the subject well inside the frame
const book = readPhoto(PHOTOS.book); // 640x480: the model's mask is speckled inside the book's cover

/** The subject's larger side on the result, as the shadow measures its offset and blur. */
const sizeOf = (out: Output) => Math.max(out.result.foreground.width, out.result.foreground.height);

/** The pixel indices of a w x h image for which `keep(x, y, i)` holds. */
function where(w: number, h: number, keep: (x: number, y: number, i: number) => boolean): number[] {
  const out: number[] = [];
  for (let y = 0; y < h; y++) for (let x = 0; x < w; x++) if (keep(x, y, y * w + x)) out.push(y * w + x);
  return out;
}

/** The pixels at least `depth` pixels from any pixel below `below` in `mask` (the square around them, read every other pixel). */
function inside(mask: Uint8Array, w: number, h: number, depth: number, below: number): Set<number> {
  const out = new Set<number>();
  for (let y = depth; y < h - depth; y++) {
    for (let x = depth; x < w - depth; x++) {
      let clear = true;
      for (let dy = -depth; dy <= depth && clear; dy += 2) for (let dx = -depth; dx <= depth && clear; dx += 2) clear = mask[(y + dy) * w + x + dx]! >= below;
      if (clear) out.add(y * w + x);
    }
  }
  return out;
}

const mean = (values: number[]) => values.reduce((s, v) => s + v, 0) / Math.max(1, values.length);
const largest = (values: number[]) => values.reduce((m, v) => Math.max(m, v), 0);

describe('shadow=drop', () => {
  let plain: Output;
  let drop: Output;
  let faint: Output;
  let onWhite: Output;
  let onImage: Output;
  let alpha: Uint8Array;
  let shadowAlpha: Uint8Array;
  let offset: { x: number; y: number };
  const { width: W, height: H } = { width: 284, height: 398 };
  const at = (a: Uint8Array, x: number, y: number) => (x >= 0 && y >= 0 && x < W && y < H ? a[y * W + x]! : 0);

  beforeAll(async () => {
    const grey = await sharp({ create: { width: 64, height: 64, channels: 3, background: { r: 160, g: 160, b: 160 } } })
      .png()
      .toBuffer();
    ({ plain, drop, faint, onWhite, onImage } = await runAll({
      plain: [teddy],
      drop: [teddy, { shadow: 'drop', shadowOpacity: '100%' }],
      faint: [teddy, { shadow: 'drop', shadowOpacity: 0.25 }],
      onWhite: [teddy, { shadow: 'drop', bgColor: '#ffffff' }],
      onImage: [teddy, { shadow: 'drop', bgImageFile: grey }],
    }));
    alpha = alphaOf(plain.image);
    shadowAlpha = alphaOf(drop.image);
    const size = sizeOf(plain);
    offset = { x: Math.round(TUNING.shadowOffsetX * size), y: Math.round(TUNING.shadowOffsetY * size) };
    expect(offset.x).toBeGreaterThanOrEqual(5);
    expect(offset.y).toBeGreaterThanOrEqual(5);
  });

  /** Where the subject is not, but the subject moved by the offset is. */
  const underOffset = () => where(W, H, (x, y, i) => alpha[i] === 0 && at(alpha, x - offset.x, y - offset.y) === 255);
  /** Where neither the subject nor the subject moved by the offset is: only a halo would show there. */
  const aboveLeft = () =>
    where(W, H, (x, y, i) => alpha[i] === 0 && at(alpha, x - offset.x, y - offset.y) === 0 && at(alpha, x + offset.x, y + offset.y) === 255);

  it('the result keeps its size; the subject itself keeps its pixels', () => {
    expect({ width: drop.image.width, height: drop.image.height }).toEqual({ width: W, height: H });
    expect(drop.result.foreground).toEqual(plain.result.foreground);
    const opaque = where(W, H, (_x, _y, i) => alpha[i] === 255);
    expect(opaque.length).toBeGreaterThan(10_000);
    for (const i of opaque) expect(drop.image.data.subarray(i * 4, i * 4 + 4)).toEqual(plain.image.data.subarray(i * 4, i * 4 + 4));
  });

  it('transparent result: where the subject is not but the offset subject is, alpha > 0 and black', () => {
    const pixels = underOffset();
    expect(pixels.length).toBeGreaterThan(500);
    expect(pixels.filter((i) => shadowAlpha[i]! > 0).length / pixels.length).toBeGreaterThan(0.99);
    expect(mean(pixels.map((i) => shadowAlpha[i]!))).toBeGreaterThan(0.5 * 255);
    for (const i of pixels) for (let c = 0; c < 3; c++) expect(drop.image.data[i * 4 + c]).toBe(0);
  });

  it('the offset goes down and to the right: no halo on the other side', () => {
    const below = mean(underOffset().map((i) => shadowAlpha[i]!));
    const above = aboveLeft();
    expect(above.length).toBeGreaterThan(200);
    expect(mean(above.map((i) => shadowAlpha[i]!))).toBeLessThan(0.15 * below);
    // The shadow's centroid, where the subject is not, lies right of and below the subject's.
    let [sx, sy, sw, cx, cy, cw] = [0, 0, 0, 0, 0, 0];
    for (let i = 0; i < alpha.length; i++) {
      const x = i % W;
      const y = (i - x) / W;
      const shade = alpha[i] === 0 ? shadowAlpha[i]! : 0;
      [sx, sy, sw] = [sx + shade * x, sy + shade * y, sw + shade];
      [cx, cy, cw] = [cx + alpha[i]! * x, cy + alpha[i]! * y, cw + alpha[i]!];
    }
    expect(sx / sw - cx / cw).toBeGreaterThan(offset.x);
    expect(sy / sw - cy / cw).toBeGreaterThan(offset.y);
  });

  it('shadow_opacity scales it: 25 % is a quarter of 100 %', () => {
    const pixels = where(W, H, (_x, _y, i) => alpha[i] === 0 && shadowAlpha[i]! > 0);
    const ratio = mean(pixels.map((i) => alphaOf(faint.image)[i]!)) / mean(pixels.map((i) => shadowAlpha[i]!));
    expect(ratio).toBeGreaterThan(0.23);
    expect(ratio).toBeLessThan(0.27);
  });

  it('is soft: no step between neighbours, and much of it between 10 % and 90 % of its darkest', () => {
    let steepest = 0;
    for (let y = 0; y < H; y++) {
      for (let x = 1; x < W; x++) {
        const i = y * W + x;
        if (alpha[i] === 0 && alpha[i - 1] === 0) steepest = Math.max(steepest, Math.abs(shadowAlpha[i]! - shadowAlpha[i - 1]!));
      }
    }
    expect(steepest).toBeLessThan(40);
    const shade = where(W, H, (_x, _y, i) => alpha[i] === 0 && shadowAlpha[i]! > 0).map((i) => shadowAlpha[i]!);
    const darkest = largest(shade);
    expect(shade.filter((v) => v > 0.1 * darkest && v < 0.9 * darkest).length / shade.length).toBeGreaterThan(0.3);
  });

  it('under bg_color: darker pixels where the shadow falls, the colour itself far from it', () => {
    expect(onWhite.image.channels).toBe(3);
    const pixels = underOffset();
    expect(mean(pixels.map((i) => onWhite.image.data[i * 3 + 1]!))).toBeLessThan(255 - 40);
    expect(pixel(onWhite.image, 0, 0)).toEqual([255, 255, 255]);
    expect(pixel(onWhite.image, W - 1, 0)).toEqual([255, 255, 255]);
  });

  it('under a background image: darker pixels where the shadow falls, the image itself far from it', () => {
    const pixels = underOffset();
    expect(mean(pixels.map((i) => onImage.image.data[i * onImage.image.channels]!))).toBeLessThan(160 - 25);
    for (const c of pixel(onImage.image, 0, 0)) expect(Math.abs(c - 160)).toBeLessThanOrEqual(1);
  });
});

describe('shadow=contact', () => {
  it('lies only near the subject’s base, some of it below it', async () => {
    const { plain, contact } = await runAll({ plain: [teddy], contact: [teddy, { shadow: 'contact', shadowOpacity: 1 }] });
    const { width: W, height: H } = plain.image;
    const alpha = alphaOf(plain.image);
    const shade = alphaOf(contact.image);
    const { top, height } = plain.result.foreground;
    const base = top + height;
    const size = sizeOf(plain);
    const rows = where(W, H, (_x, _y, i) => alpha[i] === 0 && shade[i]! > 0).map((i) => Math.floor(i / W));
    expect(rows.length).toBeGreaterThan(200);
    expect(rows.reduce((m, y) => Math.min(m, y), H)).toBeGreaterThan(base - 0.25 * size);
    expect(largest(rows)).toBeLessThan(base + 0.1 * size);
    expect(rows.filter((y) => y >= base).length).toBeGreaterThan(50);
    // Where the subject is opaque it is unchanged.
    const opaque = where(W, H, (_x, _y, i) => alpha[i] === 255);
    for (const i of opaque) expect(shade[i]).toBe(255);
  });
});

describe('semitransparency=false', () => {
  let soft: Raw;
  let opaque: Raw;

  beforeAll(async () => {
    const out = await runAll({ soft: [book, { channels: 'alpha' }], opaque: [book, { channels: 'alpha', semitransparency: false }] });
    [soft, opaque] = [out.soft.image, out.opaque.image];
  });

  it('makes the semi-transparent pixels inside the subject opaque', () => {
    const { width: w, height: h } = soft;
    const interior = [...inside(soft.data, w, h, 12, 13)].filter((i) => soft.data[i]! < 250);
    expect(interior.length).toBeGreaterThan(2000);
    expect(interior.filter((i) => opaque.data[i] === 255).length / interior.length).toBeGreaterThan(0.99);
  });

  it('keeps the outer edge soft, and the background clear', () => {
    const { width: w, height: h } = soft;
    const deep = inside(soft.data, w, h, 12, 13);
    // The edge band: the pixels between 5 % and 95 % that are not deep inside.
    const edge = where(w, h, (_x, _y, i) => !deep.has(i) && soft.data[i]! > 13 && soft.data[i]! < 242);
    const stillSoft = edge.filter((i) => opaque.data[i]! > 0 && opaque.data[i]! < 255).length;
    expect(edge.length).toBeGreaterThan(1000);
    expect(stillSoft / edge.length).toBeGreaterThan(0.6);
    // The refinement sees the filled mask: the background moves by a level or two at most.
    const background = where(w, h, (_x, _y, i) => soft.data[i] === 0);
    expect(largest(background.map((i) => opaque.data[i]!))).toBeLessThanOrEqual(4);
  });

  it('keeps a clear hole clear (the gaps in a plush toy’s fur)', async () => {
    const photo = readPhoto('am_GT05.png');
    const [clearHoles, filled] = await Promise.all([run(photo, { channels: 'alpha' }), run(photo, { channels: 'alpha', semitransparency: false })]);
    const { width: w, height: h, data } = clearHoles.image;
    // Alpha 0 the background does not reach (through pixels below 128 from the border).
    const reached = new Uint8Array(w * h);
    const stack = where(w, h, (x, y, i) => (x === 0 || y === 0 || x === w - 1 || y === h - 1) && data[i]! < 128);
    for (const i of stack) reached[i] = 1;
    while (stack.length > 0) {
      const i = stack.pop()!;
      const x = i % w;
      for (const j of [x > 0 ? i - 1 : -1, x < w - 1 ? i + 1 : -1, i - w, i + w]) {
        if (j < 0 || j >= w * h || reached[j] || data[j]! >= 128) continue;
        reached[j] = 1;
        stack.push(j);
      }
    }
    const holes = where(w, h, (_x, _y, i) => !reached[i] && data[i] === 0);
    expect(holes.length).toBeGreaterThan(100);
    expect(largest(holes.map((i) => filled.image.data[i]!))).toBeLessThanOrEqual(13);
  });
});

describe('despill', () => {
  it('takes at least 80 % of the green spill off the edge band of a green-screen photo, and leaves the inside alone', async () => {
    const screen = await greenScreen(photoPath(PHOTOS.teddy), gtPath(PHOTOS.teddy));
    const { off, on } = await runAll({ off: [screen.png], on: [screen.png, { despill: true }] });
    const [before, after] = [greenExcess(off.image.data, screen.band), greenExcess(on.image.data, screen.band)];
    expect(before).toBeGreaterThan(5);
    expect(1 - after / before).toBeGreaterThanOrEqual(0.8);
    // Far inside the subject (opaque, no screen within a tenth of its size) despill changes nothing.
    const { width: w, height: h } = off.image;
    const interior = inside(alphaOf(off.image), w, h, Math.ceil(0.1 * sizeOf(off)), 255);
    expect(interior.size).toBeGreaterThan(500);
    for (const i of interior) expect(on.image.data.subarray(i * 4, i * 4 + 3)).toEqual(off.image.data.subarray(i * 4, i * 4 + 3));
  });

  it('on a background that is no green or blue screen, changes nothing', async () => {
    const [off, on] = await Promise.all([removeBackground(teddy), removeBackground(teddy, { despill: true })]);
    expect(on.data.equals(off.data)).toBe(true);
  });
});

describe('format=zip with the effects', () => {
  it('with a shadow: color.jpg and alpha.png compose to what format=png gives', async () => {
    const [zip, png] = await Promise.all([removeBackground(teddy, { format: 'zip', shadow: 'drop' }), run(teddy, { shadow: 'drop' })]);
    const [colour, alpha] = unzipStored(zip.data).map((e) => e.data);
    const [c, a] = [await decode(colour!), await decode(alpha!)];
    expect(a.channels).toBe(1);
    expect(Buffer.from(alphaOf(a)).equals(Buffer.from(alphaOf(png.image)))).toBe(true);
    // The colours where anything shows (the shadow included, black there), up to the JPEG's loss.
    let [sum, n] = [0, 0];
    for (let i = 0; i < a.data.length; i++) {
      if (a.data[i]! < 64) continue;
      for (let ch = 0; ch < 3; ch++) sum += Math.abs(c.data[i * 3 + ch]! - png.image.data[i * 4 + ch]!);
      n += 3;
    }
    expect(n).toBeGreaterThan(30_000);
    expect(sum / n).toBeLessThan(4);
  });

  it("with channels=alpha: color.jpg is the mask as grey and alpha.png is opaque, so composing them gives the mask (remove.bg's clients)", async () => {
    const [zip, mask] = await Promise.all([removeBackground(teddy, { format: 'zip', channels: 'alpha' }), run(teddy, { channels: 'alpha' })]);
    expect(zip).toMatchObject({ format: 'zip', width: 284, height: 398 });
    const entries = unzipStored(zip.data);
    expect(entries.map((e) => e.name)).toEqual(['color.jpg', 'alpha.png']);
    const [c, a] = [await decode(entries[0]!.data), await decode(entries[1]!.data)];
    expect(await sharp(entries[0]!.data).metadata()).toMatchObject({ format: 'jpeg', channels: 3, width: 284, height: 398 });
    expect(a).toMatchObject({ channels: 1, width: 284, height: 398 });
    expect(a.data.every((v) => v === 255)).toBe(true);
    let [sum, worst] = [0, 0];
    for (let i = 0; i < mask.image.data.length; i++) {
      for (let ch = 0; ch < 3; ch++) {
        const d = Math.abs(c.data[i * 3 + ch]! - mask.image.data[i]!);
        sum += d;
        worst = Math.max(worst, d);
      }
    }
    expect(sum / (3 * mask.image.data.length)).toBeLessThan(1);
    expect(worst).toBeLessThan(32);
  });
});

describe('uncertainty', () => {
  it('is in 0..1, the same for the same photo, whatever the effects', async () => {
    const {
      a,
      b,
      effects,
      book: other,
    } = await runAll({
      a: [teddy],
      b: [teddy],
      effects: [teddy, { shadow: 'contact', semitransparency: false, despill: true, format: 'jpg' }],
      book: [book],
    });
    for (const out of [a, other]) {
      expect(out.result.uncertainty).toBeGreaterThan(0);
      expect(out.result.uncertainty).toBeLessThan(1);
    }
    expect(b.result.uncertainty).toBe(a.result.uncertainty);
    expect(effects.result.uncertainty).toBe(a.result.uncertainty);
    expect(other.result.uncertainty).not.toBe(a.result.uncertainty);
  });
});

describe('the defaults', () => {
  it('given explicitly, give the same bytes as left out', async () => {
    const [left, given] = await Promise.all([removeBackground(teddy), removeBackground(teddy, { shadow: 'none', semitransparency: true, despill: false })]);
    expect(given.data.equals(left.data)).toBe(true);
  });
});
