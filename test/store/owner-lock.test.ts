/**
 * One service process per SQLite file (src/store/sqlite/owner-lock.ts through openStore's
 * serviceOwner): a second owner is refused while the first lives, in this process or another, and
 * through any other name of the same file (a symlink, a hard link, another relative path); operator
 * stores are not; a clean close gives the lock back; and a lock whose process died (kill -9) is
 * free again. Owners in other processes are real child processes loading
 * the compiled store from dist/ (rebuilt by test/global-setup.ts).
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { linkSync, mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openStore, StoreError } from '../../src/store/index.js';
import { sqliteDriver } from '../../src/store/sqlite/driver.js';
import { REPO_ROOT } from '../helpers/paths.js';

const DIST_STORE_URL = pathToFileURL(join(REPO_ROOT, 'dist', 'src', 'store', 'index.js')).href;

let dir: string;
let db: string;
const children: ChildProcess[] = [];
beforeEach(() => {
  dir = realpathSync(mkdtempSync(join(tmpdir(), 'bgone-lock-'))); // the paths the messages name are real ones
  db = join(dir, 'data', 'bgone.db');
});
afterEach(() => {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

/** Why opening a service owner on `path` fails (null: it did not). */
async function refusal(path: string): Promise<unknown> {
  return openStore({ path, serviceOwner: true }).then(
    async (store) => {
      await store.close();
      return null;
    },
    (err: unknown) => err,
  );
}

/** Whether a service owner of `path` in another process is refused ('locked') or not ('owner'). */
function tryInChild(path: string): string {
  const code = `
    const { openStore } = await import(${JSON.stringify(DIST_STORE_URL)});
    try {
      await (await openStore({ path: ${JSON.stringify(path)}, serviceOwner: true })).close();
      console.log('owner');
    } catch (err) {
      console.log(err.code);
    }
  `;
  const child = spawnSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8' });
  return `${child.stdout.trim()}${child.stderr}`;
}

/** A service owner of `path` in a child process, holding the store open until killed. */
async function ownerProcess(path: string): Promise<ChildProcess> {
  const code = `
    const { openStore } = await import(${JSON.stringify(DIST_STORE_URL)});
    await openStore({ path: ${JSON.stringify(path)}, serviceOwner: true });
    console.log('owner');
    setInterval(() => {}, 1000);
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', code], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const first = await createInterface({ input: child.stdout! })[Symbol.asyncIterator]().next();
  expect(first.value, `the child took the lock (stderr: ${stderr})`).toBe('owner');
  return child;
}

async function kill9(child: ChildProcess): Promise<void> {
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
}

describe('the SQLite owner lock', () => {
  it('refuses a second service owner while the first is open, naming its pid; allows operator stores beside it', async () => {
    const first = await openStore({ path: db, serviceOwner: true });
    try {
      const refused = await refusal(db);
      expect(refused).toBeInstanceOf(StoreError);
      expect((refused as StoreError).code).toBe('locked');
      expect((refused as StoreError).message).toContain(`is in use by another bgone service (pid ${process.pid}`);
      // The refused connection, closed in this process, left the owner's kernel lock in place.
      expect(tryInChild(db)).toBe('locked');
      const operator = await openStore({ path: db });
      expect((await operator.accounts.list()).length).toBe(0);
      await operator.close();
    } finally {
      await first.close();
    }
    expect(await refusal(db)).toBeNull();
    expect(tryInChild(db)).toBe('owner');
  });

  it('refuses a second service through a symlink to the same file, from another process too, naming both paths', async () => {
    const link = join(dir, 'link.db');
    mkdirSync(join(dir, 'data'));
    symlinkSync(db, link); // the link is made before the file exists: the lock still finds it
    const owner = await ownerProcess(link);
    for (const path of [db, link]) {
      const refused = await refusal(path);
      expect(refused, path).toBeInstanceOf(StoreError);
      expect((refused as StoreError).message).toContain(`in use by another bgone service (pid ${owner.pid}`);
    }
    expect(((await refusal(link)) as StoreError).message).toContain(`${link} (the file ${db}) is in use`);
    const parent = join(dir, 'parent-link');
    symlinkSync(join(dir, 'data'), parent); // a symlinked folder is the same file as well
    expect(await refusal(join(parent, 'bgone.db'))).toBeInstanceOf(StoreError);
    await kill9(owner);
    expect(await refusal(link)).toBeNull();
  });

  it('refuses a second service through a hard link or another relative path to the file, with the same message; the first’s reservations stay', async () => {
    mkdirSync(join(dir, 'data'));
    const first = await openStore({ path: db, serviceOwner: true });
    const operator = await openStore({ path: db });
    try {
      const account = await operator.accounts.create({ email: 'held@example.com', plan: 'free' });
      const held = await operator.credits.reserve(account.id, { requestId: 'req_held' });
      expect(held.ok).toBe(true);
      const hard = join(dir, 'elsewhere', 'hard.db');
      mkdirSync(join(dir, 'elsewhere'));
      linkSync(db, hard); // the same file under another name, in another folder
      const fromCwd = relative(process.cwd(), db);
      for (const path of [hard, fromCwd, join(dir, 'data', '..', 'data', 'bgone.db')]) {
        const refused = await refusal(path);
        expect(refused, path).toBeInstanceOf(StoreError);
        expect((refused as StoreError).code, path).toBe('locked');
        expect((refused as StoreError).message, path).toContain(`is in use by another bgone service (pid ${process.pid}`);
        expect(tryInChild(path), path).toBe('locked');
      }
      expect(((await refusal(hard)) as StoreError).message).toContain(`${hard} is in use by another bgone service (pid ${process.pid})`);
      expect(await operator.credits.balance(account.id)).toMatchObject({ reserved: 1 });
    } finally {
      await operator.close();
      await first.close();
    }
  });

  it('refuses a service on a hard link while an owner in another process holds the file through its own name', async () => {
    mkdirSync(join(dir, 'data'));
    const hard = join(dir, 'hard.db');
    const owner = await ownerProcess(db);
    linkSync(db, hard);
    const refused = await refusal(hard);
    expect(refused).toBeInstanceOf(StoreError);
    expect((refused as StoreError).message).toContain(`${hard} is in use by another bgone service (pid ${owner.pid})`);
    await kill9(owner);
    expect(await refusal(hard)).toBeNull();
  });

  it('is free once its owner is killed (kill -9)', async () => {
    const owner = await ownerProcess(db);
    expect(await refusal(db)).toBeInstanceOf(StoreError);
    await kill9(owner);
    const store = await openStore({ path: db, serviceOwner: true });
    await store.close();
  });

  it('ignores the lock files older builds left (`<db>.lock`, `<db>.owner-lock`)', async () => {
    mkdirSync(join(dir, 'data'));
    writeFileSync(`${db}.lock`, JSON.stringify({ pid: process.pid, host: hostname(), startedAt: '2026-01-01T00:00:00.000Z' }));
    const Database = sqliteDriver();
    const old = new Database(`${db}.owner-lock`);
    old.exec('CREATE TABLE owner (id INTEGER PRIMARY KEY)');
    old.close();
    const store = await openStore({ path: db, serviceOwner: true });
    await store.close();
  });
});
