/**
 * Loaded models and their memory (src/lib/models.ts): a model loads on first use, is released after
 * modelIdleSeconds unused, and the loaded models stay within modelsMemoryMb (an idle one is released
 * to make room for another). The models are tiny graphs of the isnet family holding 4 MiB of weights
 * each (test/helpers/family-graph.ts).
 */
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadedModels } from '../../src/lib/models.js';
import { native } from '../../src/lib/native.js';
import { configure, DEFAULT_SETTINGS, type Manifest, preloadModel, removeBackground } from '../helpers/bgone.js';
import { writeFamilyGraph } from '../helpers/family-graph.js';

const dir = mkdtempSync(join(tmpdir(), 'bgone-model-memory-'));
const NAMES = ['one', 'two', 'three'];

beforeAll(() => {
  const manifest: Manifest = { default: 'one', models: {} };
  for (const name of NAMES) {
    writeFamilyGraph(join(dir, `${name}.onnx`), {
      inputName: 'input',
      side: 'symbolic',
      batch: 1,
      k: [1, 0.5, 0.25],
      bias: 0.5,
      decoys: 0,
      ballastBytes: 4 << 20,
    });
    manifest.models[name] = {
      file: `${name}.onnx`,
      sha256: '',
      bytes: statSync(join(dir, `${name}.onnx`)).size,
      license: 'test',
      family: 'isnet',
      dynamic: true,
    };
  }
  writeFileSync(join(dir, 'manifest.json'), JSON.stringify(manifest));
});
afterAll(() => {
  configure({ ...DEFAULT_SETTINGS });
  rmSync(dir, { recursive: true, force: true });
});

const image = () => {
  const rgb = Buffer.alloc(64 * 64 * 3, 200);
  return native().encodePng(rgb, 64, 64, 3, 1);
};
const loaded = () =>
  loadedModels()
    .map((m) => m.model)
    .sort();

describe('loaded models', () => {
  it('load on first use, each reporting its memory; an unused one is released after modelIdleSeconds', async () => {
    configure({ modelsDir: dir, modelIdleSeconds: 1, modelsMemoryMb: 0 });
    expect(loaded()).toEqual([]);
    await removeBackground(image(), { model: 'two', size: 'preview' });
    await removeBackground(image(), { model: 'three', size: 'preview' });
    expect(loaded()).toEqual(['three', 'two']);
    for (const m of loadedModels()) expect(m.bytes).toBeGreaterThanOrEqual(4 << 20);
    await new Promise((r) => setTimeout(r, 1500));
    expect(loaded()).toEqual([]);
  });

  it('a preloaded model stays loaded, idle or not', async () => {
    configure({ modelsDir: dir, modelIdleSeconds: 1 });
    await preloadModel('one');
    await new Promise((r) => setTimeout(r, 1500));
    expect(loaded()).toEqual(['one']);
  });

  it('within modelsMemoryMb: loading another releases the least recently used idle one; the preloaded one stays', async () => {
    configure({ modelsDir: dir, modelIdleSeconds: 0, modelsMemoryMb: 0 });
    await preloadModel('one');
    await removeBackground(image(), { model: 'two', size: 'preview' });
    const each = Math.max(...loadedModels().map((m) => m.bytes));
    const file = statSync(join(dir, 'three.onnx')).size; // what a model not loaded yet is counted as
    // Room for the preloaded model and one more, not two.
    configure({ modelsMemoryMb: Math.floor((1.5 * each + file) / 2 ** 20) });
    expect(loaded()).toEqual(['one', 'two']);
    await removeBackground(image(), { model: 'three', size: 'preview' });
    expect(loaded()).toEqual(['one', 'three']);
    await removeBackground(image(), { model: 'two', size: 'preview' });
    expect(loaded()).toEqual(['one', 'two']);
  });
});
