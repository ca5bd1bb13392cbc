/**
 * A SQLite file held by another process (a real child process in a write transaction on it: every
 * write of the service is SQLITE_BUSY) never stalls the service: the event loop is not
 * blocked by the store (watched with a loop-delay monitor, with a wide margin over the ~100 ms
 * allowed), /healthz answers meanwhile, a request that needs the file gets 503 with Retry-After
 * once the store gives up waiting, and a credit release that failed under the lock is retried until
 * it succeeds. Through HTTP, on a real server, on a real file.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { createInterface, type Interface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../../src/server.js';
import { openStore, type Store } from '../../src/store/index.js';
import { BUSY_WAIT_MS } from '../../src/store/sqlite/busy.js';
import { PHOTOS } from '../helpers/constants.js';
import { expectError, trackUncaught } from '../helpers/http-assert.js';
import { REPO_ROOT, readPhoto } from '../helpers/paths.js';
import { credits, get, postImage, removeForm, serveStore, setBalance, waitFor } from '../helpers/server.js';

const DIST_DRIVER_URL = pathToFileURL(join(REPO_ROOT, 'dist', 'src', 'store', 'sqlite', 'driver.js')).href;
const teddy = readPhoto(PHOTOS.teddy);
const book = readPhoto(PHOTOS.book);
const uncaught = trackUncaught();
/** Far above the ~100 ms a store call may block the loop, far below the 5 s a busy timeout did. */
const LOOP_BLOCK_LIMIT_MS = 500;

let dir: string;
let db: string;
let store: Store;
let server: RunningServer;
let served: Awaited<ReturnType<typeof serveStore>>;
let url: string;
let key: string;
let accountId: number;

/** Another process on the same file: `lock` takes its write lock, `unlock` gives it back. */
class Locker {
  readonly child: ChildProcess;
  readonly #lines: Interface;

  constructor(path: string) {
    const code = `
      const { createInterface } = await import('node:readline');
      const { sqliteDriver } = await import(${JSON.stringify(DIST_DRIVER_URL)});
      const Database = sqliteDriver();
      let db;
      for await (const line of createInterface({ input: process.stdin })) {
        if (line === 'lock') {
          db = new Database(${JSON.stringify(path)}, { timeout: 5000 });
          db.exec('BEGIN IMMEDIATE'); // the write lock (WAL): no other connection writes until it ends
        } else {
          db.exec('ROLLBACK');
          db.close();
        }
        console.log(line + 'ed');
      }
    `;
    this.child = spawn(process.execPath, ['--input-type=module', '-e', code], { stdio: ['pipe', 'pipe', 'inherit'] });
    this.#lines = createInterface({ input: this.child.stdout! });
  }

  async send(command: 'lock' | 'unlock'): Promise<void> {
    const answer = new Promise<string>((resolve) => {
      this.#lines.once('line', resolve);
      this.child.once('exit', (code) => resolve(`exited with ${code}`));
    });
    this.child.stdin!.write(`${command}\n`);
    expect(await answer).toBe(`${command}ed`);
  }
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'bgone-busy-'));
  db = join(dir, 'db.sqlite');
  store = await openStore({ path: db, rateLimits: { free: 100_000, pro: 100_000, ultra: 100_000, mega: 100_000 } });
  const account = await store.accounts.create({ email: 'busy@example.com' });
  accountId = account.id;
  key = (await store.keys.create(account.id)).key;
  await setBalance(store, accountId, 20);
  // The default per-account cap (serveStore lifts it): this file's requests come from one account.
  served = await serveStore(store, dir, {
    accountInFlight: 4,
    batches: { resultTtlSeconds: 3600, memoryMb: 256, webhookAllowPrivate: true, webhookPollMs: 50 },
  });
  server = served.server;
  url = `http://127.0.0.1:${server.port}`;
});

afterAll(async () => {
  await served.close();
});

describe('a SQLite file held by another process', () => {
  it('blocks no one: /healthz answers, a request that needs the file gets 503, and the release that failed meanwhile is retried until done', async () => {
    const locker = new Locker(db);
    const loop = monitorEventLoopDelay({ resolution: 10 });
    try {
      const before = await credits({ store, accountId });
      // A request holds a credit while its image is processed (full size: seconds of work)...
      const client = new AbortController();
      const inFlight = fetch(`${url}/api/v1/remove`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}` },
        body: removeForm({}, book),
        signal: client.signal,
      }).catch((err: Error) => err);
      await waitFor(async () => (await credits({ store, accountId })).reserved === before.reserved + 1, 'the credit to be reserved');

      // ...when another process takes the file, and the client leaves: its release is busy.
      loop.enable();
      await locker.send('lock');
      const lockedAt = performance.now();
      client.abort();
      expect(await inFlight).toBeInstanceOf(Error);

      // Meanwhile the process serves what needs no file, and answers what does with a 503.
      const waiting = postImage(url, key, { size: 'preview' }, teddy);
      for (let i = 0; i < 5; i++) {
        expect((await get(url, '/healthz')).status).toBe(200);
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      const refused = await waiting;
      expectError(refused, 503, 'overloaded');
      expect(refused.headers.get('retry-after')).toBe('5');

      // The lock outlives one whole wait of the store: the release has failed at least once.
      const held = performance.now() - lockedAt;
      if (held < BUSY_WAIT_MS + 1500) await new Promise((resolve) => setTimeout(resolve, BUSY_WAIT_MS + 1500 - held));
      await locker.send('unlock');
      loop.disable();
      const worstBlockMs = loop.max / 1e6;
      expect(worstBlockMs, 'the longest the event loop was blocked (ms)').toBeLessThan(LOOP_BLOCK_LIMIT_MS);

      // The credit comes back without a restart: nothing was charged, nothing is left held.
      await waitFor(async () => (await credits({ store, accountId })).reserved === before.reserved, 'the retried release', 15_000);
      expect(await credits({ store, accountId })).toEqual(before);
      const ok = await postImage(url, key, { size: 'preview' }, teddy);
      expect(ok.status).toBe(200);
      expect(await credits({ store, accountId })).toEqual({ used: before.used + 1, reserved: before.reserved, remaining: before.remaining - 1 });
      await uncaught.check();
    } finally {
      loop.disable();
      locker.child.kill('SIGKILL');
    }
  });
});
