/**
 * The placement layout (output_size with margin, area_padding, fit, position, snap, reference_box;
 * output_size=original|subject with max_width, max_height): the subject's box on the result, by
 * numbers, against the layout rules of Photoroom's positioning guide worked out here from the
 * subject's box of a plain cut-out (its foreground box; the same model, the same photo): margins of the result's side,
 * area padding of the margin box's, the reference box fitted (contain) or covering (cover), placed by
 * position (centred without), and on a snapping axis a side the photo's edge cuts sits on the margin.
 * Each box within 1 % of the canvas's side.
 */
import sharp from 'sharp';
import { beforeAll, describe, expect, it } from 'vitest';
import { expectBgoneError } from '../helpers/assert.js';
import { type RemoveBackgroundOptions, removeBackground } from '../helpers/bgone.js';
import { PHOTOS } from '../helpers/constants.js';
import { readPhoto } from '../helpers/paths.js';

/** x0, y0, x1, y1 (exclusive). */
type Box = [number, number, number, number];

const llama = readPhoto(PHOTOS.llama);
/** The photo's size and its subject's box on a plain cut-out. */
let image: { w: number; h: number };
let subject: Box;

/** The box of alpha >= 128 of a one-band result. */
async function alphaBox(data: Buffer): Promise<{ box: Box; w: number; h: number }> {
  const { data: px, info } = await sharp(data).extractChannel(0).raw().toBuffer({ resolveWithObject: true });
  let [x0, y0, x1, y1] = [Number.POSITIVE_INFINITY, Number.POSITIVE_INFINITY, -1, -1];
  for (let y = 0; y < info.height; y++) {
    for (let x = 0; x < info.width; x++) {
      if (px[y * info.width + x]! >= 128) [x0, y0, x1, y1] = [Math.min(x0, x), Math.min(y0, y), Math.max(x1, x), Math.max(y1, y)];
    }
  }
  return { box: [x0, y0, x1 + 1, y1 + 1], w: info.width, h: info.height };
}

interface Rules {
  canvas: [number, number];
  margin?: [number, number, number, number];
  padding?: [number, number, number, number];
  cover?: boolean;
  align?: [number, number];
  snap?: { x: boolean; y: boolean };
  referenceImage?: boolean;
}

/** Where the guide's rules put the subject's box: top, right, bottom, left shares. */
function expected(r: Rules): Box {
  const [cw, ch] = r.canvas;
  const [mt, mr, mb, ml] = r.margin ?? [0, 0, 0, 0];
  const M: Box = [ml * cw, mt * ch, cw - mr * cw, ch - mb * ch];
  const [mw, mh] = [M[2] - M[0], M[3] - M[1]];
  const [pt, pr, pb, pl] = r.padding ?? [0, 0, 0, 0];
  const T: Box = [M[0] + pl * mw, M[1] + pt * mh, M[2] - pr * mw, M[3] - pb * mh];
  let [ax, ay] = r.align ?? [0.5, 0.5];
  const cut = { left: subject[0] <= 0, right: subject[2] >= image.w, top: subject[1] <= 0, bottom: subject[3] >= image.h };
  if (r.snap?.x && (cut.left || cut.right)) {
    if (cut.left) T[0] = M[0];
    if (cut.right) T[2] = M[2];
    ax = cut.left && cut.right ? 0.5 : cut.left ? 0 : 1;
  }
  if (r.snap?.y && (cut.top || cut.bottom)) {
    if (cut.top) T[1] = M[1];
    if (cut.bottom) T[3] = M[3];
    ay = cut.top && cut.bottom ? 0.5 : cut.top ? 0 : 1;
  }
  const B: Box = r.referenceImage ? [0, 0, image.w, image.h] : subject;
  const [bw, bh] = [B[2] - B[0], B[3] - B[1]];
  const [tw, th] = [T[2] - T[0], T[3] - T[1]];
  const s = r.cover ? Math.max(tw / bw, th / bh) : Math.min(tw / bw, th / bh);
  const ox = T[0] + ax * (tw - bw * s) - B[0] * s;
  const oy = T[1] + ay * (th - bh * s) - B[1] * s;
  // The subject's box through the map, clipped by the canvas.
  return [Math.max(0, ox + subject[0] * s), Math.max(0, oy + subject[1] * s), Math.min(cw, ox + subject[2] * s), Math.min(ch, oy + subject[3] * s)];
}

async function expectPlaced(options: RemoveBackgroundOptions, rules: Rules): Promise<void> {
  const result = await removeBackground(llama, { ...options, channels: 'alpha' });
  const { box, w, h } = await alphaBox(result.data);
  expect([w, h]).toEqual(rules.canvas);
  const want = expected(rules);
  const tolerance = 0.01 * Math.max(w, h);
  for (let i = 0; i < 4; i++) expect(Math.abs(box[i]! - want[i]!), `side ${i}: ${box} against ${want.map(Math.round)}`).toBeLessThanOrEqual(tolerance);
}

beforeAll(async () => {
  const plain = await removeBackground(llama, { channels: 'alpha' });
  image = { w: plain.width, h: plain.height };
  const f = plain.foreground;
  subject = [f.left, f.top, f.left + f.width, f.top + f.height];
  // The photo's subject stands on its bottom edge and is cut by nothing else: the snapping cases rely on it.
  expect(subject[3]).toBe(image.h);
  expect(subject[0]).toBeGreaterThan(0);
});

describe('the placement layout puts the subject where the positioning rules say', () => {
  it('fitted and centred in the whole canvas', async () => {
    await expectPlaced({ outputSize: '1000x1000', fit: 'contain' }, { canvas: [1000, 1000] });
  });

  it('area padding: 10 % of each side of the canvas', async () => {
    await expectPlaced({ outputSize: '1000x1000', areaPadding: '0.1' }, { canvas: [1000, 1000], padding: [0.1, 0.1, 0.1, 0.1] });
    await expectPlaced({ outputSize: '1000x500', areaPadding: '10%' }, { canvas: [1000, 500], padding: [0.1, 0.1, 0.1, 0.1] });
  });

  it('a side of its own, and pixels', async () => {
    await expectPlaced({ outputSize: '1000x1000', areaPadding: '0.2 0.1 0.1 0.1' }, { canvas: [1000, 1000], padding: [0.2, 0.1, 0.1, 0.1] });
    await expectPlaced({ outputSize: '1000x1000', areaPadding: '100px' }, { canvas: [1000, 1000], padding: [0.1, 0.1, 0.1, 0.1] });
  });

  it('margins first, then the area padding of what they leave', async () => {
    await expectPlaced(
      { outputSize: '1000x1000', margin: '0.1', areaPadding: '0.1' },
      { canvas: [1000, 1000], margin: [0.1, 0.1, 0.1, 0.1], padding: [0.1, 0.1, 0.1, 0.1] },
    );
  });

  it('cover: the box covers the area, past it where its ratio differs', async () => {
    await expectPlaced(
      { outputSize: '1000x1000', fit: 'cover', areaPadding: '0.25' },
      { canvas: [1000, 1000], padding: [0.25, 0.25, 0.25, 0.25], cover: true },
    );
    await expectPlaced(
      { outputSize: '1000x500', fit: 'cover', areaPadding: '0.25 0.4' },
      { canvas: [1000, 500], padding: [0.25, 0.4, 0.25, 0.4], cover: true },
    );
  });

  it('position: left and bottom of the area', async () => {
    await expectPlaced(
      { outputSize: '1000x600', areaPadding: '0.1', position: '0% 100%' },
      { canvas: [1000, 600], padding: [0.1, 0.1, 0.1, 0.1], align: [0, 1] },
    );
  });

  it('snap: the side the photo cuts (its bottom) keeps no area padding and sits on the margin; on the other axis nothing changes', async () => {
    const rules: Rules = { canvas: [1000, 1000], padding: [0.1, 0.1, 0.1, 0.1], snap: { x: true, y: true } };
    await expectPlaced({ outputSize: '1000x1000', areaPadding: '0.1', snap: 'both' }, rules);
    await expectPlaced({ outputSize: '1000x1000', areaPadding: '0.1', margin: '0 0 5% 0', snap: 'vertical' }, { ...rules, margin: [0, 0, 0.05, 0] });
    // Snapping only horizontally: the cut bottom keeps its padding.
    await expectPlaced({ outputSize: '1000x1000', areaPadding: '0.1', snap: 'horizontal' }, { ...rules, snap: { x: true, y: false } });
  });

  it('reference_box=image: the whole photo fitted, the subject keeping its place in it', async () => {
    await expectPlaced(
      { outputSize: '1000x1000', areaPadding: '0.1', referenceBox: 'image' },
      { canvas: [1000, 1000], padding: [0.1, 0.1, 0.1, 0.1], referenceImage: true },
    );
  });

  it("output_size=subject: a canvas of the subject's box, max_width shrinking it with its ratio", async () => {
    const [w, h] = [subject[2] - subject[0], subject[3] - subject[1]];
    await expectPlaced({ outputSize: 'subject' }, { canvas: [w, h] });
    const small: [number, number] = [100, Math.floor((h * 100) / w)];
    await expectPlaced({ outputSize: 'subject', maxWidth: 100 }, { canvas: small });
  });

  it("output_size=original: the photo's size, the subject fitted in the area; the canvas of a placement option without output_size", async () => {
    await expectPlaced({ outputSize: 'original', areaPadding: '0.1' }, { canvas: [image.w, image.h], padding: [0.1, 0.1, 0.1, 0.1] });
    await expectPlaced({ areaPadding: '0.1' }, { canvas: [image.w, image.h], padding: [0.1, 0.1, 0.1, 0.1] });
    await expectPlaced({ fit: 'contain' }, { canvas: [image.w, image.h] });
  });
});

describe('refusals', () => {
  it.each<[RemoveBackgroundOptions, string]>([
    [{ outputSize: '1000x1000', margin: '0.5' }, 'margin'],
    [{ outputSize: '1000x1000', areaPadding: '50%' }, 'area_padding'],
    [{ outputSize: '1000x1000', fit: 'fill' }, 'fit'],
    [{ outputSize: '1000x1000', snap: 'yes' }, 'snap'],
    [{ outputSize: '1000x1000', referenceBox: 'canvas' }, 'reference_box'],
    [{ outputSize: '1000x1000', maxWidth: 100 }, 'max_width'],
    [{ maxHeight: 100 }, 'max_height'],
    [{ outputSize: 'subject', maxWidth: 0 }, 'max_width'],
    [{ outputSize: 'subject', crop: 'true' }, 'crop'],
    [{ margin: '0.1', scale: '50%' }, 'scale'],
    [{ outputSize: 'everything' }, 'output_size'],
  ])('%j: a validation_error naming %s', async (options, field) => {
    const err = await expectBgoneError(removeBackground(llama, options), 'validation_error');
    expect(err.details).toMatchObject({ field });
  });
});
