/**
 * The dashboard's abuse limits that need no server: the bound on concurrent scrypt work
 * (src/dashboard/passwords.ts, PasswordHasher), the sign-up variables of the configuration, and the
 * in-memory login throttle keeping a one-hour sign-up key beside 15-minute login keys.
 *
 * node:crypto's scrypt is wrapped here (vi.mock is hoisted above the imports) so that the number of
 * computations running at once is counted at the call itself, independently of the hasher's own
 * bookkeeping.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/config.js';
import { DEFAULT_PASSWORD_WORK, hashPassword, PasswordHasher, PasswordWorkOverloaded } from '../../src/dashboard/passwords.js';
import { MemoryLoginThrottle } from '../../src/store/login-throttle.js';

const crypto = vi.hoisted(() => ({ running: 0, peak: 0, calls: 0 }));

vi.mock('node:crypto', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:crypto')>();
  const scrypt = ((...args: unknown[]) => {
    const callback = args[args.length - 1] as (err: Error | null, key: Buffer) => void;
    crypto.calls++;
    crypto.running++;
    crypto.peak = Math.max(crypto.peak, crypto.running);
    (actual.scrypt as (...a: unknown[]) => void)(...args.slice(0, -1), (err: Error | null, key: Buffer) => {
      crypto.running--;
      callback(err, key);
    });
  }) as typeof actual.scrypt;
  return { ...actual, scrypt, default: { ...actual, scrypt } };
});

/** Cheap scrypt (1 MiB) so that the tests count places, not seconds. */
const CHEAP = { N: 1024, r: 8, p: 1 };

afterEach(() => {
  crypto.running = 0;
  crypto.peak = 0;
  crypto.calls = 0;
});

async function settle<T>(promises: Promise<T>[]) {
  const results = await Promise.allSettled(promises);
  return {
    done: results.filter((r) => r.status === 'fulfilled').map((r) => (r as PromiseFulfilledResult<T>).value),
    refused: results.filter((r) => r.status === 'rejected').map((r) => (r as PromiseRejectedResult).reason as unknown),
  };
}

describe('PasswordHasher', () => {
  it('defaults to one scrypt at a time with 8 waiting', () => {
    expect(DEFAULT_PASSWORD_WORK).toEqual({ concurrency: 1, queue: 8, retryAfterSeconds: 2 });
    expect(new PasswordHasher().limits).toEqual(DEFAULT_PASSWORD_WORK);
  });

  it('runs one scrypt at a time, lets `queue` more wait, and refuses the rest before any work', async () => {
    const hasher = new PasswordHasher(CHEAP, { concurrency: 1, queue: 3, retryAfterSeconds: 7 });
    const burst = Array.from({ length: 10 }, (_, i) => hasher.hash(`password number ${i}`));
    expect(hasher.waiting).toBe(3);
    const { done, refused } = await settle(burst);
    expect(done).toHaveLength(4);
    for (const hash of done) expect(hash).toMatch(/^scrypt\$1024\$8\$1\$/);
    expect(refused).toHaveLength(6);
    for (const err of refused) {
      expect(err).toBeInstanceOf(PasswordWorkOverloaded);
      expect((err as PasswordWorkOverloaded).retryAfterSeconds).toBe(7);
    }
    expect(crypto.calls).toBe(4); // the refused ones did no work
    expect(crypto.peak).toBe(1);
    expect(hasher.peakHashing).toBe(1);
    expect(hasher.hashing).toBe(0);
    expect(hasher.waiting).toBe(0);
    // The places are free again.
    expect(await hasher.verify('password number 0', done[0]!)).toBe(true);
  });

  it('holds the bound for verifications too, the dummy hash of a missing password included', async () => {
    const hasher = new PasswordHasher({ N: 2048, r: 8, p: 1 }, { concurrency: 2, queue: 2 });
    const stored = await hashPassword('the right password', { N: 2048, r: 8, p: 1 });
    crypto.peak = 0;
    // The first four get places: the right and a wrong password against the hash, then the right
    // and a wrong one against no hash (the dummy hash is computed inside the place).
    const burst = Array.from({ length: 8 }, (_, i) =>
      hasher.verify(i % 2 === 0 ? 'the right password' : 'a wrong password', i === 2 || i === 3 ? null : stored),
    );
    const { done, refused } = await settle(burst);
    expect(refused).toHaveLength(4);
    expect(done).toEqual([true, false, false, false]);
    expect(crypto.peak).toBe(2);
    expect(hasher.peakHashing).toBe(2);
  });

  it('never runs more than the bound over a long burst with places freed meanwhile', async () => {
    const hasher = new PasswordHasher(CHEAP, { concurrency: 2, queue: 5 });
    const waves: Promise<unknown>[] = [];
    for (let wave = 0; wave < 5; wave++) {
      for (let i = 0; i < 6; i++) waves.push(hasher.hash(`wave ${wave} password ${i}`).catch((err: unknown) => err));
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    await Promise.all(waves);
    expect(crypto.peak).toBeLessThanOrEqual(2);
    expect(hasher.peakHashing).toBeLessThanOrEqual(2);
  });

  it('refuses bad limits and bad parameters', () => {
    expect(() => new PasswordHasher(CHEAP, { concurrency: 0 })).toThrow(RangeError);
    expect(() => new PasswordHasher(CHEAP, { queue: -1 })).toThrow(RangeError);
    expect(() => new PasswordHasher(CHEAP, { retryAfterSeconds: 0 })).toThrow(RangeError);
    expect(() => new PasswordHasher({ N: 1000, r: 8, p: 1 })).toThrow(RangeError);
    expect(new PasswordHasher(CHEAP, { queue: 0 }).limits.queue).toBe(0);
  });
});

describe('sign-up configuration', () => {
  it('is open with 5 sign-ups per address per hour by default', () => {
    expect(loadConfig({}).signup).toEqual({ enabled: true, perIpPerHour: 5 });
  });

  it('reads BGONE_SIGNUP and BGONE_SIGNUP_PER_IP_PER_HOUR', () => {
    expect(loadConfig({ BGONE_SIGNUP: 'false', BGONE_SIGNUP_PER_IP_PER_HOUR: '20' }).signup).toEqual({ enabled: false, perIpPerHour: 20 });
    expect(loadConfig({ BGONE_SIGNUP: 'off' }).signup.enabled).toBe(false);
    expect(loadConfig({ BGONE_SIGNUP: 'true' }).signup.enabled).toBe(true);
  });

  it.each([
    ['BGONE_SIGNUP', 'closed'],
    ['BGONE_SIGNUP_PER_IP_PER_HOUR', '0'],
    ['BGONE_SIGNUP_PER_IP_PER_HOUR', '2.5'],
    ['BGONE_SIGNUP_PER_IP_PER_HOUR', 'many'],
  ])('refuses %s=%s with a ConfigError naming it', (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(ConfigError);
    expect(() => loadConfig({ [name]: value })).toThrow(new RegExp(name));
  });
});

describe('the in-memory login throttle with windows of different lengths', () => {
  const MINUTE = 60_000;
  const HOUR_RULE = { maxFailures: 2, windowMs: 60 * MINUTE };
  const HOUR = { perEmail: HOUR_RULE, perIp: HOUR_RULE };
  const QUARTER = { perEmail: { maxFailures: 5, windowMs: 15 * MINUTE }, perIp: { maxFailures: 5, windowMs: 15 * MINUTE } };

  it('keeps a one-hour key through a sweep made by a 15-minute attempt', () => {
    let now = 1_700_000_000_000;
    const throttle = new MemoryLoginThrottle(() => now);
    expect(throttle.begin(undefined, 'signup:10.0.0.1', HOUR).allowed).toBe(true);
    expect(throttle.begin(undefined, 'signup:10.0.0.1', HOUR).allowed).toBe(true);
    expect(throttle.begin(undefined, 'signup:10.0.0.1', HOUR).allowed).toBe(false);
    now += 20 * MINUTE;
    // Enough addresses for the 15-minute attempts to sweep the whole table.
    for (let i = 0; i < 10_050; i++) throttle.begin(undefined, `10.1.${i >> 8}.${i & 255}`, QUARTER);
    const refused = throttle.begin(undefined, 'signup:10.0.0.1', HOUR);
    expect(refused.allowed).toBe(false);
    expect(refused.allowed ? 0 : refused.retryAfterSeconds).toBe(40 * 60);
    now += 40 * MINUTE;
    expect(throttle.begin(undefined, 'signup:10.0.0.1', HOUR).allowed).toBe(true);
  });
});
