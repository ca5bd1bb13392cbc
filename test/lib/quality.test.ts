/**
 * The cut-out matches the ground truth: a real accuracy check, with the metric of the DEV set's
 * BASELINE.md (IoU of the alpha thresholded at 128, at the ground truth's size). It fails if the
 * mask is garbage, inverted, transposed, shifted or scaled wrongly.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { removeBackground } from '../helpers/bgone.js';
import { alphaOf, decode, gtMask, iou, shift } from '../helpers/image.js';
import { readPhoto } from '../helpers/paths.js';

const PHOTOS = ['gc_book.jpg', 'gc_teddy.jpg', 'davis_blackswan_00025.jpg', 'am_GT05.png'];
const scores: Record<string, number> = {};
const masks: Record<string, { pred: Uint8Array; gt: Uint8Array; width: number; height: number }> = {};

beforeAll(async () => {
  for (const photo of PHOTOS) {
    const result = await removeBackground(readPhoto(photo), { refine: true });
    const image = await decode(result.data);
    const gt = await gtMask(photo);
    expect({ width: image.width, height: image.height }).toEqual({ width: gt.width, height: gt.height });
    masks[photo] = { pred: alphaOf(image), gt: gt.mask, width: gt.width, height: gt.height };
    scores[photo] = iou(masks[photo].pred, gt.mask);
  }
});

describe('accuracy against the ground truth', () => {
  it('mean IoU of the refined alpha (threshold 128) over 4 photos of the DEV set is at least 0.85', () => {
    const mean = PHOTOS.reduce((s, p) => s + scores[p]!, 0) / PHOTOS.length;
    expect(mean, JSON.stringify(scores)).toBeGreaterThanOrEqual(0.85);
  });

  it.each(PHOTOS)('%s alone has an IoU of at least 0.75', (photo) => {
    expect(scores[photo]).toBeGreaterThanOrEqual(0.75);
  });

  it('the metric would catch a misaligned mask: the same prediction shifted by 5 % scores far lower', () => {
    let sum = 0;
    for (const photo of PHOTOS) {
      const { pred, gt, width, height } = masks[photo]!;
      const moved = shift(pred, width, height, Math.round(0.05 * width), Math.round(0.05 * height), width, height);
      sum += iou(moved, gt);
    }
    expect(sum / PHOTOS.length).toBeLessThan(0.85);
  });
});

describe('the other model and the unrefined matte', () => {
  const photo = 'gc_book.jpg';

  it('model=small also cuts out the subject (IoU >= 0.9)', async () => {
    const image = await decode((await removeBackground(readPhoto(photo), { model: 'small' })).data);
    expect(iou(alphaOf(image), masks[photo]!.gt)).toBeGreaterThanOrEqual(0.9);
  });

  it('refine=false gives a plainly upsampled mask: still accurate, and not the refined one', async () => {
    const image = await decode((await removeBackground(readPhoto(photo), { refine: false })).data);
    const alpha = alphaOf(image);
    expect(iou(alpha, masks[photo]!.gt)).toBeGreaterThanOrEqual(0.9);
    let differ = 0;
    for (let i = 0; i < alpha.length; i++) if (alpha[i] !== masks[photo]!.pred[i]) differ++;
    expect(differ).toBeGreaterThan(0);
  });
});
