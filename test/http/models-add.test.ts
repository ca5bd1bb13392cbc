/**
 * A model added from a file (`bgone models add FILE --family F --name N`) served by name: the
 * installed medium-fp32 ISNet file added as my-isnet gives the same bytes as medium-fp32, with
 * X-Model naming it. A file of another family is refused naming the mismatch and leaves nothing
 * behind. A model a request may not name (not allowed, not installed, unknown) is 400
 * model_unavailable, uncharged. Each loaded model's memory is in /metrics. `models list` and
 * `models remove`.
 */
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configure, DEFAULT_SETTINGS, type Manifest } from '../../src/lib/index.js';
import { openStore } from '../../src/store/index.js';
import { runCli, useCliFolder } from '../helpers/cli-process.js';
import { PHOTOS } from '../helpers/constants.js';
import { expectError } from '../helpers/http-assert.js';
import { REPO_ROOT, readPhoto } from '../helpers/paths.js';
import { credits, get, metricsUrl, postImage, serveStore, setBalance } from '../helpers/server.js';

const folder = useCliFolder('bgone-models-add-');
const modelsDir = join(folder, 'models');
const shipped = JSON.parse(readFileSync(join(REPO_ROOT, 'models', 'manifest.json'), 'utf8')) as Manifest;
const fp32File = join(REPO_ROOT, 'models', shipped.models['medium-fp32']!.file);
const teddy = readPhoto(PHOTOS.teddy);
const env = { BGONE_MODELS_DIR: modelsDir };

let served: Awaited<ReturnType<typeof serve>>;

async function serve() {
  const dir = join(folder, `db-${Date.now()}`);
  mkdirSync(dir);
  const store = await openStore({ path: join(dir, 'db.sqlite') });
  const account = await store.accounts.create({ email: 'models@example.com' });
  const { key } = await store.keys.create(account.id);
  await setBalance(store, account.id, 20);
  const { server, close } = await serveStore(store, dir, { modelsAllowed: ['medium-fp32', 'my-isnet', 'medium-fp16'] });
  return { url: `http://127.0.0.1:${server.port}`, key, store, accountId: account.id, server, close };
}

beforeAll(async () => {
  mkdirSync(modelsDir);
  writeFileSync(join(modelsDir, 'manifest.json'), JSON.stringify(shipped));
  for (const name of ['medium', 'medium-fp32']) symlinkSync(join(REPO_ROOT, 'models', shipped.models[name]!.file), join(modelsDir, shipped.models[name]!.file));
}, 60_000);
afterAll(async () => {
  await served?.close();
  configure({ modelsDir: DEFAULT_SETTINGS.modelsDir });
});

describe('bgone models add FILE --family', () => {
  it('the ISNet file as modnet: refused, naming the batch dimension that differs; nothing is left behind', async () => {
    const run = await runCli(folder, ['models', 'add', fp32File, '--family', 'modnet', '--name', 'not-modnet'], env);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('does not fit family modnet');
    expect(run.stderr).toMatch(/input input has batch dimension 1; family modnet's reference export .* has symbolic/);
    expect(existsSync(join(modelsDir, 'not-modnet.onnx'))).toBe(false);
    expect(existsSync(join(modelsDir, 'manifest.local.json'))).toBe(false);
  });

  it('an unknown family, or no such file: usage errors naming them', async () => {
    const family = await runCli(folder, ['models', 'add', fp32File, '--family', 'sam'], env);
    expect(family.code).toBe(2);
    expect(family.stderr).toMatch(/--family must be one of isnet, u2net, birefnet, rmbg14, ben2, modnet/);
    const missing = await runCli(folder, ['models', 'add', join(folder, 'none.onnx'), '--family', 'isnet'], env);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/none\.onnx is not a file/);
  });

  it('the medium-fp32 file as isnet, named my-isnet: proved on the test images in a child process, then copied and listed with its sha256 and family', async () => {
    const run = await runCli(folder, ['models', 'add', fp32File, '--family', 'isnet', '--name', 'my-isnet'], env);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^added my-isnet \(family isnet, symbolic sides.*sha256 697df947/);
    const local = JSON.parse(readFileSync(join(modelsDir, 'manifest.local.json'), 'utf8'));
    expect(local.models['my-isnet']).toMatchObject({
      file: 'my-isnet.onnx',
      family: 'isnet',
      dynamic: true,
      sha256: shipped.models['medium-fp32']!.sha256,
      bytes: shipped.models['medium-fp32']!.bytes,
      source: { file: fp32File },
    });
    expect(local.models['my-isnet'].license).toMatch(/AGPL-3\.0/);
    // The shipped manifest is not edited.
    expect(JSON.parse(readFileSync(join(modelsDir, 'manifest.json'), 'utf8'))).toEqual(shipped);
    const again = await runCli(folder, ['models', 'add', fp32File, '--family', 'isnet', '--name', 'my-isnet'], env);
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/a model named my-isnet is already listed/);
  }, 120_000);

  it('models list: every model with its family, size and licence; the default marked (BGONE_MODEL)', async () => {
    const list = await runCli(folder, ['models', 'list', '--json'], { ...env, BGONE_MODEL: 'my-isnet' });
    expect(list.code).toBe(0);
    const models = JSON.parse(list.stdout) as Array<Record<string, unknown>>;
    expect(models.find((m) => m.name === 'my-isnet')).toMatchObject({ family: 'isnet', installed: true, added: true, isDefault: true });
    expect(models.find((m) => m.name === 'medium')).toMatchObject({ family: 'isnet', installed: true, added: false, isDefault: false });
    const text = await runCli(folder, ['models', 'list'], env);
    expect(text.stdout).toMatch(/installed {2}medium +isnet +45 MB {2}AGPL-3\.0 {2}\(default\)/);
  });
});

describe('POST /api/v1/remove with model', () => {
  beforeAll(async () => {
    configure({ modelsDir });
    served = await serve();
  }, 60_000);

  it('model=my-isnet gives the bytes of model=medium-fp32, X-Model naming each', async () => {
    const mine = await postImage(served.url, served.key, { model: 'my-isnet', size: 'preview' }, teddy);
    const theirs = await postImage(served.url, served.key, { model: 'medium-fp32', size: 'preview' }, teddy);
    expect([mine.status, theirs.status]).toEqual([200, 200]);
    expect(mine.headers.get('x-model')).toBe('my-isnet');
    expect(theirs.headers.get('x-model')).toBe('medium-fp32');
    expect(mine.body.equals(theirs.body)).toBe(true);
    const plain = await postImage(served.url, served.key, { size: 'preview' }, teddy);
    expect(plain.headers.get('x-model')).toBe('medium');
  }, 120_000);

  it('each loaded model in /metrics: bgone_model_resident_bytes by model', async () => {
    const metrics = (await get(metricsUrl(served.server), '/metrics')).body.toString();
    for (const model of ['my-isnet', 'medium-fp32', 'medium']) {
      const line = metrics.split('\n').find((l) => l.startsWith(`bgone_model_resident_bytes{model="${model}"}`));
      expect(Number(line?.split(' ')[1])).toBeGreaterThan(10e6);
    }
  });

  it.each([
    ['a model the operator does not allow', 'small'],
    ['an allowed model that is not installed', 'medium-fp16'],
    ['an unknown model', 'no-such-model'],
  ])('%s: 400 model_unavailable listing the usable ones, nothing charged, the server still serves', async (_, model) => {
    const before = await credits(served);
    const res = await postImage(served.url, served.key, { model, size: 'preview' }, teddy);
    const body = expectError(res, 400, 'model_unavailable');
    expect(body.message).toContain(model);
    expect(body.details).toEqual({ field: 'model', allowed: ['medium', 'medium-fp32', 'my-isnet'] });
    expect(await credits(served)).toEqual(before);
  });

  it('afterwards the server still serves', async () => {
    expect((await postImage(served.url, served.key, { size: 'preview' }, teddy)).status).toBe(200);
  }, 60_000);
});

describe('bgone models remove', () => {
  it('removes an added model and its file; a shipped model is refused', async () => {
    const shippedOne = await runCli(folder, ['models', 'remove', 'medium'], env);
    expect(shippedOne.code).toBe(2);
    expect(shippedOne.stderr).toMatch(/only models added from a file are removed/);
    const run = await runCli(folder, ['models', 'remove', 'my-isnet'], env);
    expect(run.code).toBe(0);
    expect(existsSync(join(modelsDir, 'my-isnet.onnx'))).toBe(false);
    expect(JSON.parse(readFileSync(join(modelsDir, 'manifest.local.json'), 'utf8')).models).toEqual({});
  });
});
