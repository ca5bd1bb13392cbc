/**
 * The store's part in the dashboard's abuse limits, on both implementations (a fresh SQLite file
 * or PostgreSQL database per test, a fake clock): disabling an account ends its dashboard sessions,
 * and the login throttle holds the one-hour sign-up counts beside the 15-minute login failures,
 * shared by every node on PostgreSQL.
 */
import { describe, expect, it } from 'vitest';
import type { LimitDecision, LoginLimits } from '../../src/store/index.js';
import { expectStoreError, STORE_KINDS, useTempStores } from '../helpers/store.js';

const MINUTE = 60_000;
const HOUR_RULE = { maxFailures: 3, windowMs: 60 * MINUTE };
/** As the dashboard counts sign-ups: per address, for an hour. */
const SIGNUPS: LoginLimits = { perEmail: HOUR_RULE, perIp: HOUR_RULE };
const FAILURES: LoginLimits = { perEmail: { maxFailures: 5, windowMs: 15 * MINUTE }, perIp: { maxFailures: 5, windowMs: 15 * MINUTE } };

const allowed = (d: LimitDecision) => d.allowed;

describe.each(STORE_KINDS)('%s store', (kind) => {
  const t = useTempStores(kind);

  describe('disabling an account', () => {
    it("deletes the account's dashboard sessions, and only its own", async () => {
      const store = await t.open();
      const ada = await store.accounts.create({ email: 'ada@example.com' });
      const bob = await store.accounts.create({ email: 'bob@example.com' });
      const adaSessions = [await store.sessions.create(ada.id), await store.sessions.create(ada.id)];
      const bobSession = await store.sessions.create(bob.id);
      for (const s of adaSessions) expect((await store.sessions.get(s.token))?.accountId).toBe(ada.id);

      const disabled = await store.accounts.disable(ada.id);
      expect(disabled).toMatchObject({ id: ada.id, disabled: true, disabledAt: t.clock() });
      for (const s of adaSessions) expect(await store.sessions.get(s.token)).toBeNull();
      expect((await store.sessions.get(bobSession.token))?.accountId).toBe(bob.id);
      expect(await store.sessions.deleteForAccount(ada.id)).toBe(0); // nothing left behind

      // Enabling again does not bring them back; a new login makes a new one.
      await store.accounts.enable(ada.id);
      for (const s of adaSessions) expect(await store.sessions.get(s.token)).toBeNull();
      const fresh = await store.sessions.create(ada.id);
      expect((await store.sessions.get(fresh.token))?.accountId).toBe(ada.id);
    });

    it('disabling twice keeps the first time and ends sessions made in between', async () => {
      const store = await t.open();
      const ada = await store.accounts.create({ email: 'ada@example.com' });
      const first = await store.accounts.disable(ada.id);
      const between = await store.sessions.create(ada.id);
      t.clock.advance(MINUTE);
      expect((await store.accounts.disable(ada.id)).disabledAt).toEqual(first.disabledAt);
      expect(await store.sessions.get(between.token)).toBeNull();
    });

    it('an unknown account is not_found and ends no session', async () => {
      const store = await t.open();
      const ada = await store.accounts.create({ email: 'ada@example.com' });
      const session = await store.sessions.create(ada.id);
      await expectStoreError(store.accounts.disable(ada.id + 100), 'not_found');
      expect(await store.sessions.get(session.token)).not.toBeNull();
    });
  });

  describe('sign-up counts in the login throttle', () => {
    it('hold for an hour under their own key, apart from the login failures of the same address', async () => {
      const store = await t.open();
      const throttle = store.loginThrottle;
      for (let i = 0; i < 3; i++) expect(allowed(await throttle.begin(undefined, 'signup:10.0.0.1', SIGNUPS))).toBe(true);
      const refused = await throttle.begin(undefined, 'signup:10.0.0.1', SIGNUPS);
      expect(refused).toEqual({ allowed: false, retryAfterSeconds: 3600 });
      // The address's login failures and another address's sign-ups are counted apart.
      expect(allowed(await throttle.begin('ada@example.com', '10.0.0.1', FAILURES))).toBe(true);
      expect(allowed(await throttle.begin(undefined, 'signup:10.0.0.2', SIGNUPS))).toBe(true);

      t.clock.advance(59 * MINUTE);
      expect(await throttle.begin(undefined, 'signup:10.0.0.1', SIGNUPS)).toEqual({ allowed: false, retryAfterSeconds: 60 });
      t.clock.advance(MINUTE);
      expect(allowed(await throttle.begin(undefined, 'signup:10.0.0.1', SIGNUPS))).toBe(true);
    });

    it.runIf(kind === 'postgres')('are shared by every node on one database', async () => {
      const nodes = [await t.open(), await t.open(), await t.open()];
      const decisions: LimitDecision[] = [];
      // In parallel from three nodes: exactly the limit gets through.
      await Promise.all(
        Array.from({ length: 9 }, async (_, i) => {
          decisions.push(await nodes[i % 3]!.loginThrottle.begin(undefined, 'signup:10.0.0.1', SIGNUPS));
        }),
      );
      expect(decisions.filter(allowed)).toHaveLength(3);
      for (const node of nodes) expect(allowed(await node.loginThrottle.begin(undefined, 'signup:10.0.0.1', SIGNUPS))).toBe(false);
    });
  });
});
