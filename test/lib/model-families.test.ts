/**
 * Each model family's plumbing without its weights: a tiny ONNX graph with the family's input and
 * output contract (test/helpers/family-graph.ts) whose matte is a known function of its input, run
 * through the whole pipeline (PNG in, channels=alpha out, refine off, an output the size of the
 * model's input). The alpha must be the bytes the family's normalisation, the model input's
 * resampling (the addon's resampleForModel), the output choice and the matte transform give.
 */
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FamilyName, MODEL_FAMILIES, nativeNormalisation } from '../../src/lib/model-families.js';
import { native } from '../../src/lib/native.js';
import { configure, DEFAULT_SETTINGS, type Manifest, removeBackground } from '../helpers/bgone.js';
import { expectedMatte, type FamilyGraph, writeFamilyGraph } from '../helpers/family-graph.js';
import { randomBytes } from '../helpers/prng.js';

const dir = mkdtempSync(join(tmpdir(), 'bgone-families-'));

/** Per family: its reference export's input name and decoy outputs, and a function whose matte spans 0..1. */
const GRAPHS: Record<FamilyName, Omit<FamilyGraph, 'side' | 'batch'>> = {
  isnet: { inputName: 'input', decoys: 11, k: [1, 0.5, 0.25], bias: 0.5 },
  u2net: { inputName: 'input.1', decoys: 6, k: [1, -0.5, 0.25], bias: 0.1 },
  birefnet: { inputName: 'input_image', decoys: 0, k: [1, 1, 1], bias: 0 },
  rmbg14: { inputName: 'input', decoys: 1, k: [1, -0.5, 0.25], bias: 0.1 },
  ben2: { inputName: 'input.1', decoys: 1, k: [-1, 0.5, 0.25], bias: 0 },
  modnet: { inputName: 'input', decoys: 0, k: [0.25, 0.25, 0.25], bias: 0.5 },
};

function graphOf(name: FamilyName, symbolic: boolean): FamilyGraph {
  const family = MODEL_FAMILIES[name];
  return { ...GRAPHS[name], side: symbolic ? 'symbolic' : family.input.sides[0]!, batch: family.input.batch };
}

const CASES: Array<[FamilyName, boolean]> = [
  ['isnet', false],
  ['isnet', true],
  ['u2net', false],
  ['birefnet', false],
  ['rmbg14', false],
  ['ben2', false],
  ['modnet', true],
];
const caseName = (family: FamilyName, symbolic: boolean) => `${family}-${symbolic ? 'symbolic' : 'fixed'}`;

beforeAll(() => {
  const manifest: Manifest = { default: 'isnet-fixed', models: {} };
  for (const [family, symbolic] of CASES) {
    const name = caseName(family, symbolic);
    const file = `${name}.onnx`;
    writeFamilyGraph(join(dir, file), graphOf(family, symbolic));
    manifest.models[name] = { file, sha256: '', bytes: statSync(join(dir, file)).size, license: 'test', family, ...(symbolic ? { dynamic: true } : {}) };
  }
  writeFileSync(join(dir, 'manifest.json'), JSON.stringify(manifest));
  configure({ modelsDir: dir });
});
afterAll(() => {
  configure({ modelsDir: DEFAULT_SETTINGS.modelsDir });
  rmSync(dir, { recursive: true, force: true });
});

/** Deterministic noise pixels, RGB. */
const pixels = (side: number, seed: number): Buffer => randomBytes(side * side * 3, seed);

describe('every family: normalisation, resizing, output choice and matte transform give the expected matte', () => {
  it.each(CASES)('%s (symbolic sides: %s)', async (familyName, symbolic) => {
    const family = MODEL_FAMILIES[familyName];
    const g = graphOf(familyName, symbolic);
    // The side the model runs at: its fixed side, or its family's side for a symbolic graph.
    const side = symbolic ? (familyName === 'isnet' ? 1024 : family.input.dynamicSide) : family.input.sides[0]!;
    const imageSide = (side * 3) / 2; // resized to the model's side
    const rgb = pixels(imageSide, 7 + side);
    const png = native().encodePng(rgb, imageSide, imageSide, 3, 1);
    const result = await removeBackground(png, {
      model: caseName(familyName, symbolic),
      channels: 'alpha',
      refine: false,
      outputSize: `${side}x${side}`,
    });
    expect([result.width, result.height]).toEqual([side, side]);
    expect(result.channels).toBe(1);
    const alpha = await sharp(result.data).extractChannel(0).raw().toBuffer();

    const modelInput = native().resampleForModel(rgb, imageSide, imageSide, 3, side, side);
    const { mean, std } = nativeNormalisation(family);
    const expected = expectedMatte(modelInput, g, family, mean, std);
    let differing = 0;
    for (let i = 0; i < expected.length; i++) if (alpha[i] !== expected[i]) differing++;
    expect(differing).toBe(0);
    // The matte spans the range: a wrong output, normalisation or transform would not match above.
    expect(Math.min(...expected.subarray(0, 4096))).toBeLessThan(64);
    expect(Math.max(...expected.subarray(0, 4096))).toBeGreaterThan(192);
  });
});
