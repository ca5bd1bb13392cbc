/**
 * A PostgreSQL connection lost while the store holds it (the database restarting, a network cut):
 * the work on it fails with an error, the process stays up, and the pool serves again once the
 * database is back. The pool's own 'error' listener covers idle connections only; pg emits 'error'
 * on a checked-out client whose socket ends, and with no listener that is an uncaught exception
 * that ends the process (a node of several-nodes.test.ts was seen dying so under load).
 * The database is reached through a TCP proxy on loopback that the tests cut and restore.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createPool, inTransaction, withClient } from '../../src/store/postgres/pool.js';
import { freshDatabase, testDatabaseUrl } from '../helpers/postgres.js';
import { TcpProxy } from '../helpers/tcp-proxy.js';

let database: { url: string; drop(): Promise<void> };
let proxy: TcpProxy;
let proxiedUrl: string;
const uncaught: unknown[] = [];
const recordUncaught = (err: unknown) => uncaught.push(err);

beforeAll(async () => {
  database = await freshDatabase(await testDatabaseUrl());
  const direct = new URL(database.url);
  proxy = await TcpProxy.start(direct.hostname, Number(direct.port));
  const proxied = new URL(database.url);
  proxied.hostname = '127.0.0.1';
  proxied.port = String(proxy.port);
  proxiedUrl = proxied.toString();
  process.on('uncaughtException', recordUncaught);
});

afterAll(async () => {
  process.off('uncaughtException', recordUncaught);
  await proxy?.close();
  await database?.drop();
});

afterEach(() => {
  proxy.restore();
  uncaught.length = 0;
});

function openPool() {
  return createPool({ url: proxiedUrl, poolSize: 2, statementTimeoutMs: 5000, connectionTimeoutMs: 2000 });
}

/** Runs `hold` with a connection checked out, cuts the database off while it waits, then lets it go on. */
async function cutWhileHeld<T>(start: (hold: () => Promise<void>) => Promise<T>): Promise<PromiseSettledResult<T>> {
  let held!: () => void;
  const reached = new Promise<void>((resolve) => (held = resolve));
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const work = start(async () => {
    held();
    await gate;
  });
  await reached;
  proxy.cut();
  // The socket's end reaches the client while no query of it is running.
  await sleep(200);
  release();
  const [outcome] = await Promise.allSettled([work]);
  return outcome;
}

/** The two ways the store holds a connection, each waiting at `hold()` with it checked out. */
const HOLDERS: Array<[string, (pool: pg.Pool, hold: () => Promise<void>) => Promise<number>]> = [
  [
    'inside a transaction (inTransaction)',
    (pool, hold) =>
      inTransaction(pool, async (client) => {
        await client.query('SELECT 1');
        await hold();
        return (await client.query<{ n: number }>('SELECT 2 AS n')).rows[0]!.n;
      }),
  ],
  [
    'outside a transaction (withClient)',
    (pool, hold) =>
      withClient(pool, async (client) => {
        await hold();
        return (await client.query<{ n: number }>('SELECT 2 AS n')).rows[0]!.n;
      }),
  ],
];

describe('a PostgreSQL connection lost while checked out', () => {
  it.each(HOLDERS)('%s: the work fails, the process stays up, and the pool serves once the database is back', async (_, holder) => {
    const pool = openPool();
    try {
      const outcome = await cutWhileHeld((hold) => holder(pool, hold));
      expect(outcome.status).toBe('rejected');
      expect(uncaught).toEqual([]);
      proxy.restore();
      expect((await pool.query<{ n: number }>('SELECT 3 AS n')).rows[0]!.n).toBe(3);
      expect(pool.totalCount).toBe(1); // the broken connection was dropped, not returned to the pool
    } finally {
      await pool.end();
    }
  });

  it('(control) with the database reachable throughout, the same transaction commits', async () => {
    const pool = openPool();
    try {
      const result = await inTransaction(pool, async (client) => (await client.query<{ n: number }>('SELECT 6 AS n')).rows[0]!.n);
      expect(result).toBe(6);
      expect(uncaught).toEqual([]);
    } finally {
      await pool.end();
    }
  });
});
