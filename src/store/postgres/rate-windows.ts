/**
 * Rate-limit counters on PostgreSQL, shared by every node: one row per bucket and fixed minute
 * (../rate-window.ts has the sliding-window rule). A request is counted by one statement whose
 * conditional upsert re-checks the limit on the row it locks, so parallel requests on any number
 * of nodes never pass more than the limit.
 */
import type pg from 'pg';
import { previousWindowWeight, RATE_WINDOW_MS, type RateDecision, rateWindowStart, refusedDecision } from '../rate-window.js';

/** Counts one request when the sliding window has room: the previous minute's count weighted, plus this minute's. */
const TAKE_SQL = `WITH previous AS (
    SELECT coalesce((SELECT count FROM rate_windows WHERE bucket = $1 AND window_start = $2::bigint - ${RATE_WINDOW_MS}), 0) AS n
  ), taken AS (
    INSERT INTO rate_windows AS w (bucket, window_start, count)
    SELECT $1, $2, 1 FROM previous WHERE 1 + previous.n * $3::float8 <= $4
    ON CONFLICT (bucket, window_start) DO UPDATE SET count = w.count + 1
      WHERE w.count + 1 + (SELECT n FROM previous) * $3::float8 <= $4
    RETURNING count
  )
  SELECT (SELECT n FROM previous) AS previous, (SELECT count FROM taken) AS taken`;

export class PostgresRateWindows {
  constructor(
    private readonly pool: pg.Pool,
    private readonly now: () => number,
  ) {}

  async take(bucket: string, limit: number): Promise<RateDecision> {
    const now = this.now();
    const start = rateWindowStart(now);
    const weight = previousWindowWeight(now);
    const { rows } = await this.pool.query<{ previous: number; taken: number | null }>(TAKE_SQL, [bucket, start, weight, limit]);
    const previous = Number(rows[0]?.previous ?? 0);
    const taken = rows[0]?.taken ?? null;
    const reset = Math.ceil((start + RATE_WINDOW_MS) / 1000);
    if (taken !== null) {
      const used = Number(taken) + previous * weight; // this request included
      return { allowed: true, limit, remaining: Math.max(0, Math.floor(limit - used)), reset, retryAfter: 0 };
    }
    // Refused: read this minute's count for Retry-After (counts only grow within a minute).
    const current = await this.pool.query<{ count: number }>('SELECT count FROM rate_windows WHERE bucket = $1 AND window_start = $2', [bucket, start]);
    return refusedDecision(now, Number(current.rows[0]?.count ?? 0), previous, limit);
  }

  /** Deletes the windows that no decision reads any more (older than the previous minute). */
  async purge(): Promise<void> {
    await this.pool.query('DELETE FROM rate_windows WHERE window_start < $1', [rateWindowStart(this.now()) - RATE_WINDOW_MS]);
  }
}
