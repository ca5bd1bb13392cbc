/**
 * The PostgreSQL store as several nodes on one database (the interface itself is covered for both
 * implementations by store.test.ts): exact credits across nodes, migrations when nodes start at
 * once, and reservations of a dead node released once its heartbeat lapses, never a live node's.
 * Each test has a fresh database on the server of BGONE_TEST_DATABASE_URL.
 *
 * The killed node is a child process loading the compiled store from dist/, which
 * test/global-setup.ts rebuilds from src/ before every run.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { SCHEMA_VERSION } from '../../src/store/postgres/migrations.js';
import { openPostgresStore } from '../../src/store/postgres/postgres-store.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { countOutcomes, expectStoreError, spend, useTempStores } from '../helpers/store.js';

const DIST_POSTGRES_STORE_URL = pathToFileURL(join(REPO_ROOT, 'dist', 'src', 'store', 'postgres', 'postgres-store.js')).href;

const t = useTempStores('postgres');

async function query<T extends pg.QueryResultRow>(url: string, sql: string, params: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(sql, params)).rows;
  } finally {
    await client.end();
  }
}

/** Calls `probe` until it returns true or `timeoutMs` passes; returns whether it did. */
async function eventually(probe: () => Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await probe()) return true;
    await sleep(50);
  }
  return probe();
}

describe('several nodes on one database', () => {
  it('nodes starting at once migrate the database once', async () => {
    const nodes = await Promise.all(Array.from({ length: 4 }, () => t.open()));
    expect(new Set(nodes.map((n) => n.kind))).toEqual(new Set(['postgres']));
    expect(await query(t.dbUrl, 'SELECT version FROM schema_migrations ORDER BY version')).toEqual(
      Array.from({ length: SCHEMA_VERSION }, (_, i) => ({ version: i + 1 })),
    );
    const a = await nodes[0]!.accounts.create({ email: 'a@example.com' });
    expect((await nodes[3]!.accounts.get(a.id))?.email).toBe('a@example.com');
  });

  it('refuses a database migrated by a newer build', async () => {
    await (await t.open()).close();
    await query(t.dbUrl, 'INSERT INTO schema_migrations (version) VALUES (999)');
    await expectStoreError(t.open(), 'schema_too_new');
  });

  it('a balance of N and 3N parallel reserves spread over two nodes give exactly N', async () => {
    const n1 = await t.open({ poolSize: 4 });
    const n2 = await t.open({ poolSize: 4 });
    const a = await n1.accounts.create({ email: 'a@example.com' });
    await spend(n2, a.id, 80); // 20 credits left
    const results = await Promise.all(Array.from({ length: 60 }, (_, i) => (i % 2 === 0 ? n1 : n2).credits.reserve(a.id, { requestId: `req_${i}` })));
    expect(countOutcomes(results)).toEqual({ ok: 20, payment_required: 40 });
    // Commits from either node, each once: a second commit of the same reservation charges nothing.
    const held = results.filter((r) => r.ok).map((r) => r.reservationId!);
    const commits = await Promise.all(held.flatMap((id, i) => [(i % 2 === 0 ? n1 : n2).credits.commit(id), (i % 2 === 0 ? n2 : n1).credits.commit(id)]));
    expect(commits.filter((c) => c !== null)).toHaveLength(20);
    expect(await n1.credits.balance(a.id)).toMatchObject({ used: 100, reserved: 0, remaining: 0 });
    expect((await n2.usage.summary()).charged.total).toBe(100);
  });

  it('an Idempotency-Key is honoured across nodes', async () => {
    const n1 = await t.open();
    const n2 = await t.open();
    const a = await n1.accounts.create({ email: 'a@example.com' });
    const attempts = await Promise.all(
      Array.from({ length: 10 }, (_, i) => (i % 2 === 0 ? n1 : n2).credits.reserve(a.id, { requestId: `req_${i}`, idempotencyKey: 'k', imageHash: 'h' })),
    );
    expect(countOutcomes(attempts)).toEqual({ ok: 1, idempotency_in_progress: 9 });
    await n2.credits.commit(attempts.find((r) => r.ok)!.reservationId!);
    expect(await n1.credits.reserve(a.id, { requestId: 'req_retry', idempotencyKey: 'k', imageHash: 'h' })).toMatchObject({ ok: true, alreadyCharged: true });
    expect((await n2.credits.balance(a.id)).used).toBe(1);
  });

  it('a per-minute rate limit holds across nodes: 30 parallel requests over three nodes, limit 10', async () => {
    const nodes = await Promise.all([t.open(), t.open(), t.open()]);
    const decisions = await Promise.all(Array.from({ length: 30 }, (_, i) => nodes[i % 3]!.rateLimits.take('key:1', 10)));
    expect(decisions.filter((d) => d.allowed)).toHaveLength(10);
    // Every node sees the same count: the next request is refused on each.
    for (const node of nodes) expect(await node.rateLimits.take('key:1', 10)).toMatchObject({ allowed: false, remaining: 0 });
  });

  it('login throttles hold across nodes, and a success on one node clears the email on all', async () => {
    const [n1, n2] = await Promise.all([t.open(), t.open()]);
    const limits = { perEmail: { maxFailures: 3, windowMs: 600_000 }, perIp: { maxFailures: 100, windowMs: 600_000 } };
    const decisions = await Promise.all(Array.from({ length: 8 }, (_, i) => (i % 2 ? n1 : n2).loginThrottle.begin('a@example.com', `10.0.0.${i}`, limits)));
    const allowed = decisions.filter((d) => d.allowed);
    expect(allowed).toHaveLength(3);
    expect((await n2.loginThrottle.begin('a@example.com', '10.0.1.1', limits)).allowed).toBe(false);
    await n1.loginThrottle.succeed(allowed[0]!.attempt);
    expect((await n2.loginThrottle.begin('a@example.com', '10.0.1.1', limits)).allowed).toBe(true);
    // Neither the email nor the address is stored.
    const stored = JSON.stringify(await query(t.dbUrl, 'SELECT * FROM login_failures'));
    expect(stored).not.toContain('a@example.com');
    expect(stored).not.toContain('10.0.');
  });

  it("a live node's reservations are never released, however long they are held", async () => {
    const live = await t.open({ heartbeatLapseMs: 600 });
    const other = await t.open({ heartbeatLapseMs: 600, autoRecover: true });
    const a = await live.accounts.create({ email: 'a@example.com' });
    const r = (await live.credits.reserve(a.id, { requestId: 'req_slow' })) as { reservationId: number };
    await sleep(1500); // 2.5 lapses, with the other node's automatic recovery running meanwhile
    expect(await other.credits.recoverAfterCrash()).toBe(0);
    expect((await other.credits.balance(a.id)).reserved).toBe(1);
    expect(await live.credits.commit(r.reservationId)).toMatchObject({ remaining: 99 });
  });

  it('each node is judged by its own lapse: a short-lapse node never releases a slow-beating live node', async () => {
    const slow = await t.open({ heartbeatLapseMs: 30_000 }); // beats every 5 s
    const quick = await t.open({ heartbeatLapseMs: 600, autoRecover: true }); // would call 600 ms dead
    const a = await slow.accounts.create({ email: 'a@example.com' });
    const r = (await slow.credits.reserve(a.id, { requestId: 'req_slow' })) as { reservationId: number };
    await sleep(1500);
    expect(await quick.credits.recoverAfterCrash()).toBe(0);
    expect(await slow.credits.commit(r.reservationId)).toMatchObject({ remaining: 99 });
  });

  it("a killed node's reservations are released by the others once its heartbeat lapses", async () => {
    const lapseMs = 2000;
    const judge = await t.open({ heartbeatLapseMs: lapseMs });
    const a = await judge.accounts.create({ email: 'a@example.com' });
    const own = (await judge.credits.reserve(a.id, { requestId: 'req_own' })) as { reservationId: number };
    const code = `
      const { openPostgresStore } = await import(${JSON.stringify(DIST_POSTGRES_STORE_URL)});
      const store = await openPostgresStore({ url: ${JSON.stringify(t.dbUrl)}, heartbeatLapseMs: ${lapseMs}, clock: () => new Date(${t.clock().getTime()}) });
      for (let i = 0; i < 2; i++) await store.credits.reserve(${a.id}, { requestId: 'req_child' + i });
      process.kill(process.pid, 'SIGKILL');
    `;
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8' });
    const killedAt = Date.now();
    expect(child.signal, child.stderr).toBe('SIGKILL');
    expect(await judge.credits.balance(a.id)).toMatchObject({ used: 0, reserved: 3 });
    // Its heartbeat is still fresh: nothing is released yet.
    expect(await judge.credits.recoverAfterCrash()).toBe(0);

    let released = 0;
    expect(
      await eventually(async () => {
        released += await judge.credits.recoverAfterCrash();
        return released === 2;
      }, lapseMs + 3000),
    ).toBe(true);
    expect(Date.now() - killedAt).toBeGreaterThan(lapseMs / 2); // the lapse was waited for, not skipped
    expect(await judge.credits.balance(a.id)).toMatchObject({ used: 0, reserved: 1, remaining: 99 });
    expect(await judge.credits.commit(own.reservationId)).toMatchObject({ remaining: 99 });
  });

  it('a running node releases a dead node’s reservations by itself (automatic recovery)', async () => {
    const dead = await t.open({ heartbeatLapseMs: 600 });
    const a = await dead.accounts.create({ email: 'a@example.com' });
    await dead.credits.reserve(a.id, { requestId: 'req_left' });
    await dead.close(); // a stopped node: its row is gone, its reservation left behind
    const survivor = await t.open({ heartbeatLapseMs: 600, autoRecover: true });
    expect(await eventually(async () => (await survivor.credits.balance(a.id)).reserved === 0, 3000)).toBe(true);
  });

  it('a store opened on an unreachable server fails with the driver error', async () => {
    const url = new URL(t.dbUrl);
    url.port = '1'; // nothing listens there
    await expect(openPostgresStore({ url: url.toString(), connectionTimeoutMs: 2000 })).rejects.toThrow();
  });
});
