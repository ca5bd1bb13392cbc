/**
 * The job plan (src/lib/job-plan.ts): the side a job runs at, from its model's family and graph, its
 * output and its provider; the family's refinement at that side; the family's runs and levels for
 * the effort; the memory the job holds, from all of it and the model's working memory.
 */
import { describe, expect, it } from 'vitest';
import { estimateJobBytes } from '../../src/lib/job-memory.js';
import { effortRuns, type JobPlan, planJob, planSide, sideForOutput } from '../../src/lib/job-plan.js';
import { FAMILY_NAMES, MODEL_FAMILIES, type ModelFamily } from '../../src/lib/model-families.js';
import type { ModelContract } from '../../src/lib/models.js';
import type { Effort } from '../../src/lib/option-table.js';
import { normaliseOptions, type RequestedOptions, TUNING } from '../../src/lib/options.js';

const options = (size: string) => normaliseOptions({ size }).native;
const JPEG = Buffer.from([0xff, 0xd8, 0xff]);

function contract(family: ModelFamily, dynamic: boolean, side = family.input.sides[0]!, runBytesPerPixel = family.runBytesPerPixel): ModelContract {
  return { family, width: side, height: side, dynamic, mean: [0, 0, 0], std: [1, 1, 1], outputIndex: 0, matteTransform: 0, runBytesPerPixel };
}

function plan(o: RequestedOptions, size: { width: number; height: number }, c: ModelContract, effort: Effort = 'standard', provider = 'cpu'): JobPlan {
  return planJob(o, { bytes: JPEG, ...size }, c, effort, provider);
}

const isnet = contract(MODEL_FAMILIES.isnet, true);
const table = MODEL_FAMILIES.isnet.input.smallerSides;

describe("ISNet's smaller sides follow the output (preview and medium only, on the CPU)", () => {
  it('small outputs: 896, larger ones: 1024', () => {
    const at = (pixels: number) => sideForOutput(table, 1024, { ...options('preview'), maxPixels: pixels }, 10_000, 10_000);
    expect(at(250_000)).toBe(896);
    expect(at(600_000)).toBe(896);
    expect(at(600_001)).toBe(1024);
    expect(at(1_500_000)).toBe(1024);
  });

  it('preview of a 12 MP photo (0.25 MP output): 896, with the guided radius scaled (6 -> 5)', () => {
    expect(plan(options('preview'), { width: 4000, height: 3000 }, isnet).options).toMatchObject({ inferenceSize: 896, guidedRadius: 5 });
  });

  it('medium of a 0.4 MP photo (the photo is the output): 896; of a 12 MP photo (1.5 MP output): 1024', () => {
    expect(planSide(isnet, options('medium'), 800, 500, 'cpu')).toBe(896);
    expect(planSide(isnet, options('medium'), 4000, 3000, 'cpu')).toBe(1024);
  });

  it('a region of interest of up to 0.6 MP decides by its own pixels, whatever the preset', () => {
    const full = options('full');
    expect(planSide(isnet, { ...full, roi: [0, 0, 960, 540] }, 1920, 1080, 'cpu')).toBe(896);
    expect(planSide(isnet, { ...full, roi: [0, 0, 1920, 540] }, 1920, 1080, 'cpu')).toBe(1024);
    expect(planSide(isnet, { ...options('preview'), roi: [0, 0, 4000, 3000] }, 4000, 3000, 'cpu')).toBe(896);
  });

  it('an exact canvas decides by its own pixels, not the preset', () => {
    expect(planSide(isnet, { ...options('preview'), canvasWidth: 2000, canvasHeight: 2000 }, 4000, 3000, 'cpu')).toBe(1024);
    expect(planSide(isnet, { ...options('medium'), canvasWidth: 500, canvasHeight: 500 }, 4000, 3000, 'cpu')).toBe(896);
  });

  it.each(['full', 'hd'])('%s keeps 1024 even for a small photo', (size) => {
    expect(plan(options(size), { width: 640, height: 480 }, isnet).options).toMatchObject({ inferenceSize: 1024, guidedRadius: 6 });
  });

  it('on a GPU provider every job runs at the full side', () => {
    expect(planSide(isnet, options('preview'), 4000, 3000, 'cuda')).toBe(1024);
  });
});

describe('other families and fixed graphs', () => {
  it('a fixed graph runs at its own side, the radius scaled to it (2048² BiRefNet HR: 12)', () => {
    const hr = contract(MODEL_FAMILIES.birefnet, false, 2048);
    expect(plan(options('preview'), { width: 4000, height: 3000 }, hr).options).toMatchObject({ inferenceSize: 2048, guidedRadius: 12 });
  });

  it('a symbolic graph of a family without smaller sides runs at its family side, whatever the output', () => {
    expect(planSide(contract(MODEL_FAMILIES.birefnet, true), options('preview'), 4000, 3000, 'cpu')).toBe(1024);
    expect(planSide(contract(MODEL_FAMILIES.modnet, true), options('preview'), 4000, 3000, 'cpu')).toBe(512);
  });

  it("the family's refinement and levels; effort=best its mirrored run and its levels rule", () => {
    const birefnet = contract(MODEL_FAMILIES.birefnet, false);
    const { guidedEps, levelsLow, levelsHigh } = MODEL_FAMILIES.birefnet.matting;
    const standard = plan(options('full'), { width: 640, height: 480 }, birefnet).options;
    expect(standard).toMatchObject({ guidedEps, levelsLow, levelsHigh, mirrorWeight: 0, mirrorUnion: 0, secondSide: 0 });
    expect(plan(options('full'), { width: 640, height: 480 }, birefnet, 'best').options).toMatchObject({
      levelsLow,
      levelsHigh,
      mirrorWeight: MODEL_FAMILIES.birefnet.best.mirrorWeight,
      mirrorUnion: MODEL_FAMILIES.birefnet.best.mirrorUnion,
    });
    const own = effortRuns(
      { guidedRadius: 0, guidedEps: 0, levelsLow: 0.05, levelsHigh: 0.85 },
      { mirrorWeight: 0.5, mirrorUnion: 1, levels: { levelsLow: 0.125, levelsHigh: 0.925 } },
      'best',
    );
    expect(own).toEqual({ levelsLow: 0.125, levelsHigh: 0.925, mirrorWeight: 0.5, mirrorUnion: 1 });
    expect(plan(options('full'), { width: 640, height: 480 }, isnet, 'best').options).toMatchObject(MODEL_FAMILIES.isnet.best.levels as object);
    expect(effortRuns(MODEL_FAMILIES.modnet.matting, MODEL_FAMILIES.modnet.best, 'best')).toMatchObject({ levelsLow: 0, levelsHigh: 1 });
  });

  it('every family row gives every planned field, and the generic options none of them', () => {
    const planned = ['inferenceSize', 'guidedRadius', 'guidedEps', 'levelsLow', 'levelsHigh', 'mirrorWeight', 'mirrorUnion', 'secondSide', 'secondWeight'];
    for (const name of FAMILY_NAMES) {
      for (const effort of ['standard', 'best'] as const) {
        const o = plan(options('full'), { width: 640, height: 480 }, contract(MODEL_FAMILIES[name], true), effort).options as unknown as Record<
          string,
          unknown
        >;
        for (const key of planned) expect(Number.isFinite(o[key]), `${name} ${effort} ${key}`).toBe(true);
      }
    }
    for (const key of planned) {
      expect(Object.hasOwn(TUNING, key), key).toBe(false);
      expect(Object.hasOwn(options('full'), key), key).toBe(false);
    }
  });

  it("the memory: the larger of the model's working memory and the matting's at the planned side, a 2048² model's four times a 1024² one's", () => {
    const at = (side: number, perPixel: number) =>
      plan(options('full'), { width: 640, height: 480 }, contract(MODEL_FAMILIES.birefnet, false, side, perPixel)).memoryBytes;
    const image = estimateJobBytes(640, 480, { inferenceSide: 0, runBytesPerPixel: 0 });
    expect(at(1024, 100) - image).toBe(100 * 1024 ** 2);
    expect(at(2048, 100) - image).toBe(4 * (at(1024, 100) - image));
    // A model that needs less than the matting: the matting's 48 bytes a pixel.
    expect(at(1024, 10) - image).toBe(48 * 1024 ** 2);
    // A job at a smaller side counts the model's memory at that side.
    const small = plan(options('preview'), { width: 4000, height: 3000 }, contract(MODEL_FAMILIES.isnet, true, 1024, 100)).memoryBytes;
    expect(small - estimateJobBytes(4000, 3000, { inferenceSide: 0, runBytesPerPixel: 0 })).toBe(100 * 896 ** 2);
  });

  it('never changes its input', () => {
    const normalised = options('preview');
    plan(normalised, { width: 640, height: 480 }, isnet);
    expect(normalised).toEqual(options('preview'));
  });
});
