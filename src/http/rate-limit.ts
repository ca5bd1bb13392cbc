/**
 * Per-key rate limiting: a sliding window of one minute approximated from two fixed windows (the
 * previous minute's count weighted by how much of it still overlaps). Memory is one small record per
 * active key, dropped when idle. Per process: a multi-process deployment would move this to shared
 * storage.
 */
export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Epoch seconds when the current window ends. */
  reset: number;
  /** Seconds to wait when not allowed. */
  retryAfter: number;
}

interface Window {
  start: number; // ms, aligned to the minute
  count: number;
  previous: number;
}

const WINDOW_MS = 60_000;

/** The X-RateLimit-* headers of a decision (on every authenticated answer). */
export function rateLimitHeaders(d: Pick<RateDecision, 'limit' | 'remaining' | 'reset'>): Record<string, string> {
  return { 'X-RateLimit-Limit': String(d.limit), 'X-RateLimit-Remaining': String(d.remaining), 'X-RateLimit-Reset': String(d.reset) };
}

export class RateLimiter {
  private readonly windows = new Map<string, Window>();

  constructor(private readonly now: () => number = Date.now) {}

  take(key: string, limit: number): RateDecision {
    const now = this.now();
    const start = now - (now % WINDOW_MS);
    let w = this.windows.get(key);
    if (!w || w.start !== start) {
      const previous = w && w.start === start - WINDOW_MS ? w.count : 0;
      w = { start, count: 0, previous };
      this.windows.set(key, w);
    }
    const overlap = 1 - (now - start) / WINDOW_MS;
    const used = w.count + w.previous * overlap;
    const reset = Math.ceil((start + WINDOW_MS) / 1000);
    if (used + 1 > limit) {
      // Wait until enough of the previous window has slid out (or the next window starts).
      const needed = used + 1 - limit;
      const wait = w.previous > 0 ? Math.min((needed / w.previous) * WINDOW_MS, start + WINDOW_MS - now) : start + WINDOW_MS - now;
      return { allowed: false, limit, remaining: 0, reset, retryAfter: Math.max(1, Math.ceil(wait / 1000)) };
    }
    w.count++;
    if (this.windows.size > 10_000) this.sweep(start);
    return { allowed: true, limit, remaining: Math.max(0, Math.floor(limit - used - 1)), reset, retryAfter: 0 };
  }

  private sweep(start: number): void {
    for (const [key, w] of this.windows) if (w.start < start - WINDOW_MS) this.windows.delete(key);
  }
}
