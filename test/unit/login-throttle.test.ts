/**
 * The password-guessing throttle in memory (src/store/login-throttle.ts, the SQLite store's) on an injected clock:
 * failures counted per email and per IP in a sliding window, counted as soon as an attempt begins,
 * taken back by forgive/succeed, and Retry-After until the oldest counted failure expires.
 */
import { describe, expect, it } from 'vitest';
import { DEFAULT_LOGIN_LIMITS, type LimitDecision, type LoginLimits, MemoryLoginThrottle } from '../../src/store/login-throttle.js';

/** The in-memory throttle with its limits bound, as the dashboard calls it. */
function limiterFor(now: () => number, limits: LoginLimits = DEFAULT_LOGIN_LIMITS) {
  const throttle = new MemoryLoginThrottle(now);
  return {
    begin: (email: string | undefined, ip: string) => throttle.begin(email, ip, limits),
    forgive: (a: Parameters<MemoryLoginThrottle['forgive']>[0]) => throttle.forgive(a),
    succeed: (a: Parameters<MemoryLoginThrottle['succeed']>[0]) => throttle.succeed(a),
  };
}

const MINUTE = 60_000;
const T0 = 1_700_000_000_000;

function clock() {
  let now = T0;
  return {
    now: () => now,
    advance(ms: number) {
      now += ms;
    },
  };
}

function attempt(decision: LimitDecision) {
  if (!decision.allowed) throw new Error(`refused, retry after ${decision.retryAfterSeconds} s`);
  return decision.attempt;
}

/** Only the email's count matters (the IP's limit is far away), or only the IP's. */
const EMAIL_ONLY: LoginLimits = { perEmail: { maxFailures: 3, windowMs: 10 * MINUTE }, perIp: { maxFailures: 1000, windowMs: 10 * MINUTE } };
const IP_ONLY: LoginLimits = { perEmail: { maxFailures: 1000, windowMs: 10 * MINUTE }, perIp: { maxFailures: 3, windowMs: 10 * MINUTE } };

describe('defaults', () => {
  it('are 5 failures per 15 minutes per email and per IP', () => {
    expect(DEFAULT_LOGIN_LIMITS).toEqual({
      perEmail: { maxFailures: 5, windowMs: 15 * MINUTE },
      perIp: { maxFailures: 5, windowMs: 15 * MINUTE },
    });
  });

  it('refuse the 6th attempt at one email within 15 minutes, until the first failure is 15 minutes old', () => {
    const c = clock();
    const limiter = limiterFor(c.now);
    for (let i = 0; i < 5; i++) {
      expect(limiter.begin('a@b.c', `10.0.0.${i}`).allowed).toBe(true);
      c.advance(MINUTE);
    }
    // Now T0 + 5 min; the first failure (T0) expires at T0 + 15 min: 600 s from now.
    expect(limiter.begin('a@b.c', '10.0.0.99')).toEqual({ allowed: false, retryAfterSeconds: 600 });
    c.advance(10 * MINUTE - 1);
    expect(limiter.begin('a@b.c', '10.0.0.99')).toEqual({ allowed: false, retryAfterSeconds: 1 });
    c.advance(1);
    expect(limiter.begin('a@b.c', '10.0.0.99').allowed).toBe(true);
  });
});

describe('per email', () => {
  it('counts an attempt as a failure as soon as it begins (parallel guesses cannot all pass)', () => {
    const limiter = limiterFor(clock().now, EMAIL_ONLY);
    const started = [1, 2, 3].map((i) => limiter.begin('a@b.c', `10.0.0.${i}`));
    expect(started.map((d) => d.allowed)).toEqual([true, true, true]);
    expect(limiter.begin('a@b.c', '10.0.0.4')).toEqual({ allowed: false, retryAfterSeconds: 600 });
  });

  it('leaves other emails alone', () => {
    const limiter = limiterFor(clock().now, EMAIL_ONLY);
    for (let i = 0; i < 3; i++) limiter.begin('a@b.c', '10.0.0.1');
    expect(limiter.begin('other@b.c', '10.0.0.1').allowed).toBe(true);
  });

  it('takes a forgiven attempt back', () => {
    const limiter = limiterFor(clock().now, EMAIL_ONLY);
    for (let i = 0; i < 10; i++) limiter.forgive(attempt(limiter.begin('a@b.c', '10.0.0.1')));
    expect(limiter.begin('a@b.c', '10.0.0.1').allowed).toBe(true);
  });

  it('clears every failure of the email on a successful login', () => {
    const c = clock();
    const limiter = limiterFor(c.now, EMAIL_ONLY);
    limiter.begin('a@b.c', '10.0.0.1');
    c.advance(1);
    limiter.begin('a@b.c', '10.0.0.1');
    c.advance(1);
    limiter.succeed(attempt(limiter.begin('a@b.c', '10.0.0.1')));
    for (let i = 0; i < 3; i++) expect(limiter.begin('a@b.c', '10.0.0.1').allowed).toBe(true);
    expect(limiter.begin('a@b.c', '10.0.0.1').allowed).toBe(false);
  });

  it('slides: one more attempt is allowed each time the oldest failure leaves the window', () => {
    const c = clock();
    const limiter = limiterFor(c.now, EMAIL_ONLY);
    for (let i = 0; i < 3; i++) {
      limiter.begin('a@b.c', '10.0.0.1');
      c.advance(MINUTE);
    }
    // Failures at T0, T0+1, T0+2 min; now T0+3 min.
    expect(limiter.begin('a@b.c', '10.0.0.1')).toEqual({ allowed: false, retryAfterSeconds: 7 * 60 });
    c.advance(7 * MINUTE);
    expect(limiter.begin('a@b.c', '10.0.0.1').allowed).toBe(true);
    // The new failure (T0+10 min) replaced T0's; the next to expire is T0+1 min's, a minute later.
    expect(limiter.begin('a@b.c', '10.0.0.1')).toEqual({ allowed: false, retryAfterSeconds: 60 });
  });
});

describe('per IP', () => {
  it('refuses any email from an IP at its limit, and leaves other IPs alone', () => {
    const limiter = limiterFor(clock().now, IP_ONLY);
    for (let i = 0; i < 3; i++) expect(limiter.begin(`user${i}@b.c`, '10.0.0.1').allowed).toBe(true);
    expect(limiter.begin('new@b.c', '10.0.0.1')).toEqual({ allowed: false, retryAfterSeconds: 600 });
    expect(limiter.begin('new@b.c', '10.0.0.2').allowed).toBe(true);
  });

  it('counts sign-ups (no email) against the IP only', () => {
    const limiter = limiterFor(clock().now, IP_ONLY);
    for (let i = 0; i < 3; i++) expect(limiter.begin(undefined, '10.0.0.1').allowed).toBe(true);
    expect(limiter.begin(undefined, '10.0.0.1').allowed).toBe(false);
    expect(limiter.begin(undefined, '10.0.0.2').allowed).toBe(true);
  });

  it('keeps the IP failures of earlier wrong passwords after a successful login', () => {
    const c = clock();
    const limiter = limiterFor(c.now, IP_ONLY);
    limiter.begin('a@b.c', '10.0.0.1');
    c.advance(1);
    limiter.begin('a@b.c', '10.0.0.1');
    c.advance(1);
    limiter.succeed(attempt(limiter.begin('a@b.c', '10.0.0.1')));
    // Two failures remain against the IP: one more attempt fits, then it is at its limit.
    expect(limiter.begin('b@b.c', '10.0.0.1').allowed).toBe(true);
    expect(limiter.begin('b@b.c', '10.0.0.1').allowed).toBe(false);
  });
});

describe('both limits', () => {
  it('waits for the later of the two when both are reached', () => {
    const c = clock();
    const limiter = limiterFor(c.now, {
      perEmail: { maxFailures: 1, windowMs: 2 * MINUTE },
      perIp: { maxFailures: 1, windowMs: 5 * MINUTE },
    });
    limiter.begin('a@b.c', '10.0.0.1');
    expect(limiter.begin('a@b.c', '10.0.0.1')).toEqual({ allowed: false, retryAfterSeconds: 300 });
    expect(limiter.begin('a@b.c', '10.0.0.2')).toEqual({ allowed: false, retryAfterSeconds: 120 });
    expect(limiter.begin('z@b.c', '10.0.0.1')).toEqual({ allowed: false, retryAfterSeconds: 300 });
  });
});
