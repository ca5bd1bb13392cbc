/**
 * Webhook delivery fair to every account, against a real server on
 * 127.0.0.1 and a real SQLite file, with real receivers: one that never answers (a stuck endpoint),
 * ones that answer, and a real DNS server on 127.0.0.1 for endpoint names. The store's clock is a
 * fake one (retry times, retention); the attempts' deadlines run on the real clock.
 *
 * The bounds of 2 s below are the contract's ("one stuck endpoint delays no other account's events
 * by more than a second or two"), not a measure of speed: before this fix the wait was the stuck
 * endpoint's 15 s deadline, or more.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { BatchServiceOptions } from '../../src/server.js';
import { openStore, type Store, type WebhookDelivery } from '../../src/store/index.js';
import { type DnsServer, startDnsServer } from '../helpers/dns-server.js';
import { type FaultyStore, withFaults } from '../helpers/failing-store.js';
import { expectError } from '../helpers/http-assert.js';
import { serveStore, toResult, waitFor } from '../helpers/server.js';
import { type FakeClock, fakeClock } from '../helpers/store.js';
import { EMBEDDED_PRIVATE_IPV6 } from '../helpers/webhook-addresses.js';
import { type StuckReceiver, startStuckReceiver, startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';

const UNLIMITED = { free: 100_000, pro: 100_000, ultra: 100_000, mega: 100_000 };
/** The contract's bound on how long a stuck endpoint may delay anyone else's event. */
const FAIRNESS_BOUND_MS = 2_000;

interface Service {
  url: string;
  /** The store the server uses (with faults injected, when asked for). */
  store: Store;
  clock: FakeClock;
  faulty: FaultyStore;
}

interface Account {
  id: number;
  key: string;
}

/** Stopped after each test, in reverse order: receivers before the server, so that stuck attempts end at once. */
let cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  cleanups = [];
});

async function service(batches: Partial<BatchServiceOptions> = {}): Promise<Service> {
  const dir = mkdtempSync(join(tmpdir(), 'bgone-webhook-fairness-'));
  const clock = fakeClock('2026-01-10T08:00:00.000Z');
  const faulty = withFaults(await openStore({ path: join(dir, 'db.sqlite'), clock, rateLimits: UNLIMITED }));
  const { server, close } = await serveStore(faulty.store, dir, {
    batches: { resultTtlSeconds: 3600, memoryMb: 64, webhookAllowPrivate: true, webhookPollMs: 50, ...batches },
  });
  cleanups.push(close);
  return { url: `http://127.0.0.1:${server.port}`, store: faulty.store, clock, faulty };
}

async function receiver(): Promise<WebhookReceiver> {
  const r = await startWebhookReceiver();
  cleanups.push(() => r.stop().catch(() => {}));
  return r;
}

async function stuckReceiver(): Promise<StuckReceiver> {
  const r = await startStuckReceiver();
  cleanups.push(() => r.stop());
  return r;
}

async function dnsServer(records: Parameters<typeof startDnsServer>[0]): Promise<DnsServer> {
  const dns = await startDnsServer(records);
  cleanups.push(() => dns.close());
  return dns;
}

async function account(s: Service, email: string): Promise<Account> {
  const { id } = await s.store.accounts.create({ email });
  return { id, key: (await s.store.keys.create(id)).key };
}

function createEndpoint(s: Service, a: Account, url: string) {
  return fetch(`${s.url}/api/v1/webhooks`, {
    method: 'POST',
    headers: { authorization: `Bearer ${a.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ url }),
  }).then(toResult);
}

/** Creates the endpoint (201) and returns its id; a receiver given learns its secret. */
async function endpoint(s: Service, a: Account, url: string, r?: WebhookReceiver): Promise<string> {
  const res = await createEndpoint(s, a, url);
  expect(res.status, JSON.stringify(res.json)).toBe(201);
  if (r) r.secret = res.json.secret;
  return res.json.id;
}

/** A receiver (stopped after the test) and `a`'s endpoint at its address, whose secret it learns. */
async function receivingEndpoint(s: Service, a: Account): Promise<{ receiver: WebhookReceiver; id: string }> {
  const r = await receiver();
  return { receiver: r, id: await endpoint(s, a, r.url, r) };
}

async function sendTest(s: Service, a: Account, endpointId: string): Promise<number> {
  const res = await fetch(`${s.url}/api/v1/webhooks/${endpointId}/test`, { method: 'POST', headers: { authorization: `Bearer ${a.key}` } });
  await res.arrayBuffer();
  return res.status;
}

async function deliveries(s: Service, a: Account, endpointId: string): Promise<WebhookDelivery[]> {
  return s.store.webhooks.deliveries(a.id, endpointId, 1000);
}

describe('fair delivery', () => {
  it("a stuck endpoint of account X, flooded with 64 test events, delays neither account Y's event nor X's other endpoint beyond ~2 s", async () => {
    const s = await service({ webhookTimeoutMs: 15_000 });
    const stuck = await stuckReceiver();
    const x = await account(s, 'x@example.com');
    const y = await account(s, 'y@example.com');
    const stuckId = await endpoint(s, x, stuck.url);
    const xHealthy = await receivingEndpoint(s, x);
    const yHook = await receivingEndpoint(s, y);

    const flood = await Promise.all(Array.from({ length: 64 }, () => sendTest(s, x, stuckId)));
    expect(flood.every((status) => status === 202)).toBe(true);
    await waitFor(() => stuck.open >= 2, 'the stuck endpoint holding attempts');

    expect(await sendTest(s, y, yHook.id)).toBe(202);
    expect(await sendTest(s, x, xHealthy.id)).toBe(202);
    await waitFor(
      () => yHook.receiver.delivered('webhook.test').length === 1 && xHealthy.receiver.delivered('webhook.test').length === 1,
      "Y's event and X's other endpoint's event, beside the stuck one",
      FAIRNESS_BOUND_MS,
    );
    expect(yHook.receiver.received[0]!.verified).toBe(true);
    expect(xHealthy.receiver.received[0]!.verified).toBe(true);
    // Never more than two attempts at the stuck endpoint at once, and its events all wait their turn: none lost.
    expect(stuck.maxOpen).toBe(2);
    expect(stuck.accepted).toBe(2);
    const flooded = await deliveries(s, x, stuckId);
    expect(flooded).toHaveLength(64);
    expect(flooded.every((d) => d.status === 'pending' && d.attempts === 0)).toBe(true);
  });

  it("a name whose DNS server never answers fails at the attempt's deadline, resolution included, and holds no one else", async () => {
    const hanging = ['hang1', 'hang2', 'hang3'].map((n) => `${n}.bgone.test`);
    const dns = await dnsServer({ 'y.bgone.test': { a: ['127.0.0.1'] }, ...Object.fromEntries(hanging.map((name) => [name, { hang: true }])) });
    const s = await service({ webhookTimeoutMs: 1_000, webhookDnsServers: [dns.address] });
    const yReceiver = await receiver();
    const x = await account(s, 'x@example.com');
    const y = await account(s, 'y@example.com');
    const hangIds = [];
    for (const name of hanging) hangIds.push(await endpoint(s, x, `http://${name}:9/hook`));
    const hangId = hangIds[0]!;
    // Y's endpoint is a name too: its lookup must not queue behind X's, which never end.
    const yId = await endpoint(s, y, yReceiver.url.replace('127.0.0.1', 'y.bgone.test'), yReceiver);
    for (const id of hangIds) for (let i = 0; i < 4; i++) expect(await sendTest(s, x, id)).toBe(202);
    await waitFor(() => hanging.every((name) => dns.queries.some((q) => q.startsWith(name))), 'the names asked');
    expect(await sendTest(s, y, yId)).toBe(202);
    await waitFor(() => yReceiver.delivered('webhook.test').length === 1, "Y's event beside the unresolvable names", FAIRNESS_BOUND_MS);
    expect(dns.queries).toContain('y.bgone.test A');

    await waitFor(async () => (await deliveries(s, x, hangId)).some((d) => d.attempts === 1), 'an attempt at the unresolvable name recorded', 10_000);
    const tried = (await deliveries(s, x, hangId)).filter((d) => d.attempts === 1);
    expect(tried.length).toBeLessThanOrEqual(2);
    for (const d of tried) expect(d).toMatchObject({ status: 'pending', lastStatusCode: null, lastError: 'no answer within 1 s (resolving the name)' });
  });
});

describe('IPv6 addresses that embed a private IPv4 address', () => {
  it('are refused when an endpoint is created', async () => {
    const s = await service({ webhookAllowPrivate: false });
    const x = await account(s, 'x@example.com');
    for (const address of EMBEDDED_PRIVATE_IPV6) {
      const body = expectError(await createEndpoint(s, x, `https://[${address}]/hook`), 400, 'validation_error');
      expect(body.message, address).toMatch(/loopback, private, link-local or metadata/);
    }
    expect(await s.store.webhooks.list(x.id)).toEqual([]);
    // The same forms of a public address are accepted.
    expect((await createEndpoint(s, x, 'https://[64:ff9b::808:808]/hook')).status).toBe(201);
  });

  it('are refused when a name resolves to one at delivery time: nothing is sent, the attempt records why', async () => {
    const names = EMBEDDED_PRIVATE_IPV6.map((_, i) => `embedded${i}.bgone.test`);
    const dns = await dnsServer(Object.fromEntries(names.map((name, i) => [name, { aaaa: [EMBEDDED_PRIVATE_IPV6[i]!] }])));
    const s = await service({ webhookAllowPrivate: false, webhookDnsServers: [dns.address] });
    const endpoints: Array<{ owner: Account; id: string; address: string }> = [];
    // Five endpoints per account at most: as many accounts as it takes.
    for (let i = 0; i < names.length; i += 5) {
      const owner = await account(s, `owner${i}@example.com`);
      for (const [j, name] of names.slice(i, i + 5).entries())
        endpoints.push({ owner, id: await endpoint(s, owner, `https://${name}/hook`), address: EMBEDDED_PRIVATE_IPV6[i + j]! });
    }
    for (const e of endpoints) expect(await sendTest(s, e.owner, e.id)).toBe(202);
    for (const e of endpoints) {
      await waitFor(async () => (await deliveries(s, e.owner, e.id))[0]?.attempts === 1, `the attempt for ${e.address} recorded`);
      const [d] = await deliveries(s, e.owner, e.id);
      expect(d, e.address).toMatchObject({ status: 'pending', lastStatusCode: null });
      expect(d!.lastError, e.address).toMatch(/^refused: embedded\d+\.bgone\.test resolves to a loopback, private, link-local or metadata address$/);
    }
    for (const name of names) expect(dns.queries).toContain(`${name} AAAA`);
  });
});

describe('outbox retention', () => {
  it('deletes delivered and failed deliveries once BGONE_WEBHOOK_RETENTION has passed on the store’s clock; keeps pending ones', async () => {
    const s = await service({ webhookRetentionSeconds: 3600 });
    const a = await account(s, 'a@example.com');
    const { id: okId } = await receivingEndpoint(s, a);
    const { receiver: gone, id: goneId } = await receivingEndpoint(s, a);
    const { receiver: flaky, id: flakyId } = await receivingEndpoint(s, a);
    gone.script = [410];
    flaky.script = Array.from({ length: 8 }, () => 500);
    for (const id of [okId, goneId, flakyId]) expect(await sendTest(s, a, id)).toBe(202);
    const state = async (id: string) => (await deliveries(s, a, id))[0]?.status;
    await waitFor(async () => (await state(okId)) === 'delivered' && (await state(goneId)) === 'failed', 'one delivered, one failed');
    await waitFor(async () => (await deliveries(s, a, flakyId))[0]?.attempts === 1, 'the flaky one tried once');

    // 30 min on: pruning has run again (its 10 min have passed; the flaky retry, due after 5 s, shows a
    // poll went by), but nothing is past the hour of retention yet.
    s.clock.advance(30 * 60_000);
    await waitFor(async () => (await deliveries(s, a, flakyId))[0]?.attempts === 2, 'the flaky retry');
    expect(await state(okId)).toBe('delivered');
    expect(await state(goneId)).toBe('failed');

    s.clock.advance(31 * 60_000);
    await waitFor(async () => (await deliveries(s, a, okId)).length === 0 && (await deliveries(s, a, goneId)).length === 0, 'the ended rows pruned');
    expect(await deliveries(s, a, flakyId)).toHaveLength(1);
    expect(await state(flakyId)).toBe('pending');
  });

  it('a pruning that fails leaves deliveries going, and is tried again at the next poll', async () => {
    const s = await service({ webhookRetentionSeconds: 3600 });
    const a = await account(s, 'a@example.com');
    const { receiver: ok, id: okId } = await receivingEndpoint(s, a);
    expect(await sendTest(s, a, okId)).toBe(202);
    await waitFor(async () => (await deliveries(s, a, okId))[0]?.status === 'delivered', 'the first event delivered');
    s.faulty.fail('webhooks.prune');
    s.clock.advance(2 * 3600_000);
    await waitFor(() => (s.faulty.calls.get('webhooks.prune') ?? 0) >= 2, 'pruning failed, then tried again');
    expect(await sendTest(s, a, okId)).toBe(202);
    await waitFor(() => ok.delivered('webhook.test').length === 2, 'the next event delivered all the same');
    expect(await deliveries(s, a, okId)).toHaveLength(2);
    s.faulty.clear();
    await waitFor(async () => (await deliveries(s, a, okId)).length === 1, 'the old row pruned once the store answers');
    expect((await deliveries(s, a, okId))[0]?.status).toBe('delivered');
  });
});
