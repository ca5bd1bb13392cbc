/**
 * `bgone models add` records what the file is, and the service runs it so: tiny graphs of the
 * birefnet family (test/helpers/family-graph.ts) at 2048² (BiRefNet HR's side), with symbolic sides,
 * and with their weights in an external data file, found beside the graph or given with --data.
 * Each is listed with its side or its data file's name, sha256 and size; POST /api/v1/remove with
 * model= gives the library's bytes for it, and the library's unrefined matte is exactly the one its
 * function gives on the model's input.
 * A data file that is missing, too short for the graph, or not the one the graph's checksum names
 * refuses the file and leaves nothing in the models folder.
 */
import { createHash } from 'node:crypto';
import { copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error: plain ESM scripts without type declarations
import { onnx } from '../../scripts/model-tools/onnx-graph.mjs';
import { configure, DEFAULT_SETTINGS, type Manifest, removeBackground } from '../../src/lib/index.js';
import { MODEL_FAMILIES, nativeNormalisation } from '../../src/lib/model-families.js';
import { native } from '../../src/lib/native.js';
import { openStore } from '../../src/store/index.js';
import { runCli, useCliFolder } from '../helpers/cli-process.js';
import { expectedMatte, type FamilyGraph, writeFamilyGraph } from '../helpers/family-graph.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { postImage, serveStore, setBalance } from '../helpers/server.js';

const folder = useCliFolder('bgone-models-sides-');
const modelsDir = join(folder, 'models');
const downloads = join(folder, 'downloads');
const elsewhere = join(folder, 'elsewhere');
const shipped = JSON.parse(readFileSync(join(REPO_ROOT, 'models', 'manifest.json'), 'utf8')) as Manifest;
const env = { BGONE_MODELS_DIR: modelsDir };
const birefnet = MODEL_FAMILIES.birefnet;
const UPLOAD = 192;

const k: [number, number, number] = [1, -0.5, 0.25];
/** Each: the model's name, its graph, the side it runs at. */
const GRAPHS: Record<string, { graph: FamilyGraph; side: number }> = {
  'birefnet-hr': { side: 2048, graph: { inputName: 'input_image', side: 2048, batch: 1, k, bias: 0.1, decoys: 0 } },
  'hr-data': { side: 2048, graph: { inputName: 'input_image', side: 2048, batch: 1, k, bias: -0.1, decoys: 0, externalData: 'model.onnx.data' } },
  'dynamic-data': {
    side: birefnet.input.dynamicSide,
    graph: { inputName: 'input_image', side: 'symbolic', batch: 1, k, bias: 0.2, decoys: 0, externalData: 'weights.bin' },
  },
};

const sha256 = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');
const local = () => JSON.parse(readFileSync(join(modelsDir, 'manifest.local.json'), 'utf8')) as Manifest;
const folderNow = () => readdirSync(modelsDir).sort();

let served: Awaited<ReturnType<typeof serveStore>> & { url: string; key: string };

beforeAll(async () => {
  for (const d of [modelsDir, downloads, elsewhere]) mkdirSync(d);
  writeFileSync(join(modelsDir, 'manifest.json'), JSON.stringify(shipped));
  symlinkSync(join(REPO_ROOT, 'models', shipped.models.medium!.file), join(modelsDir, shipped.models.medium!.file));
  writeFamilyGraph(join(downloads, 'BiRefNet_HR-general.onnx'), GRAPHS['birefnet-hr']!.graph);
  writeFamilyGraph(join(downloads, 'model.onnx'), GRAPHS['hr-data']!.graph);
  // The symbolic one's data file is given with --data, from another folder and under another name.
  writeFamilyGraph(join(elsewhere, 'dynamic.onnx'), GRAPHS['dynamic-data']!.graph);
  copyFileSync(join(elsewhere, 'weights.bin'), join(downloads, 'dynamic-weights.bin'));
}, 60_000);
afterAll(async () => {
  await served?.close();
  configure({ modelsDir: DEFAULT_SETTINGS.modelsDir });
});

describe('bgone models add records what the file is', () => {
  it('a fixed 2048² graph: listed with side 2048 and the working memory its proving run measured', async () => {
    const run = await runCli(folder, ['models', 'add', join(downloads, 'BiRefNet_HR-general.onnx'), '--family', 'birefnet', '--name', 'birefnet-hr'], env);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^added birefnet-hr \(family birefnet, 2048², sha256 /);
    const entry = local().models['birefnet-hr']!;
    expect(entry).toMatchObject({ file: 'birefnet-hr.onnx', family: 'birefnet', side: 2048 });
    expect(entry.dynamic).toBeUndefined();
    expect(entry.data).toBeUndefined();
    // Its run holds at least its float input and answer, 16 bytes a pixel.
    expect(entry.runBytesPerPixel).toBeGreaterThanOrEqual(16);
    expect(run.stdout).toContain(`, ${entry.runBytesPerPixel} bytes of working memory per pixel`);
  }, 120_000);

  it('a graph whose weights are in model.onnx.data beside it: the data file copied under that name, its sha256 and size listed', async () => {
    const run = await runCli(folder, ['models', 'add', join(downloads, 'model.onnx'), '--family', 'birefnet', '--name', 'hr-data'], env);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/weights in model\.onnx\.data \(sha256 [0-9a-f]{64}\)/);
    const data = join(downloads, 'model.onnx.data');
    expect(local().models['hr-data']).toMatchObject({
      file: 'hr-data.onnx',
      side: 2048,
      data: { file: 'model.onnx.data', sha256: sha256(data), bytes: statSync(data).size },
    });
    expect(sha256(join(modelsDir, 'model.onnx.data'))).toBe(sha256(data));
  }, 120_000);

  it('a symbolic graph with its data file given with --data: listed as dynamic, the data under the name the graph reads', async () => {
    const data = join(downloads, 'dynamic-weights.bin');
    const run = await runCli(folder, ['models', 'add', join(elsewhere, 'dynamic.onnx'), '--family', 'birefnet', '--name', 'dynamic-data', '--data', data], env);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/symbolic sides, runs at 1024²/);
    const entry = local().models['dynamic-data']!;
    expect(entry).toMatchObject({ dynamic: true, data: { file: 'weights.bin', sha256: sha256(data), bytes: statSync(data).size } });
    expect(entry.side).toBeUndefined();
  }, 120_000);
});

describe('a data file that is not the graph’s: refused, nothing left in the models folder', () => {
  /** A graph reading its weights from `location`, with the graph's SHA-1 checksum of it where given. */
  function graphReading(name: string, location: string, checksum?: string): string {
    const path = join(elsewhere, `${name}.onnx`);
    writeFamilyGraph(path, { ...GRAPHS['hr-data']!.graph, externalData: location });
    if (checksum !== undefined) {
      const model = onnx.ModelProto.decode(readFileSync(path));
      for (const t of model.graph.initializer) if (t.dataLocation === 1) t.externalData.push({ key: 'checksum', value: checksum });
      writeFileSync(path, onnx.ModelProto.encode(model).finish());
    }
    return path;
  }

  it('not beside the graph, no --data: named, with the flag to give', async () => {
    const before = folderNow();
    const path = graphReading('no-data', 'absent.data');
    rmSync(join(elsewhere, 'absent.data'));
    const run = await runCli(folder, ['models', 'add', path, '--family', 'birefnet', '--name', 'no-data'], env);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/keeps its weights in absent\.data, which is not beside it .*: give the file with --data FILE/);
    expect(folderNow()).toEqual(before);
    expect(local().models['no-data']).toBeUndefined();
  });

  it('shorter than the graph reads: its size and the graph’s named', async () => {
    const before = folderNow();
    const path = graphReading('short-data', 'short.data');
    truncateSync(join(elsewhere, 'short.data'), 12);
    const run = await runCli(folder, ['models', 'add', path, '--family', 'birefnet', '--name', 'short-data'], env);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/short\.data is 12 bytes, and .*short-data\.onnx reads 16 bytes of short\.data: it is not this graph's data file/);
    expect(folderNow()).toEqual(before);
  });

  it('of the right size but not the file the graph’s checksum names: both SHA-1s named', async () => {
    const before = folderNow();
    const path = graphReading('other-data', 'other.data', '0'.repeat(40));
    const run = await runCli(folder, ['models', 'add', path, '--family', 'birefnet', '--name', 'other-data'], env);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/other\.data has SHA-1 [0-9a-f]{40}, and .* gives other\.data the checksum 0{40}: it is not this graph's data file/);
    expect(folderNow()).toEqual(before);
  });

  it('a data file of a name another model’s already has in the folder: refused', async () => {
    const before = folderNow();
    const path = graphReading('same-name', 'model.onnx.data');
    const run = await runCli(folder, ['models', 'add', path, '--family', 'birefnet', '--name', 'same-name'], env);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/model\.onnx\.data exists already/);
    expect(folderNow()).toEqual(before);
  });
});

describe('POST /api/v1/remove with model= runs each at its side', () => {
  beforeAll(async () => {
    configure({ modelsDir });
    const dir = join(folder, 'db');
    mkdirSync(dir);
    const store = await openStore({ path: join(dir, 'db.sqlite') });
    const account = await store.accounts.create({ email: 'sides@example.com' });
    const { key } = await store.keys.create(account.id);
    await setBalance(store, account.id, 20);
    const running = await serveStore(store, dir, { modelsAllowed: ['medium', ...Object.keys(GRAPHS)] });
    served = { ...running, url: `http://127.0.0.1:${running.server.port}`, key };
  }, 60_000);

  /**
   * The upload for a model: noise at UPLOAD², run at the model's side. The API has no `refine`, so
   * the service's answer is compared with the library's on the same model and options, and the
   * library's unrefined matte with the graph's function.
   */
  it.each(Object.keys(GRAPHS))(
    "model=%s: the library's bytes, whose matte unrefined is the expected one at its side",
    async (model) => {
      const { graph, side } = GRAPHS[model]!;
      const rgb = Buffer.alloc(UPLOAD * UPLOAD * 3);
      let s = side + graph.bias * 1000;
      for (let i = 0; i < rgb.length; i++) {
        s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
        rgb[i] = s >>> 24;
      }
      const png = native().encodePng(rgb, UPLOAD, UPLOAD, 3, 1);
      const res = await postImage(served.url, served.key, { model, channels: 'alpha', output_size: `${side}x${side}`, format: 'png' }, png);
      expect([res.status, res.status === 200 ? '' : res.body.toString()]).toEqual([200, '']);
      expect(res.headers.get('x-model')).toBe(model);
      const library = await removeBackground(png, { model, channels: 'alpha', outputSize: `${side}x${side}`, format: 'png' });
      expect(res.body.equals(library.data)).toBe(true);

      const unrefined = await removeBackground(png, { model, channels: 'alpha', refine: false, outputSize: `${side}x${side}` });
      const { data, info } = await sharp(unrefined.data).extractChannel(0).raw().toBuffer({ resolveWithObject: true });
      expect([info.width, info.height]).toEqual([side, side]);
      const { mean, std } = nativeNormalisation(birefnet);
      const expected = expectedMatte(native().resampleForModel(rgb, UPLOAD, UPLOAD, 3, side, side), graph, birefnet, mean, std);
      expect(Math.min(...expected.subarray(0, 4096))).toBeLessThan(64);
      expect(Math.max(...expected.subarray(0, 4096))).toBeGreaterThan(192);
      let differing = 0;
      for (let i = 0; i < expected.length; i++) if (data[i] !== expected[i]) differing++;
      expect(differing).toBe(0);
    },
    60_000,
  );
});

describe('bgone models remove', () => {
  it('removes an added model with its data file', async () => {
    const run = await runCli(folder, ['models', 'remove', 'hr-data'], env);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/removed hr-data \(hr-data\.onnx and model\.onnx\.data\)/);
    expect(folderNow()).not.toContain('model.onnx.data');
    expect(folderNow()).not.toContain('hr-data.onnx');
  });
});
