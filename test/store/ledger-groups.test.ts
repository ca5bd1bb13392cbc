/**
 * The metering path's writes in groups (src/store/groups.ts): calls made together share one
 * transaction, yet each keeps its own outcome; on PostgreSQL, exact across nodes, a key's cached
 * lookup bounded in time, and a group that meets a failing database fails its own calls only.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import type { Store } from '../../src/store/index.js';
import { countOutcomes, expectStoreError, STORE_KINDS, useTempStores } from '../helpers/store.js';
import { TcpProxy } from '../helpers/tcp-proxy.js';

describe.each(STORE_KINDS)('grouped metering writes (%s)', (kind) => {
  const t = useTempStores(kind);

  it('reserves made together each get their own outcome: the balance, a disabled account, an unknown one, a key in flight', async () => {
    const store = await t.open();
    const a = await store.accounts.create({ email: 'a@example.com' });
    const b = await store.accounts.create({ email: 'b@example.com' });
    const off = await store.accounts.create({ email: 'off@example.com' });
    await store.accounts.disable(off.id);
    const calls = [
      ...Array.from({ length: 105 }, (_, i) => store.credits.reserve(a.id, { requestId: `req_a${i}` })),
      ...Array.from({ length: 5 }, (_, i) => store.credits.reserve(b.id, { requestId: `req_b${i}`, idempotencyKey: 'same', imageHash: 'h' })),
      store.credits.reserve(off.id, { requestId: 'req_off' }),
      store.credits.reserve(424242, { requestId: 'req_nobody' }),
    ];
    const settled = await Promise.allSettled(calls);
    const values = settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
    expect(countOutcomes(values.slice(0, 105))).toEqual({ ok: 100, payment_required: 5 });
    expect(countOutcomes(values.slice(105, 110))).toEqual({ ok: 1, idempotency_in_progress: 4 });
    expect(values[110]).toEqual({ ok: false, reason: 'account_disabled' });
    await expectStoreError(calls[111]!, 'not_found');
    expect(await store.credits.balance(a.id)).toMatchObject({ used: 0, reserved: 100, remaining: 0 });
    expect(await store.credits.balance(b.id)).toMatchObject({ reserved: 1, remaining: 99 });
  });

  it('charges and releases made together: each reservation is charged or released once, never both', async () => {
    const store = await t.open();
    const a = await store.accounts.create({ email: 'a@example.com' });
    const held = await Promise.all(Array.from({ length: 10 }, (_, i) => store.credits.reserve(a.id, { requestId: `req_${i}` })));
    const ids = held.map((r) => (r.ok && r.reservationId !== null ? r.reservationId : -1));
    const outcomes = await Promise.all(
      ids.map(async (id, i) => {
        const [first, second, release] = await Promise.all([
          store.credits.commit(id),
          store.credits.commit(id),
          i % 3 === 0 ? store.credits.release(id) : false,
        ]);
        return [first !== null, second !== null, release].filter(Boolean).length;
      }),
    );
    expect(outcomes).toEqual(ids.map(() => 1));
    const balance = await store.credits.balance(a.id);
    expect(balance.reserved).toBe(0);
    expect(balance.used).toBeGreaterThanOrEqual(6); // at least the 6 never released
    expect(balance.used + balance.remaining).toBe(100);
    // Each charge's balance is the account's after the group: 100 - used.
    const more = await store.credits.reserve(a.id, { requestId: 'req_more' });
    if (!more.ok || more.reservationId === null) throw new Error('no reservation');
    expect((await store.credits.commit(more.reservationId))?.remaining).toBe(100 - balance.used - 1);
  });
});

describe('grouped metering writes across nodes (postgres)', () => {
  const t = useTempStores('postgres');

  it('a per-minute limit holds for counts made together on two nodes, and a bucket asked with two limits in one group is counted for each', async () => {
    const n1 = await t.open();
    const n2 = await t.open();
    const decisions = await Promise.all(Array.from({ length: 30 }, (_, i) => (i % 2 === 0 ? n1 : n2).rateLimits.take('key:1', 10)));
    expect(decisions.filter((d) => d.allowed)).toHaveLength(10);
    expect(decisions.filter((d) => !d.allowed).every((d) => d.retryAfter >= 1 && d.remaining === 0)).toBe(true);
    expect(
      decisions
        .filter((d) => d.allowed)
        .map((d) => d.remaining)
        .sort((x, y) => x - y),
    ).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    const mixed = await Promise.all([
      n1.rateLimits.take('key:2', 3),
      n1.rateLimits.take('key:2', 3),
      n1.rateLimits.take('key:2', 1),
      n1.rateLimits.take('key:2', 3),
      n1.rateLimits.take('key:2', 3),
    ]);
    expect(mixed.map((d) => d.allowed)).toEqual([true, true, false, true, false]);
  });

  it('a key read by one node: revoked on another, refused here once the cache bound has passed; revoked here, refused at once', async () => {
    const here = await t.open({ keyCacheMs: 1000 });
    const there = await t.open({ keyCacheMs: 1000 });
    const a = await there.accounts.create({ email: 'a@example.com' });
    const k1 = await there.keys.create(a.id);
    const k2 = await there.keys.create(a.id);
    expect(await here.keys.authenticate(k1.key)).toMatchObject({ keyId: k1.info.id, accountId: a.id });
    await there.keys.revoke(k1.info.id);
    expect(await there.keys.authenticate(k1.key)).toBeNull(); // its own revocation: at once
    t.clock.advance(999);
    expect(await here.keys.authenticate(k1.key)).not.toBeNull(); // within the bound
    t.clock.advance(1);
    expect(await here.keys.authenticate(k1.key)).toBeNull(); // the bound passed
    expect(await here.keys.authenticate(k2.key)).not.toBeNull();
    await here.keys.revoke(k2.info.id);
    expect(await here.keys.authenticate(k2.key)).toBeNull();
  });

  it('without the cache (keyCacheMs 0) a revocation on another node is refused at once', async () => {
    const here = await t.open({ keyCacheMs: 0 });
    const there = await t.open();
    const a = await there.accounts.create({ email: 'a@example.com' });
    const k = await there.keys.create(a.id);
    expect(await here.keys.authenticate(k.key)).not.toBeNull();
    await there.keys.revoke(k.info.id);
    expect(await here.keys.authenticate(k.key)).toBeNull();
  });

  it('an account disabled on another node is refused its reservations at once, whatever the cache holds; its key says so once the bound has passed', async () => {
    const here = await t.open();
    const there = await t.open();
    const a = await there.accounts.create({ email: 'a@example.com' });
    const k = await there.keys.create(a.id);
    expect(await here.keys.authenticate(k.key)).toMatchObject({ disabled: false });
    await there.accounts.disable(a.id);
    expect(await here.credits.reserve(a.id, { requestId: 'req_1' })).toEqual({ ok: false, reason: 'account_disabled' });
    t.clock.advance(1000);
    expect(await here.keys.authenticate(k.key)).toMatchObject({ disabled: true });
    await here.accounts.enable(a.id);
    expect(await here.keys.authenticate(k.key)).toMatchObject({ disabled: false }); // changed here: at once
  });

  it('a group that meets the database cut off fails each of its calls, the process stays up, and the next group succeeds once it is back', async () => {
    const direct = new URL(t.dbUrl);
    const proxy = await TcpProxy.start(direct.hostname, Number(direct.port));
    t.closeAfter(proxy);
    const proxied = new URL(t.dbUrl);
    proxied.hostname = '127.0.0.1';
    proxied.port = String(proxy.port);
    const setup = await t.open();
    const a = await setup.accounts.create({ email: 'a@example.com' });
    const k = await setup.keys.create(a.id);
    const store: Store = await t.open({ url: proxied.toString(), connectionTimeoutMs: 1000, keyCacheMs: 0 });
    const first = await store.credits.reserve(a.id, { requestId: 'req_0' });
    expect(first.ok).toBe(true);
    proxy.cut();
    const during = await Promise.allSettled([
      ...Array.from({ length: 5 }, (_, i) => store.credits.reserve(a.id, { requestId: `req_cut${i}` })),
      store.credits.commit(first.ok ? first.reservationId! : -1),
      store.rateLimits.take('key:1', 10),
      store.keys.authenticate(k.key),
    ]);
    expect(during.map((s) => s.status)).toEqual(during.map(() => 'rejected'));
    proxy.restore();
    expect((await store.credits.reserve(a.id, { requestId: 'req_back' })).ok).toBe(true);
    expect(await store.credits.commit(first.ok ? first.reservationId! : -1)).toMatchObject({ cycleIndex: 0 });
    expect((await store.rateLimits.take('key:1', 10)).allowed).toBe(true);
    expect(await store.keys.authenticate(k.key)).toMatchObject({ accountId: a.id });
    expect(await setup.credits.balance(a.id)).toMatchObject({ used: 1, reserved: 1 });
  });
});

describe('grouped metering across nodes, accounts in any order (postgres)', () => {
  const t = useTempStores('postgres');

  it('nodes reserving and charging the same accounts in random orders close no deadlock, and every account is charged exactly what was answered', async () => {
    const nodes = [await t.open(), await t.open(), await t.open()];
    const accounts = await Promise.all(Array.from({ length: 12 }, (_, i) => nodes[0]!.accounts.create({ email: `a${i}@example.com` })));
    let seed = 7;
    const pick = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return accounts[seed % accounts.length]!.id;
    };
    const charged = new Map<number, number>();
    let next = 0;
    await Promise.all(
      nodes.flatMap((node) =>
        Array.from({ length: 8 }, async () => {
          for (let n = next++; n < 600; n = next++) {
            const accountId = pick();
            const r = await node.credits.reserve(accountId, { requestId: `req_${n}` });
            if (!r.ok || r.reservationId === null) continue;
            if (n % 5 === 0) await node.credits.release(r.reservationId);
            else if (await node.credits.commit(r.reservationId)) charged.set(accountId, (charged.get(accountId) ?? 0) + 1);
          }
        }),
      ),
    );
    for (const a of accounts) expect(await nodes[0]!.credits.balance(a.id)).toMatchObject({ used: charged.get(a.id) ?? 0, reserved: 0 });
    for (const node of nodes) await node.close();
    // The server counts the deadlocks it broke (each one a transaction rolled back and retried).
    const admin = new pg.Client({ connectionString: t.dbUrl });
    await admin.connect();
    try {
      await new Promise((resolve) => setTimeout(resolve, 1100)); // the statistics' flush interval
      const { rows } = await admin.query<{ deadlocks: string }>('SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()');
      expect(Number(rows[0]!.deadlocks)).toBe(0);
    } finally {
      await admin.end();
    }
  });
});
