/**
 * Login throttling on PostgreSQL, shared by every node (../login-throttle.ts has the rules): one
 * row per counted attempt and scope (email, IP), keyed by a SHA-256 of the email or address so
 * that the table holds neither. An attempt is checked and counted in one transaction holding
 * advisory locks on its keys, so parallel guesses on any number of nodes never pass the limit.
 */
import { createHash, randomUUID } from 'node:crypto';
import type pg from 'pg';
import { type LimitDecision, type LoginAttempt, type LoginLimits, type LoginThrottleStore, retryAfterSeconds, throttleWaitMs } from '../login-throttle.js';

/** Rows older than this are deleted by purge(): longer windows than a day are not supported. */
export const LOGIN_THROTTLE_HORIZON_MS = 24 * 60 * 60 * 1000;

type Scope = 'email' | 'ip';

function throttleKey(scope: Scope, value: string): string {
  return createHash('sha256').update(`${scope}\0${value}`).digest('hex');
}

export class PostgresLoginThrottle implements LoginThrottleStore {
  constructor(
    private readonly pool: pg.Pool,
    private readonly transaction: <T>(fn: (client: pg.PoolClient) => Promise<T>) => Promise<T>,
    private readonly now: () => number,
  ) {}

  begin(email: string | undefined, ip: string, limits: LoginLimits): Promise<LimitDecision> {
    const scopes: [Scope, string, LoginLimits['perIp']][] = [['ip', throttleKey('ip', ip), limits.perIp]];
    if (email !== undefined) scopes.push(['email', throttleKey('email', email), limits.perEmail]);
    return this.transaction(async (c) => {
      // Locks in key order: two attempts sharing both keys wait for each other instead of deadlocking.
      for (const key of scopes.map(([, k]) => k).sort()) await c.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [key]);
      const now = this.now();
      let wait = 0;
      for (const [, key, rule] of scopes) {
        const { rows } = await c.query<{ at: number }>('SELECT at FROM login_failures WHERE key = $1 AND at > $2 ORDER BY at', [key, now - rule.windowMs]);
        wait = Math.max(
          wait,
          throttleWaitMs(
            rows.map((r) => Number(r.at)),
            rule,
            now,
          ),
        );
      }
      if (wait > 0) return { allowed: false, retryAfterSeconds: retryAfterSeconds(wait) };
      const attempt: LoginAttempt = { id: randomUUID(), email, ip, at: now };
      for (const [, key] of scopes) await c.query('INSERT INTO login_failures (key, attempt_id, at) VALUES ($1, $2, $3)', [key, attempt.id, now]);
      return { allowed: true, attempt };
    });
  }

  async forgive(attempt: LoginAttempt): Promise<void> {
    await this.pool.query('DELETE FROM login_failures WHERE attempt_id = $1', [attempt.id]);
  }

  async succeed(attempt: LoginAttempt): Promise<void> {
    await this.forgive(attempt);
    if (attempt.email !== undefined) await this.pool.query('DELETE FROM login_failures WHERE key = $1', [throttleKey('email', attempt.email)]);
  }

  async purge(): Promise<void> {
    await this.pool.query('DELETE FROM login_failures WHERE at < $1', [this.now() - LOGIN_THROTTLE_HORIZON_MS]);
  }
}
