/**
 * The sliding-window rate limit in memory (src/store/rate-window.ts, the SQLite store's counters)
 * on an injected clock: the limit inside one
 * minute, the previous minute's weight sliding out, Retry-After, the reset time, keys counted
 * apart, and idle keys swept once the table is large.
 */
import { describe, expect, it } from 'vitest';
import { rateLimitHeaders } from '../../src/service/rate-limit.js';
import { MemoryRateWindows as RateLimiter } from '../../src/store/rate-window.js';

const MINUTE = 60_000;
/** A minute boundary (epoch ms divisible by 60 000), so window offsets are exact. */
const T0 = 28_333_334 * MINUTE;
const T0_RESET = (T0 + MINUTE) / 1000;

function clock(start = T0) {
  let now = start;
  return {
    now: () => now,
    set(ms: number) {
      now = ms;
    },
  };
}

describe('within one minute', () => {
  it('allows exactly `limit` requests, counting remaining down to 0', () => {
    const c = clock();
    const limiter = new RateLimiter(c.now);
    const decisions = [1, 2, 3].map(() => limiter.take('k', 3));
    expect(decisions).toEqual([
      { allowed: true, limit: 3, remaining: 2, reset: T0_RESET, retryAfter: 0 },
      { allowed: true, limit: 3, remaining: 1, reset: T0_RESET, retryAfter: 0 },
      { allowed: true, limit: 3, remaining: 0, reset: T0_RESET, retryAfter: 0 },
    ]);
  });

  it('refuses the next one with Retry-After = seconds until the minute ends', () => {
    const c = clock();
    const limiter = new RateLimiter(c.now);
    for (let i = 0; i < 3; i++) limiter.take('k', 3);
    c.set(T0 + 15_000);
    expect(limiter.take('k', 3)).toEqual({ allowed: false, limit: 3, remaining: 0, reset: T0_RESET, retryAfter: 45 });
  });

  it('rounds Retry-After up to at least 1 second just before the minute ends', () => {
    const c = clock();
    const limiter = new RateLimiter(c.now);
    limiter.take('k', 1);
    c.set(T0 + MINUTE - 1);
    expect(limiter.take('k', 1)).toMatchObject({ allowed: false, retryAfter: 1, reset: T0_RESET });
  });

  it('reports reset as the epoch second the current minute ends, moving on with the next minute', () => {
    const c = clock();
    const limiter = new RateLimiter(c.now);
    c.set(T0 + MINUTE - 1);
    expect(limiter.take('k', 10).reset).toBe(T0_RESET);
    c.set(T0 + MINUTE);
    expect(limiter.take('k', 10).reset).toBe(T0_RESET + 60);
  });

  it('counts each key apart', () => {
    const limiter = new RateLimiter(clock().now);
    limiter.take('a', 1);
    expect(limiter.take('a', 1).allowed).toBe(false);
    expect(limiter.take('b', 1)).toMatchObject({ allowed: true, remaining: 0 });
  });

  it('does not count refused requests', () => {
    const c = clock();
    const limiter = new RateLimiter(c.now);
    limiter.take('k', 2);
    limiter.take('k', 2);
    for (let i = 0; i < 10; i++) expect(limiter.take('k', 2).allowed).toBe(false);
    // Half-way through the next minute the previous one weighs 2 × 0.5 = 1 (not 12 × 0.5).
    c.set(T0 + MINUTE + 30_000);
    expect(limiter.take('k', 2)).toMatchObject({ allowed: true, remaining: 0 });
  });
});

describe('sliding into the next minute', () => {
  it('weighs the previous minute by how much of it still overlaps the last 60 s', () => {
    const c = clock();
    const limiter = new RateLimiter(c.now);
    for (let i = 0; i < 4; i++) limiter.take('k', 4);
    // 45 s into the next minute: used = 0 + 4 × 0.25 = 1, so 3 more fit.
    c.set(T0 + MINUTE + 45_000);
    expect(limiter.take('k', 4)).toEqual({ allowed: true, limit: 4, remaining: 2, reset: T0_RESET + 60, retryAfter: 0 });
    expect(limiter.take('k', 4)).toMatchObject({ allowed: true, remaining: 1 });
    expect(limiter.take('k', 4)).toMatchObject({ allowed: true, remaining: 0 });
    expect(limiter.take('k', 4)).toMatchObject({ allowed: false });
  });

  it('sets Retry-After to when enough of the previous minute has slid out', () => {
    const c = clock();
    const limiter = new RateLimiter(c.now);
    for (let i = 0; i < 4; i++) limiter.take('k', 4);
    // 30 s in: used = 0 + 4 × 0.5 = 2; two fit, then used = 4 and one more needs 1 request of
    // the previous 4 to slide out: a quarter of a minute, 15 s.
    c.set(T0 + MINUTE + 30_000);
    expect(limiter.take('k', 4).allowed).toBe(true);
    expect(limiter.take('k', 4).allowed).toBe(true);
    expect(limiter.take('k', 4)).toEqual({ allowed: false, limit: 4, remaining: 0, reset: T0_RESET + 60, retryAfter: 15 });
    c.set(T0 + MINUTE + 45_000);
    expect(limiter.take('k', 4)).toMatchObject({ allowed: true, remaining: 0 });
  });

  it('forgets a minute that ended more than a minute ago', () => {
    const c = clock();
    const limiter = new RateLimiter(c.now);
    for (let i = 0; i < 3; i++) limiter.take('k', 3);
    c.set(T0 + 2 * MINUTE);
    expect(limiter.take('k', 3)).toEqual({ allowed: true, limit: 3, remaining: 2, reset: T0_RESET + 120, retryAfter: 0 });
  });
});

describe('memory', () => {
  /** The limiter's table of keys (private: the sweep has no other visible effect). */
  const tableSize = (limiter: RateLimiter) => (limiter as unknown as { buckets: Map<string, unknown> }).buckets.size;

  it('keeps the previous minute of every key and drops keys idle for longer once over 10 000 keys', () => {
    const c = clock();
    const limiter = new RateLimiter(c.now);
    for (let i = 0; i < 10_000; i++) limiter.take(`old-${i}`, 5);
    expect(tableSize(limiter)).toBe(10_000);
    // A minute later the old keys still weigh in the sliding window: none is dropped.
    c.set(T0 + MINUTE);
    limiter.take('recent', 5);
    expect(tableSize(limiter)).toBe(10_001);
    // Two minutes later they no longer count, and the next insertion sweeps them away.
    c.set(T0 + 2 * MINUTE);
    limiter.take('new', 5);
    expect(tableSize(limiter)).toBe(2);
    expect(limiter.take('recent', 5)).toMatchObject({ allowed: true });
  });
});

describe('rateLimitHeaders', () => {
  it('writes the X-RateLimit-* headers of a decision', () => {
    expect(rateLimitHeaders({ limit: 60, remaining: 7, reset: 1_700_000_100 })).toEqual({
      'X-RateLimit-Limit': '60',
      'X-RateLimit-Remaining': '7',
      'X-RateLimit-Reset': '1700000100',
    });
  });
});
