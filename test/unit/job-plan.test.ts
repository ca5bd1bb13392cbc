/**
 * The job plan (src/lib/job-plan.ts): the side a job runs at, from its model's family and graph, its
 * output and its provider; the radius scaled to it; the family's levels for the effort.
 */
import { describe, expect, it } from 'vitest';
import { planJob, planSide, sideForOutput } from '../../src/lib/job-plan.js';
import { MODEL_FAMILIES, type ModelFamily } from '../../src/lib/model-families.js';
import type { ModelContract } from '../../src/lib/models.js';
import { normaliseOptions } from '../../src/lib/options.js';

const options = (size: string) => normaliseOptions({ size }).native;

function contract(family: ModelFamily, dynamic: boolean, side = family.input.sides[0]!): ModelContract {
  return { family, width: side, height: side, dynamic, mean: [0, 0, 0], std: [1, 1, 1], outputIndex: 0, matteTransform: 0 };
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
    expect(planJob(options('preview'), { width: 4000, height: 3000 }, isnet, 'standard', 'cpu')).toMatchObject({ inferenceSize: 896, guidedRadius: 5 });
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
    expect(planJob(options(size), { width: 640, height: 480 }, isnet, 'standard', 'cpu')).toMatchObject({ inferenceSize: 1024, guidedRadius: 6 });
  });

  it('on a GPU provider every job runs at the full side', () => {
    expect(planSide(isnet, options('preview'), 4000, 3000, 'cuda')).toBe(1024);
  });
});

describe('other families and fixed graphs', () => {
  it('a fixed graph runs at its own side, the radius scaled to it (2048² BiRefNet HR: 12)', () => {
    const hr = contract(MODEL_FAMILIES.birefnet, false, 2048);
    expect(planJob(options('preview'), { width: 4000, height: 3000 }, hr, 'standard', 'cpu')).toMatchObject({ inferenceSize: 2048, guidedRadius: 12 });
  });

  it('a symbolic graph of a family without smaller sides runs at its family side, whatever the output', () => {
    expect(planSide(contract(MODEL_FAMILIES.birefnet, true), options('preview'), 4000, 3000, 'cpu')).toBe(1024);
    expect(planSide(contract(MODEL_FAMILIES.modnet, true), options('preview'), 4000, 3000, 'cpu')).toBe(512);
  });

  it("the family's levels, centred on 0.5 for effort=best", () => {
    const birefnet = contract(MODEL_FAMILIES.birefnet, false);
    expect(planJob(options('full'), { width: 640, height: 480 }, birefnet, 'standard', 'cpu')).toMatchObject(MODEL_FAMILIES.birefnet.matting);
    const best = planJob(options('full'), { width: 640, height: 480 }, isnet, 'best', 'cpu');
    expect(best.levelsLow).toBeCloseTo(0.1, 12);
    expect(best.levelsHigh).toBeCloseTo(0.9, 12);
  });

  it('never changes its input', () => {
    const normalised = options('preview');
    planJob(normalised, { width: 640, height: 480 }, isnet, 'standard', 'cpu');
    expect(normalised).toEqual(options('preview'));
  });
});
