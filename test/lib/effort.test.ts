/**
 * effort=best: the model's answers for the image and for its mirror, averaged in the one native
 * call. The matte of a mirrored photo, mirrored back, is then the matte of the photo (up to the
 * guided filter's grid), where the standard matte shows the model's own asymmetry; a mirror folded
 * in wrongly (not mirrored back, or shifted) would break that at once.
 */
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { getModel } from '../../src/lib/models.js';
import { native } from '../../src/lib/native.js';
import { expectBgoneError } from '../helpers/assert.js';
import { prepareJob, removeBackground } from '../helpers/bgone.js';
import { PHOTOS } from '../helpers/constants.js';
import { decode, gtMask, iou } from '../helpers/image.js';
import { readPhoto } from '../helpers/paths.js';

const llama = readPhoto(PHOTOS.llama); // 513x371, an asymmetric subject

async function matte(input: Buffer, effort: string): Promise<{ data: Uint8Array; width: number; height: number }> {
  const result = await removeBackground(input, { channels: 'alpha', effort });
  const { data, width, height } = await decode(result.data);
  return { data, width, height };
}

/** Mean |a - mirror(b)| over the pixels, in 0..255. */
function mirrorDistance(a: { data: Uint8Array; width: number; height: number }, b: { data: Uint8Array }): number {
  let sum = 0;
  for (let y = 0; y < a.height; y++) {
    for (let x = 0; x < a.width; x++) sum += Math.abs(a.data[y * a.width + x]! - b.data[y * a.width + (a.width - 1 - x)]!);
  }
  return sum / (a.width * a.height);
}

describe('effort', () => {
  it('best is as accurate as standard on the ground truth, and another matte', async () => {
    const gt = await gtMask(PHOTOS.llama);
    const [standard, best] = [await matte(llama, 'standard'), await matte(llama, 'best')];
    expect({ width: best.width, height: best.height }).toEqual({ width: gt.width, height: gt.height });
    expect(Buffer.from(best.data).equals(Buffer.from(standard.data))).toBe(false);
    expect(iou(best.data, gt.mask)).toBeGreaterThanOrEqual(iou(standard.data, gt.mask) - 0.01);
  });

  it('best on the mirrored photo is the mirror of best on the photo; standard is not', async () => {
    const mirrored = await sharp(llama).flop().png().toBuffer();
    const standard = mirrorDistance(await matte(llama, 'standard'), await matte(mirrored, 'standard'));
    const best = mirrorDistance(await matte(llama, 'best'), await matte(mirrored, 'best'));
    expect(best).toBeLessThan(standard / 4);
    expect(best).toBeLessThan(0.5);
  });

  it('the second-side knob (bench/quality variants): an answer at another side mixed in, the same frame', async () => {
    const model = await getModel();
    const { options } = prepareJob(llama, { channels: 'alpha' });
    const plain = await native().removeBackground(llama, options, model, null);
    const mixed = await native().removeBackground(llama, { ...options, secondSide: 512, secondWeight: 0.5 }, model, null);
    expect([mixed.width, mixed.height]).toEqual([plain.width, plain.height]);
    const [a, b] = [await decode(Buffer.from(plain.data)), await decode(Buffer.from(mixed.data))];
    const gt = await gtMask(PHOTOS.llama);
    expect(Buffer.from(b.data).equals(Buffer.from(a.data))).toBe(false);
    expect(iou(b.data, gt.mask)).toBeGreaterThan(0.8);
  });

  it('an effort it does not know is a validation_error naming the option', async () => {
    await expectBgoneError(removeBackground(llama, { effort: 'max' }), 'validation_error');
    const err = await removeBackground(llama, { effort: 'fast' }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'validation_error', details: { field: 'effort' } });
  });
});
