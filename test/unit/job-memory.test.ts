/** A job's memory estimate (src/lib/job-memory.ts), from its image, its planned options and its model's working memory. */
import { describe, expect, it } from 'vitest';
import { effectBytes, estimateJobBytes, extraInferenceBytes, jobMemoryEstimate } from '../../src/lib/job-memory.js';
import { planJob } from '../../src/lib/job-plan.js';
import { MODEL_FAMILIES } from '../../src/lib/model-families.js';
import type { ModelContract } from '../../src/lib/models.js';
import { type NativeOptions, normaliseOptions, type RemoveBackgroundOptions } from '../../src/lib/options.js';

const JPEG = Buffer.from([0xff, 0xd8, 0xff]);
const family = MODEL_FAMILIES.isnet;
const isnet: ModelContract = {
  family,
  width: 1024,
  height: 1024,
  dynamic: true,
  mean: [0, 0, 0],
  std: [1, 1, 1],
  outputIndex: 0,
  matteTransform: 0,
  runBytesPerPixel: 100,
};
/** The planned options of a full-size job on a 2000 x 1000 photo. */
const planned = (options: RemoveBackgroundOptions = {}): NativeOptions => {
  const n = normaliseOptions(options);
  return planJob(n.native, { bytes: JPEG, width: 2000, height: 1000 }, isnet, n.effort, 'cpu').options;
};
const RUN = 100;

const base = { inferenceSide: 1024, runBytesPerPixel: RUN };
const full = base;

describe('estimateJobBytes', () => {
  it('grows with the pixels, doubles the decode for 16-bit, and counts an extended canvas', () => {
    const small = estimateJobBytes(640, 480, base);
    const large = estimateJobBytes(6000, 6000, base);
    expect(large - small).toBe((6000 * 6000 - 640 * 480) * (5 + 8));
    expect(estimateJobBytes(6000, 6000, { ...base, bitsPerSample: 16 }) - large).toBe(6000 * 6000 * 4);
    expect(estimateJobBytes(1000, 1000, { ...base, outputScale: 4 }) - estimateJobBytes(1000, 1000, base)).toBe(3 * 1000 * 1000 * 8);
  });

  it("counts the work and the model's working memory at the planned inference side: a 2048² model's four times a 1024² one's, an 896² job's less", () => {
    const at = (side: number) =>
      estimateJobBytes(640, 480, { inferenceSide: side, runBytesPerPixel: RUN }) - estimateJobBytes(640, 480, { inferenceSide: 0, runBytesPerPixel: RUN });
    expect(at(1024)).toBe(Math.max(48, RUN) * 2 ** 20);
    expect(at(2048)).toBe(4 * at(1024));
    expect(at(896)).toBeLessThan(at(1024));
  });
});

describe('jobMemoryEstimate', () => {
  const jpeg = Buffer.from([0xff, 0xd8, 0xff]);
  const plain = planned();
  const image = { width: 2000, height: 1000 };

  it('an exact canvas counts its own pixels where it is larger than the image', () => {
    const canvas = { ...plain, canvasWidth: 4000, canvasHeight: 4000 };
    expect(jobMemoryEstimate(jpeg, image, canvas, RUN)).toBe(estimateJobBytes(2000, 1000, { ...full, outputScale: 8 }));
    expect(jobMemoryEstimate(jpeg, image, { ...plain, canvasWidth: 100, canvasHeight: 100 }, RUN)).toBe(estimateJobBytes(2000, 1000, full));
  });

  it('effort=best adds the mirrored answer, a float plane at the inference side', () => {
    const best = planned({ effort: 'best' });
    expect(best.mirrorWeight).toBeGreaterThan(0);
    expect(jobMemoryEstimate(jpeg, image, best, RUN) - jobMemoryEstimate(jpeg, image, plain, RUN)).toBe(extraInferenceBytes(best));
    expect(extraInferenceBytes(best)).toBeGreaterThanOrEqual(4 * best.inferenceSize ** 2);
    expect(extraInferenceBytes(plain)).toBe(0);
    // A second side: its input, tensor and answer, and the answer resampled to the inference side.
    expect(extraInferenceBytes({ mirrorWeight: 0, secondSide: 512, inferenceSize: 1024 })).toBe(19 * 512 * 512 + 4 * 1024 * 1024);
  });

  it('the effects add their working memory: the interior marks at the inference side, a coarse grid for a shadow and for despill', () => {
    expect(effectBytes(plain)).toBe(0);
    const opaque = planned({ semitransparency: false });
    expect(effectBytes(opaque)).toBe(9 * 1024 * 1024);
    const all = planned({ semitransparency: false, shadow: 'drop', despill: true });
    expect(jobMemoryEstimate(jpeg, image, all, RUN) - jobMemoryEstimate(jpeg, image, plain, RUN)).toBe(effectBytes(all));
    expect(effectBytes(all)).toBe(9 * 1024 * 1024 + 2 * 8 * 1024 * 1024);
  });

  it('the outline and the blurred background add their grids (at most 1025² cells, else a cell a pixel) and the blurred canvas as RGB', () => {
    const pixels = 2000 * 1000;
    const cells = 1025 * 1025;
    const outline = planned({ outlineColor: 'white' });
    expect(effectBytes(outline, pixels)).toBe(8 * cells);
    expect(effectBytes(outline, 100 * 100)).toBe(8 * 100 * 100);
    expect(effectBytes(planned({ outlineColor: 'white', outlineWidth: 0 }), pixels)).toBe(0);
    const blurred = planned({ bgBlur: 0.01 });
    expect(effectBytes(blurred, pixels)).toBe(60 * cells + 3 * pixels);
    expect(effectBytes(blurred)).toBe(0);
    const both = planned({ bgBlur: 0.01, bgBlurMode: 'bokeh', outlineColor: 'white' });
    // The canvas of a full-size job on the photo is the photo.
    expect(jobMemoryEstimate(jpeg, image, both, RUN) - jobMemoryEstimate(jpeg, image, plain, RUN)).toBe(effectBytes(both, pixels));
    expect(effectBytes(both, pixels)).toBe(68 * cells + 3 * pixels);
  });

  it('bg_fit=contain adds the fitted background beside the canvas-sized RGBA', () => {
    const background = { width: 500, height: 500 };
    const fill = jobMemoryEstimate(jpeg, image, planned({ bgImageFile: JPEG }), RUN, background);
    expect(jobMemoryEstimate(jpeg, image, planned({ bgImageFile: JPEG, bgFit: 'contain' }), RUN, background) - fill).toBe(2000 * 1000 * 4);
  });

  it('a background image adds its decode (shrunk on load to at most twice the covering size per side) and its canvas-sized RGBA', () => {
    const canvas = { ...plain, canvasWidth: 1000, canvasHeight: 1000 };
    const base = jobMemoryEstimate(jpeg, image, canvas, RUN);
    // 6000 x 6000 covering 1000 x 1000: a scale of 1/6, decoded at most at 2/6 per side.
    const large = jobMemoryEstimate(jpeg, image, canvas, RUN, { width: 6000, height: 6000 }) - base;
    expect(large).toBeCloseTo(6000 * 6000 * (4 / 36) * 8 + 1000 * 1000 * 4, -1);
    // A small background is enlarged: decoded whole.
    expect(jobMemoryEstimate(jpeg, image, canvas, RUN, { width: 100, height: 50 }) - base).toBe(100 * 50 * 8 + 1000 * 1000 * 4);
    // Without an exact canvas, the canvas is the image (no crop, never upscaled).
    expect(jobMemoryEstimate(jpeg, image, plain, RUN, { width: 2000, height: 1000 }) - jobMemoryEstimate(jpeg, image, plain, RUN)).toBe(
      2000 * 1000 * 8 + 2000 * 1000 * 4,
    );
  });

  it("remove_background=false counts no model's run nor matting at its side; keep_alpha=auto, which may run the model, counts it", () => {
    const none = planned({ removeBackground: false });
    expect(jobMemoryEstimate(jpeg, image, none, RUN)).toBe(estimateJobBytes(2000, 1000, { inferenceSide: 0, runBytesPerPixel: RUN }));
    expect(jobMemoryEstimate(jpeg, image, plain, RUN) - jobMemoryEstimate(jpeg, image, none, RUN)).toBe(Math.max(48, RUN) * plain.inferenceSize ** 2);
    expect(jobMemoryEstimate(jpeg, image, planned({ keepAlpha: 'auto' }), RUN)).toBe(jobMemoryEstimate(jpeg, image, plain, RUN));
  });

  it("format=avif adds the AV1 encoder's planes, per output pixel", () => {
    const avif = planned({ format: 'avif' });
    const extra = jobMemoryEstimate(jpeg, image, avif, RUN) - jobMemoryEstimate(jpeg, image, plain, RUN);
    expect(extra).toBe(32 * 2000 * 1000);
    const canvas = { ...avif, canvasWidth: 4000, canvasHeight: 4000 };
    expect(jobMemoryEstimate(jpeg, image, canvas, RUN) - jobMemoryEstimate(jpeg, image, { ...plain, canvasWidth: 4000, canvasHeight: 4000 }, RUN)).toBe(
      32 * 4000 * 4000,
    );
  });
});
