/**
 * The store, through its interface only (src/store/index.ts): what any implementation must do.
 * Every test runs on both implementations: SQLite files (a fresh temporary folder per test) and
 * PostgreSQL (a fresh database per test on the server of BGONE_TEST_DATABASE_URL). The checks that
 * look inside the SQLite file are in sqlite.test.ts; several PostgreSQL nodes in postgres.test.ts.
 * A fake clock drives everything time-dependent (no sleeps).
 *
 * The parallel tests (worker threads, a child process killed mid-request) load the compiled store
 * from dist/src/store/, which test/global-setup.ts rebuilds from src/ before every run.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import {
  API_KEY_PATTERN,
  cycleAt,
  cycleByIndex,
  cycleStart,
  IDEMPOTENCY_TTL_MS,
  PLANS,
  type ReserveResult,
  resolvePlans,
  SESSION_TTL_MS,
  type Store,
} from '../../src/store/index.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { countOutcomes, expectStoreError, STORE_KINDS, spend, useTempStores } from '../helpers/store.js';

const DIST_STORE_URL = pathToFileURL(join(REPO_ROOT, 'dist', 'src', 'store', 'index.js')).href;
const HOUR = 60 * 60 * 1000;
const DAY = 24 * HOUR;

describe.each(STORE_KINDS)('%s store', (kind) => {
  const t = useTempStores(kind);

  describe('opening', () => {
    it('creates the folder and the database; data survives closing and reopening', async () => {
      const first = await t.open();
      expect(first.kind).toBe(kind);
      expect(first.isOpen).toBe(true);
      if (kind === 'sqlite') expect(existsSync(t.dbPath)).toBe(true);
      const account = await first.accounts.create({ email: 'keep@example.com' });
      await first.close();
      expect(first.isOpen).toBe(false);
      await first.close(); // idempotent

      for (let i = 0; i < 2; i++) {
        const again = await t.open();
        expect((await again.accounts.get(account.id))?.email).toBe('keep@example.com');
        await again.close();
      }
    });

    it('serverKey: 32 random bytes, one per database, the same for every store on it and after reopening', async () => {
      const [a, b] = await Promise.all([t.open(), t.open()]);
      const [keyA, keyB] = await Promise.all([a.serverKey(), b.serverKey()]);
      expect(keyA).toHaveLength(32);
      expect(keyB.equals(keyA)).toBe(true);
      await Promise.all([a.close(), b.close()]);
      const again = await t.open();
      expect((await again.serverKey()).equals(keyA)).toBe(true);
      await again.close();
    });

    it('rejects bad options', async () => {
      await expect(t.open({ lastUsedResolutionMs: -1 })).rejects.toThrow(RangeError);
      await expect(t.open({ sessionTtlMs: 0 })).rejects.toThrow(RangeError);
      await expect(t.open({ rateLimits: { free: 0 } })).rejects.toThrow(RangeError);
    });
  });

  describe('plans', () => {
    it('has the plans of the spec and overridable rate limits', async () => {
      expect(PLANS.free).toMatchObject({ credits: 100, rateLimitPerMinute: 10, paid: false });
      expect(PLANS.pro).toMatchObject({ credits: 10_000, rateLimitPerMinute: 60, paid: true });
      expect(PLANS.ultra).toMatchObject({ credits: 50_000, rateLimitPerMinute: 300, paid: true });
      expect(PLANS.mega).toMatchObject({ credits: 200_000, rateLimitPerMinute: 1000, paid: true });
      const plans = resolvePlans({ free: 3 });
      expect(plans.free.rateLimitPerMinute).toBe(3);
      expect(plans.pro.rateLimitPerMinute).toBe(60);
      expect(() => resolvePlans({ free: 0 })).toThrow(RangeError);
      expect(() => resolvePlans({ gold: 5 } as never)).toThrow(RangeError);

      const store = await t.open({ rateLimits: { pro: 7 } });
      expect(store.plans.pro.rateLimitPerMinute).toBe(7);
      const account = await store.accounts.create({ email: 'a@example.com', plan: 'pro' });
      expect((await store.credits.balance(account.id)).rateLimitPerMinute).toBe(7);
      const { key } = await store.keys.create(account.id);
      expect(await store.keys.authenticate(key)).toMatchObject({ plan: 'pro', rateLimitPerMinute: 7 });
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
    it('creates accounts with unique case-insensitive emails, anchored at sign-up', async () => {
      const store = await t.open();
      const a = await store.accounts.create({ email: '  Alice@Example.COM ' });
      expect(a).toMatchObject({ email: 'Alice@Example.COM', plan: 'free', subscribedPlan: 'free', cancelAt: null, disabled: false, disabledAt: null });
      expect(a.createdAt).toEqual(t.clock());
      expect(await store.accounts.get(a.id)).toEqual(a);
      expect((await store.accounts.getByEmail('alice@example.com'))?.id).toBe(a.id);
      expect(await store.accounts.getByEmail('bob@example.com')).toBeNull();
      expect(await store.accounts.get(999)).toBeNull();
      await expectStoreError(store.accounts.create({ email: 'ALICE@example.com' }), 'email_taken');
      await expectStoreError(store.accounts.create({ email: 'not an email' }), 'invalid_argument');
      await expectStoreError(store.accounts.create({ email: 'x@example.com', plan: 'gold' as never }), 'invalid_argument');
      const b = await store.accounts.create({ email: 'bob@example.com', plan: 'ultra' });
      expect((await store.accounts.list()).map((x) => [x.email, x.plan])).toEqual([
        ['Alice@Example.COM', 'free'],
        ['bob@example.com', 'ultra'],
      ]);
      await expectStoreError(store.accounts.setPlan(999, 'pro'), 'not_found');
      await expectStoreError(store.accounts.setPlan(a.id, 'gold' as never), 'invalid_argument');
      await expectStoreError(store.accounts.disable(999), 'not_found');
      await expectStoreError(store.accounts.enable(999), 'not_found');
      expect(b.id).not.toBe(a.id);
    });

    it('setPlan takes effect now, for the current cycle', async () => {
      const store = await t.open();
      const a = await store.accounts.create({ email: 'a@example.com' });
      await spend(store, a.id, 100);
      expect(await store.credits.reserve(a.id, { requestId: 'req_x' })).toMatchObject({ ok: false, reason: 'payment_required' });
      expect(await store.accounts.setPlan(a.id, 'pro')).toMatchObject({ plan: 'pro', subscribedPlan: 'pro' });
      expect(await store.credits.balance(a.id)).toMatchObject({ plan: 'pro', allowance: 10_000, used: 100, remaining: 9_900, rateLimitPerMinute: 60 });
      await store.accounts.setPlan(a.id, 'free');
      expect(await store.credits.balance(a.id)).toMatchObject({ plan: 'free', allowance: 100, used: 100, remaining: 0 });
    });

    it('cancel keeps a paid plan until the end of the cycle, then the account is on Free', async () => {
      const store = await t.open();
      const a = await store.accounts.create({ email: 'a@example.com', plan: 'pro' }); // anchor 2024-03-10T08:00Z
      t.clock.set('2024-04-20T00:00:00.000Z'); // cycle 1: Apr 10 08:00 → May 10 08:00
      const cancelled = await store.accounts.cancel(a.id);
      expect(cancelled).toMatchObject({ plan: 'pro', subscribedPlan: 'pro', cancelAt: new Date('2024-05-10T08:00:00.000Z') });
      expect((await store.accounts.cancel(a.id)).cancelAt).toEqual(cancelled.cancelAt); // idempotent
      expect(await store.credits.balance(a.id)).toMatchObject({ plan: 'pro', allowance: 10_000 });

      t.clock.set('2024-05-10T07:59:59.999Z');
      expect((await store.accounts.get(a.id))?.plan).toBe('pro');
      t.clock.set('2024-05-10T08:00:00.000Z');
      expect(await store.accounts.get(a.id)).toMatchObject({ plan: 'free', subscribedPlan: 'pro' });
      expect(await store.credits.balance(a.id)).toMatchObject({ plan: 'free', allowance: 100, used: 0, cycleIndex: 2, rateLimitPerMinute: 10 });
      const { key } = await store.keys.create(a.id);
      expect(await store.keys.authenticate(key)).toMatchObject({ plan: 'free', rateLimitPerMinute: 10 });

      // Too late to resume; nothing left to cancel; subscribing again works.
      await expectStoreError(store.accounts.resume(a.id), 'invalid_state');
      await expectStoreError(store.accounts.cancel(a.id), 'invalid_state');
      expect(await store.accounts.setPlan(a.id, 'pro')).toMatchObject({ plan: 'pro', cancelAt: null });
    });

    it('resume before the cycle end keeps the paid plan', async () => {
      const store = await t.open();
      const a = await store.accounts.create({ email: 'a@example.com', plan: 'mega' });
      await store.accounts.cancel(a.id);
      t.clock.advance(20 * DAY);
      expect(await store.accounts.resume(a.id)).toMatchObject({ plan: 'mega', cancelAt: null });
      expect(await store.accounts.resume(a.id)).toMatchObject({ plan: 'mega', cancelAt: null }); // nothing pending: no-op
      t.clock.advance(100 * DAY);
      expect((await store.accounts.get(a.id))?.plan).toBe('mega');
      expect((await store.credits.balance(a.id)).allowance).toBe(200_000);
    });

    it('cannot cancel the free plan', async () => {
      const store = await t.open();
      const a = await store.accounts.create({ email: 'a@example.com' });
      await expectStoreError(store.accounts.cancel(a.id), 'invalid_state');
      await expectStoreError(store.accounts.cancel(12345), 'not_found');
      await expectStoreError(store.accounts.resume(12345), 'not_found');
    });

    it('a disabled account still authenticates (for a 403) but cannot reserve credits', async () => {
      const store = await t.open();
      const a = await store.accounts.create({ email: 'a@example.com' });
      const { key } = await store.keys.create(a.id);
      const disabled = await store.accounts.disable(a.id);
      expect(disabled).toMatchObject({ disabled: true, disabledAt: t.clock() });
      t.clock.advance(1000);
      expect((await store.accounts.disable(a.id)).disabledAt).toEqual(disabled.disabledAt); // the first time is kept
      expect((await store.keys.authenticate(key))?.disabled).toBe(true);
      expect(await store.credits.reserve(a.id, { requestId: 'req_1' })).toEqual({ ok: false, reason: 'account_disabled' });
      expect((await store.credits.balance(a.id)).reserved).toBe(0);
      expect(await store.accounts.enable(a.id)).toMatchObject({ disabled: false, disabledAt: null });
      expect((await store.keys.authenticate(key))?.disabled).toBe(false);
      expect(await store.credits.reserve(a.id, { requestId: 'req_2' })).toMatchObject({ ok: true });
    });
  });

  describe('passwords (dashboard sign-up)', () => {
    it('createWithPassword makes a Free account with its password hash and first key', async () => {
      const store = await t.open();
      const { account, key } = await store.accounts.createWithPassword({ email: ' Ada@Example.com', passwordHash: 'scrypt$hash' });
      expect(account).toMatchObject({ email: 'Ada@Example.com', plan: 'free', createdAt: t.clock() });
      expect(await store.accounts.passwordHash(account.id)).toBe('scrypt$hash');
      expect(key).toMatch(API_KEY_PATTERN);
      expect(await store.keys.authenticate(key)).toMatchObject({ accountId: account.id, plan: 'free' });
      expect(await store.keys.list(account.id)).toHaveLength(1);
    });

    it('a refused sign-up leaves nothing behind', async () => {
      const store = await t.open();
      await store.accounts.createWithPassword({ email: 'ada@example.com', passwordHash: 'h1' });
      await expectStoreError(store.accounts.createWithPassword({ email: 'ADA@example.com', passwordHash: 'h2' }), 'email_taken');
      await expectStoreError(store.accounts.createWithPassword({ email: 'nope', passwordHash: 'h2' }), 'invalid_argument');
      await expectStoreError(store.accounts.createWithPassword({ email: 'bob@example.com', passwordHash: '' }), 'invalid_argument');
      expect((await store.accounts.list()).map((a) => a.email)).toEqual(['ada@example.com']);
      expect(await store.usage.summary()).toMatchObject({ keys: { active: 1, revoked: 0 } });
    });

    it('an account made by the operator has no password until one is set', async () => {
      const store = await t.open();
      const a = await store.accounts.create({ email: 'cli@example.com' });
      expect(await store.accounts.passwordHash(a.id)).toBeNull();
      expect(await store.accounts.passwordHash(999)).toBeNull();
      await store.accounts.setPasswordHash(a.id, 'scrypt$new');
      expect(await store.accounts.passwordHash(a.id)).toBe('scrypt$new');
      await expectStoreError(store.accounts.setPasswordHash(999, 'x'), 'not_found');
      await expectStoreError(store.accounts.setPasswordHash(a.id, ''), 'invalid_argument');
      expect(await store.accounts.passwordHash(a.id)).toBe('scrypt$new');
    });
  });

  describe('API keys', () => {
    it('are created once, listed without the secret, authenticated and revoked', async () => {
      const store = await t.open();
      const a = await store.accounts.create({ email: 'a@example.com' });
      const b = await store.accounts.create({ email: 'b@example.com' });
      const { key, info } = await store.keys.create(a.id);
      expect(key).toMatch(/^rb-sk_[A-Za-z0-9_-]{43}$/);
      expect(key).toMatch(API_KEY_PATTERN);
      expect(info).toMatchObject({ accountId: a.id, prefix: key.slice(0, 12), last4: key.slice(-4), lastUsedAt: null, revokedAt: null, revoked: false });
      expect(info.createdAt).toEqual(t.clock());
      expect(JSON.stringify(await store.keys.list(a.id))).not.toContain(key.slice(12, -4));
      expect((await store.keys.create(a.id)).key).not.toBe(key);
      expect(await store.keys.list(a.id)).toHaveLength(2);
      expect(await store.keys.list(b.id)).toHaveLength(0);
      await expectStoreError(store.keys.create(999), 'not_found');
      expect(await store.keys.get(999)).toBeNull();

      t.clock.advance(1000);
      expect(await store.keys.authenticate(key)).toEqual({ keyId: info.id, accountId: a.id, disabled: false, plan: 'free', rateLimitPerMinute: 10 });
      expect((await store.keys.get(info.id))?.lastUsedAt).toEqual(t.clock());

      // Scoped revoke: not another account's key.
      expect(await store.keys.revoke(info.prefix, { accountId: b.id })).toBeNull();
      expect(await store.keys.authenticate(key)).not.toBeNull();
      const revoked = await store.keys.revoke(info.prefix);
      expect(revoked).toMatchObject({ id: info.id, revoked: true, revokedAt: t.clock() });
      expect(await store.keys.authenticate(key)).toBeNull();
      t.clock.advance(1000);
      expect((await store.keys.revoke(info.id))?.revokedAt).toEqual(revoked!.revokedAt); // idempotent
      expect(await store.keys.revoke('rb-sk_nope00')).toBeNull();
      expect(await store.keys.revoke(424242)).toBeNull();

      const other = await store.keys.create(b.id);
      expect((await store.keys.revoke(other.key, { accountId: b.id }))?.id).toBe(other.info.id); // by the full key
      expect(await store.keys.authenticate(other.key)).toBeNull();
    });

    it('are capped per account: the 11th active key is refused (key_limit), a revoked key frees a place, other accounts are not affected', async () => {
      const store = await t.open();
      const a = await store.accounts.create({ email: 'a@example.com' });
      const b = await store.accounts.create({ email: 'b@example.com' });
      const keys = [];
      for (let i = 0; i < 10; i++) keys.push(await store.keys.create(a.id));
      await expectStoreError(store.keys.create(a.id), 'key_limit');
      expect(await store.keys.list(a.id)).toHaveLength(10);
      expect((await store.keys.create(b.id)).info.accountId).toBe(b.id);
      // Revoked keys stay listed but do not count.
      await store.keys.revoke(keys[0]!.info.id);
      const replacement = await store.keys.create(a.id);
      expect(await store.keys.authenticate(replacement.key)).toMatchObject({ accountId: a.id });
      await expectStoreError(store.keys.create(a.id), 'key_limit');
      expect((await store.keys.list(a.id)).filter((k) => !k.revoked)).toHaveLength(10);
      await expectStoreError(store.keys.create(999), 'not_found');
      await expect(t.open({ maxKeysPerAccount: 0 })).rejects.toThrow(RangeError);
    });

    it('the cap is an option, and creations racing from two stores on one database (two nodes) never pass it', async () => {
      const first = await t.open({ maxKeysPerAccount: 3 });
      const second = await t.open({ maxKeysPerAccount: 3 });
      const a = await first.accounts.create({ email: 'a@example.com' });
      const outcomes = await Promise.allSettled(Array.from({ length: 8 }, (_, i) => (i % 2 ? second : first).keys.create(a.id)));
      expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(3);
      for (const o of outcomes) if (o.status === 'rejected') expect(o.reason).toMatchObject({ name: 'StoreError', code: 'key_limit' });
      expect(await first.keys.list(a.id)).toHaveLength(3);
    });

    it('record the last use at most once per resolution', async () => {
      const store = await t.open(); // default resolution: 60 s
      const a = await store.accounts.create({ email: 'a@example.com' });
      const { key, info } = await store.keys.create(a.id);
      const t0 = t.clock();
      await store.keys.authenticate(key);
      expect((await store.keys.get(info.id))?.lastUsedAt).toEqual(t0);
      t.clock.advance(59_999);
      await store.keys.authenticate(key);
      expect((await store.keys.get(info.id))?.lastUsedAt).toEqual(t0);
      t.clock.advance(1);
      await store.keys.authenticate(key);
      expect((await store.keys.get(info.id))?.lastUsedAt).toEqual(t.clock());

      const eager = await t.open({ lastUsedResolutionMs: 0 });
      t.clock.advance(1);
      await eager.keys.authenticate(key);
      expect((await eager.keys.get(info.id))?.lastUsedAt).toEqual(t.clock());
    });

    it('reject a malformed key without touching the database', async () => {
      const store = await t.open();
      const a = await store.accounts.create({ email: 'a@example.com' });
      const { key } = await store.keys.create(a.id);
      const malformed: unknown[] = [
        undefined,
        null,
        42,
        '',
        `Bearer ${key}`,
        `${key} `,
        'rb-sk_',
        'rb-sk_tooShort',
        `rb-sk_${'a'.repeat(129)}`,
        `rb-sk_${'a'.repeat(40)}!`,
        `RB-SK_${key.slice(6)}`,
        `sk_${key.slice(6)}`,
      ];
      await store.close();
      // Any query on a closed store fails: a well-formed key proves it.
      await expect(store.keys.authenticate(`rb-sk_${'A'.repeat(43)}`)).rejects.toThrow();
      for (const k of malformed) expect(await store.keys.authenticate(k as string)).toBeNull();
    });
  });

  describe('credits', () => {
    it("reservations follow the effective plan: a cancelled Pro's credits until cancel_at, Free's from then, a grant on top", async () => {
      const store = await t.open();
      const a = await store.accounts.create({ email: 'a@example.com', plan: 'pro' }); // anchor 2024-03-10T08:00Z
      await store.accounts.cancel(a.id); // Free from 2024-04-10T08:00Z, cycle 1
      expect(await store.credits.reserve(a.id, { requestId: 'req_pro' })).toMatchObject({ ok: true, remainingAfterCharge: 9_999 });
      t.clock.set('2024-04-10T08:00:00.000Z');
      const free = await Promise.all(Array.from({ length: 101 }, (_, i) => store.credits.reserve(a.id, { requestId: `req_free${i}` })));
      expect(countOutcomes(free)).toEqual({ ok: 100, payment_required: 1 });
      expect(free.filter((r) => r.ok).map((r) => (r as { remainingAfterCharge: number }).remainingAfterCharge)).toContain(0);
      await store.credits.grant(a.id, 2);
      const granted = await Promise.all(Array.from({ length: 3 }, (_, i) => store.credits.reserve(a.id, { requestId: `req_granted${i}` })));
      expect(countOutcomes(granted)).toEqual({ ok: 2, payment_required: 1 });
    });

    it('reserve holds a credit, commit charges exactly one, release gives it back', async () => {
      const store = await t.open();
      const a = await store.accounts.create({ email: 'a@example.com' });
      const { info } = await store.keys.create(a.id);

      const r = await store.credits.reserve(a.id, { requestId: 'req_1', keyId: info.id });
      expect(r).toEqual({ ok: true, reservationId: expect.any(Number), alreadyCharged: false, remainingAfterCharge: 99 });
      const id = (r as { reservationId: number }).reservationId;
      expect(await store.credits.balance(a.id)).toMatchObject({ allowance: 100, used: 0, reserved: 1, remaining: 99 });
      expect(await store.credits.commit(id)).toEqual({ chargeId: expect.any(Number), cycleIndex: 0, remaining: 99 });
      expect(await store.credits.balance(a.id)).toMatchObject({ used: 1, reserved: 0, remaining: 99 });
      expect(await store.credits.commit(id)).toBeNull(); // never twice
      expect(await store.credits.release(id)).toBe(false);
      expect((await store.credits.balance(a.id)).used).toBe(1);
      expect(await store.usage.byDay(a.id)).toContainEqual({ day: '2024-03-10', requests: 1 });

      const r2 = (await store.credits.reserve(a.id, { requestId: 'req_2' })) as { reservationId: number };
      expect(await store.credits.balance(a.id)).toMatchObject({ used: 1, reserved: 1, remaining: 98 });
      expect(await store.credits.release(r2.reservationId)).toBe(true);
      expect(await store.credits.release(r2.reservationId)).toBe(false);
      expect(await store.credits.commit(r2.reservationId)).toBeNull(); // a released request is never charged
      expect(await store.credits.balance(a.id)).toMatchObject({ used: 1, reserved: 0, remaining: 99 });

      await expectStoreError(store.credits.reserve(999, { requestId: 'req_3' }), 'not_found');
      await expectStoreError(store.credits.balance(999), 'not_found');
      await expectStoreError(store.credits.reserve(a.id, { requestId: '' }), 'invalid_argument');
      await expectStoreError(store.credits.reserve(a.id, { requestId: 'x'.repeat(256) }), 'invalid_argument');
      await expectStoreError(store.credits.reserve(a.id, { requestId: 'req_4', idempotencyKey: 'k' }), 'invalid_argument'); // no imageHash
    });

    it('a balance of 5 admits exactly 5 of 50 concurrent reservations', async () => {
      const store = await t.open();
      const a = await store.accounts.create({ email: 'a@example.com' });
      await spend(store, a.id, 95);
      const results = await Promise.all(Array.from({ length: 50 }, (_, i) => store.credits.reserve(a.id, { requestId: `req_${i}` })));
      expect(countOutcomes(results)).toEqual({ ok: 5, payment_required: 45 });
      const admitted = results.filter((r): r is Extract<ReserveResult, { ok: true }> => r.ok);
      expect(admitted.map((r) => r.remainingAfterCharge).sort()).toEqual([0, 1, 2, 3, 4]);
      expect(results.find((r) => !r.ok)).toEqual({ ok: false, reason: 'payment_required', resetsAt: new Date('2024-04-10T08:00:00.000Z') });
      await Promise.all(admitted.map((r) => store.credits.commit(r.reservationId!)));
      expect(await store.credits.balance(a.id)).toMatchObject({ used: 100, reserved: 0, remaining: 0 });
    });

    it('two stores on one database interleaving never oversell', async () => {
      const s1 = await t.open();
      const s2 = await t.open();
      const a = await s1.accounts.create({ email: 'a@example.com' });
      await s2.credits.grant(a.id, 5);
      await spend(s1, a.id, 100); // the plan's 100 are gone: 5 granted credits left
      const results = await Promise.all(Array.from({ length: 50 }, (_, i) => (i % 2 === 0 ? s1 : s2).credits.reserve(a.id, { requestId: `req_${i}` })));
      expect(countOutcomes(results)).toEqual({ ok: 5, payment_required: 45 });
      // Commits and releases from either store.
      const held = results.filter((r) => r.ok).map((r) => r.reservationId!);
      await s2.credits.commit(held[0]!);
      await s1.credits.commit(held[1]!);
      await s1.credits.release(held[2]!);
      expect(await s2.credits.balance(a.id)).toMatchObject({ allowance: 105, used: 102, reserved: 2, remaining: 1 });
      expect((await s1.credits.reserve(a.id, { requestId: 'req_again' })).ok).toBe(true);
      expect(await s2.credits.reserve(a.id, { requestId: 'req_over' })).toMatchObject({ ok: false, reason: 'payment_required' });
    });

    // SQLite only: the workers open the same file; postgres.test.ts has the PostgreSQL counterparts.
    it.runIf(kind === 'sqlite')('truly parallel stores (worker threads) charge exactly the balance', async () => {
      const store = await t.open();
      const a = await store.accounts.create({ email: 'a@example.com' });
      const workers = 4;
      const attempts = 60; // 240 attempts for 100 credits
      const go = new SharedArrayBuffer(4);
      const code = `
        const { workerData, parentPort } = require('node:worker_threads');
        (async () => {
          const { openStore } = await import(workerData.url);
          const store = await openStore({ path: workerData.path, clock: () => new Date(workerData.now) });
          const go = new Int32Array(workerData.go);
          parentPort.postMessage('ready');
          Atomics.wait(go, 0, 0);
          const outcomes = [];
          for (let i = 0; i < workerData.attempts; i++) {
            const r = await store.credits.reserve(workerData.accountId, { requestId: 'req_w' + workerData.n + '_' + i });
            if (r.ok) await store.credits.commit(r.reservationId);
            outcomes.push(r.ok ? 'ok' : r.reason);
          }
          await store.close();
          parentPort.postMessage(outcomes);
        })();
      `;
      const ready: Array<Promise<void>> = [];
      const done: Array<Promise<string[]>> = [];
      for (let n = 0; n < workers; n++) {
        const w = new Worker(code, {
          eval: true,
          workerData: { url: DIST_STORE_URL, path: t.dbPath, now: t.clock().getTime(), go, attempts, accountId: a.id, n },
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
      expect(countOutcomes(outcomes.map((o) => (o === 'ok' ? { ok: true } : { ok: false, reason: o })))).toEqual({ ok: 100, payment_required: 140 });
      expect(await store.credits.balance(a.id)).toMatchObject({ used: 100, reserved: 0, remaining: 0 });
      expect((await store.usage.summary()).charged.total).toBe(100);
    });

    it('recoverAfterCrash releases the reservations of a previous process, not its own', async () => {
      const before = await t.open();
      const a = await before.accounts.create({ email: 'a@example.com' });
      await spend(before, a.id, 10);
      for (let i = 0; i < 3; i++) expect((await before.credits.reserve(a.id, { requestId: `req_${i}` })).ok).toBe(true);
      await before.close(); // "crash": no commit, no release

      const after = await t.open();
      const own = (await after.credits.reserve(a.id, { requestId: 'req_new' })) as { reservationId: number };
      expect(await after.credits.balance(a.id)).toMatchObject({ used: 10, reserved: 4, remaining: 86 });
      expect((await after.usage.summary()).inFlight).toBe(4);
      expect(await after.credits.recoverAfterCrash()).toBe(3);
      expect(await after.credits.balance(a.id)).toMatchObject({ used: 10, reserved: 1, remaining: 89 });
      expect(await after.credits.recoverAfterCrash()).toBe(0);
      await after.credits.commit(own.reservationId);
      expect(await after.credits.balance(a.id)).toMatchObject({ used: 11, reserved: 0, remaining: 89 });
    });

    it.runIf(kind === 'sqlite')('a process killed between reserve and commit leaves no charge', async () => {
      const store = await t.open();
      const a = await store.accounts.create({ email: 'a@example.com' });
      const code = `
        const { openStore } = await import(${JSON.stringify(DIST_STORE_URL)});
        const store = await openStore({ path: ${JSON.stringify(t.dbPath)}, clock: () => new Date(${t.clock().getTime()}) });
        for (let i = 0; i < 2; i++) await store.credits.reserve(${a.id}, { requestId: 'req_child' + i });
        process.kill(process.pid, 'SIGKILL');
      `;
      const child = spawnSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8' });
      expect(child.signal, child.stderr).toBe('SIGKILL');
      expect(await store.credits.balance(a.id)).toMatchObject({ used: 0, reserved: 2 });
      expect(await store.credits.recoverAfterCrash()).toBe(2);
      expect(await store.credits.balance(a.id)).toMatchObject({ used: 0, reserved: 0, remaining: 100 });
    });

    it('credits reset at each cycle start; nothing carries over (Jan 31 anchor → Feb 29)', async () => {
      t.clock.set('2024-01-31T12:00:00.000Z');
      const store = await t.open();
      const a = await store.accounts.create({ email: 'a@example.com' });
      await spend(store, a.id, 100);
      expect(await store.credits.reserve(a.id, { requestId: 'req_x' })).toEqual({
        ok: false,
        reason: 'payment_required',
        resetsAt: new Date('2024-02-29T12:00:00.000Z'),
      });
      t.clock.set('2024-02-29T11:59:59.999Z');
      expect(await store.credits.balance(a.id)).toMatchObject({ cycleIndex: 0, used: 100, remaining: 0 });
      t.clock.set('2024-02-29T12:00:00.000Z');
      expect(await store.credits.balance(a.id)).toEqual({
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
      await spend(store, a.id, 30);
      t.clock.set('2024-03-31T12:00:00.000Z'); // 70 unused: not carried over
      expect(await store.credits.balance(a.id)).toMatchObject({
        cycleIndex: 2,
        allowance: 100,
        used: 0,
        remaining: 100,
        cycleEnd: new Date('2024-04-30T12:00:00.000Z'),
      });
    });

    it('a request admitted before the cycle end is charged to that cycle even if it completes after', async () => {
      const store = await t.open();
      const a = await store.accounts.create({ email: 'a@example.com' });
      await spend(store, a.id, 99);
      t.clock.set('2024-04-10T07:59:59.000Z');
      const r = (await store.credits.reserve(a.id, { requestId: 'req_late' })) as { reservationId: number };
      t.clock.set('2024-04-10T08:00:01.000Z'); // cycle 1 now
      expect(await store.credits.balance(a.id)).toMatchObject({ cycleIndex: 1, used: 0, reserved: 0, remaining: 100 });
      expect(await store.credits.commit(r.reservationId)).toMatchObject({ cycleIndex: 0, remaining: 100 });
      const cycle0 = await store.usage.byDay(a.id, 0);
      expect(cycle0.reduce((s, d) => s + d.requests, 0)).toBe(100);
      expect(cycle0.at(-1)).toEqual({ day: '2024-04-10', requests: 1 });
    });

    it('grant adds credits to the current cycle only', async () => {
      const store = await t.open();
      const a = await store.accounts.create({ email: 'a@example.com' });
      await spend(store, a.id, 100);
      expect(await store.credits.grant(a.id, 3, 'support ticket 12')).toMatchObject({ allowance: 103, granted: 3, used: 100, remaining: 3 });
      expect(await store.credits.grant(a.id, 2)).toMatchObject({ allowance: 105, granted: 5, remaining: 5 });
      const results = await Promise.all(Array.from({ length: 8 }, (_, i) => store.credits.reserve(a.id, { requestId: `req_${i}` })));
      expect(countOutcomes(results)).toEqual({ ok: 5, payment_required: 3 });
      t.clock.set('2024-04-10T08:00:00.000Z');
      expect(await store.credits.balance(a.id)).toMatchObject({ allowance: 100, granted: 0, used: 0 });
      await expectStoreError(store.credits.grant(a.id, 0), 'invalid_argument');
      await expectStoreError(store.credits.grant(a.id, 1.5), 'invalid_argument');
      await expectStoreError(store.credits.grant(999, 1), 'not_found');
    });

    describe('Idempotency-Key', () => {
      it('a retry with the same key and image is charged once', async () => {
        const store = await t.open();
        const a = await store.accounts.create({ email: 'a@example.com' });
        const first = await store.credits.reserve(a.id, { requestId: 'req_1', idempotencyKey: 'order-42', imageHash: 'h1' });
        expect(first).toMatchObject({ ok: true, alreadyCharged: false });
        await store.credits.commit((first as { reservationId: number }).reservationId);
        t.clock.advance(HOUR);
        const retry = await store.credits.reserve(a.id, { requestId: 'req_2', idempotencyKey: 'order-42', imageHash: 'h1' });
        expect(retry).toEqual({ ok: true, reservationId: null, alreadyCharged: true, remainingAfterCharge: 99 });
        expect(await store.credits.balance(a.id)).toMatchObject({ used: 1, reserved: 0 });

        // A different image under the same key is a conflict.
        expect(await store.credits.reserve(a.id, { requestId: 'req_3', idempotencyKey: 'order-42', imageHash: 'h2' })).toEqual({
          ok: false,
          reason: 'idempotency_conflict',
        });
        // The key is scoped to the account.
        const b = await store.accounts.create({ email: 'b@example.com' });
        expect(await store.credits.reserve(b.id, { requestId: 'req_4', idempotencyKey: 'order-42', imageHash: 'h2' })).toMatchObject({
          ok: true,
          alreadyCharged: false,
        });
      });

      it('a key in flight is in progress for its own image, a conflict for another; a failed (released) request leaves no record', async () => {
        const store = await t.open();
        const a = await store.accounts.create({ email: 'a@example.com' });
        const r = (await store.credits.reserve(a.id, { requestId: 'req_1', idempotencyKey: 'k', imageHash: 'h' })) as { reservationId: number };
        expect(await store.credits.reserve(a.id, { requestId: 'req_2', idempotencyKey: 'k', imageHash: 'h' })).toEqual({
          ok: false,
          reason: 'idempotency_in_progress',
        });
        expect(await store.credits.reserve(a.id, { requestId: 'req_2b', idempotencyKey: 'k', imageHash: 'other' })).toEqual({
          ok: false,
          reason: 'idempotency_conflict',
        });
        await store.credits.release(r.reservationId);
        const again = await store.credits.reserve(a.id, { requestId: 'req_3', idempotencyKey: 'k', imageHash: 'h' });
        expect(again).toMatchObject({ ok: true, alreadyCharged: false, reservationId: expect.any(Number) });
        await store.credits.commit((again as { reservationId: number }).reservationId);
        expect((await store.credits.balance(a.id)).used).toBe(1);
      });

      it('an already-charged retry is served even with no credits left', async () => {
        const store = await t.open();
        const a = await store.accounts.create({ email: 'a@example.com' });
        await spend(store, a.id, 99);
        const r = (await store.credits.reserve(a.id, { requestId: 'req_1', idempotencyKey: 'k', imageHash: 'h' })) as { reservationId: number };
        await store.credits.commit(r.reservationId);
        expect(await store.credits.reserve(a.id, { requestId: 'req_2' })).toMatchObject({ ok: false, reason: 'payment_required' });
        expect(await store.credits.reserve(a.id, { requestId: 'req_3', idempotencyKey: 'k', imageHash: 'h' })).toMatchObject({
          ok: true,
          alreadyCharged: true,
          remainingAfterCharge: 0,
        });
      });

      it('a record protects for 24 h; after that the key starts a new request, which replaces it', async () => {
        const store = await t.open();
        const a = await store.accounts.create({ email: 'a@example.com' });
        const r = (await store.credits.reserve(a.id, { requestId: 'req_1', idempotencyKey: 'k', imageHash: 'h' })) as { reservationId: number };
        await store.credits.commit(r.reservationId);
        t.clock.advance(IDEMPOTENCY_TTL_MS - 1);
        expect(await store.credits.reserve(a.id, { requestId: 'req_2', idempotencyKey: 'k', imageHash: 'h' })).toMatchObject({ alreadyCharged: true });
        t.clock.advance(1);
        const late = await store.credits.reserve(a.id, { requestId: 'req_3', idempotencyKey: 'k', imageHash: 'other' });
        expect(late).toMatchObject({ ok: true, alreadyCharged: false }); // expired: a new request
        await store.credits.commit((late as { reservationId: number }).reservationId);
        expect((await store.credits.balance(a.id)).used).toBe(2);
        // The key now stands for the new image.
        expect(await store.credits.reserve(a.id, { requestId: 'req_4', idempotencyKey: 'k', imageHash: 'other' })).toMatchObject({ alreadyCharged: true });
        expect(await store.credits.reserve(a.id, { requestId: 'req_5', idempotencyKey: 'k', imageHash: 'h' })).toEqual({
          ok: false,
          reason: 'idempotency_conflict',
        });
      });
    });
  });

  describe('usage', () => {
    it('reports requests per UTC day of a cycle and a global summary', async () => {
      const store = await t.open(); // anchor 2024-03-10T08:00Z: cycle 0 touches Mar 10 … Apr 10
      const a = await store.accounts.create({ email: 'a@example.com' });
      const b = await store.accounts.create({ email: 'b@example.com', plan: 'pro' });
      await store.keys.create(a.id);
      const kb = await store.keys.create(b.id);
      await store.keys.revoke(kb.info.id);
      await spend(store, a.id, 2); // Mar 10
      t.clock.set('2024-03-12T23:59:59.999Z');
      await spend(store, a.id, 3);
      t.clock.set('2024-03-13T00:00:00.000Z');
      await spend(store, a.id, 1);
      await spend(store, b.id, 4);
      await store.credits.reserve(b.id, { requestId: 'req_in_flight' });

      const days = await store.usage.byDay(a.id);
      expect(days).toHaveLength(32); // Mar 10 … Apr 10 inclusive
      expect(days[0]).toEqual({ day: '2024-03-10', requests: 2 });
      expect(days.slice(1, 4)).toEqual([
        { day: '2024-03-11', requests: 0 },
        { day: '2024-03-12', requests: 3 },
        { day: '2024-03-13', requests: 1 },
      ]);
      expect(days.at(-1)).toEqual({ day: '2024-04-10', requests: 0 });
      expect(days.reduce((s, d) => s + d.requests, 0)).toBe((await store.credits.balance(a.id)).used);
      expect((await store.usage.byDay(a.id, 1)).every((d) => d.requests === 0)).toBe(true);
      await expectStoreError(store.usage.byDay(999), 'not_found');

      t.clock.set('2024-03-20T00:00:00.000Z');
      await store.accounts.disable(a.id);
      const summary = await store.usage.summary();
      expect(summary).toMatchObject({
        at: t.clock(),
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

  describe('sessions', () => {
    it('open with a token given once, resolve until they expire on the store clock, and end at logout', async () => {
      const store = await t.open();
      expect(store.sessions.ttlMs).toBe(SESSION_TTL_MS);
      const a = await store.accounts.create({ email: 'a@example.com' });
      const { token, session } = await store.sessions.create(a.id);
      expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(session).toMatchObject({ accountId: a.id, createdAt: t.clock(), expiresAt: new Date(t.clock().getTime() + SESSION_TTL_MS) });
      expect(session.csrfToken).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(session.csrfToken).not.toBe(token);
      expect(await store.sessions.get(token)).toEqual(session);

      const second = await store.sessions.create(a.id);
      expect(second.token).not.toBe(token);
      expect(second.session.csrfToken).not.toBe(session.csrfToken);

      t.clock.advance(SESSION_TTL_MS - 1);
      expect(await store.sessions.get(token)).toEqual(session);
      t.clock.advance(1);
      expect(await store.sessions.get(token)).toBeNull();

      const third = await store.sessions.create(a.id);
      expect(await store.sessions.delete(third.token)).toBe(true);
      expect(await store.sessions.get(third.token)).toBeNull();
      expect(await store.sessions.delete(third.token)).toBe(false);
    });

    it('ignore malformed and unknown tokens, and end all of an account at once', async () => {
      const store = await t.open();
      const a = await store.accounts.create({ email: 'a@example.com' });
      const b = await store.accounts.create({ email: 'b@example.com' });
      const [a1, a2, b1] = [await store.sessions.create(a.id), await store.sessions.create(a.id), await store.sessions.create(b.id)];
      for (const token of [undefined, '', 'short', `${a1.token}x`, `${a1.token.slice(0, -1)}!`, 'A'.repeat(43)]) {
        expect(await store.sessions.get(token)).toBeNull();
        expect(await store.sessions.delete(token)).toBe(false);
      }
      expect(await store.sessions.deleteForAccount(a.id)).toBe(2);
      expect(await store.sessions.get(a1.token)).toBeNull();
      expect(await store.sessions.get(a2.token)).toBeNull();
      expect(await store.sessions.get(b1.token)).not.toBeNull();
      expect(await store.sessions.deleteForAccount(a.id)).toBe(0);
      await expectStoreError(store.sessions.create(999), 'not_found');
    });

    it('last sessionTtlMs when the store is opened with it', async () => {
      const store = await t.open({ sessionTtlMs: 5 * 60_000 });
      expect(store.sessions.ttlMs).toBe(5 * 60_000);
      const a = await store.accounts.create({ email: 'a@example.com' });
      const { token, session } = await store.sessions.create(a.id);
      expect(session.expiresAt.getTime() - session.createdAt.getTime()).toBe(5 * 60_000);
      t.clock.advance(5 * 60_000);
      expect(await store.sessions.get(token)).toBeNull();
    });
  });

  describe('rate limits', () => {
    const MINUTE = 60_000;

    it('counts a bucket within the sliding minute: the limit, then a refusal with Retry-After; buckets apart', async () => {
      const store = await t.open();
      t.clock.set('2024-03-10T08:00:15.000Z'); // 15 s into a minute
      const reset = Date.parse('2024-03-10T08:01:00.000Z') / 1000;
      const taken = [];
      for (let i = 0; i < 3; i++) taken.push(await store.rateLimits.take('key:1', 3));
      expect(taken).toEqual([2, 1, 0].map((remaining) => ({ allowed: true, limit: 3, remaining, reset, retryAfter: 0 })));
      expect(await store.rateLimits.take('key:1', 3)).toEqual({ allowed: false, limit: 3, remaining: 0, reset, retryAfter: 45 });
      expect(await store.rateLimits.take('key:2', 3)).toMatchObject({ allowed: true, remaining: 2 });
    });

    it('weighs the previous minute as it slides out, and does not count refusals', async () => {
      const store = await t.open();
      t.clock.set('2024-03-10T08:00:00.000Z');
      for (let i = 0; i < 4; i++) await store.rateLimits.take('k', 4);
      for (let i = 0; i < 5; i++) expect((await store.rateLimits.take('k', 4)).allowed).toBe(false);
      t.clock.advance(MINUTE + 30_000); // the previous minute weighs 4 x 0.5 = 2: two fit
      expect(await store.rateLimits.take('k', 4)).toMatchObject({ allowed: true, remaining: 1 });
      expect(await store.rateLimits.take('k', 4)).toMatchObject({ allowed: true, remaining: 0 });
      expect(await store.rateLimits.take('k', 4)).toMatchObject({ allowed: false, retryAfter: 15 });
      t.clock.advance(MINUTE * 2); // both minutes slid out
      expect(await store.rateLimits.take('k', 4)).toMatchObject({ allowed: true, remaining: 3 });
    });

    it('40 parallel requests against a limit of 10 pass exactly 10', async () => {
      const store = await t.open();
      const decisions = await Promise.all(Array.from({ length: 40 }, () => store.rateLimits.take('k', 10)));
      expect(decisions.filter((d) => d.allowed)).toHaveLength(10);
    });
  });

  describe('login throttle', () => {
    const LIMITS = { perEmail: { maxFailures: 3, windowMs: 10 * 60_000 }, perIp: { maxFailures: 5, windowMs: 10 * 60_000 } };
    const allowed = async (store: Store, email: string | undefined, ip: string) => {
      const d = await store.loginThrottle.begin(email, ip, LIMITS);
      if (!d.allowed) throw new Error(`refused, retry after ${d.retryAfterSeconds} s`);
      return d.attempt;
    };

    it('counts attempts per email and per IP as they begin; refuses at the limit until the oldest expires', async () => {
      const store = await t.open();
      for (let i = 0; i < 3; i++) {
        await allowed(store, 'a@example.com', `10.0.0.${i}`);
        t.clock.advance(60_000);
      }
      // The first failure (3 minutes ago) expires in 7 minutes.
      expect(await store.loginThrottle.begin('a@example.com', '10.0.0.9', LIMITS)).toEqual({ allowed: false, retryAfterSeconds: 420 });
      await allowed(store, 'b@example.com', '10.0.0.9'); // another email from another IP
      await allowed(store, undefined, '10.0.0.9'); // a sign-up counts against the IP only
      await allowed(store, undefined, '10.0.0.9');
      await allowed(store, undefined, '10.0.0.9');
      await allowed(store, 'c@example.com', '10.0.0.9'); // the IP's fifth
      expect(await store.loginThrottle.begin('d@example.com', '10.0.0.9', LIMITS)).toMatchObject({ allowed: false });
      t.clock.advance(7 * 60_000);
      await allowed(store, 'a@example.com', '10.0.0.1');
    });

    it('forgive takes one attempt back; succeed also clears the email', async () => {
      const store = await t.open();
      const first = await allowed(store, 'a@example.com', '10.0.0.1');
      await allowed(store, 'a@example.com', '10.0.0.2');
      await allowed(store, 'a@example.com', '10.0.0.3');
      expect((await store.loginThrottle.begin('a@example.com', '10.0.0.4', LIMITS)).allowed).toBe(false);
      await store.loginThrottle.forgive(first); // two counted now
      const fourth = await allowed(store, 'a@example.com', '10.0.0.4');
      expect((await store.loginThrottle.begin('a@example.com', '10.0.0.5', LIMITS)).allowed).toBe(false);
      await store.loginThrottle.succeed(fourth);
      for (let i = 0; i < 3; i++) await allowed(store, 'a@example.com', `10.0.1.${i}`);
    });

    it('10 parallel attempts at one email pass exactly the limit', async () => {
      const store = await t.open();
      const decisions = await Promise.all(Array.from({ length: 10 }, (_, i) => store.loginThrottle.begin('a@example.com', `10.0.0.${i}`, LIMITS)));
      expect(decisions.filter((d) => d.allowed)).toHaveLength(3);
    });
  });
});
