/**
 * A failure of ONNX Runtime never ends the process: a model that ONNX Runtime refuses to load, and
 * one that loads but whose run fails (its input declared under a wrong name), answer the contract's
 * 500, uncharged, and the same process then serves with a good model. Through HTTP, real servers.
 */
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configure, DEFAULT_SETTINGS, type Manifest } from '../../src/lib/index.js';
import { openStore } from '../../src/store/index.js';
import { PHOTOS } from '../helpers/constants.js';
import { expectError, trackUncaught } from '../helpers/http-assert.js';
import { REPO_ROOT, readPhoto } from '../helpers/paths.js';
import { credits, postImage, serveStore, setBalance } from '../helpers/server.js';

const teddy = readPhoto(PHOTOS.teddy);
const uncaught = trackUncaught();
const shipped = JSON.parse(readFileSync(join(REPO_ROOT, 'models', 'manifest.json'), 'utf8')) as Manifest;
const medium = shipped.models.medium!;
const modelsDir = mkdtempSync(join(tmpdir(), 'bgone-core-faults-'));

beforeAll(() => {
  symlinkSync(join(REPO_ROOT, 'models', medium.file), join(modelsDir, medium.file));
  symlinkSync(join(REPO_ROOT, 'models', shipped.models.small!.file), join(modelsDir, shipped.models.small!.file));
  writeFileSync(join(modelsDir, 'truncated.onnx'), readFileSync(join(REPO_ROOT, 'models', medium.file)).subarray(0, 1 << 20));
  const manifest: Manifest = {
    default: 'medium',
    models: {
      medium,
      truncated: { ...medium, file: 'truncated.onnx' },
      // A real model (fixed at 1024²) declared with a family of another side (320²): it loads, and every run fails.
      misfit: { ...shipped.models.small!, family: 'u2net' },
    },
  };
  writeFileSync(join(modelsDir, 'manifest.json'), JSON.stringify(manifest));
  configure({ modelsDir });
});

afterAll(() => {
  configure({ modelsDir: DEFAULT_SETTINGS.modelsDir });
  rmSync(modelsDir, { recursive: true, force: true });
});

async function serve(model: string) {
  const dir = mkdtempSync(join(tmpdir(), 'bgone-core-faults-db-'));
  const store = await openStore({ path: join(dir, 'db.sqlite'), rateLimits: { free: 100_000, pro: 100_000, ultra: 100_000, mega: 100_000 } });
  const account = await store.accounts.create({ email: 'core@example.com' });
  const { key } = await store.keys.create(account.id);
  await setBalance(store, account.id, 5);
  const { server, close } = await serveStore(store, dir, { model });
  return { url: `http://127.0.0.1:${server.port}`, key, store, accountId: account.id, close };
}

describe('ONNX Runtime failures', () => {
  it.each(['truncated', 'misfit'])('a %s model: 500 internal_server_error, uncharged, twice; then a good model serves in the same process', async (model) => {
    const bad = await serve(model);
    try {
      const before = await credits(bad);
      for (let i = 0; i < 2; i++) expectError(await postImage(bad.url, bad.key, { size: 'preview' }, teddy), 500, 'internal_server_error');
      expect(await credits(bad)).toEqual(before);
    } finally {
      await bad.close();
    }
    const good = await serve('medium');
    try {
      expect((await postImage(good.url, good.key, { size: 'preview' }, teddy)).status).toBe(200);
    } finally {
      await good.close();
    }
    await uncaught.check();
  });
});
