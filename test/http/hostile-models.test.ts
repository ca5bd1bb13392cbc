/**
 * A model cannot take the node down. `bgone models add` refuses each hostile graph of
 * test/helpers/hostile-graph.ts (a giant Expand, a 174,000-channel Conv, an endless Loop, a matte
 * that is NaN or one value on bright images), a file of another family, a file over the size bound
 * and a target that is a symbolic link, and leaves nothing in the models folder. Served anyway
 * (placed in manifest.local.json by hand), each fails its own request with 500 internal_server_error,
 * uncharged, while another account's requests with the default model are answered; SIGTERM ends the
 * process whatever a run does. BGONE_MODELS_ALLOWED naming a model no manifest lists is warned of.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Manifest } from '../../src/lib/index.js';
import { native } from '../../src/lib/native.js';
import { openStore } from '../../src/store/index.js';
import { runCli, ServeProcess, useCliFolder } from '../helpers/cli-process.js';
import { PHOTOS } from '../helpers/constants.js';
import { type Hostile, writeHostileGraph } from '../helpers/hostile-graph.js';
import { expectError } from '../helpers/http-assert.js';
import { REPO_ROOT, readPhoto } from '../helpers/paths.js';
import { get, postImage, waitFor } from '../helpers/server.js';

const folder = useCliFolder('bgone-hostile-');
const shipped = JSON.parse(readFileSync(join(REPO_ROOT, 'models', 'manifest.json'), 'utf8')) as Manifest;
const fp32File = join(REPO_ROOT, 'models', shipped.models['medium-fp32']!.file);
const teddy = readPhoto(PHOTOS.teddy);
const white = native().encodePng(Buffer.alloc(320 * 240 * 3, 255), 320, 240, 3, 1);
const KINDS: Hostile[] = ['giant-expand', 'huge-conv', 'endless-loop', 'bright-nan', 'bright-constant'];

/** A models folder with the shipped manifest and the default model's file (a link to the installed one). */
function modelsFolder(name: string): string {
  const dir = join(folder, name);
  mkdirSync(dir);
  writeFileSync(join(dir, 'manifest.json'), JSON.stringify(shipped));
  for (const m of [shipped.default, 'medium-fp32']) symlinkSync(join(REPO_ROOT, 'models', shipped.models[m]!.file), join(dir, shipped.models[m]!.file));
  return dir;
}

const graphs = join(folder, 'graphs');
beforeAll(() => {
  mkdirSync(graphs);
  for (const kind of KINDS) writeHostileGraph(join(graphs, `${kind}.onnx`), kind);
});

describe('bgone models add refuses', () => {
  let dir: string;
  let env: Record<string, string>;
  const listing = () => readdirSync(dir).sort();
  let contents: string[];
  beforeAll(() => {
    dir = modelsFolder('add');
    env = { BGONE_MODELS_DIR: dir, BGONE_INFERENCE_TIMEOUT: '2' };
    contents = listing();
  });
  const add = (file: string, family: string, name: string, ...more: string[]) =>
    runCli(folder, ['models', 'add', file, '--family', family, '--name', name, ...more], env);

  it.each([
    ['giant-expand', [], /is refused: its graph implies more than bgone runs[\s\S]*node giant \(Expand\) makes a tensor of 2\^62\.0 values/],
    ['huge-conv', [], /node huge \(Conv\) has weights \[174000, 3, 1, 1\]: more than 16384 channels/],
    ['endless-loop', [], /uses operators that family isnet's exports do not: Loop[\s\S]*--trust only if you trust/],
    ['endless-loop', ['--trust'], /did not run as family isnet: it failed on a photo: .*passed its limit of 2000 ms/],
    ['bright-nan', [], /did not run as family isnet: it failed on a bright photo: .*values that are not finite numbers/],
    ['bright-constant', [], /did not run as family isnet: its matte on a bright photo is 0\.5 everywhere: it does not depend on the image/],
  ] as const)(
    '%s %j: code 1, the reason named, nothing installed',
    async (kind, flags, reason) => {
      const run = await add(join(graphs, `${kind}.onnx`), 'isnet', kind, ...flags);
      expect({ code: run.code, stdout: run.stdout }).toEqual({ code: 1, stdout: '' });
      expect(run.stderr).toMatch(reason);
      expect(listing()).toEqual(contents);
    },
    120_000,
  );

  it("the ISNet file as u2net: refused, its outputs named (u2net's exports have 7); nothing installed", async () => {
    const run = await add(fp32File, 'u2net', 'not-u2net');
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/does not fit family u2net[\s\S]*the file has 1 outputs; family u2net's matte is output 0 of at least 7/);
    expect(listing()).toEqual(contents);
  });

  it('a file over 1 GiB: refused from its size; nothing installed', async () => {
    const large = join(folder, 'large.onnx');
    writeFileSync(large, '');
    truncateSync(large, 1.5 * 2 ** 30);
    const run = await add(large, 'isnet', 'large');
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/large\.onnx is 1\.50 GiB; bgone takes ONNX files of at most 1 GiB/);
    expect(listing()).toEqual(contents);
  });

  it('a dangling symbolic link where the file would go: refused, nothing written through it', async () => {
    const aim = join(folder, 'elsewhere.onnx');
    symlinkSync(aim, join(dir, 'linked.onnx'));
    const run = await add(fp32File, 'isnet', 'linked');
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/linked\.onnx is a symbolic link: bgone models add does not write through one/);
    expect(existsSync(aim)).toBe(false);
    expect(readlinkSync(join(dir, 'linked.onnx'))).toBe(aim);
    expect(existsSync(join(dir, 'manifest.local.json'))).toBe(false);
  });
});

/** A database with two accounts and a key each, for a serve process started on it. */
async function accounts(db: string): Promise<{ hostile: string; other: string; ids: [number, number] }> {
  const store = await openStore({ path: db });
  try {
    const a = await store.accounts.create({ email: 'hostile@example.com' });
    const b = await store.accounts.create({ email: 'other@example.com' });
    return { hostile: (await store.keys.create(a.id)).key, other: (await store.keys.create(b.id)).key, ids: [a.id, b.id] };
  } finally {
    await store.close();
  }
}

async function used(db: string, id: number): Promise<number> {
  const store = await openStore({ path: db });
  try {
    return (await store.credits.balance(id)).used;
  } finally {
    await store.close();
  }
}

/** A models folder where the hostile graphs are listed in manifest.local.json by hand, as an operator could. */
function placedByHand(name: string): string {
  const dir = modelsFolder(name);
  const models: Record<string, unknown> = {};
  for (const kind of KINDS) {
    writeHostileGraph(join(dir, `${kind}.onnx`), kind);
    models[kind] = { file: `${kind}.onnx`, sha256: '', bytes: 0, license: 'test', family: 'isnet' };
  }
  writeFileSync(join(dir, 'manifest.local.json'), JSON.stringify({ models }));
  return dir;
}

function serve(name: string, db: string, extra: Record<string, string>): ServeProcess {
  return new ServeProcess(folder, {
    BGONE_DB: db,
    BGONE_PORT: '0',
    BGONE_HOST: '127.0.0.1',
    BGONE_BOOTSTRAP_ACCOUNT: 'false',
    BGONE_MODELS_DIR: placedByHand(name),
    BGONE_MODELS_ALLOWED: 'all',
    ...extra,
  });
}

describe('served anyway', () => {
  it('each fails its request (500 internal_server_error, uncharged); the other account is answered meanwhile; SIGTERM exits 0', async () => {
    const db = join(folder, 'served.sqlite');
    const keys = await accounts(db);
    const node = serve('served', db, { BGONE_INFERENCE_TIMEOUT: '3' });
    const url = `http://127.0.0.1:${await node.port()}`;
    for (const [model, image] of [
      ['giant-expand', teddy],
      ['huge-conv', teddy],
      ['bright-nan', white],
    ] as const) {
      const res = await postImage(url, keys.hostile, { model, size: 'preview' }, image);
      expectError(res, 500, 'internal_server_error');
      expect((await postImage(url, keys.other, { size: 'preview' }, teddy)).status).toBe(200);
    }
    const looping = postImage(url, keys.hostile, { model: 'endless-loop', size: 'preview' }, teddy);
    await waitFor(async () => (await get(url, '/readyz')).json?.in_flight === 1, 'the loop to be in flight');
    expect((await postImage(url, keys.other, { size: 'preview' }, teddy)).status).toBe(200);
    expectError(await looping, 500, 'internal_server_error');
    expect((await postImage(url, keys.other, { size: 'preview' }, teddy)).status).toBe(200);
    expect(node.child.kill('SIGTERM')).toBe(true);
    expect(await node.exited).toEqual({ code: 0, signal: null });
    expect([await used(db, keys.ids[0]), await used(db, keys.ids[1])]).toEqual([0, 5]);
  }, 240_000);

  it('SIGTERM while an endless Loop runs with no limit: the process exits after the drain time', async () => {
    const db = join(folder, 'sigterm.sqlite');
    const keys = await accounts(db);
    const node = serve('sigterm', db, { BGONE_INFERENCE_TIMEOUT: '0', BGONE_DRAIN_TIMEOUT: '1', BGONE_MODELS_ALLOWED: 'endless-loop,nope' });
    const url = `http://127.0.0.1:${await node.port()}`;
    // A name no manifest lists is warned of at start.
    expect(node.logs().find((l) => l.level === 40 && /BGONE_MODELS_ALLOWED names models that no manifest lists: nope/.test(l.msg))?.unknown).toEqual(['nope']);
    const looping = postImage(url, keys.hostile, { model: 'endless-loop', size: 'preview' }, teddy).catch((err: unknown) => err);
    await waitFor(async () => (await get(url, '/readyz')).json?.in_flight === 1, 'the loop to be in flight');
    expect((await postImage(url, keys.other, { size: 'preview' }, teddy)).status).toBe(200);
    expect(node.child.kill('SIGTERM')).toBe(true);
    const exit = await node.exited;
    expect(exit.signal).toBe(null);
    expect(node.logs().map((l) => l.msg)).toEqual(expect.arrayContaining(['draining', 'stopped']));
    expect(node.logs().find((l) => l.msg === 'stopped')?.runs).toBe(1);
    await looping;
    expect(await used(db, keys.ids[0])).toBe(0);
  }, 240_000);
});
