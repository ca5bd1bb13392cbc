/**
 * Rate limiting by a sliding window of one minute, approximated from two fixed windows: the current
 * minute's count plus the previous minute's count weighted by how much of it the sliding window
 * still covers. Two counters per bucket, whatever the rate: cheap to keep in memory (SQLite, one
 * process) and in one row per bucket and minute (PostgreSQL, shared by every node).
 */

export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Epoch seconds when the current fixed window ends. */
  reset: number;
  /** Seconds to wait when not allowed (0 when allowed). */
  retryAfter: number;
}

export const RATE_WINDOW_MS = 60_000;

/** The start (ms) of the fixed window holding `nowMs`. */
export function rateWindowStart(nowMs: number): number {
  return nowMs - (nowMs % RATE_WINDOW_MS);
}

/** How much of the previous fixed window the sliding window still covers at `nowMs` (1 → 0). */
export function previousWindowWeight(nowMs: number): number {
  return 1 - (nowMs - rateWindowStart(nowMs)) / RATE_WINDOW_MS;
}

/** Requests counted against the sliding window at `nowMs`. */
function usedAt(nowMs: number, current: number, previous: number): number {
  return current + previous * previousWindowWeight(nowMs);
}

/**
 * The refusal at `nowMs`: the wait until enough of the previous window has slid out for one more
 * request, or until the next fixed window starts, whichever comes first (at least 1 s).
 */
export function refusedDecision(nowMs: number, current: number, previous: number, limit: number): RateDecision {
  const start = rateWindowStart(nowMs);
  const untilNextWindow = start + RATE_WINDOW_MS - nowMs;
  const needed = usedAt(nowMs, current, previous) + 1 - limit;
  const wait = previous > 0 ? Math.min((needed / previous) * RATE_WINDOW_MS, untilNextWindow) : untilNextWindow;
  return { allowed: false, limit, remaining: 0, reset: Math.ceil((start + RATE_WINDOW_MS) / 1000), retryAfter: Math.max(1, Math.ceil(wait / 1000)) };
}

/**
 * The decision for one more request at `nowMs`, given the requests already counted in the current
 * fixed window (`current`) and in the one before it (`previous`). When allowed, the caller counts it.
 */
export function decideRate(nowMs: number, current: number, previous: number, limit: number): RateDecision {
  const used = usedAt(nowMs, current, previous);
  if (used + 1 > limit) return refusedDecision(nowMs, current, previous, limit);
  const reset = Math.ceil((rateWindowStart(nowMs) + RATE_WINDOW_MS) / 1000);
  return { allowed: true, limit, remaining: Math.max(0, Math.floor(limit - used - 1)), reset, retryAfter: 0 };
}

interface Counts {
  start: number;
  current: number;
  previous: number;
}

/** The counters in this process's memory: for a store that one process owns (SQLite). */
export class MemoryRateWindows {
  private readonly buckets = new Map<string, Counts>();

  constructor(private readonly now: () => number) {}

  take(bucket: string, limit: number): RateDecision {
    const now = this.now();
    const start = rateWindowStart(now);
    let counts = this.buckets.get(bucket);
    if (!counts || counts.start !== start) {
      const previous = counts && counts.start === start - RATE_WINDOW_MS ? counts.current : 0;
      counts = { start, current: 0, previous };
      this.buckets.set(bucket, counts);
    }
    const decision = decideRate(now, counts.current, counts.previous, limit);
    if (decision.allowed) counts.current++;
    if (this.buckets.size > 10_000) this.sweep(start);
    return decision;
  }

  /** Buckets idle for two windows count nothing any more: forget them. */
  private sweep(start: number): void {
    for (const [bucket, counts] of this.buckets) if (counts.start < start - RATE_WINDOW_MS) this.buckets.delete(bucket);
  }
}
