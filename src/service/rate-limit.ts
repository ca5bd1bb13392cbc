/**
 * The X-RateLimit-* headers of a rate-limit decision, on every authenticated answer. The counters
 * themselves live in the store (src/store/rate-window.ts), shared by every node on one database.
 */
import type { RateDecision } from '../store/index.js';

export function rateLimitHeaders(d: Pick<RateDecision, 'limit' | 'remaining' | 'reset'>): Record<string, string> {
  return { 'X-RateLimit-Limit': String(d.limit), 'X-RateLimit-Remaining': String(d.remaining), 'X-RateLimit-Reset': String(d.reset) };
}
