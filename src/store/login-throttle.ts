/**
 * Login throttling: failed attempts counted per email address and per client IP in a sliding
 * window. While either count is at its limit, further attempts are refused before any password is
 * checked.
 *
 * An attempt is counted as a failure when it starts (begin), before the password is checked, so
 * parallel guesses cannot all pass the check while the hashes are computed; `forgive` takes it
 * back (an attempt that was no guess), `succeed` takes it back and clears its email's count.
 *
 * This file holds the rules, the types and the in-memory implementation for a store that one
 * process owns (SQLite); PostgreSQL keeps the same counts in a table shared by every node.
 */
import { randomUUID } from 'node:crypto';

export interface LimitRule {
  maxFailures: number;
  windowMs: number;
}

export interface LoginLimits {
  perEmail: LimitRule;
  perIp: LimitRule;
}

export const DEFAULT_LOGIN_LIMITS: LoginLimits = {
  perEmail: { maxFailures: 5, windowMs: 15 * 60 * 1000 },
  perIp: { maxFailures: 5, windowMs: 15 * 60 * 1000 },
};

/** One attempt in progress, counted as a failure until taken back. */
export interface LoginAttempt {
  /** Unique per attempt: what forgive and succeed take back. */
  readonly id: string;
  /** The normalised email; undefined for a sign-up (counted per IP only). */
  readonly email: string | undefined;
  readonly ip: string;
  /** When it was counted (ms since the epoch). */
  readonly at: number;
}

export type LimitDecision = { allowed: true; attempt: LoginAttempt } | { allowed: false; retryAfterSeconds: number };

export interface LoginThrottleStore {
  /** Starts an attempt: refused while either count is at its limit, otherwise counted right away. */
  begin(email: string | undefined, ip: string, limits: LoginLimits): Promise<LimitDecision>;
  /** The attempt was no guess (a sign-up that succeeded, a password too short): take it back. */
  forgive(attempt: LoginAttempt): Promise<void>;
  /** A successful login: take the attempt back and clear its email's failures. */
  succeed(attempt: LoginAttempt): Promise<void>;
}

/**
 * Milliseconds until one more attempt is allowed, given the times of the failures inside the
 * window (ascending); 0 when allowed now.
 */
export function throttleWaitMs(failureTimes: readonly number[], rule: LimitRule, now: number): number {
  if (failureTimes.length < rule.maxFailures) return 0;
  return Math.max(1, failureTimes[failureTimes.length - rule.maxFailures]! + rule.windowMs - now);
}

export function retryAfterSeconds(waitMs: number): number {
  return Math.max(1, Math.ceil(waitMs / 1000));
}

const SWEEP_THRESHOLD = 10_000;

/**
 * The failures of one scope (emails, or IPs), by key: attempt id → time, and the window the key was
 * last checked with. Keys of one scope may use different windows (the dashboard counts sign-ups
 * for an hour under "signup:" keys beside 15-minute login failures), so a sweep prunes each key
 * with its own window, never with the caller's.
 */
class FailureWindow {
  private readonly failures = new Map<string, { windowMs: number; attempts: Map<string, number> }>();

  waitMs(key: string, rule: LimitRule, now: number): number {
    const entry = this.failures.get(key);
    if (entry) entry.windowMs = rule.windowMs;
    return throttleWaitMs(this.prune(key, now), rule, now);
  }

  add(key: string, id: string, now: number, windowMs: number): void {
    let entry = this.failures.get(key);
    if (!entry) {
      entry = { windowMs, attempts: new Map() };
      this.failures.set(key, entry);
    }
    entry.attempts.set(id, now);
  }

  remove(key: string, id: string): void {
    const entry = this.failures.get(key);
    if (!entry) return;
    entry.attempts.delete(id);
    if (entry.attempts.size === 0) this.failures.delete(key);
  }

  clear(key: string): void {
    this.failures.delete(key);
  }

  /** Drops the key's failures older than its window; returns the times kept, ascending. */
  private prune(key: string, now: number): number[] {
    const entry = this.failures.get(key);
    if (!entry) return [];
    for (const [id, at] of entry.attempts) if (at <= now - entry.windowMs) entry.attempts.delete(id);
    if (entry.attempts.size === 0) this.failures.delete(key);
    return [...entry.attempts.values()].sort((a, b) => a - b);
  }

  sweep(now: number): void {
    if (this.failures.size <= SWEEP_THRESHOLD) return;
    for (const key of [...this.failures.keys()]) this.prune(key, now);
  }
}

/**
 * The counts in this process's memory, for a store that one process owns (SQLite): the methods of
 * LoginThrottleStore, answered synchronously.
 */
export class MemoryLoginThrottle {
  private readonly byEmail = new FailureWindow();
  private readonly byIp = new FailureWindow();

  constructor(private readonly now: () => number) {}

  begin(email: string | undefined, ip: string, limits: LoginLimits): LimitDecision {
    const now = this.now();
    const wait = Math.max(email === undefined ? 0 : this.byEmail.waitMs(email, limits.perEmail, now), this.byIp.waitMs(ip, limits.perIp, now));
    if (wait > 0) return { allowed: false, retryAfterSeconds: retryAfterSeconds(wait) };
    const attempt: LoginAttempt = { id: randomUUID(), email, ip, at: now };
    if (email !== undefined) this.byEmail.add(email, attempt.id, now, limits.perEmail.windowMs);
    this.byIp.add(ip, attempt.id, now, limits.perIp.windowMs);
    this.byEmail.sweep(now);
    this.byIp.sweep(now);
    return { allowed: true, attempt };
  }

  forgive(attempt: LoginAttempt): void {
    if (attempt.email !== undefined) this.byEmail.remove(attempt.email, attempt.id);
    this.byIp.remove(attempt.ip, attempt.id);
  }

  succeed(attempt: LoginAttempt): void {
    this.forgive(attempt);
    if (attempt.email !== undefined) this.byEmail.clear(attempt.email);
  }
}
