/**
 * Throttles password guessing: failed attempts are counted per email address and per client IP in
 * a sliding window (default 5 failures per 15 minutes for each). While either count is at its
 * limit, further attempts are refused (429) before any password is checked.
 *
 * An attempt is counted as a failure when it starts (begin), before the password is checked, so
 * parallel guesses cannot all pass the check while the hashes are computed; a success then takes
 * it back (and clears its email's count). Sign-ups that fail on the email (taken or invalid) keep
 * their count against the IP, so probing for registered addresses through the sign-up form costs
 * the same as guessing passwords.
 *
 * Per process and in memory: entries expire with their window, and the maps are swept.
 */
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
export interface Attempt {
  readonly email: string | undefined;
  readonly ip: string;
  readonly at: number;
}

export type LimitDecision = { allowed: true; attempt: Attempt } | { allowed: false; retryAfterSeconds: number };

const SWEEP_THRESHOLD = 10_000;

class FailureWindow {
  private readonly failures = new Map<string, number[]>();

  constructor(private readonly rule: LimitRule) {}

  /** Milliseconds until an attempt is allowed again (0: allowed now). */
  waitMs(key: string, now: number): number {
    const list = this.prune(key, now);
    if (list.length < this.rule.maxFailures) return 0;
    return list[list.length - this.rule.maxFailures]! + this.rule.windowMs - now;
  }

  add(key: string, now: number): void {
    const list = this.prune(key, now);
    list.push(now);
    this.failures.set(key, list);
    if (this.failures.size > SWEEP_THRESHOLD) this.sweep(now);
  }

  /** Takes back one failure recorded at `at`. */
  remove(key: string, at: number): void {
    const list = this.failures.get(key);
    const i = list?.indexOf(at) ?? -1;
    if (i < 0) return;
    list!.splice(i, 1);
    if (list!.length === 0) this.failures.delete(key);
  }

  clear(key: string): void {
    this.failures.delete(key);
  }

  private prune(key: string, now: number): number[] {
    const list = this.failures.get(key) ?? [];
    const kept = list.filter((t) => t > now - this.rule.windowMs);
    if (kept.length === 0) this.failures.delete(key);
    else if (kept.length !== list.length) this.failures.set(key, kept);
    return kept;
  }

  private sweep(now: number): void {
    for (const key of [...this.failures.keys()]) this.prune(key, now);
  }
}

export class LoginLimiter {
  private readonly byEmail: FailureWindow;
  private readonly byIp: FailureWindow;

  constructor(
    private readonly now: () => number = Date.now,
    limits: LoginLimits = DEFAULT_LOGIN_LIMITS,
  ) {
    this.byEmail = new FailureWindow(limits.perEmail);
    this.byIp = new FailureWindow(limits.perIp);
  }

  /**
   * Starts an attempt for this email (normalised; undefined for a sign-up) from this IP: refused
   * while either count is at its limit, otherwise counted as a failure right away.
   */
  begin(email: string | undefined, ip: string): LimitDecision {
    const now = this.now();
    const wait = Math.max(email === undefined ? 0 : this.byEmail.waitMs(email, now), this.byIp.waitMs(ip, now));
    if (wait > 0) return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil(wait / 1000)) };
    if (email !== undefined) this.byEmail.add(email, now);
    this.byIp.add(ip, now);
    return { allowed: true, attempt: { email, ip, at: now } };
  }

  /** The attempt was not a guess (e.g. a sign-up that succeeded, or a password too short): take it back. */
  forgive(attempt: Attempt): void {
    if (attempt.email !== undefined) this.byEmail.remove(attempt.email, attempt.at);
    this.byIp.remove(attempt.ip, attempt.at);
  }

  /** A successful login: takes the attempt back and clears the email's failures. */
  succeed(attempt: Attempt): void {
    this.forgive(attempt);
    if (attempt.email !== undefined) this.byEmail.clear(attempt.email);
  }
}
