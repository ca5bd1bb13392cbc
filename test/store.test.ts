/**
 * The persistence layer (src/store/): a real SQLite file in a fresh temporary folder per test, a
 * fake clock for everything time-dependent (no sleeps).
 *
 * The parallel tests (worker threads, a child process killed mid-request) load the compiled store
 * from dist/src/store/, which test/global-setup.ts rebuilds from src/ before every run.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  API_KEY_PATTERN,
  cycleAt,
  cycleByIndex,
  cycleStart,
  IDEMPOTENCY_TTL_MS,
  openStore,
  PLANS,
  resolvePlans,
  SCHEMA_VERSION,
  type Store,
  StoreError,
  type StoreOptions,
} from '../src/store/index.js';

const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const DIST_STORE_URL = pathToFileURL(join(REPO_ROOT, 'dist', 'src', 'store', 'index.js')).href;
const HOUR = 60 * 60 * 1000;
const DAY = 24 * HOUR;

interface FakeClock {
  (): Date;
  set(iso: string): void;
  advance(ms: number): void;
}

function fakeClock(iso: string): FakeClock {
  let t = Date.parse(iso);
  const clock = (() => new Date(t)) as FakeClock;
  clock.set = (next) => {
    t = Date.parse(next);
  };
  clock.advance = (ms) => {
    t += ms;
  };
  return clock;
}

let dir: string;
let dbPath: string;
let clock: FakeClock;
const opened: Array<{ close(): void }> = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'bgone-store-'));
  dbPath = join(dir, 'data', 'bgone.db'); // the data/ folder does not exist yet
  clock = fakeClock('2024-03-10T08:00:00.000Z');
});

afterEach(() => {
  for (const db of opened.splice(0)) db.close();
  rmSync(dir, { recursive: true, force: true });
});

function open(options: Partial<StoreOptions> = {}): Store {
  const store = openStore({ path: dbPath, clock, ...options });
  opened.push(store);
  return store;
}

/** A second, plain connection to the same file, for looking at it from outside the store. */
function rawConnection(readonly = false): Database.Database {
  const db = new Database(dbPath, { readonly });
  opened.push(db);
  return db;
}

function expectStoreError(fn: () => unknown, code: string): void {
  let thrown: unknown;
  try {
    fn();
  } catch (err) {
    thrown = err;
  }
  expect(thrown).toBeInstanceOf(StoreError);
  expect((thrown as StoreError).code).toBe(code);
}

/** Charges `n` requests to the account (reserve + commit). */
function spend(store: Store, accountId: number, n: number): void {
  for (let i = 0; i < n; i++) {
    const r = store.credits.reserve(accountId, { requestId: `req_spend${i}` });
    if (!r.ok || r.reservationId === null) throw new Error(`spend ${i}: ${JSON.stringify(r)}`);
    store.credits.commit(r.reservationId);
  }
}

function totalChanges(db: Database.Database): number {
  return (db.prepare('SELECT total_changes() AS n').get() as { n: number }).n;
}

function countOutcomes(results: Array<{ ok: boolean; reason?: string }>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of results) {
    const k = r.ok ? 'ok' : r.reason!;
    out[k] = (out[k] ?? 0) + 1;
  }
  return out;
}

describe('database', () => {
  it('creates the folder and sets WAL, synchronous FULL, foreign keys and busy timeout on every connection', () => {
    const store = open();
    expect(existsSync(dbPath)).toBe(true);
    expect(store.db.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(store.db.pragma('synchronous', { simple: true })).toBe(2); // FULL
    expect(store.db.pragma('foreign_keys', { simple: true })).toBe(1);
    expect(store.db.pragma('busy_timeout', { simple: true })).toBe(5000);
    // WAL is a property of the file: a plain connection sees it too.
    expect(rawConnection().pragma('journal_mode', { simple: true })).toBe('wal');
  });

  it('applies the migrations once and is idempotent on reopen (user_version)', () => {
    expect(SCHEMA_VERSION).toBeGreaterThanOrEqual(1);
    const first = open();
    expect(first.db.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
    const account = first.accounts.create({ email: 'keep@example.com' });
    first.close();

    for (let i = 0; i < 2; i++) {
      const again = open();
      expect(again.db.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
      expect(again.accounts.get(account.id)?.email).toBe('keep@example.com');
      again.close();
    }
    const tables = rawConnection()
      .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")
      .pluck()
      .all();
    expect(tables).toEqual(['accounts', 'api_keys', 'charges', 'cycle_usage', 'grants', 'idempotency_keys', 'reservations', 'sessions']);
    const columns = rawConnection().prepare("SELECT name FROM pragma_table_info('accounts')").pluck().all();
    expect(columns).toContain('password_hash');
  });

  it('refuses a database written by a newer schema', () => {
    open().close();
    const raw = rawConnection();
    raw.pragma(`user_version = ${SCHEMA_VERSION + 1}`);
    raw.close();
    expectStoreError(() => open(), 'schema_too_new');
  });
});

describe('plans', () => {
  it('has the plans of the spec and overridable rate limits', () => {
    expect(PLANS.free).toMatchObject({ credits: 100, rateLimitPerMinute: 10, paid: false });
    expect(PLANS.pro).toMatchObject({ credits: 10_000, rateLimitPerMinute: 60, paid: true });
    expect(PLANS.ultra).toMatchObject({ credits: 50_000, rateLimitPerMinute: 300, paid: true });
    expect(PLANS.mega).toMatchObject({ credits: 200_000, rateLimitPerMinute: 1000, paid: true });
    const plans = resolvePlans({ free: 3 });
    expect(plans.free.rateLimitPerMinute).toBe(3);
    expect(plans.pro.rateLimitPerMinute).toBe(60);
    expect(() => resolvePlans({ free: 0 })).toThrow(RangeError);
    expect(() => resolvePlans({ gold: 5 } as never)).toThrow(RangeError);

    const store = open({ rateLimits: { pro: 7 } });
    const account = store.accounts.create({ email: 'a@example.com', plan: 'pro' });
    expect(store.credits.balance(account.id).rateLimitPerMinute).toBe(7);
    const { key } = store.keys.create(account.id);
    expect(store.keys.authenticate(key)?.plan).toMatchObject({ name: 'pro', credits: 10_000, rateLimitPerMinute: 7 });
  });
});

describe('billing cycles', () => {
  it('start at the anchor plus k calendar months, same time of day (UTC)', () => {
    const anchor = new Date('2024-03-15T10:20:30.456Z');
    expect(cycleAt(anchor, anchor)).toEqual({ index: 0, start: anchor, end: new Date('2024-04-15T10:20:30.456Z') });
    expect(cycleAt(anchor, new Date('2024-04-15T10:20:30.455Z')).index).toBe(0);
    expect(cycleAt(anchor, new Date('2024-04-15T10:20:30.456Z')).index).toBe(1);
    expect(cycleAt(anchor, new Date('2024-05-01T00:00:00.000Z'))).toEqual({
      index: 1,
      start: new Date('2024-04-15T10:20:30.456Z'),
      end: new Date('2024-05-15T10:20:30.456Z'),
    });
    expect(cycleAt(anchor, new Date('2026-01-15T10:20:30.456Z')).start).toEqual(new Date('2026-01-15T10:20:30.456Z'));
    expect(cycleAt(anchor, new Date('2026-01-15T10:20:30.456Z')).index).toBe(22);
    // A clock stepping back before the sign-up: cycle 0.
    expect(cycleAt(anchor, new Date('2024-03-01T00:00:00.000Z')).index).toBe(0);
  });

  it('clamp a day missing from the month to its last day, relative to the anchor (Jan 31 → Feb 28/29 → Mar 31)', () => {
    const leap = new Date('2024-01-31T12:00:00.000Z');
    expect(cycleByIndex(leap, 0).end).toEqual(new Date('2024-02-29T12:00:00.000Z'));
    expect(cycleByIndex(leap, 1)).toEqual({ index: 1, start: new Date('2024-02-29T12:00:00.000Z'), end: new Date('2024-03-31T12:00:00.000Z') });
    expect(cycleStart(leap, 3)).toEqual(new Date('2024-04-30T12:00:00.000Z'));
    expect(cycleStart(leap, 13)).toEqual(new Date('2025-02-28T12:00:00.000Z'));
    expect(cycleAt(leap, new Date('2024-02-29T11:59:59.999Z')).index).toBe(0);
    expect(cycleAt(leap, new Date('2024-02-29T12:00:00.000Z')).index).toBe(1);

    const common = new Date('2023-01-31T23:30:00.000Z');
    expect(cycleStart(common, 1)).toEqual(new Date('2023-02-28T23:30:00.000Z'));
    expect(cycleStart(common, 2)).toEqual(new Date('2023-03-31T23:30:00.000Z'));
    expect(cycleAt(common, new Date('2023-03-01T00:00:00.000Z'))).toMatchObject({ index: 1, start: new Date('2023-02-28T23:30:00.000Z') });
    expect(cycleStart(new Date('2024-12-31T00:00:00.000Z'), 2)).toEqual(new Date('2025-02-28T00:00:00.000Z'));
  });

  it('always contain now, and consecutive cycles touch (seeded random anchors and times)', () => {
    let seed = 12345;
    const rand = () => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed / 2 ** 32;
    };
    const base = Date.parse('2020-01-01T00:00:00.000Z');
    for (let i = 0; i < 2000; i++) {
      const anchor = new Date(base + Math.floor(rand() * 5 * 365 * DAY));
      const now = new Date(anchor.getTime() + Math.floor(rand() * 4 * 365 * DAY));
      const c = cycleAt(anchor, now);
      expect(c.start.getTime()).toBeLessThanOrEqual(now.getTime());
      expect(now.getTime()).toBeLessThan(c.end.getTime());
      expect(c.start).toEqual(cycleStart(anchor, c.index));
      expect(c.end).toEqual(cycleStart(anchor, c.index + 1));
      expect(c.end.getTime() - c.start.getTime()).toBeGreaterThanOrEqual(28 * DAY);
      expect(c.end.getTime() - c.start.getTime()).toBeLessThanOrEqual(31 * DAY);
    }
  });
});

describe('accounts', () => {
  it('creates accounts with unique case-insensitive emails, anchored at sign-up', () => {
    const store = open();
    const a = store.accounts.create({ email: '  Alice@Example.COM ' });
    expect(a).toMatchObject({ email: 'Alice@Example.COM', plan: 'free', subscribedPlan: 'free', cancelAt: null, disabled: false });
    expect(a.createdAt).toEqual(clock());
    expect(store.accounts.get(a.id)).toEqual(a);
    expect(store.accounts.getByEmail('alice@example.com')?.id).toBe(a.id);
    expect(store.accounts.getByEmail('bob@example.com')).toBeNull();
    expect(store.accounts.get(999)).toBeNull();
    expectStoreError(() => store.accounts.create({ email: 'ALICE@example.com' }), 'email_taken');
    expectStoreError(() => store.accounts.create({ email: 'not an email' }), 'invalid_argument');
    expectStoreError(() => store.accounts.create({ email: 'x@example.com', plan: 'gold' as never }), 'invalid_argument');
    const b = store.accounts.create({ email: 'bob@example.com', plan: 'ultra' });
    expect(store.accounts.list().map((x) => [x.email, x.plan])).toEqual([
      ['Alice@Example.COM', 'free'],
      ['bob@example.com', 'ultra'],
    ]);
    expectStoreError(() => store.accounts.setPlan(999, 'pro'), 'not_found');
    expect(b.id).not.toBe(a.id);
  });

  it('setPlan takes effect now, for the current cycle', () => {
    const store = open();
    const a = store.accounts.create({ email: 'a@example.com' });
    spend(store, a.id, 100);
    expect(store.credits.reserve(a.id, { requestId: 'req_x' })).toMatchObject({ ok: false, reason: 'payment_required' });
    store.accounts.setPlan(a.id, 'pro');
    expect(store.credits.balance(a.id)).toMatchObject({ plan: 'pro', allowance: 10_000, used: 100, remaining: 9_900, rateLimitPerMinute: 60 });
    store.accounts.setPlan(a.id, 'free');
    expect(store.credits.balance(a.id)).toMatchObject({ plan: 'free', allowance: 100, used: 100, remaining: 0 });
  });

  it('cancel keeps a paid plan until the end of the cycle, then the account is on Free', () => {
    const store = open();
    const a = store.accounts.create({ email: 'a@example.com', plan: 'pro' }); // anchor 2024-03-10T08:00Z
    clock.set('2024-04-20T00:00:00.000Z'); // cycle 1: Apr 10 08:00 → May 10 08:00
    const cancelled = store.accounts.cancel(a.id);
    expect(cancelled).toMatchObject({ plan: 'pro', subscribedPlan: 'pro', cancelAt: new Date('2024-05-10T08:00:00.000Z') });
    expect(store.accounts.cancel(a.id).cancelAt).toEqual(cancelled.cancelAt); // idempotent
    expect(store.credits.balance(a.id)).toMatchObject({ plan: 'pro', allowance: 10_000 });

    clock.set('2024-05-10T07:59:59.999Z');
    expect(store.accounts.get(a.id)?.plan).toBe('pro');
    expect(store.accounts.effectivePlan(a.id)).toBe('pro');
    clock.set('2024-05-10T08:00:00.000Z');
    expect(store.accounts.get(a.id)).toMatchObject({ plan: 'free', subscribedPlan: 'pro' });
    expect(store.accounts.effectivePlan(a.id, new Date('2024-05-01T00:00:00.000Z'))).toBe('pro');
    expect(store.credits.balance(a.id)).toMatchObject({ plan: 'free', allowance: 100, used: 0, cycleIndex: 2, rateLimitPerMinute: 10 });
    const { key } = store.keys.create(a.id);
    expect(store.keys.authenticate(key)?.plan.name).toBe('free');

    // Too late to resume; nothing left to cancel; subscribing again works.
    expectStoreError(() => store.accounts.resume(a.id), 'invalid_state');
    expectStoreError(() => store.accounts.cancel(a.id), 'invalid_state');
    expect(store.accounts.setPlan(a.id, 'pro')).toMatchObject({ plan: 'pro', cancelAt: null });
  });

  it('resume before the cycle end keeps the paid plan', () => {
    const store = open();
    const a = store.accounts.create({ email: 'a@example.com', plan: 'mega' });
    store.accounts.cancel(a.id);
    clock.advance(20 * DAY);
    expect(store.accounts.resume(a.id)).toMatchObject({ plan: 'mega', cancelAt: null });
    expect(store.accounts.resume(a.id)).toMatchObject({ plan: 'mega', cancelAt: null }); // nothing pending: no-op
    clock.advance(100 * DAY);
    expect(store.accounts.get(a.id)?.plan).toBe('mega');
    expect(store.credits.balance(a.id).allowance).toBe(200_000);
  });

  it('cannot cancel the free plan', () => {
    const store = open();
    const a = store.accounts.create({ email: 'a@example.com' });
    expectStoreError(() => store.accounts.cancel(a.id), 'invalid_state');
    expectStoreError(() => store.accounts.cancel(12345), 'not_found');
  });

  it('a disabled account still authenticates (for a 403) but cannot reserve credits', () => {
    const store = open();
    const a = store.accounts.create({ email: 'a@example.com' });
    const { key } = store.keys.create(a.id);
    const disabled = store.accounts.disable(a.id);
    expect(disabled).toMatchObject({ disabled: true, disabledAt: clock() });
    expect(store.keys.authenticate(key)?.account.disabled).toBe(true);
    expect(store.credits.reserve(a.id, { requestId: 'req_1' })).toEqual({ ok: false, reason: 'account_disabled' });
    expect(store.credits.balance(a.id).reserved).toBe(0);
    expect(store.accounts.enable(a.id).disabled).toBe(false);
    expect(store.credits.reserve(a.id, { requestId: 'req_2' })).toMatchObject({ ok: true });
  });
});

describe('API keys', () => {
  it('are created once, listed without the secret, authenticated and revoked', () => {
    const store = open();
    const a = store.accounts.create({ email: 'a@example.com' });
    const b = store.accounts.create({ email: 'b@example.com' });
    const { key, info } = store.keys.create(a.id);
    expect(key).toMatch(/^rb-sk_[A-Za-z0-9_-]{43}$/);
    expect(key).toMatch(API_KEY_PATTERN);
    expect(info).toMatchObject({ accountId: a.id, prefix: key.slice(0, 12), last4: key.slice(-4), lastUsedAt: null, revokedAt: null, revoked: false });
    expect(JSON.stringify(store.keys.list(a.id))).not.toContain(key.slice(12, -4));
    expect(store.keys.create(a.id).key).not.toBe(key);
    expect(store.keys.list(a.id)).toHaveLength(2);
    expect(store.keys.list(b.id)).toHaveLength(0);
    expectStoreError(() => store.keys.create(999), 'not_found');

    clock.advance(1000);
    const auth = store.keys.authenticate(key);
    expect(auth).toMatchObject({ keyId: info.id, account: { id: a.id, email: 'a@example.com', plan: 'free' }, plan: { name: 'free', rateLimitPerMinute: 10 } });
    expect(store.keys.get(info.id)?.lastUsedAt).toEqual(clock());

    // Scoped revoke: not another account's key.
    expect(store.keys.revoke(info.prefix, { accountId: b.id })).toBeNull();
    expect(store.keys.authenticate(key)).not.toBeNull();
    const revoked = store.keys.revoke(info.prefix);
    expect(revoked).toMatchObject({ id: info.id, revoked: true, revokedAt: clock() });
    expect(store.keys.authenticate(key)).toBeNull();
    clock.advance(1000);
    expect(store.keys.revoke(info.id)?.revokedAt).toEqual(revoked!.revokedAt); // idempotent
    expect(store.keys.revoke('rb-sk_nope00')).toBeNull();
    expect(store.keys.revoke(424242)).toBeNull();

    const other = store.keys.create(b.id);
    expect(store.keys.revoke(other.key, { accountId: b.id })?.id).toBe(other.info.id); // by the full key
    expect(store.keys.authenticate(other.key)).toBeNull();
  });

  it('writes last_used_at at most once per resolution', () => {
    const store = open(); // default resolution: 60 s
    const a = store.accounts.create({ email: 'a@example.com' });
    const { key, info } = store.keys.create(a.id);
    const t0 = clock();
    store.keys.authenticate(key);
    const before = totalChanges(store.db);
    clock.advance(59_999);
    store.keys.authenticate(key);
    expect(totalChanges(store.db)).toBe(before);
    expect(store.keys.get(info.id)?.lastUsedAt).toEqual(t0);
    clock.advance(1);
    store.keys.authenticate(key);
    expect(store.keys.get(info.id)?.lastUsedAt).toEqual(clock());
  });

  it('reject a malformed key without touching the database', () => {
    const store = open();
    const a = store.accounts.create({ email: 'a@example.com' });
    const { key } = store.keys.create(a.id);
    const malformed: unknown[] = [
      undefined,
      null,
      42,
      '',
      'Bearer ' + key,
      key + ' ',
      'rb-sk_',
      'rb-sk_tooShort',
      'rb-sk_' + 'a'.repeat(129),
      'rb-sk_' + 'a'.repeat(40) + '!',
      'RB-SK_' + key.slice(6),
      'sk_' + key.slice(6),
    ];
    store.close();
    // Any statement on a closed connection throws: a well-formed key proves it.
    expect(() => store.keys.authenticate('rb-sk_' + 'A'.repeat(43))).toThrow(/not open/);
    for (const k of malformed) expect(store.keys.authenticate(k)).toBeNull();
  });

  it('an unknown or revoked key costs a read and no write', () => {
    const store = open();
    const a = store.accounts.create({ email: 'a@example.com' });
    const { key } = store.keys.create(a.id);
    const revoked = store.keys.create(a.id);
    store.keys.revoke(revoked.info.id);

    const observer = rawConnection(true);
    const dataVersion = () => observer.pragma('data_version', { simple: true }) as number;
    const walSize = () => statSync(dbPath + '-wal').size;
    const snapshot = () => ({ dataVersion: dataVersion(), walSize: walSize(), changes: totalChanges(store.db) });

    const before = snapshot();
    expect(store.keys.authenticate('rb-sk_' + 'A'.repeat(43))).toBeNull(); // unknown
    expect(store.keys.authenticate(revoked.key)).toBeNull();
    expect(store.keys.authenticate(key.slice(0, -1) + (key.endsWith('A') ? 'B' : 'A'))).toBeNull(); // one character off
    expect(snapshot()).toEqual(before);

    // Control: the measurement does see a write (a valid key's first use records last_used_at).
    expect(store.keys.authenticate(key)).not.toBeNull();
    const after = snapshot();
    expect(after.dataVersion).not.toBe(before.dataVersion);
    expect(after.walSize).toBeGreaterThan(before.walSize);
    expect(after.changes).toBe(before.changes + 1);
  });

  it('the database files never contain a key secret, only its hash', () => {
    const store = open();
    const a = store.accounts.create({ email: 'a@example.com' });
    const keys = [store.keys.create(a.id), store.keys.create(a.id), store.keys.create(a.id)];
    for (const k of keys) store.keys.authenticate(k.key);
    store.keys.revoke(keys[1]!.info.id);

    const contents = () => Buffer.concat(readdirSync(join(dir, 'data')).map((f) => readFileSync(join(dir, 'data', f))));
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
    expect(existsSync(dbPath + '-wal')).toBe(true);
    check(contents()); // .db + -wal + -shm while open
    store.close(); // checkpoints the WAL into the .db
    check(contents());
  });
});

describe('credits', () => {
  it('reserve holds a credit, commit charges exactly one, release gives it back', () => {
    const store = open();
    const a = store.accounts.create({ email: 'a@example.com' });
    const { info } = store.keys.create(a.id);

    const r = store.credits.reserve(a.id, { requestId: 'req_1', keyId: info.id });
    expect(r).toEqual({ ok: true, reservationId: expect.any(Number), alreadyCharged: false, remainingAfterCharge: 99 });
    expect(store.credits.balance(a.id)).toMatchObject({ allowance: 100, used: 0, reserved: 1, remaining: 99 });
    const c = store.credits.commit((r as { reservationId: number }).reservationId);
    expect(c).toEqual({ chargeId: expect.any(Number), cycleIndex: 0, remaining: 99 });
    expect(store.credits.balance(a.id)).toMatchObject({ used: 1, reserved: 0, remaining: 99 });
    expectStoreError(() => store.credits.commit((r as { reservationId: number }).reservationId), 'not_found'); // never twice
    expect(store.credits.balance(a.id).used).toBe(1);
    const ledger = rawConnection().prepare('SELECT account_id, api_key_id, request_id, cycle_index, charged_at FROM charges').all();
    expect(ledger).toEqual([{ account_id: a.id, api_key_id: info.id, request_id: 'req_1', cycle_index: 0, charged_at: clock().getTime() }]);

    const r2 = store.credits.reserve(a.id, { requestId: 'req_2' }) as { reservationId: number };
    expect(store.credits.balance(a.id)).toMatchObject({ used: 1, reserved: 1, remaining: 98 });
    expect(store.credits.release(r2.reservationId)).toBe(true);
    expect(store.credits.release(r2.reservationId)).toBe(false);
    expectStoreError(() => store.credits.commit(r2.reservationId), 'not_found'); // a released request is never charged
    expect(store.credits.balance(a.id)).toMatchObject({ used: 1, reserved: 0, remaining: 99 });
    expect(store.credits.release(null)).toBe(false);
    expect(store.credits.commit(null)).toBeNull();

    expectStoreError(() => store.credits.reserve(999, { requestId: 'req_3' }), 'not_found');
    expectStoreError(() => store.credits.reserve(a.id, { requestId: '' }), 'invalid_argument');
    expectStoreError(() => store.credits.reserve(a.id, { requestId: 'req_4', idempotencyKey: 'k' }), 'invalid_argument'); // no imageHash
  });

  it('a balance of 5 admits exactly 5 of 50 reservations', () => {
    const store = open();
    const a = store.accounts.create({ email: 'a@example.com' });
    spend(store, a.id, 95);
    const results = Array.from({ length: 50 }, (_, i) => store.credits.reserve(a.id, { requestId: `req_${i}` }));
    expect(countOutcomes(results)).toEqual({ ok: 5, payment_required: 45 });
    expect(results.slice(0, 5).map((r) => (r as { remainingAfterCharge: number }).remainingAfterCharge)).toEqual([4, 3, 2, 1, 0]);
    expect(results[5]).toEqual({ ok: false, reason: 'payment_required', resetsAt: new Date('2024-04-10T08:00:00.000Z') });
    for (const r of results) if (r.ok) store.credits.commit(r.reservationId!);
    expect(store.credits.balance(a.id)).toMatchObject({ used: 100, reserved: 0, remaining: 0 });
  });

  it('two Store instances (two connections) on one file interleaving never oversell', () => {
    const s1 = open();
    const s2 = open();
    const a = s1.accounts.create({ email: 'a@example.com' });
    s2.credits.grant(a.id, 5);
    spend(s1, a.id, 100); // the plan's 100 are gone: 5 granted credits left
    const results = Array.from({ length: 50 }, (_, i) => (i % 2 === 0 ? s1 : s2).credits.reserve(a.id, { requestId: `req_${i}` }));
    expect(countOutcomes(results)).toEqual({ ok: 5, payment_required: 45 });
    // Commits and releases from either connection.
    const held = results.filter((r) => r.ok).map((r) => r.reservationId!);
    s2.credits.commit(held[0]!);
    s1.credits.commit(held[1]!);
    s1.credits.release(held[2]!);
    expect(s2.credits.balance(a.id)).toMatchObject({ allowance: 105, used: 102, reserved: 2, remaining: 1 });
    expect(s1.credits.reserve(a.id, { requestId: 'req_again' }).ok).toBe(true);
    expect(s2.credits.reserve(a.id, { requestId: 'req_over' })).toMatchObject({ ok: false, reason: 'payment_required' });
  });

  it('truly parallel connections (worker threads) charge exactly the balance', async () => {
    const store = open();
    const a = store.accounts.create({ email: 'a@example.com' });
    const workers = 4;
    const attempts = 60; // 240 attempts for 100 credits
    const go = new SharedArrayBuffer(4);
    const code = `
      const { workerData, parentPort } = require('node:worker_threads');
      (async () => {
        const { openStore } = await import(workerData.url);
        const store = openStore({ path: workerData.path, clock: () => new Date(workerData.now) });
        const go = new Int32Array(workerData.go);
        parentPort.postMessage('ready');
        Atomics.wait(go, 0, 0);
        const outcomes = [];
        for (let i = 0; i < workerData.attempts; i++) {
          const r = store.credits.reserve(workerData.accountId, { requestId: 'req_w' + workerData.n + '_' + i });
          if (r.ok) store.credits.commit(r.reservationId);
          outcomes.push(r.ok ? 'ok' : r.reason);
        }
        store.close();
        parentPort.postMessage(outcomes);
      })();
    `;
    const ready: Array<Promise<void>> = [];
    const done: Array<Promise<string[]>> = [];
    for (let n = 0; n < workers; n++) {
      const w = new Worker(code, {
        eval: true,
        workerData: { url: DIST_STORE_URL, path: dbPath, now: clock().getTime(), go, attempts, accountId: a.id, n },
      });
      let onReady!: () => void;
      ready.push(new Promise<void>((r) => (onReady = r)));
      done.push(
        new Promise<string[]>((resolveDone, reject) => {
          w.on('message', (m) => (m === 'ready' ? onReady() : resolveDone(m as string[])));
          w.on('error', reject);
          w.on('exit', (codeNum) => codeNum !== 0 && reject(new Error(`worker exited with ${codeNum}`)));
        }),
      );
    }
    await Promise.all(ready);
    const flag = new Int32Array(go);
    Atomics.store(flag, 0, 1);
    Atomics.notify(flag, 0);
    const outcomes = (await Promise.all(done)).flat();
    const counts: Record<string, number> = {};
    for (const o of outcomes) counts[o] = (counts[o] ?? 0) + 1;
    expect(counts).toEqual({ ok: 100, payment_required: 140 });
    expect(store.credits.balance(a.id)).toMatchObject({ used: 100, reserved: 0, remaining: 0 });
    expect(rawConnection().prepare('SELECT count(*) FROM charges').pluck().get()).toBe(100);
  });

  it('recoverAfterCrash releases the reservations of a previous process, not its own', () => {
    const before = open();
    const a = before.accounts.create({ email: 'a@example.com' });
    spend(before, a.id, 10);
    for (let i = 0; i < 3; i++) expect(before.credits.reserve(a.id, { requestId: `req_${i}` }).ok).toBe(true);
    before.close(); // "crash": no commit, no release

    const after = open();
    const own = after.credits.reserve(a.id, { requestId: 'req_new' }) as { reservationId: number };
    expect(after.credits.balance(a.id)).toMatchObject({ used: 10, reserved: 4, remaining: 86 });
    expect(after.credits.recoverAfterCrash()).toBe(3);
    expect(after.credits.balance(a.id)).toMatchObject({ used: 10, reserved: 1, remaining: 89 });
    expect(after.credits.recoverAfterCrash()).toBe(0);
    after.credits.commit(own.reservationId);
    expect(after.credits.balance(a.id)).toMatchObject({ used: 11, reserved: 0, remaining: 89 });
  });

  it('a process killed between reserve and commit leaves no charge', () => {
    const store = open();
    const a = store.accounts.create({ email: 'a@example.com' });
    const code = `
      const { openStore } = await import(${JSON.stringify(DIST_STORE_URL)});
      const store = openStore({ path: ${JSON.stringify(dbPath)}, clock: () => new Date(${clock().getTime()}) });
      for (let i = 0; i < 2; i++) store.credits.reserve(${a.id}, { requestId: 'req_child' + i });
      process.kill(process.pid, 'SIGKILL');
    `;
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8' });
    expect(child.signal).toBe('SIGKILL');
    expect(store.credits.balance(a.id)).toMatchObject({ used: 0, reserved: 2 });
    expect(store.credits.recoverAfterCrash()).toBe(2);
    expect(store.credits.balance(a.id)).toMatchObject({ used: 0, reserved: 0, remaining: 100 });
  });

  it('credits reset at each cycle start; nothing carries over (Jan 31 anchor → Feb 29)', () => {
    clock.set('2024-01-31T12:00:00.000Z');
    const store = open();
    const a = store.accounts.create({ email: 'a@example.com' });
    spend(store, a.id, 100);
    expect(store.credits.reserve(a.id, { requestId: 'req_x' })).toEqual({
      ok: false,
      reason: 'payment_required',
      resetsAt: new Date('2024-02-29T12:00:00.000Z'),
    });
    clock.set('2024-02-29T11:59:59.999Z');
    expect(store.credits.balance(a.id)).toMatchObject({ cycleIndex: 0, used: 100, remaining: 0 });
    clock.set('2024-02-29T12:00:00.000Z');
    expect(store.credits.balance(a.id)).toEqual({
      plan: 'free',
      allowance: 100,
      granted: 0,
      used: 0,
      reserved: 0,
      remaining: 100,
      cycleIndex: 1,
      cycleStart: new Date('2024-02-29T12:00:00.000Z'),
      cycleEnd: new Date('2024-03-31T12:00:00.000Z'),
      rateLimitPerMinute: 10,
    });
    spend(store, a.id, 30);
    clock.set('2024-03-31T12:00:00.000Z'); // 70 unused: not carried over
    expect(store.credits.balance(a.id)).toMatchObject({ cycleIndex: 2, allowance: 100, used: 0, remaining: 100, cycleEnd: new Date('2024-04-30T12:00:00.000Z') });
  });

  it('a request admitted before the cycle end is charged to that cycle even if it completes after', () => {
    const store = open();
    const a = store.accounts.create({ email: 'a@example.com' });
    spend(store, a.id, 99);
    clock.set('2024-04-10T07:59:59.000Z');
    const r = store.credits.reserve(a.id, { requestId: 'req_late' }) as { reservationId: number };
    clock.set('2024-04-10T08:00:01.000Z'); // cycle 1 now
    expect(store.credits.balance(a.id)).toMatchObject({ cycleIndex: 1, used: 0, reserved: 0, remaining: 100 });
    expect(store.credits.commit(r.reservationId)).toMatchObject({ cycleIndex: 0, remaining: 100 });
    expect(store.usage.byDay(a.id, 0).reduce((s, d) => s + d.requests, 0)).toBe(100);
    expect(store.usage.byDay(a.id, 0).at(-1)).toEqual({ day: '2024-04-10', requests: 1 });
  });

  it('grant adds credits to the current cycle only', () => {
    const store = open();
    const a = store.accounts.create({ email: 'a@example.com' });
    spend(store, a.id, 100);
    expect(store.credits.grant(a.id, 3, 'support ticket 12')).toMatchObject({ allowance: 103, granted: 3, used: 100, remaining: 3 });
    expect(store.credits.grant(a.id, 2)).toMatchObject({ allowance: 105, granted: 5, remaining: 5 });
    const results = Array.from({ length: 8 }, (_, i) => store.credits.reserve(a.id, { requestId: `req_${i}` }));
    expect(countOutcomes(results)).toEqual({ ok: 5, payment_required: 3 });
    clock.set('2024-04-10T08:00:00.000Z');
    expect(store.credits.balance(a.id)).toMatchObject({ allowance: 100, granted: 0, used: 0 });
    expectStoreError(() => store.credits.grant(a.id, 0), 'invalid_argument');
    expectStoreError(() => store.credits.grant(a.id, 1.5), 'invalid_argument');
    expectStoreError(() => store.credits.grant(999, 1), 'not_found');
    expect(rawConnection().prepare('SELECT credits, note FROM grants ORDER BY id').all()).toEqual([
      { credits: 3, note: 'support ticket 12' },
      { credits: 2, note: null },
    ]);
  });

  describe('Idempotency-Key', () => {
    it('a retry with the same key and image is charged once', () => {
      const store = open();
      const a = store.accounts.create({ email: 'a@example.com' });
      const first = store.credits.reserve(a.id, { requestId: 'req_1', idempotencyKey: 'order-42', imageHash: 'h1' });
      expect(first).toMatchObject({ ok: true, alreadyCharged: false });
      store.credits.commit(first.ok ? first.reservationId : null);
      clock.advance(HOUR);
      const retry = store.credits.reserve(a.id, { requestId: 'req_2', idempotencyKey: 'order-42', imageHash: 'h1' });
      expect(retry).toEqual({ ok: true, reservationId: null, alreadyCharged: true, remainingAfterCharge: 99 });
      expect(store.credits.commit(retry.ok ? retry.reservationId : 0)).toBeNull();
      expect(store.credits.balance(a.id)).toMatchObject({ used: 1, reserved: 0 });

      // A different image under the same key is a conflict.
      expect(store.credits.reserve(a.id, { requestId: 'req_3', idempotencyKey: 'order-42', imageHash: 'h2' })).toEqual({
        ok: false,
        reason: 'idempotency_conflict',
      });
      // The key is scoped to the account.
      const b = store.accounts.create({ email: 'b@example.com' });
      expect(store.credits.reserve(b.id, { requestId: 'req_4', idempotencyKey: 'order-42', imageHash: 'h2' })).toMatchObject({ ok: true, alreadyCharged: false });
    });

    it('a key in flight is a conflict; a failed (released) request leaves no record', () => {
      const store = open();
      const a = store.accounts.create({ email: 'a@example.com' });
      const r = store.credits.reserve(a.id, { requestId: 'req_1', idempotencyKey: 'k', imageHash: 'h' }) as { reservationId: number };
      expect(store.credits.reserve(a.id, { requestId: 'req_2', idempotencyKey: 'k', imageHash: 'h' })).toEqual({ ok: false, reason: 'idempotency_conflict' });
      store.credits.release(r.reservationId);
      const again = store.credits.reserve(a.id, { requestId: 'req_3', idempotencyKey: 'k', imageHash: 'h' });
      expect(again).toMatchObject({ ok: true, alreadyCharged: false, reservationId: expect.any(Number) });
      store.credits.commit((again as { reservationId: number }).reservationId);
      expect(store.credits.balance(a.id).used).toBe(1);
    });

    it('an already-charged retry is served even with no credits left', () => {
      const store = open();
      const a = store.accounts.create({ email: 'a@example.com' });
      spend(store, a.id, 99);
      const r = store.credits.reserve(a.id, { requestId: 'req_1', idempotencyKey: 'k', imageHash: 'h' }) as { reservationId: number };
      store.credits.commit(r.reservationId);
      expect(store.credits.reserve(a.id, { requestId: 'req_2' })).toMatchObject({ ok: false, reason: 'payment_required' });
      expect(store.credits.reserve(a.id, { requestId: 'req_3', idempotencyKey: 'k', imageHash: 'h' })).toMatchObject({ ok: true, alreadyCharged: true, remainingAfterCharge: 0 });
    });

    it('records expire after 24 h and are purged lazily', () => {
      const store = open();
      const a = store.accounts.create({ email: 'a@example.com' });
      const r = store.credits.reserve(a.id, { requestId: 'req_1', idempotencyKey: 'k', imageHash: 'h' }) as { reservationId: number };
      store.credits.commit(r.reservationId);
      const count = () => rawConnection().prepare('SELECT count(*) FROM idempotency_keys').pluck().get();
      expect(count()).toBe(1);
      clock.advance(IDEMPOTENCY_TTL_MS - 1);
      expect(store.credits.reserve(a.id, { requestId: 'req_2', idempotencyKey: 'k', imageHash: 'h' })).toMatchObject({ alreadyCharged: true });
      clock.advance(1);
      const late = store.credits.reserve(a.id, { requestId: 'req_3', idempotencyKey: 'k', imageHash: 'other' });
      expect(late).toMatchObject({ ok: true, alreadyCharged: false }); // expired (not purged yet): a new request
      store.credits.commit((late as { reservationId: number }).reservationId);
      expect(store.credits.balance(a.id).used).toBe(2);
      expect(rawConnection().prepare('SELECT image_hash FROM idempotency_keys').pluck().all()).toEqual(['other']); // replaced
      clock.advance(IDEMPOTENCY_TTL_MS + HOUR);
      store.credits.reserve(a.id, { requestId: 'req_4' }); // any reserve purges now and then
      expect(count()).toBe(0);
    });
  });
});

describe('usage', () => {
  it('reports requests per UTC day of a cycle and a global summary', () => {
    const store = open(); // anchor 2024-03-10T08:00Z: cycle 0 touches Mar 10 … Apr 10
    const a = store.accounts.create({ email: 'a@example.com' });
    const b = store.accounts.create({ email: 'b@example.com', plan: 'pro' });
    store.keys.create(a.id);
    const kb = store.keys.create(b.id);
    store.keys.revoke(kb.info.id);
    spend(store, a.id, 2); // Mar 10
    clock.set('2024-03-12T23:59:59.999Z');
    spend(store, a.id, 3);
    clock.set('2024-03-13T00:00:00.000Z');
    spend(store, a.id, 1);
    spend(store, b.id, 4);
    store.credits.reserve(b.id, { requestId: 'req_in_flight' });

    const days = store.usage.byDay(a.id);
    expect(days).toHaveLength(32); // Mar 10 … Apr 10 inclusive
    expect(days[0]).toEqual({ day: '2024-03-10', requests: 2 });
    expect(days.slice(1, 4)).toEqual([
      { day: '2024-03-11', requests: 0 },
      { day: '2024-03-12', requests: 3 },
      { day: '2024-03-13', requests: 1 },
    ]);
    expect(days.at(-1)).toEqual({ day: '2024-04-10', requests: 0 });
    expect(days.reduce((s, d) => s + d.requests, 0)).toBe(store.credits.balance(a.id).used);
    expect(store.usage.byDay(a.id, 1).every((d) => d.requests === 0)).toBe(true);

    clock.set('2024-03-20T00:00:00.000Z');
    store.accounts.disable(a.id);
    const summary = store.usage.summary();
    expect(summary).toMatchObject({
      at: clock(),
      accounts: { total: 2, disabled: 1, byPlan: { free: 1, pro: 1, ultra: 0, mega: 0 } },
      keys: { active: 1, revoked: 1 },
      charged: { last24h: 0, last30d: 10, total: 10 },
      inFlight: 1,
    });
    expect(summary.perAccount).toEqual([
      expect.objectContaining({ accountId: a.id, email: 'a@example.com', disabled: true, plan: 'free', used: 6, remaining: 94 }),
      expect.objectContaining({ accountId: b.id, plan: 'pro', used: 4, reserved: 1, remaining: 9_995 }),
    ]);
  });
});
