/**
 * Several nodes on one PostgreSQL ledger, as an operator runs them: three `bgone serve` processes
 * (the compiled CLI) started at once on loopback ports against one fresh, empty database, each
 * with the real model.
 * Credits stay exact when parallel requests are spread over the three, a per-minute limit holds
 * across them, an Idempotency-Key retry on another node is not charged, and when one node is
 * killed (SIGKILL) while it processes a request, the others release its reservation once its
 * heartbeat lapses, while an Idempotency-Key retry of its request elsewhere is told to wait (409
 * with Retry-After) until then; one paused (SIGSTOP) past its lapse under a request answers it 503
 * with Retry-After, uncharged. One node reaches the database through a TCP proxy that the last test cuts:
 * while the database is unreachable that node is not ready and answers 503, uncharged, and it
 * recovers by itself when the database is back.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PHOTOS } from '../helpers/constants.js';
import { HEARTBEAT_LAPSE_MS, NodesOnOneDatabase } from '../helpers/nodes-on-one-database.js';
import { readPhoto } from '../helpers/paths.js';
import { get, postImage, setBalance, waitFor } from '../helpers/server.js';
import { TcpProxy } from '../helpers/tcp-proxy.js';

const teddy = readPhoto(PHOTOS.teddy);
const PRO_LIMIT_PER_MINUTE = 6;

let cluster: NodesOnOneDatabase;
/** Between node 1 and the database. */
let proxy: TcpProxy;

beforeAll(async () => {
  cluster = await NodesOnOneDatabase.open('nodes');
  const settings = {
    BGONE_QUEUE_LIMIT: '64',
    // 60 parallel requests of one account: the per-account in-flight cap is not what this file tests.
    BGONE_ACCOUNT_IN_FLIGHT: '1000',
    BGONE_RATE_LIMIT_FREE: '100000',
    BGONE_RATE_LIMIT_PRO: String(PRO_LIMIT_PER_MINUTE),
  };
  const direct = new URL(cluster.database.url);
  proxy = await TcpProxy.start(direct.hostname, Number(direct.port));
  const proxied = new URL(cluster.database.url);
  proxied.hostname = '127.0.0.1';
  proxied.port = String(proxy.port);
  await cluster.start([settings, { ...settings, BGONE_DATABASE_URL: proxied.toString() }, settings]);
});

afterAll(async () => {
  await cluster?.close();
  await proxy?.close();
});

describe('three nodes on one PostgreSQL database', () => {
  it('started at once on an empty database: exactly one node created the local account and printed its key', async () => {
    const printed = cluster.nodes.filter((node) => node.stdout.includes('shown only this once'));
    expect(printed).toHaveLength(1);
    expect((await cluster.store.accounts.list()).map((a) => a.email)).toEqual(['local@localhost']);
  });

  it('each node reports PostgreSQL and its HTTP backend', async () => {
    for (const url of cluster.urls) {
      const ready = await get(url, '/readyz');
      expect(ready.status).toBe(200);
      expect(ready.json).toMatchObject({ status: 'ready', database: 'postgres' });
    }
  });

  it('a balance of 5 and 60 parallel requests spread over the three give exactly 5 successes and 55 payment_required', async () => {
    const client = await cluster.account('credits@example.com');
    await setBalance(cluster.store, client.id, 5);
    const results = await Promise.all(Array.from({ length: 60 }, (_, i) => postImage(cluster.urls[i % 3]!, client.key, { size: 'preview' }, teddy)));
    const byStatus: Record<number, number> = {};
    for (const r of results) byStatus[r.status] = (byStatus[r.status] ?? 0) + 1;
    expect(byStatus).toEqual({ 200: 5, 402: 55 });
    for (const r of results.filter((r) => r.status === 402)) expect(r.json).toMatchObject({ code: 'payment_required' });
    expect(await cluster.store.credits.balance(client.id)).toMatchObject({ remaining: 0, reserved: 0, used: 100 });
  });

  it('a per-minute limit holds across the three: 12 requests, 6 let through, 6 refused with 429', async () => {
    const client = await cluster.account('rate@example.com', 'pro');
    // Requests that fail validation are cheap and still count against the limit.
    const results = [];
    for (let i = 0; i < 2 * PRO_LIMIT_PER_MINUTE; i++) results.push(await postImage(cluster.urls[i % 3]!, client.key, { format: 'bmp' }, teddy));
    expect(results.map((r) => r.status)).toEqual([...Array(PRO_LIMIT_PER_MINUTE).fill(400), ...Array(PRO_LIMIT_PER_MINUTE).fill(429)]);
    expect(results.at(-1)!.headers.get('x-ratelimit-remaining')).toBe('0');
  });

  it('an Idempotency-Key retry sent to another node is processed again but not charged', async () => {
    const client = await cluster.account('idempotent@example.com');
    const headers = { 'Idempotency-Key': 'order-42' };
    const first = await postImage(cluster.urls[0]!, client.key, { size: 'preview' }, teddy, headers);
    expect(first.status).toBe(200);
    const retry = await postImage(cluster.urls[1]!, client.key, { size: 'preview' }, teddy, headers);
    expect(retry.status).toBe(200);
    expect(retry.headers.get('x-credits-remaining')).toBe(first.headers.get('x-credits-remaining'));
    expect(await cluster.store.credits.balance(client.id)).toMatchObject({ used: 1, reserved: 0 });
  });

  it('a node paused past its lapse under a request: its reservation is released, and the request is answered 503 with Retry-After, uncharged', async () => {
    const client = await cluster.account('paused@example.com');
    const paused = cluster.nodes[2]!;
    const pending = postImage(cluster.urls[2]!, client.key, {}, teddy);
    await waitFor(async () => (await cluster.store.credits.balance(client.id)).reserved === 1, 'the reservation of the request in flight');
    paused.child.kill('SIGSTOP');
    try {
      // A live node's heartbeat releases the paused node's reservation once its lapse has passed.
      await waitFor(
        async () => (await cluster.store.credits.balance(client.id)).reserved === 0,
        'the paused node’s reservation to be released',
        6 * HEARTBEAT_LAPSE_MS,
      );
    } finally {
      paused.child.kill('SIGCONT');
    }
    const res = await pending;
    expect(res.status, JSON.stringify(res.json)).toBe(503);
    expect(res.json).toMatchObject({ code: 'overloaded' });
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(await cluster.store.credits.balance(client.id)).toMatchObject({ used: 0, reserved: 0 });
    // Back from its pause, the node serves and charges again.
    const after = await postImage(cluster.urls[2]!, client.key, { size: 'preview' }, teddy);
    expect(after.status).toBe(200);
    expect(await cluster.store.credits.balance(client.id)).toMatchObject({ used: 1, reserved: 0 });
  });

  it('a node killed while processing: the others release its reservation once its heartbeat lapses, and nothing is charged', async () => {
    const client = await cluster.account('killed@example.com');
    const victim = cluster.nodes[2]!;
    const headers = { 'Idempotency-Key': 'killed-7' };
    const pending = postImage(cluster.urls[2]!, client.key, {}, teddy, headers).catch((err: unknown) => err);
    await waitFor(async () => (await cluster.store.credits.balance(client.id)).reserved === 1, 'the reservation of the request in flight');
    victim.child.kill('SIGKILL');
    expect((await victim.exited).signal).toBe('SIGKILL');
    expect(await pending).toBeInstanceOf(Error); // the connection died with the node
    // Still held right after the kill; released by a live node's heartbeat tick after the lapse.
    expect((await cluster.store.credits.balance(client.id)).reserved).toBe(1);
    // Its retry meanwhile, on another node: the first request still counts as in progress, so the
    // client is told to wait (409 with Retry-After), not that its request is wrong.
    const early = await postImage(cluster.urls[0]!, client.key, {}, teddy, headers);
    expect(early.status, JSON.stringify(early.json)).toBe(409);
    expect(early.json).toMatchObject({ code: 'idempotency_in_progress' });
    expect(Number(early.headers.get('retry-after'))).toBeGreaterThan(0);
    await waitFor(
      async () => (await cluster.store.credits.balance(client.id)).reserved === 0,
      'the dead node’s reservation to be released',
      6 * HEARTBEAT_LAPSE_MS,
    );
    expect(await cluster.store.credits.balance(client.id)).toMatchObject({ used: 0, reserved: 0, remaining: 100 });
    // The two live nodes still serve, and the retry now runs and is charged once.
    const after = await postImage(cluster.urls[0]!, client.key, {}, teddy, headers);
    expect(after.status).toBe(200);
    expect(after.headers.get('x-credits-charged')).toBe('1');
    expect(await cluster.store.credits.balance(client.id)).toMatchObject({ used: 1, reserved: 0 });
  });

  it('a node cut off from the database: not ready, 503 with Retry-After and nothing charged; it recovers by itself', async () => {
    const client = await cluster.account('outage@example.com');
    const url = cluster.urls[1]!;
    proxy.cut();
    try {
      const ready = await get(url, '/readyz');
      expect(ready.status).toBe(503);
      expect(ready.json).toMatchObject({ status: 'database_unreachable', database: 'postgres' });
      const refused = await postImage(url, client.key, { size: 'preview' }, teddy);
      expect(refused.status).toBe(503);
      expect(refused.json).toMatchObject({ code: 'overloaded' });
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
      // The other nodes serve meanwhile.
      expect((await postImage(cluster.urls[0]!, client.key, { size: 'preview' }, teddy)).status).toBe(200);
      expect(cluster.nodes[1]!.alive).toBe(true);
      // Long enough for the others to count node 1 as dead: its first reservation after the outage
      // must still be its own (it beats before reserving), not released under the request.
      await sleep(2 * HEARTBEAT_LAPSE_MS);
    } finally {
      proxy.restore();
    }
    await waitFor(async () => (await get(url, '/readyz')).status === 200, 'node 1 to be ready again', 30_000);
    const after = await postImage(url, client.key, { size: 'preview' }, teddy);
    expect(after.status, `node 1 answered ${JSON.stringify(after.json)}; its log:\n${cluster.nodes[1]!.stdout.slice(-4000)}`).toBe(200);
    expect(await cluster.store.credits.balance(client.id)).toMatchObject({ used: 2, reserved: 0 });
  });
});
