/**
 * A credit release that keeps being tried until it succeeds. A reservation whose release failed
 * (the database busy or unreachable for longer than a call waits) still holds its credit: on SQLite
 * until the next start, on PostgreSQL until this node stops, since a live node's reservations are
 * never released by the others. The account would pay for a request it never got, in its balance,
 * for as long as the process runs. So the release is tried again, with growing pauses, until it
 * succeeds; only a closed store ends the retries, and then the next start (SQLite) or the other
 * nodes (PostgreSQL: a closed node's reservations are released at once) release it instead.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Store } from './store.js';

const FIRST_PAUSE_MS = 100;
const MAX_PAUSE_MS = 5000;

/**
 * Releases the reservation, retrying after each failure (any error: none of them is the caller's
 * to fix) until it succeeds. `onFailure` hears each failed attempt (attempts count from 1). Resolves
 * true once released (or already gone), false when the store closed first. Never rejects, and its
 * pauses do not keep the process alive.
 */
export async function releaseUntilDone(
  store: Pick<Store, 'credits' | 'isOpen'>,
  reservationId: number,
  onFailure?: (err: unknown, attempt: number) => void,
): Promise<boolean> {
  for (let attempt = 1, pause = FIRST_PAUSE_MS; ; attempt++, pause = Math.min(pause * 2, MAX_PAUSE_MS)) {
    try {
      await store.credits.release(reservationId);
      return true;
    } catch (err) {
      onFailure?.(err, attempt);
    }
    if (!store.isOpen) return false;
    await sleep(pause, undefined, { ref: false });
    if (!store.isOpen) return false;
  }
}
