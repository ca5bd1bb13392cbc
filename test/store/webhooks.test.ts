/**
 * Webhook endpoints and the delivery outbox in the store, through its interface only, on both
 * implementations: endpoints per account (limit, secret shown once, delete with its rows), test
 * events, claims that keep two senders (two nodes on PostgreSQL) off one row and lapse when their
 * sender dies, the state an attempt leaves a delivery in (410 disabling its endpoint), the
 * dashboard's and the operator's lists, and the operator's retry. A fake clock drives time.
 */
import { describe, expect, it } from 'vitest';
import type { DeliveryOutcome, Store, WebhookDelivery } from '../../src/store/index.js';
import { expectStoreError, STORE_KINDS, useTempStores } from '../helpers/store.js';

const SECRET = /^whsec_[A-Za-z0-9+/]{43}=$/;
const ID = /^[A-Za-z0-9_-]{24}$/;
const LEASE_MS = 30_000;
const HOUR_MS = 60 * 60 * 1000;

async function createEndpoint(store: Store, accountId: number, n: number, maxEndpoints = 5) {
  return store.webhooks.create(accountId, { url: `https://hooks.example.com/${n}`, description: `hook ${n}`, maxEndpoints });
}

function failure(statusCode: number | null, nextAttemptAt: Date | null): DeliveryOutcome {
  return { delivered: false, statusCode, error: statusCode === null ? 'timeout' : `HTTP ${statusCode}`, nextAttemptAt, disableEndpoint: false };
}

const DELIVERED: DeliveryOutcome = { delivered: true, statusCode: 204, error: null, nextAttemptAt: null, disableEndpoint: false };

describe.each(STORE_KINDS)('%s store: webhooks', (kind) => {
  const t = useTempStores(kind);

  /** Writes `n` test events to the endpoint, `advanceMs` apart on the clock; returns the deliveries, oldest first. */
  async function testEvents(store: Store, accountId: number, endpointId: string, n: number, advanceMs = 1): Promise<WebhookDelivery[]> {
    for (let i = 0; i < n; i++) {
      expect(await store.webhooks.sendTest(accountId, endpointId)).toBe(true);
      t.clock.advance(advanceMs);
    }
    return (await store.webhooks.deliveries(accountId, endpointId, n)).reverse();
  }

  /** A store with two accounts: a with endpoints 1 and 2, and beside it b with endpoint 3. */
  async function openTwoAccountsWithEndpoints() {
    const store = await t.open();
    const a = await store.accounts.create({ email: 'a@example.com' });
    const b = await store.accounts.create({ email: 'b@example.com' });
    const a1 = (await createEndpoint(store, a.id, 1))!.endpoint;
    const a2 = (await createEndpoint(store, a.id, 2))!.endpoint;
    const b3 = (await createEndpoint(store, b.id, 3))!.endpoint;
    return { store, a, b, a1, a2, b3 };
  }

  describe('endpoints', () => {
    it('create returns the secret once; list and get never show it', async () => {
      const store = await t.open();
      const a = await store.accounts.create({ email: 'a@example.com' });
      const b = await store.accounts.create({ email: 'b@example.com' });
      const created = (await createEndpoint(store, a.id, 1))!;
      expect(created.secret).toMatch(SECRET);
      expect(Buffer.from(created.secret.slice('whsec_'.length), 'base64')).toHaveLength(32);
      expect(created.endpoint.id.startsWith('wh_') && ID.test(created.endpoint.id.slice(3))).toBe(true);
      expect(created.endpoint).toEqual({
        id: created.endpoint.id,
        accountId: a.id,
        url: 'https://hooks.example.com/1',
        description: 'hook 1',
        createdAt: t.clock(),
        disabledAt: null,
      });
      const second = (await createEndpoint(store, a.id, 2))!;
      expect(second.secret).not.toBe(created.secret);

      const listed = await store.webhooks.list(a.id);
      expect(listed).toEqual([created.endpoint, second.endpoint]); // creation order
      expect(JSON.stringify(listed)).not.toContain('whsec_');
      expect(listed.every((e) => !('secret' in e))).toBe(true);
      expect(await store.webhooks.get(a.id, second.endpoint.id)).toEqual(second.endpoint);
      expect(await store.webhooks.get(b.id, second.endpoint.id)).toBeNull();
      expect(await store.webhooks.list(b.id)).toEqual([]);
      await expectStoreError(createEndpoint(store, a.id + 1000, 3), 'not_found');
    });

    it('an account has at most maxEndpoints: a disabled one counts, a deleted one does not', async () => {
      const store = await t.open();
      const a = await store.accounts.create({ email: 'a@example.com' });
      const b = await store.accounts.create({ email: 'b@example.com' });
      const first = (await createEndpoint(store, a.id, 1, 2))!;
      expect(await createEndpoint(store, a.id, 2, 2)).not.toBeNull();
      expect(await createEndpoint(store, a.id, 3, 2)).toBeNull();
      expect(await createEndpoint(store, b.id, 1, 2)).not.toBeNull(); // per account

      // Disable the first (410 Gone): it still counts.
      await store.webhooks.sendTest(a.id, first.endpoint.id);
      const [claimed] = await store.webhooks.claimDue(10, LEASE_MS);
      await store.webhooks.recordAttempt(claimed!.id, { delivered: false, statusCode: 410, error: 'HTTP 410', nextAttemptAt: null, disableEndpoint: true });
      expect((await store.webhooks.get(a.id, first.endpoint.id))!.disabledAt).toEqual(t.clock());
      expect(await createEndpoint(store, a.id, 3, 2)).toBeNull();

      expect(await store.webhooks.delete(a.id, first.endpoint.id)).toBe(true);
      expect(await createEndpoint(store, a.id, 3, 2)).not.toBeNull();
      expect(await store.webhooks.list(a.id)).toHaveLength(2);
    });

    it('concurrent creates never pass the limit', async () => {
      const store = await t.open();
      const other = kind === 'postgres' ? await t.open() : store;
      const a = await store.accounts.create({ email: 'a@example.com' });
      const results = await Promise.all(Array.from({ length: 12 }, (_, i) => createEndpoint(i % 2 ? store : other, a.id, i, 5)));
      expect(results.filter((r) => r !== null)).toHaveLength(5);
      expect(await store.webhooks.list(a.id)).toHaveLength(5);
    });

    it('delete removes the endpoint and its outbox rows; only the owning account can', async () => {
      const store = await t.open();
      const a = await store.accounts.create({ email: 'a@example.com' });
      const b = await store.accounts.create({ email: 'b@example.com' });
      const kept = (await createEndpoint(store, a.id, 1))!.endpoint;
      const dropped = (await createEndpoint(store, a.id, 2))!.endpoint;
      await testEvents(store, a.id, kept.id, 1);
      await testEvents(store, a.id, dropped.id, 2);
      expect(await store.webhooks.delete(b.id, dropped.id)).toBe(false);
      expect(await store.webhooks.delete(a.id, dropped.id)).toBe(true);
      expect(await store.webhooks.delete(a.id, dropped.id)).toBe(false);
      expect(await store.webhooks.get(a.id, dropped.id)).toBeNull();
      expect(await store.webhooks.deliveries(a.id, dropped.id, 10)).toEqual([]);
      expect((await store.webhooks.recentDeliveries(a.id, 10)).map((d) => d.endpointId)).toEqual([kept.id]);
      // What a sender had claimed for the deleted endpoint records nothing and fails nothing.
      await store.webhooks.recordAttempt('msg_gone', DELIVERED);
    });

    it('sendTest writes a webhook.test event due now; false for an unknown or another account’s endpoint', async () => {
      const store = await t.open();
      const a = await store.accounts.create({ email: 'a@example.com' });
      const b = await store.accounts.create({ email: 'b@example.com' });
      const { endpoint } = (await createEndpoint(store, a.id, 1))!;
      expect(await store.webhooks.sendTest(b.id, endpoint.id)).toBe(false);
      expect(await store.webhooks.sendTest(a.id, 'wh_unknown')).toBe(false);
      expect(await store.webhooks.sendTest(a.id, endpoint.id)).toBe(true);
      const [delivery] = await store.webhooks.deliveries(a.id, endpoint.id, 10);
      expect(delivery!.id.startsWith('msg_') && ID.test(delivery!.id.slice(4))).toBe(true);
      expect(delivery).toMatchObject({
        endpointId: endpoint.id,
        accountId: a.id,
        type: 'webhook.test',
        createdAt: t.clock(),
        attempts: 0,
        status: 'pending',
        nextAttemptAt: t.clock(),
        lastStatusCode: null,
        lastError: null,
        deliveredAt: null,
      });
      expect(JSON.parse(delivery!.body)).toEqual({
        type: 'webhook.test',
        timestamp: t.clock().toISOString(),
        data: { endpoint_id: endpoint.id, message: 'This is a test event from bgone.' },
      });
      expect(await store.webhooks.recentDeliveries(b.id, 10)).toEqual([]);
    });
  });

  describe('claims', () => {
    it('claimDue hands out due rows with the url and secret, oldest first, each once while its claim holds', async () => {
      const store = await t.open();
      const a = await store.accounts.create({ email: 'a@example.com' });
      const created = (await createEndpoint(store, a.id, 1))!;
      const rows = await testEvents(store, a.id, created.endpoint.id, 3);

      const first = await store.webhooks.claimDue(2, LEASE_MS);
      expect(first.map((d) => d.id)).toEqual([rows[0]!.id, rows[1]!.id]);
      expect(first[0]).toMatchObject({ url: 'https://hooks.example.com/1', secret: created.secret, body: rows[0]!.body, attempts: 0 });
      expect((await store.webhooks.claimDue(10, LEASE_MS)).map((d) => d.id)).toEqual([rows[2]!.id]);
      expect(await store.webhooks.claimDue(10, LEASE_MS)).toEqual([]);

      // A sender that died mid-attempt: its claims lapse and the rows are due again.
      t.clock.advance(LEASE_MS - 1);
      expect(await store.webhooks.claimDue(10, LEASE_MS)).toEqual([]);
      t.clock.advance(1);
      expect((await store.webhooks.claimDue(10, LEASE_MS)).map((d) => d.id)).toEqual(rows.map((r) => r.id));
    });

    it('concurrent claims get disjoint rows (on PostgreSQL: two nodes at once)', async () => {
      const n1 = await t.open();
      const n2 = kind === 'postgres' ? await t.open() : n1;
      const a = await n1.accounts.create({ email: 'a@example.com' });
      const hooks = [(await createEndpoint(n1, a.id, 1))!.endpoint.id, (await createEndpoint(n1, a.id, 2))!.endpoint.id];
      for (let i = 0; i < 20; i++) await n1.webhooks.sendTest(a.id, hooks[i % 2]!);
      const rounds = await Promise.all(Array.from({ length: 8 }, (_, i) => (i % 2 ? n1 : n2).webhooks.claimDue(4, LEASE_MS)));
      const ids = rounds.flat().map((d) => d.id);
      expect(new Set(ids).size).toBe(ids.length); // nobody got a row twice
      // Whatever was skipped while locked is still there for the next poll; nothing is lost.
      const rest = await n2.webhooks.claimDue(100, LEASE_MS);
      expect(new Set([...ids, ...rest.map((d) => d.id)]).size).toBe(20);
      expect(ids.length + rest.length).toBe(20);
    });

    it('a row is not claimed before its next attempt is due', async () => {
      const store = await t.open();
      const a = await store.accounts.create({ email: 'a@example.com' });
      const live = (await createEndpoint(store, a.id, 1))!.endpoint;
      const [row] = await testEvents(store, a.id, live.id, 1);
      const [claimed] = await store.webhooks.claimDue(10, LEASE_MS);
      const retryAt = new Date(t.clock().getTime() + 5000);
      await store.webhooks.recordAttempt(claimed!.id, failure(500, retryAt));
      t.clock.advance(4999);
      expect(await store.webhooks.claimDue(10, LEASE_MS)).toEqual([]);
      t.clock.advance(1);
      expect((await store.webhooks.claimDue(10, LEASE_MS)).map((d) => [d.id, d.attempts])).toEqual([[row!.id, 1]]);
    });
  });

  describe('fair claims (one queue for everyone)', () => {
    const CAPS = { perEndpoint: 2, perAccount: 4 };

    it('an endpoint with many due rows gets at most perEndpoint claimed; the others are taken round-robin', async () => {
      const { store, a: x, b: y, a1: stuck, a2: xOther, b3: yHook } = await openTwoAccountsWithEndpoints();
      const flood = await testEvents(store, x.id, stuck.id, 64); // written first: FIFO would send only these
      const [xLate] = await testEvents(store, x.id, xOther.id, 1);
      const [yLate] = await testEvents(store, y.id, yHook.id, 1);

      const first = await store.webhooks.claimDue(8, LEASE_MS, CAPS);
      // One per account first (the oldest of each), then each account's next endpoint, then the flood's second.
      expect(first.map((d) => d.id)).toEqual([flood[0]!.id, yLate!.id, xLate!.id, flood[1]!.id]);
      // While those claims hold, the flood's endpoint has no free place: nothing more of it.
      expect(await store.webhooks.claimDue(8, LEASE_MS, CAPS)).toEqual([]);
      // One attempt ends: one more of it, the oldest.
      await store.webhooks.recordAttempt(flood[0]!.id, failure(null, new Date(t.clock().getTime() + HOUR_MS)));
      expect((await store.webhooks.claimDue(8, LEASE_MS, CAPS)).map((d) => d.id)).toEqual([flood[2]!.id]);
    });

    it('an account never has more than perAccount rows claimed, over all its endpoints', async () => {
      const store = await t.open();
      const x = await store.accounts.create({ email: 'x@example.com' });
      const hooks = [];
      for (let i = 0; i < 5; i++) hooks.push((await createEndpoint(store, x.id, i))!.endpoint);
      for (const hook of hooks) await testEvents(store, x.id, hook.id, 3);
      const claimed = await store.webhooks.claimDue(100, LEASE_MS, CAPS);
      expect(claimed).toHaveLength(4);
      expect(new Set(claimed.map((d) => d.endpointId)).size).toBe(4); // one per endpoint before a second anywhere
      expect(await store.webhooks.claimDue(100, LEASE_MS, CAPS)).toEqual([]);
      // Lapsed claims (a dead sender) free the places.
      t.clock.advance(LEASE_MS);
      expect(await store.webhooks.claimDue(100, LEASE_MS, CAPS)).toHaveLength(4);
    });

    it('the caps hold across concurrent claims (on PostgreSQL: two nodes at once)', async () => {
      const n1 = await t.open();
      const n2 = kind === 'postgres' ? await t.open() : n1;
      const x = await n1.accounts.create({ email: 'x@example.com' });
      const stuck = (await createEndpoint(n1, x.id, 1))!.endpoint;
      await testEvents(n1, x.id, stuck.id, 40, 0);
      const rounds = await Promise.all(Array.from({ length: 8 }, (_, i) => (i % 2 ? n1 : n2).webhooks.claimDue(4, LEASE_MS, CAPS)));
      expect(rounds.flat()).toHaveLength(2);
    });

    it('refuses caps that are not positive integers', async () => {
      const store = await t.open();
      await expectStoreError(store.webhooks.claimDue(4, LEASE_MS, { perEndpoint: 0, perAccount: 4 }), 'invalid_argument');
      await expectStoreError(store.webhooks.claimDue(4, LEASE_MS, { perEndpoint: 2, perAccount: 1.5 }), 'invalid_argument');
    });
  });

  describe('pruning', () => {
    it('deletes delivered and failed rows that ended before the cutoff, oldest first, a bounded number at a time; never a pending one', async () => {
      const store = await t.open();
      const a = await store.accounts.create({ email: 'a@example.com' });
      const { endpoint } = (await createEndpoint(store, a.id, 1))!;
      const gone = (await createEndpoint(store, a.id, 2))!.endpoint;
      const [delivered, failed, retried, pending, late] = await testEvents(store, a.id, endpoint.id, 5);
      const [disabledRow, ...failedByDisable] = await testEvents(store, a.id, gone.id, 3);
      await store.webhooks.claimDue(100, LEASE_MS);
      await store.webhooks.recordAttempt(delivered!.id, DELIVERED);
      await store.webhooks.recordAttempt(failed!.id, failure(500, null));
      await store.webhooks.recordAttempt(retried!.id, failure(500, null));
      await store.webhooks.recordAttempt(pending!.id, failure(500, new Date(t.clock().getTime() + 100 * HOUR_MS)));
      await store.webhooks.recordAttempt(disabledRow!.id, { delivered: false, statusCode: 410, error: 'HTTP 410', nextAttemptAt: null, disableEndpoint: true });
      const endedAt = t.clock().getTime();
      t.clock.advance(10 * HOUR_MS);
      // The operator retries one failed row: pending again, so kept; the late one ends now, after the cutoff.
      expect(await store.webhooks.retry(retried!.id)).toBe(true);
      await store.webhooks.claimDue(100, LEASE_MS);
      await store.webhooks.recordAttempt(late!.id, DELIVERED);

      const cutoff = new Date(endedAt + 1);
      expect(await store.webhooks.prune(new Date(endedAt), 100)).toBe(0); // "before": a row that ended at the cutoff stays
      expect(await store.webhooks.prune(cutoff, 2)).toBe(2);
      expect(await store.webhooks.prune(cutoff, 100)).toBe(3);
      expect(await store.webhooks.prune(cutoff, 100)).toBe(0);
      const left = (await store.webhooks.recentDeliveries(a.id, 100)).map((d) => d.id).sort();
      expect(left).toEqual([retried!.id, pending!.id, late!.id].sort());
      expect(failedByDisable.every((d) => !left.includes(d.id))).toBe(true);
      await expectStoreError(store.webhooks.prune(cutoff, 0), 'invalid_argument');
    });
  });

  describe('attempts', () => {
    it('records each attempt: retry planned → pending; delivered; no retry left → failed; the claim ends', async () => {
      const store = await t.open();
      const a = await store.accounts.create({ email: 'a@example.com' });
      const { endpoint } = (await createEndpoint(store, a.id, 1))!;
      const [ok, flaky, doomed] = await testEvents(store, a.id, endpoint.id, 3);
      await store.webhooks.claimDue(10, LEASE_MS);

      t.clock.advance(100);
      await store.webhooks.recordAttempt(ok!.id, DELIVERED);
      await store.webhooks.recordAttempt(flaky!.id, failure(503, t.clock())); // due again at once
      await store.webhooks.recordAttempt(doomed!.id, failure(null, null));

      const byId = new Map((await store.webhooks.deliveries(a.id, endpoint.id, 10)).map((d) => [d.id, d]));
      expect(byId.get(ok!.id)).toMatchObject({
        status: 'delivered',
        attempts: 1,
        deliveredAt: t.clock(),
        nextAttemptAt: null,
        lastStatusCode: 204,
        lastError: null,
      });
      expect(byId.get(flaky!.id)).toMatchObject({ status: 'pending', attempts: 1, nextAttemptAt: t.clock(), lastStatusCode: 503, lastError: 'HTTP 503' });
      expect(byId.get(doomed!.id)).toMatchObject({ status: 'failed', attempts: 1, nextAttemptAt: null, lastStatusCode: null, lastError: 'timeout' });

      // The claim ended with the attempt: the retry is claimable now, though the lease has not lapsed.
      expect((await store.webhooks.claimDue(10, LEASE_MS)).map((d) => d.id)).toEqual([flaky!.id]);
      await store.webhooks.recordAttempt(flaky!.id, DELIVERED);
      expect((await store.webhooks.deliveries(a.id, endpoint.id, 10)).find((d) => d.id === flaky!.id)).toMatchObject({ status: 'delivered', attempts: 2 });
      // A late failure of a copy sent twice (lapsed claim) never undoes a delivery.
      await store.webhooks.recordAttempt(ok!.id, failure(500, t.clock()));
      expect((await store.webhooks.deliveries(a.id, endpoint.id, 10)).find((d) => d.id === ok!.id)).toMatchObject({ status: 'delivered', attempts: 2 });
      expect(await store.webhooks.claimDue(10, LEASE_MS)).toEqual([]);
    });

    it('410 Gone disables the endpoint and fails its other pending deliveries, not another endpoint’s', async () => {
      const store = await t.open();
      const a = await store.accounts.create({ email: 'a@example.com' });
      const gone = (await createEndpoint(store, a.id, 1))!.endpoint;
      const other = (await createEndpoint(store, a.id, 2))!.endpoint;
      const [first, second, third] = await testEvents(store, a.id, gone.id, 3);
      const [kept] = await testEvents(store, a.id, other.id, 1);
      const claimed = await store.webhooks.claimDue(1, LEASE_MS);
      expect(claimed.map((d) => d.id)).toEqual([first!.id]);
      await store.webhooks.recordAttempt(first!.id, { delivered: false, statusCode: 410, error: 'HTTP 410', nextAttemptAt: null, disableEndpoint: true });

      expect((await store.webhooks.get(a.id, gone.id))!.disabledAt).toEqual(t.clock());
      const rows = new Map((await store.webhooks.deliveries(a.id, gone.id, 10)).map((d) => [d.id, d]));
      expect(rows.get(first!.id)).toMatchObject({ status: 'failed', attempts: 1, lastStatusCode: 410, lastError: 'HTTP 410' });
      for (const id of [second!.id, third!.id]) {
        expect(rows.get(id)).toMatchObject({ status: 'failed', attempts: 0, nextAttemptAt: null, lastError: 'endpoint disabled (410 Gone)' });
      }
      expect((await store.webhooks.claimDue(10, LEASE_MS)).map((d) => d.id)).toEqual([kept!.id]);
      expect((await store.webhooks.get(a.id, other.id))!.disabledAt).toBeNull();
    });

    it('retry makes a failed delivery due now; a delivered or unknown one is not retried', async () => {
      const store = await t.open();
      const a = await store.accounts.create({ email: 'a@example.com' });
      const { endpoint } = (await createEndpoint(store, a.id, 1))!;
      const [failedRow, deliveredRow] = await testEvents(store, a.id, endpoint.id, 2);
      await store.webhooks.claimDue(10, LEASE_MS);
      await store.webhooks.recordAttempt(failedRow!.id, failure(500, null));
      await store.webhooks.recordAttempt(deliveredRow!.id, DELIVERED);
      t.clock.advance(HOUR_MS);

      expect(await store.webhooks.retry(failedRow!.id)).toBe(true);
      expect(await store.webhooks.retry(deliveredRow!.id)).toBe(false);
      expect(await store.webhooks.retry('msg_unknown')).toBe(false);
      const [claimed] = await store.webhooks.claimDue(10, LEASE_MS);
      expect(claimed).toMatchObject({ id: failedRow!.id, status: 'pending', attempts: 1, nextAttemptAt: t.clock() });
      // A pending row whose claim is held is made due again at once (the operator's "send now").
      expect(await store.webhooks.retry(failedRow!.id)).toBe(true);
      expect((await store.webhooks.claimDue(10, LEASE_MS)).map((d) => d.id)).toEqual([failedRow!.id]);
    });
  });

  describe('lists', () => {
    it('deliveries() lists one endpoint’s rows newest first; recentDeliveries() an account’s or everyone’s', async () => {
      const { store, a, b, a1: ea, a2: ea2, b3: eb } = await openTwoAccountsWithEndpoints();
      const rows = await testEvents(store, a.id, ea.id, 4, 0); // same clock time: write order decides
      const other = await testEvents(store, a.id, ea2.id, 1);
      const bRows = await testEvents(store, b.id, eb.id, 2);

      const newestFirst = [...rows].reverse().map((d) => d.id);
      expect((await store.webhooks.deliveries(a.id, ea.id, 10)).map((d) => d.id)).toEqual(newestFirst);
      expect((await store.webhooks.deliveries(a.id, ea.id, 2)).map((d) => d.id)).toEqual(newestFirst.slice(0, 2));
      expect(await store.webhooks.deliveries(b.id, ea.id, 10)).toEqual([]);
      expect((await store.webhooks.recentDeliveries(a.id, 10)).map((d) => d.id)).toEqual([other[0]!.id, ...newestFirst]);
      expect((await store.webhooks.recentDeliveries(undefined, 3)).map((d) => d.id)).toEqual([bRows[1]!.id, bRows[0]!.id, other[0]!.id]);
      await expectStoreError(store.webhooks.deliveries(a.id, ea.id, 0), 'invalid_argument');
    });
  });
});
