/**
 * For the store suites (test/store/): a fresh temporary folder per test holding the database path
 * (inside a data/ folder that does not exist yet), a fake clock for everything time-dependent (no
 * sleeps), and the stores a test opened, closed after it.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterEach, beforeEach, expect } from 'vitest';
import { openStore, type Store, StoreError, type StoreErrorCode, type StoreOptions } from '../../src/store/index.js';
import { openPostgresStore, type PostgresStoreOptions } from '../../src/store/postgres/postgres-store.js';

/** The implementations the store suites run against. */
export const STORE_KINDS = ['sqlite', 'postgres'] as const;
export type StoreKind = (typeof STORE_KINDS)[number];

/** The PostgreSQL server of the test run (test/global-setup.ts starts one, or BGONE_TEST_DATABASE_URL names one). */
export function testDatabaseUrl(): string {
  const url = process.env.BGONE_TEST_DATABASE_URL;
  if (!url) throw new Error('BGONE_TEST_DATABASE_URL is not set: the PostgreSQL store suites need a server');
  return url;
}

/** The URL of a database `name` on the same server as `serverUrl`. */
export function databaseUrl(serverUrl: string, name: string): string {
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

/** Creates a fresh, uniquely named database on the test server; returns its URL and a function that drops it. */
export async function createTestDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const server = testDatabaseUrl();
  const name = `bgone_test_${randomBytes(8).toString('hex')}`;
  const admin = new pg.Client({ connectionString: server });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  return {
    url: databaseUrl(server, name),
    async drop() {
      const c = new pg.Client({ connectionString: server });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}

export interface FakeClock {
  (): Date;
  set(iso: string): void;
  advance(ms: number): void;
}

export function fakeClock(iso: string): FakeClock {
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

export interface TempStores {
  /** The test's temporary folder. */
  readonly dir: string;
  /** `<dir>/data/bgone.db` (SQLite). */
  readonly dbPath: string;
  /** The test's own database (PostgreSQL), created before and dropped after the test; '' on SQLite. */
  readonly dbUrl: string;
  /** Starts at 2024-03-10T08:00:00Z in every test. */
  readonly clock: FakeClock;
  /**
   * Opens a store on dbPath (SQLite) or dbUrl (PostgreSQL, with autoRecover off unless given) and
   * the fake clock (options override), closed after the test.
   */
  open(options?: Partial<StoreOptions> & Partial<PostgresStoreOptions>): Promise<Store>;
  /** Anything else to close after the test (e.g. a raw connection). */
  closeAfter(thing: { close(): unknown }): void;
}

/** Registers the per-test hooks; the returned object's fields are valid inside tests. */
export function useTempStores(kind: StoreKind = 'sqlite'): TempStores {
  let dir = '';
  let clock = fakeClock('2024-03-10T08:00:00.000Z');
  let database: { url: string; drop(): Promise<void> } | undefined;
  const opened: Array<{ close(): unknown }> = [];

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'bgone-store-'));
    clock = fakeClock('2024-03-10T08:00:00.000Z');
    if (kind === 'postgres') database = await createTestDatabase();
  });

  afterEach(async () => {
    for (const thing of opened.splice(0)) await thing.close();
    rmSync(dir, { recursive: true, force: true });
    await database?.drop();
    database = undefined;
  });

  return {
    get dir() {
      return dir;
    },
    get dbPath() {
      return join(dir, 'data', 'bgone.db');
    },
    get dbUrl() {
      return database?.url ?? '';
    },
    get clock() {
      return clock;
    },
    async open(options = {}) {
      const store =
        kind === 'postgres'
          ? await openPostgresStore({ url: database!.url, clock, autoRecover: false, ...options })
          : await openStore({ path: join(dir, 'data', 'bgone.db'), clock, ...options });
      opened.push(store);
      return store;
    },
    closeAfter(thing) {
      opened.push(thing);
    },
  };
}

export async function expectStoreError(promise: Promise<unknown>, code: StoreErrorCode): Promise<void> {
  const thrown = await promise.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(thrown).toBeInstanceOf(StoreError);
  expect((thrown as StoreError).code).toBe(code);
}

/** Charges `n` requests to the account (reserve + commit). */
export async function spend(store: Store, accountId: number, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const r = await store.credits.reserve(accountId, { requestId: `req_spend${i}` });
    if (!r.ok || r.reservationId === null) throw new Error(`spend ${i}: ${JSON.stringify(r)}`);
    await store.credits.commit(r.reservationId);
  }
}

/** How many results were admitted ('ok') and refused, by reason. */
export function countOutcomes(results: ReadonlyArray<{ ok: boolean; reason?: string }>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of results) {
    const k = r.ok ? 'ok' : r.reason!;
    out[k] = (out[k] ?? 0) + 1;
  }
  return out;
}
