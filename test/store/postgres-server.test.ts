/**
 * The test PostgreSQL server is the real thing (test/helpers/postgres.ts): version 18, databases
 * from freshDatabase are independent, and the locking the PostgreSQL store relies on behaves as
 * PostgreSQL's does across two sessions (row locks with SKIP LOCKED, advisory locks).
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDatabase, testDatabaseUrl } from '../helpers/postgres.js';

let base: string;
const databases: Array<{ drop(): Promise<void> }> = [];
const clients: pg.Client[] = [];

async function connect(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url });
  // A session ended by the server (DROP DATABASE ... WITH (FORCE)) is expected here, not a failure.
  client.on('error', () => {});
  await client.connect();
  clients.push(client);
  return client;
}

async function newDatabase(): Promise<string> {
  const db = await freshDatabase(base);
  databases.push(db);
  return db.url;
}

beforeAll(async () => {
  base = await testDatabaseUrl();
});

afterAll(async () => {
  await Promise.all(clients.map((c) => c.end().catch(() => {})));
  for (const db of databases) await db.drop();
});

describe('the test PostgreSQL server', () => {
  it('is PostgreSQL 18', async () => {
    const client = await connect(base);
    const { rows } = await client.query<{ version: string }>('SELECT version()');
    expect(rows[0].version).toMatch(/^PostgreSQL 18\./);
  });

  it('gives each fresh database its own empty schema, and drops it', async () => {
    const a = await freshDatabase(base);
    const b = await newDatabase();
    expect(a.url).not.toBe(b);
    const ca = await connect(a.url);
    const cb = await connect(b);
    await ca.query('CREATE TABLE t (n int)');
    await ca.query('INSERT INTO t VALUES (1)');
    const inB = await cb.query("SELECT count(*)::int AS n FROM pg_tables WHERE tablename = 't'");
    expect(inB.rows[0].n).toBe(0);
    const name = new URL(a.url).pathname.slice(1);
    await a.drop(); // with ca still connected: FORCE ends its session
    const admin = await connect(base);
    const left = await admin.query('SELECT count(*)::int AS n FROM pg_database WHERE datname = $1', [name]);
    expect(left.rows[0].n).toBe(0);
  });

  it('lets a second session skip the row the first one locked FOR UPDATE SKIP LOCKED', async () => {
    const url = await newDatabase();
    const setup = await connect(url);
    await setup.query('CREATE TABLE job (id int PRIMARY KEY)');
    await setup.query('INSERT INTO job VALUES (1), (2)');
    const first = await connect(url);
    const second = await connect(url);
    const claim = 'SELECT id FROM job ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED';
    await first.query('BEGIN');
    await second.query('BEGIN');
    expect((await first.query(claim)).rows).toEqual([{ id: 1 }]);
    expect((await second.query(claim)).rows).toEqual([{ id: 2 }]);
    // Both rows are held now: a third claim gets nothing instead of waiting.
    const third = await connect(url);
    expect((await third.query(claim)).rows).toEqual([]);
    await first.query('COMMIT');
    await second.query('COMMIT');
    expect((await third.query(claim)).rows).toEqual([{ id: 1 }]);
  });

  it('blocks a second session on an advisory lock until the first releases it', async () => {
    const url = await newDatabase();
    const first = await connect(url);
    const second = await connect(url);
    await first.query('SELECT pg_advisory_lock(42)');
    expect((await second.query('SELECT pg_try_advisory_lock(42) AS got')).rows[0].got).toBe(false);
    let acquired = false;
    const waiting = second.query('SELECT pg_advisory_lock(42)').then(() => {
      acquired = true;
    });
    await new Promise((r) => setTimeout(r, 300));
    expect(acquired).toBe(false);
    await first.query('SELECT pg_advisory_unlock(42)');
    await waiting;
    expect(acquired).toBe(true);
  });
});
