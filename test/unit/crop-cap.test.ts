/**
 * The crop caps (src/lib/crop-cap.ts): the largest box and output a crop can give for an image,
 * checked before any work so that no request can make the pipeline allocate past its bounds. Pure
 * TypeScript, no model.
 */
import { describe, expect, it } from 'vitest';
import { expectThrowsBgone } from '../helpers/assert.js';
import { checkCropBox, cropBounds, normaliseOptions } from '../helpers/bgone.js';

describe('crop caps', () => {
  const options = (o: Record<string, unknown>) => normaliseOptions(o as never).native;
  const refuse = (image: { width: number; height: number }, o: Record<string, unknown>, field: string) => {
    const error = expectThrowsBgone(() => checkCropBox(image, options(o)), 'validation_error');
    expect(error.details?.field).toBe(field);
    return error;
  };

  it('no crop: the image itself, scaled by the size preset', () => {
    expect(cropBounds({ width: 6000, height: 6000 }, options({}))).toEqual({ box: { width: 6000, height: 6000 }, output: { width: 4000, height: 4000 } });
    expect(cropBounds({ width: 300, height: 200 }, options({ size: 'preview' }))).toEqual({
      box: { width: 300, height: 200 },
      output: { width: 300, height: 200 },
    });
  });

  it('crop=true: a subject filling the image plus its padding (a share of the width) on every side', () => {
    expect(cropBounds({ width: 1000, height: 500 }, options({ crop: 'true', padding: '10%' })).box).toEqual({ width: 1200, height: 700 });
    expect(cropBounds({ width: 1000, height: 500 }, options({ crop: 'true', padding: '0' })).box).toEqual({ width: 1000, height: 500 });
  });

  it('per-side padding: each side its share of the subject width plus its pixels', () => {
    const o = {
      ...options({ crop: 'true' }),
      paddingShare: [0.1, 0.2, 0, 0] as [number, number, number, number],
      paddingPx: [0, 0, 5, 7] as [number, number, number, number],
    };
    // 1000 x 500: top 100, right 200, bottom 5, left 7.
    expect(cropBounds({ width: 1000, height: 500 }, o).box).toEqual({ width: 1207, height: 605 });
  });

  it('an exact canvas is the output, whatever the box and the size preset', () => {
    const o = { ...options({ crop: '1:1', size: 'preview' }), canvasWidth: 1000, canvasHeight: 700 };
    expect(cropBounds({ width: 1000, height: 500 }, o)).toEqual({ box: { width: 1200, height: 1200 }, output: { width: 1000, height: 700 } });
    expect(cropBounds({ width: 300, height: 200 }, { ...options({}), canvasWidth: 5000, canvasHeight: 3000 }).output).toEqual({ width: 5000, height: 3000 });
  });

  it('crop=W:H: the padded box widened or heightened to W:H, rounded up', () => {
    expect(cropBounds({ width: 1000, height: 500 }, options({ crop: '1:1', padding: '10%' })).box).toEqual({ width: 1200, height: 1200 });
    expect(cropBounds({ width: 1000, height: 500 }, options({ crop: '3:1', padding: '0' })).box).toEqual({ width: 1500, height: 500 });
  });

  it('sensible requests pass: crop=true, 1:1, 4:3, 3:2 or 16:9 with 10 % padding on usual photos, 16:9 and 9:16 either way', () => {
    for (const image of [
      { width: 6000, height: 4000 },
      { width: 4000, height: 6000 },
      { width: 6000, height: 6000 },
      { width: 6000, height: 3375 },
      { width: 3375, height: 6000 },
      { width: 284, height: 398 },
    ]) {
      for (const crop of ['true', '1:1', '4:3', '3:2', '16:9']) {
        for (const format of ['png', 'jpg', 'webp']) expect(() => checkCropBox(image, options({ crop, padding: '10%', format }))).not.toThrow();
      }
    }
    // A 6:1 panorama: crop=true is fine; a square around a subject as wide as the panorama is not.
    expect(() => checkCropBox({ width: 6000, height: 1000 }, options({ crop: 'true', format: 'webp' }))).not.toThrow();
    expect(() => checkCropBox({ width: 3000, height: 2000 }, options({ crop: '9:16', format: 'webp' }))).not.toThrow();
    expect(() => checkCropBox({ width: 2000, height: 3000 }, options({ crop: '16:9', format: 'webp' }))).not.toThrow();
    // 50 % padding on a square: 2W x 2H, exactly 4 times the area.
    expect(() => checkCropBox({ width: 6000, height: 6000 }, options({ crop: 'true', padding: '50%' }))).not.toThrow();
  });

  it('a box that could pass 4x the image area: validation_error naming crop, with the worst case', () => {
    const error = refuse({ width: 284, height: 398 }, { crop: '100:1' }, 'crop');
    expect(error.details).toMatchObject({ max_area_ratio: 4, worst_case: { width: 45400, height: 454 } });
    refuse({ width: 6000, height: 6000 }, { crop: 'true', padding: '100%' }, 'crop');
    refuse({ width: 6000, height: 6000 }, { crop: 'true', padding: '51%' }, 'crop');
  });

  it('margins of up to 500 px on every side fit a small image though they pass 4x its area; 501 px do not', () => {
    const teddy = { width: 284, height: 398 };
    for (const padding of ['500px', '500px 500px 500px 500px', '250px 500px'])
      expect(() => checkCropBox(teddy, options({ crop: 'true', padding }))).not.toThrow();
    expect(cropBounds(teddy, options({ crop: 'true', padding: '500px' })).box).toEqual({ width: 1284, height: 1398 });
    const error = refuse(teddy, { crop: 'true', padding: '501px' }, 'crop');
    expect(error.details).toMatchObject({ max_area_ratio: 4, max_area: 1284 * 1398, worst_case: { width: 1286, height: 1400 } });
    // On a large image 4x its area is the larger cap.
    expect(() => checkCropBox({ width: 3000, height: 2000 }, options({ crop: 'true', padding: '500px' }))).not.toThrow();
    refuse({ width: 3000, height: 2000 }, { crop: 'true', padding: '100%' }, 'crop');
  });

  it('a WebP result that could pass 16383 px after the size preset: validation_error naming format', () => {
    // 6000 x 1000 at 20:1: a 20020 x 1001 box (3.3x the area), 17900 px wide at the full preset.
    const error = refuse({ width: 6000, height: 1000 }, { crop: '20:1', padding: '0', format: 'webp' }, 'format');
    expect(error.details).toMatchObject({ max_side: 16383 });
    // The same box is fine as PNG or JPG, or as WebP once a smaller preset scales it down.
    for (const o of [{ format: 'png' }, { format: 'jpg' }, { format: 'webp', size: 'hd' }]) {
      expect(() => checkCropBox({ width: 6000, height: 1000 }, options({ crop: '20:1', padding: '0', ...o }))).not.toThrow();
    }
  });

  it('the output bound holds for every subject (brute force over subject boxes, the pipeline arithmetic)', () => {
    // pipeline.cc crop_box and the preset, for a subject of sw x sh in an image of W x H.
    const pipeline = (o: ReturnType<typeof options>, sw: number, sh: number, M: number) => {
      const [top, right, bottom, left] = o.paddingShare.map((share, i) => Math.round(share * sw) + o.paddingPx[i]!) as number[];
      let w = sw + left! + right!;
      let h = sh + top! + bottom!;
      if (o.crop === 'aspect') {
        const ratio = o.aspectWidth / o.aspectHeight;
        if (w / h < ratio) w = Math.ceil(h * ratio);
        else h = Math.ceil(w / ratio);
      }
      const scale = Math.min(1, Math.sqrt(M / (w * h)));
      return { w, h, ow: Math.max(1, Math.floor(w * scale + 1e-9)), oh: Math.max(1, Math.floor(h * scale + 1e-9)) };
    };
    const image = { width: 90, height: 40 };
    // Per side: [top, right, bottom, left] shares of the subject width, and pixels.
    const sides = [
      { paddingShare: [0.3, 0, 0.05, 0.6], paddingPx: [0, 7, 0, 3] },
      { paddingShare: [0, 0, 0, 0], paddingPx: [20, 0, 1, 0] },
    ];
    for (const crop of ['true', '1:1', '7:2', '1:5']) {
      for (const padding of ['0', '0.1', '0.35', '1', ...sides.keys()]) {
        for (const size of ['preview', 'full']) {
          const o =
            typeof padding === 'number' ? ({ ...options({ crop, size }), ...sides[padding] } as ReturnType<typeof options>) : options({ crop, padding, size });
          const M = o.maxPixels / 100; // scaled down with the image, so that the preset bites
          const bounds = cropBounds(image, { ...o, maxPixels: M });
          const worst = { w: 0, h: 0, ow: 0, oh: 0 };
          for (let sw = 1; sw <= image.width; sw++) {
            for (let sh = 1; sh <= image.height; sh++) {
              const r = pipeline(o, sw, sh, M);
              worst.w = Math.max(worst.w, r.w);
              worst.h = Math.max(worst.h, r.h);
              worst.ow = Math.max(worst.ow, r.ow);
              worst.oh = Math.max(worst.oh, r.oh);
            }
          }
          const where = `crop=${crop} padding=${padding} size=${size}`;
          // The box bound is exact (a subject filling the image); the output bound may exceed by a pixel or so.
          expect({ w: worst.w, h: worst.h }, where).toEqual({ w: bounds.box.width, h: bounds.box.height });
          expect(worst.ow, where).toBeLessThanOrEqual(bounds.output.width);
          expect(worst.oh, where).toBeLessThanOrEqual(bounds.output.height);
        }
      }
    }
  });
});
