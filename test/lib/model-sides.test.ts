/**
 * A model runs at the side its file has: a tiny graph of each family (test/helpers/family-graph.ts)
 * at every fixed side the family declares (BiRefNet HR's 2048² among them), listed with that `side`
 * as `bgone models add` lists it, one with symbolic sides, and one whose weights are in an external
 * data file beside it. Each gives exactly the matte its function gives on the model's input (the
 * addon's resampleForModel of the upload), through removeBackground: PNG in, channels=alpha, refine
 * off, an output the size of the model's input.
 */
import { mkdtempSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FAMILY_NAMES, type FamilyName, MODEL_FAMILIES, nativeNormalisation } from '../../src/lib/model-families.js';
import { type ModelEntry, reloadManifest } from '../../src/lib/models.js';
import { native } from '../../src/lib/native.js';
import { configure, DEFAULT_SETTINGS, removeBackground } from '../helpers/bgone.js';
import { expectedMatte, type FamilyGraph, writeFamilyGraph } from '../helpers/family-graph.js';
import { randomBytes } from '../helpers/prng.js';

const dir = mkdtempSync(join(tmpdir(), 'bgone-sides-'));
/** The upload's side: small, enlarged to the model's side by the model input's resampling. */
const UPLOAD = 192;

interface Case {
  name: string;
  family: FamilyName;
  graph: FamilyGraph;
  /** The side it must run at. */
  side: number;
}

const k: [number, number, number] = [1, -0.5, 0.25];
const fixed: Case[] = FAMILY_NAMES.flatMap((family) =>
  MODEL_FAMILIES[family].input.sides.map((side) => ({
    name: `${family}-${side}`,
    family,
    side,
    graph: { inputName: 'input', side, batch: MODEL_FAMILIES[family].input.batch, k, bias: 0.1, decoys: MODEL_FAMILIES[family].output.minCount - 1 },
  })),
);
const CASES: Case[] = [
  ...fixed,
  { name: 'birefnet-symbolic', family: 'birefnet', side: 1024, graph: { inputName: 'input_image', side: 'symbolic', batch: 1, k, bias: 0.1, decoys: 0 } },
  {
    name: 'birefnet-2048-data',
    family: 'birefnet',
    side: 2048,
    graph: { inputName: 'input_image', side: 2048, batch: 1, k, bias: 0.1, decoys: 0, externalData: 'birefnet-hr.onnx.data' },
  },
];

function entryOf(c: Case): ModelEntry {
  const file = `${c.name}.onnx`;
  const data = c.graph.externalData;
  return {
    file,
    sha256: '',
    bytes: statSync(join(dir, file)).size,
    license: 'test',
    family: c.family,
    ...(c.graph.side === 'symbolic' ? { dynamic: true } : { side: c.graph.side }),
    ...(data ? { data: { file: data, sha256: '', bytes: statSync(join(dir, data)).size } } : {}),
  };
}

function writeManifests(models: Record<string, ModelEntry>): void {
  writeFileSync(join(dir, 'manifest.json'), JSON.stringify({ default: CASES[0]!.name, models: {} }));
  writeFileSync(join(dir, 'manifest.local.json'), JSON.stringify({ models }));
  reloadManifest();
}

beforeAll(() => {
  for (const c of CASES) writeFamilyGraph(join(dir, `${c.name}.onnx`), c.graph);
  writeManifests(Object.fromEntries(CASES.map((c) => [c.name, entryOf(c)])));
  configure({ modelsDir: dir });
});
afterAll(() => {
  configure({ modelsDir: DEFAULT_SETTINGS.modelsDir });
  rmSync(dir, { recursive: true, force: true });
});

/** Deterministic noise pixels, RGB. */
const pixels = (side: number, seed: number): Buffer => randomBytes(side * side * 3, seed);

/** How many alpha bytes of a removal through `model` differ from the matte its graph gives. */
async function differing(c: Case, model = c.name): Promise<number> {
  const rgb = pixels(UPLOAD, 3 + c.side);
  const png = native().encodePng(rgb, UPLOAD, UPLOAD, 3, 1);
  const result = await removeBackground(png, { model, channels: 'alpha', refine: false, outputSize: `${c.side}x${c.side}` });
  expect([result.width, result.height, result.channels]).toEqual([c.side, c.side, 1]);
  const alpha = await sharp(result.data).extractChannel(0).raw().toBuffer();
  const family = MODEL_FAMILIES[c.family];
  const { mean, std } = nativeNormalisation(family);
  const expected = expectedMatte(native().resampleForModel(rgb, UPLOAD, UPLOAD, 3, c.side, c.side), c.graph, family, mean, std);
  // The matte spans the range: a model run at another side, or not at all, would not match.
  expect(Math.min(...expected.subarray(0, 4096))).toBeLessThan(64);
  expect(Math.max(...expected.subarray(0, 4096))).toBeGreaterThan(192);
  let count = 0;
  for (let i = 0; i < expected.length; i++) if (alpha[i] !== expected[i]) count++;
  return count;
}

describe('each model runs at the side of its file', () => {
  it.each(CASES.map((c) => [c.name, c] as const))(
    '%s: the expected matte at its side',
    async (_, c) => {
      expect(await differing(c)).toBe(0);
    },
    60_000,
  );
});

describe('an added model whose data file is not as listed is refused before it loads, naming it', () => {
  const hr = CASES.at(-1)!;
  const variant = (name: string): Case => ({ ...hr, name, graph: { ...hr.graph, externalData: `${name}.onnx.data` } });

  /** Each: the name of a graph like the HR one with its own data file, what is done to it, and the refusal's words. */
  const spoilt: Array<[string, string, (c: Case) => ModelEntry, RegExp]> = [
    [
      'listed without its data',
      'unlisted',
      (c) => ({ ...entryOf(c), data: undefined }),
      /its weights are in unlisted\.onnx\.data, which its manifest entry does not list/,
    ],
    [
      'its data file gone',
      'gone',
      (c) => {
        const entry = entryOf(c);
        rmSync(join(dir, `${c.name}.onnx.data`));
        return entry;
      },
      /gone\.onnx\.data is not there/,
    ],
    [
      'its data file cut short',
      'cut',
      (c) => {
        const entry = entryOf(c);
        truncateSync(join(dir, `${c.name}.onnx.data`), 8);
        return entry;
      },
      /cut\.onnx\.data is 8 bytes, and its manifest entry says 16/,
    ],
  ];
  it.each(spoilt)('%s', async (_, name, spoil, message) => {
    const c = variant(name);
    writeFamilyGraph(join(dir, `${name}.onnx`), c.graph);
    writeManifests({ ...Object.fromEntries(CASES.map((x) => [x.name, entryOf(x)])), [name]: spoil(c) });
    await expect(removeBackground(native().encodePng(pixels(64, 1), 64, 64, 3, 1), { model: name })).rejects.toMatchObject({
      code: 'internal_error',
      message: expect.stringMatching(message),
    });
  });

  it('a side the family is not exported at is a malformed manifest', async () => {
    writeManifests({ ...Object.fromEntries(CASES.map((x) => [x.name, entryOf(x)])), odd: { ...entryOf(hr), side: 1536 } });
    await expect(removeBackground(native().encodePng(pixels(64, 1), 64, 64, 3, 1), { model: 'odd' })).rejects.toMatchObject({
      code: 'internal_error',
      message: expect.stringMatching(/models\.odd\.side must be one of family birefnet's sides \(1024, 2048\)/),
    });
  });
});
