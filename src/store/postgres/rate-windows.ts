/**
 * Rate-limit counters on PostgreSQL, shared by every node: one row per bucket and fixed minute
 * (../rate-window.ts has the sliding-window rule). The counts this node is asked for close together
 * go in groups (../groups.ts), one statement each: it locks the group's rows of this minute (in
 * bucket order, so two nodes' groups never deadlock), grants each bucket as many of its requests as
 * the window has room for on the row it locked, and inserts the rows of buckets new this minute.
 * Parallel requests on any number of nodes never pass more than the limit, and a refused request
 * is not counted.
 */
import type pg from 'pg';
import { Grouped, type Settled } from '../groups.js';
import { previousWindowWeight, RATE_WINDOW_MS, type RateDecision, rateWindowStart, refusedDecision } from '../rate-window.js';
import { retryingStatement } from './pool.js';

/** Buckets per group. */
const MAX_GROUP = 256;

/**
 * For each bucket of $1 with $2 requests under the limit $3 ($4: this minute's start; $5: the
 * previous minute's weight): the previous minute's count, and either this minute's count before
 * (locked) and the requests granted, or the count of a row inserted now. A bucket with neither (its
 * row inserted by another node meanwhile) is asked again.
 */
const TAKE_GROUP_SQL = `WITH input AS MATERIALIZED (
    SELECT * FROM unnest($1::text[], $2::int[], $3::float8[]) AS t(bucket, n, lim)
  ), previous AS MATERIALIZED (
    SELECT i.bucket, coalesce(w.count, 0) AS p FROM input i
    LEFT JOIN rate_windows w ON w.bucket = i.bucket AND w.window_start = $4::bigint - ${RATE_WINDOW_MS}
  ), locked AS MATERIALIZED (
    SELECT w.bucket, w.count FROM rate_windows w
    WHERE w.bucket = ANY($1::text[]) AND w.window_start = $4::bigint ORDER BY w.bucket FOR UPDATE
  ), granted AS MATERIALIZED (
    SELECT l.bucket, l.count AS before, least(i.n, greatest(0, floor(i.lim - l.count - p.p * $5::float8)))::int AS g
    FROM locked l JOIN input i ON i.bucket = l.bucket JOIN previous p ON p.bucket = l.bucket
  ), counted AS (
    UPDATE rate_windows w SET count = w.count + g.g FROM granted g
    WHERE w.bucket = g.bucket AND w.window_start = $4::bigint AND g.g > 0
  ), inserted AS (
    INSERT INTO rate_windows (bucket, window_start, count)
    SELECT i.bucket, $4::bigint, least(i.n, floor(i.lim - p.p * $5::float8))::int FROM input i JOIN previous p ON p.bucket = i.bucket
    WHERE NOT EXISTS (SELECT 1 FROM locked l WHERE l.bucket = i.bucket) AND floor(i.lim - p.p * $5::float8) >= 1
    ORDER BY i.bucket
    ON CONFLICT (bucket, window_start) DO NOTHING RETURNING bucket, count
  )
  SELECT i.bucket, p.p AS previous, g.before, g.g AS granted, n.count AS inserted,
    (g.bucket IS NULL AND n.bucket IS NULL AND floor(i.lim - p.p * $5::float8) >= 1) AS again
  FROM input i JOIN previous p ON p.bucket = i.bucket
  LEFT JOIN granted g ON g.bucket = i.bucket LEFT JOIN inserted n ON n.bucket = i.bucket`;

interface TakeItem {
  bucket: string;
  limit: number;
}

interface BucketCount {
  previous: number;
  /** This minute's count before the group. */
  before: number;
  /** The group's requests counted. */
  granted: number;
}

export class PostgresRateWindows {
  readonly #takes: Grouped<TakeItem, RateDecision>;

  constructor(
    private readonly pool: pg.Pool,
    private readonly now: () => number,
  ) {
    this.#takes = new Grouped((items) => this.#takeGroup(items), MAX_GROUP);
  }

  take(bucket: string, limit: number): Promise<RateDecision> {
    return this.#takes.submit({ bucket, limit });
  }

  /**
   * One group: the requests of one bucket are granted in the order they came, while the window has
   * room. A bucket asked with two limits in one group (rare) is counted in passes, one limit each.
   */
  async #takeGroup(items: TakeItem[]): Promise<Settled<RateDecision>[]> {
    const now = this.now();
    const start = rateWindowStart(now);
    const weight = previousWindowWeight(now);
    const reset = Math.ceil((start + RATE_WINDOW_MS) / 1000);
    const outcomes: Settled<RateDecision>[] = new Array(items.length);
    let pending = items.map((item, at) => ({ item, at }));
    while (pending.length > 0) {
      // One pass: each bucket with the limit of its first request in the pass; the others wait for the next.
      const limits = new Map<string, number>();
      const pass: typeof pending = [];
      const later: typeof pending = [];
      for (const p of pending) {
        const limit = limits.get(p.item.bucket);
        if (limit === undefined) limits.set(p.item.bucket, p.item.limit);
        (limit === undefined || limit === p.item.limit ? pass : later).push(p);
      }
      const counts = await this.#count(pass, limits, start, weight);
      const again: typeof pending = [];
      const used = new Map<string, number>();
      for (const p of pass) {
        const c = counts.get(p.item.bucket);
        if (c === undefined) {
          again.push(p);
          continue;
        }
        const n = (used.get(p.item.bucket) ?? 0) + 1;
        used.set(p.item.bucket, n);
        const { limit } = p.item;
        if (n <= c.granted) {
          const counted = c.before + n + c.previous * weight; // this request included
          outcomes[p.at] = { value: { allowed: true, limit, remaining: Math.max(0, Math.floor(limit - counted)), reset, retryAfter: 0 } };
        } else {
          outcomes[p.at] = { value: refusedDecision(now, c.before + c.granted, c.previous, limit) };
        }
      }
      pending = [...again, ...later].sort((a, b) => a.at - b.at);
    }
    return outcomes;
  }

  /** One statement for a pass; undefined for a bucket to ask again. */
  async #count(pass: Array<{ item: TakeItem }>, limits: Map<string, number>, start: number, weight: number): Promise<Map<string, BucketCount>> {
    const n = new Map<string, number>();
    for (const { item } of pass) n.set(item.bucket, (n.get(item.bucket) ?? 0) + 1);
    const buckets = [...n.keys()].sort();
    const { rows } = await retryingStatement(() =>
      this.pool.query<{ bucket: string; previous: number; before: number | null; granted: number | null; inserted: number | null; again: boolean }>(
        { name: 'bgone_take_group', text: TAKE_GROUP_SQL },
        [buckets, buckets.map((b) => n.get(b)!), buckets.map((b) => limits.get(b)!), start, weight],
      ),
    );
    const counts = new Map<string, BucketCount>();
    for (const r of rows) {
      if (r.again) continue;
      const previous = Number(r.previous);
      if (r.inserted !== null) counts.set(r.bucket, { previous, before: 0, granted: Number(r.inserted) });
      else if (r.before !== null) counts.set(r.bucket, { previous, before: Number(r.before), granted: Number(r.granted) });
      else counts.set(r.bucket, { previous, before: 0, granted: 0 }); // no room even for one: nothing written
    }
    return counts;
  }

  /** Deletes the windows that no decision reads any more (older than the previous minute). */
  async purge(): Promise<void> {
    await this.pool.query('DELETE FROM rate_windows WHERE window_start < $1', [rateWindowStart(this.now()) - RATE_WINDOW_MS]);
  }
}
