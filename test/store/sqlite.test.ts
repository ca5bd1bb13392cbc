/**
 * The SQLite implementation of the store (src/store/sqlite/), seen from inside its file: durable
 * settings, migrations, what is and is not written (no key or session secret, no write for a
 * refused key), the ledger and audit rows, lazy purges, and the atomicity of sign-up. What any
 * implementation must do is in store.test.ts, through the interface only.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { IDEMPOTENCY_TTL_MS, isDatabaseUnavailable, type Store } from '../../src/store/index.js';
import { BUSY_WAIT_MS } from '../../src/store/sqlite/busy.js';
import { type Db, sqliteDriver } from '../../src/store/sqlite/driver.js';
import { SCHEMA_VERSION } from '../../src/store/sqlite/migrations.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { expectStoreError, spend, useTempStores } from '../helpers/store.js';

const HOUR = 60 * 60 * 1000;

const t = useTempStores();

/** A second, plain connection to the same file, for looking at it from outside the store. */
function rawConnection(readonly = false): Db {
  const Database = sqliteDriver();
  const db = new Database(t.dbPath, { readonly });
  t.closeAfter(db);
  return db;
}

function totalChanges(store: Store): number {
  return SqliteStore.databaseOf(store).prepare<[], number>('SELECT total_changes()').pluck().get()!;
}

/** Every byte of the database's files (.db, and -wal and -shm while open). */
function fileContents(): Buffer {
  const folder = join(t.dir, 'data');
  return Buffer.concat(readdirSync(folder).map((f) => readFileSync(join(folder, f))));
}

describe('database file', () => {
  it('has WAL, synchronous FULL, foreign keys and no busy timeout on the store connection', async () => {
    const store = await t.open();
    expect(existsSync(t.dbPath)).toBe(true);
    const db = SqliteStore.databaseOf(store);
    expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(db.pragma('synchronous', { simple: true })).toBe(2); // FULL
    expect(db.pragma('foreign_keys', { simple: true })).toBe(1);
    // No wait inside a call once open: a busy file is waited for between attempts (busy.ts).
    expect(db.pragma('busy_timeout', { simple: true })).toBe(0);
    // WAL is a property of the file: a plain connection sees it too.
    expect(rawConnection().pragma('journal_mode', { simple: true })).toBe('wal');
  });

  it('applies the migrations once and is idempotent on reopen (user_version)', async () => {
    expect(SCHEMA_VERSION).toBeGreaterThanOrEqual(2);
    const first = await t.open();
    expect(SqliteStore.databaseOf(first).pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
    await first.accounts.create({ email: 'keep@example.com' });
    await first.close();
    for (let i = 0; i < 2; i++) {
      const again = await t.open();
      expect(SqliteStore.databaseOf(again).pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
      expect(await again.accounts.list()).toHaveLength(1);
      await again.close();
    }
    const raw = rawConnection();
    const tables = raw.prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name").pluck().all();
    expect(tables).toEqual([
      'accounts',
      'api_keys',
      'batch_images',
      'batches',
      'charges',
      'cycle_usage',
      'grants',
      'idempotency_keys',
      'reservations',
      'server_key',
      'sessions',
      'webhook_deliveries',
      'webhook_endpoints',
    ]);
    expect(raw.prepare("SELECT name FROM pragma_table_info('accounts')").pluck().all()).toContain('password_hash');
  });

  it('refuses a database written by a newer schema', async () => {
    await (await t.open()).close();
    const raw = rawConnection();
    raw.pragma(`user_version = ${SCHEMA_VERSION + 1}`);
    raw.close();
    await expectStoreError(t.open(), 'schema_too_new');
  });

  it('databaseOf refuses a store that is not SQLite', () => {
    expect(() => SqliteStore.databaseOf({ kind: 'postgres' } as unknown as Store)).toThrow(TypeError);
  });
});

describe('API keys on disk', () => {
  it('a use within the resolution writes nothing', async () => {
    const store = await t.open(); // default resolution: 60 s
    const a = await store.accounts.create({ email: 'a@example.com' });
    const { key } = await store.keys.create(a.id);
    await store.keys.authenticate(key);
    const before = totalChanges(store);
    t.clock.advance(59_999);
    await store.keys.authenticate(key);
    expect(totalChanges(store)).toBe(before);
    t.clock.advance(1);
    await store.keys.authenticate(key);
    expect(totalChanges(store)).toBe(before + 1);
  });

  it('an unknown or revoked key costs a read and no write', async () => {
    const store = await t.open();
    const a = await store.accounts.create({ email: 'a@example.com' });
    const { key } = await store.keys.create(a.id);
    const revoked = await store.keys.create(a.id);
    await store.keys.revoke(revoked.info.id);

    const observer = rawConnection(true);
    const dataVersion = () => observer.pragma('data_version', { simple: true }) as number;
    const walSize = () => statSync(`${t.dbPath}-wal`).size;
    const snapshot = () => ({ dataVersion: dataVersion(), walSize: walSize(), changes: totalChanges(store) });

    const before = snapshot();
    expect(await store.keys.authenticate(`rb-sk_${'A'.repeat(43)}`)).toBeNull(); // unknown
    expect(await store.keys.authenticate(revoked.key)).toBeNull();
    expect(await store.keys.authenticate(key.slice(0, -1) + (key.endsWith('A') ? 'B' : 'A'))).toBeNull(); // one character off
    expect(snapshot()).toEqual(before);

    // Control: the measurement does see a write (a valid key's first use records last_used_at).
    expect(await store.keys.authenticate(key)).not.toBeNull();
    const after = snapshot();
    expect(after.dataVersion).not.toBe(before.dataVersion);
    expect(after.walSize).toBeGreaterThan(before.walSize);
    expect(after.changes).toBe(before.changes + 1);
  });

  it('the database files never contain a key secret, only its hash', async () => {
    const store = await t.open();
    const a = await store.accounts.create({ email: 'a@example.com' });
    const keys = [await store.keys.create(a.id), await store.keys.create(a.id), await store.keys.create(a.id)];
    for (const k of keys) await store.keys.authenticate(k.key);
    await store.keys.revoke(keys[1]!.info.id);

    const check = (bytes: Buffer) => {
      for (const { key, info } of keys) {
        expect(bytes.includes(key)).toBe(false);
        expect(bytes.includes(key.slice(6))).toBe(false); // the secret part
        expect(bytes.includes(key.slice(12, -4))).toBe(false); // the part not shown in listings
        // Controls: the search works on these bytes.
        expect(bytes.includes(createHash('sha256').update(key).digest())).toBe(true);
        expect(bytes.includes(info.prefix)).toBe(true);
      }
    };
    expect(existsSync(`${t.dbPath}-wal`)).toBe(true);
    check(fileContents()); // .db + -wal + -shm while open
    await store.close(); // checkpoints the WAL into the .db
    check(fileContents());
  });
});

describe('sessions on disk', () => {
  it('only the hash of a session id is stored; the CSRF token is kept as issued', async () => {
    const store = await t.open();
    const a = await store.accounts.create({ email: 'a@example.com' });
    const { token, session } = await store.sessions.create(a.id);
    const row = SqliteStore.databaseOf(store).prepare<[], { token_hash: Buffer; csrf_token: string }>('SELECT token_hash, csrf_token FROM sessions').get()!;
    expect(row.token_hash).toEqual(createHash('sha256').update(token).digest());
    expect(row.csrf_token).toBe(session.csrfToken);
    await store.close();
    const bytes = fileContents();
    expect(bytes.includes(token)).toBe(false);
    expect(bytes.includes(createHash('sha256').update(token).digest())).toBe(true); // control
  });

  it('expired sessions are deleted lazily, by a later login', async () => {
    const store = await t.open({ sessionTtlMs: HOUR });
    const a = await store.accounts.create({ email: 'a@example.com' });
    await store.sessions.create(a.id);
    const count = () => SqliteStore.databaseOf(store).prepare<[], number>('SELECT count(*) FROM sessions').pluck().get();
    t.clock.advance(HOUR);
    expect(count()).toBe(1); // expired, still there
    await store.sessions.create(a.id);
    expect(count()).toBe(1); // the expired one is gone, the new one is there
  });
});

describe('credits on disk', () => {
  it('the charges ledger keeps the key, request id, cycle and time of each charge', async () => {
    const store = await t.open();
    const a = await store.accounts.create({ email: 'a@example.com' });
    const { info } = await store.keys.create(a.id);
    const r = (await store.credits.reserve(a.id, { requestId: 'req_1', keyId: info.id })) as { reservationId: number };
    await store.credits.commit(r.reservationId);
    const dashboard = (await store.credits.reserve(a.id, { requestId: 'req_2' })) as { reservationId: number };
    await store.credits.commit(dashboard.reservationId);
    expect(rawConnection().prepare('SELECT account_id, api_key_id, request_id, cycle_index, charged_at FROM charges ORDER BY id').all()).toEqual([
      { account_id: a.id, api_key_id: info.id, request_id: 'req_1', cycle_index: 0, charged_at: t.clock().getTime() },
      { account_id: a.id, api_key_id: null, request_id: 'req_2', cycle_index: 0, charged_at: t.clock().getTime() },
    ]);
  });

  it('grants are recorded with their note', async () => {
    const store = await t.open();
    const a = await store.accounts.create({ email: 'a@example.com' });
    await store.credits.grant(a.id, 3, 'support ticket 12');
    await store.credits.grant(a.id, 2);
    expect(rawConnection().prepare('SELECT account_id, cycle_index, credits, note FROM grants ORDER BY id').all()).toEqual([
      { account_id: a.id, cycle_index: 0, credits: 3, note: 'support ticket 12' },
      { account_id: a.id, cycle_index: 0, credits: 2, note: null },
    ]);
  });

  it('Idempotency-Key records are replaced when expired and purged lazily', async () => {
    const store = await t.open();
    const a = await store.accounts.create({ email: 'a@example.com' });
    const r = (await store.credits.reserve(a.id, { requestId: 'req_1', idempotencyKey: 'k', imageHash: 'h' })) as { reservationId: number };
    await store.credits.commit(r.reservationId);
    const hashes = () => rawConnection().prepare('SELECT image_hash FROM idempotency_keys').pluck().all();
    expect(hashes()).toEqual(['h']);
    t.clock.advance(IDEMPOTENCY_TTL_MS);
    const late = (await store.credits.reserve(a.id, { requestId: 'req_2', idempotencyKey: 'k', imageHash: 'other' })) as { reservationId: number };
    await store.credits.commit(late.reservationId);
    expect(hashes()).toEqual(['other']); // replaced
    t.clock.advance(IDEMPOTENCY_TTL_MS + HOUR);
    await store.credits.reserve(a.id, { requestId: 'req_3' }); // any reserve purges now and then
    expect(hashes()).toEqual([]);
  });

  it('a crash leaves reservations in the file, never charges', async () => {
    const before = await t.open();
    const a = await before.accounts.create({ email: 'a@example.com' });
    await spend(before, a.id, 2);
    await before.credits.reserve(a.id, { requestId: 'req_held' });
    await before.close();
    const raw = rawConnection();
    expect(raw.prepare('SELECT count(*) FROM reservations').pluck().get()).toBe(1);
    expect(raw.prepare('SELECT count(*) FROM charges').pluck().get()).toBe(2);
    const after = await t.open();
    expect(await after.credits.recoverAfterCrash()).toBe(1);
    expect(raw.prepare('SELECT count(*) FROM reservations').pluck().get()).toBe(0);
    expect(raw.prepare('SELECT count(*) FROM charges').pluck().get()).toBe(2);
  });
});

describe('sign-up', () => {
  it('is one transaction: when the first key cannot be written, neither the account nor its password is', async () => {
    const store = await t.open();
    await store.accounts.createWithPassword({ email: 'first@example.com', passwordHash: 'h' });
    // Make the key insert fail inside the sign-up transaction, after the account insert succeeded.
    rawConnection().exec("CREATE TRIGGER no_keys BEFORE INSERT ON api_keys BEGIN SELECT RAISE(ABORT, 'no keys today'); END");
    await expect(store.accounts.createWithPassword({ email: 'second@example.com', passwordHash: 'h' })).rejects.toThrow(/no keys today/);
    expect(await store.accounts.getByEmail('second@example.com')).toBeNull();
    expect(rawConnection().prepare('SELECT email FROM accounts ORDER BY id').pluck().all()).toEqual(['first@example.com']);
  });
});

describe('a file another process holds (busy.ts)', () => {
  const DIST_DRIVER_URL = pathToFileURL(join(REPO_ROOT, 'dist', 'src', 'store', 'sqlite', 'driver.js')).href;

  /** A child process that holds the file's write lock for `holdMs`, once it says so. */
  async function holdWriteLock(holdMs: number): Promise<{ exited: Promise<unknown> }> {
    const code = `
      const { sqliteDriver } = await import(${JSON.stringify(DIST_DRIVER_URL)});
      const db = new (sqliteDriver())(${JSON.stringify(t.dbPath)});
      db.exec('BEGIN IMMEDIATE');
      console.log('locked');
      setTimeout(() => { db.exec('ROLLBACK'); db.close(); }, ${holdMs});
    `;
    const child = spawn(process.execPath, ['--input-type=module', '-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
    t.closeAfter({ close: () => child.exitCode === null && child.kill('SIGKILL') });
    const first = await createInterface({ input: child.stdout! })[Symbol.asyncIterator]().next();
    expect(first.value).toBe('locked');
    return { exited: new Promise((resolve) => child.once('exit', resolve)) };
  }

  /** The longest gap between ticks of a 10 ms timer while `work` runs: how long the event loop was blocked. */
  async function longestStall<T>(work: Promise<T>): Promise<{ result: PromiseSettledResult<T>; stallMs: number }> {
    let last = performance.now();
    let stallMs = 0;
    const ticker = setInterval(() => {
      const now = performance.now();
      stallMs = Math.max(stallMs, now - last);
      last = now;
    }, 10);
    const [result] = await Promise.allSettled([work]);
    clearInterval(ticker);
    return { result, stallMs };
  }

  it('a write waits for a short lock between attempts, with the event loop free, then succeeds', async () => {
    const store = await t.open();
    const lock = await holdWriteLock(1500);
    const { result, stallMs } = await longestStall(store.accounts.create({ email: 'waited@example.com' }));
    expect(result.status, JSON.stringify(result)).toBe('fulfilled');
    expect(stallMs).toBeLessThan(500); // ~10 ms; a busy timeout inside the call stalled it for the whole lock
    await lock.exited;
    expect((await store.accounts.list()).map((a) => a.email)).toEqual(['waited@example.com']);
  });

  it('a lock longer than the wait fails the call with SQLITE_BUSY (database unavailable: a 503), never stalling the loop', async () => {
    const store = await t.open();
    const lock = await holdWriteLock(BUSY_WAIT_MS + 1500);
    const started = performance.now();
    const { result, stallMs } = await longestStall(store.accounts.create({ email: 'late@example.com' }));
    expect(result.status).toBe('rejected');
    const err = (result as PromiseRejectedResult).reason;
    expect((err as { code?: string }).code).toBe('SQLITE_BUSY');
    expect(isDatabaseUnavailable(err)).toBe(true);
    expect(performance.now() - started).toBeGreaterThanOrEqual(BUSY_WAIT_MS - 50); // it did wait
    expect(stallMs).toBeLessThan(500);
    // Reads need no write lock (WAL): they answer meanwhile.
    expect(await store.accounts.list()).toEqual([]);
    await lock.exited;
    await store.accounts.create({ email: 'late@example.com' });
  });
});
