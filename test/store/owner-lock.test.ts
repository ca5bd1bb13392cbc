/**
 * One service process per SQLite file (src/store/sqlite/owner-lock.ts through openStore's
 * serviceOwner): a second owner is refused while the first lives, operator stores are not, a clean
 * close gives the lock back, and a lock left by a dead process is taken over.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openStore, StoreError } from '../../src/store/index.js';

let dir: string;
let db: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'bgone-lock-'));
  db = join(dir, 'data', 'bgone.db');
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('the SQLite owner lock', () => {
  it('refuses a second service owner while the first is open, naming its pid; allows operator stores beside it', async () => {
    const first = await openStore({ path: db, serviceOwner: true });
    try {
      const refusal = await openStore({ path: db, serviceOwner: true }).then(
        () => null,
        (err: unknown) => err,
      );
      expect(refusal).toBeInstanceOf(StoreError);
      expect((refusal as StoreError).code).toBe('locked');
      expect((refusal as StoreError).message).toContain(`pid ${process.pid}`);
      const operator = await openStore({ path: db });
      expect((await operator.accounts.list()).length).toBe(0);
      await operator.close();
    } finally {
      await first.close();
    }
    expect(existsSync(`${db}.lock`)).toBe(false);
    const again = await openStore({ path: db, serviceOwner: true });
    await again.close();
  });

  it('takes over a lock whose process is gone', async () => {
    const dead = spawnSync(process.execPath, ['-e', '']).pid!; // a pid that has exited
    await openStore({ path: db }).then((s) => s.close()); // creates the folder and the file
    writeFileSync(`${db}.lock`, JSON.stringify({ pid: dead, host: hostname(), startedAt: '2026-01-01T00:00:00.000Z' }));
    const store = await openStore({ path: db, serviceOwner: true });
    expect(existsSync(`${db}.lock`)).toBe(true);
    await store.close();
    expect(existsSync(`${db}.lock`)).toBe(false);
  });

  it('treats an unreadable lock file as stale', async () => {
    await openStore({ path: db }).then((s) => s.close());
    writeFileSync(`${db}.lock`, 'not json');
    const store = await openStore({ path: db, serviceOwner: true });
    await store.close();
  });
});
