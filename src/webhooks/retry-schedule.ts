/**
 * When a failed delivery is tried again (docs/contract.md): 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and
 * 10 h after the attempts before it; after the last one it is marked failed.
 */
const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

export const RETRY_DELAYS_MS: readonly number[] = [5 * SECOND, 5 * MINUTE, 30 * MINUTE, 2 * HOUR, 5 * HOUR, 10 * HOUR, 10 * HOUR];

/** The first attempt and one per retry delay. */
export const MAX_ATTEMPTS = RETRY_DELAYS_MS.length + 1;

/** When to try again after `attemptsMade` failed attempts (this one included); null: give up. */
export function nextAttemptAt(attemptsMade: number, now: Date): Date | null {
  const delay = RETRY_DELAYS_MS[attemptsMade - 1];
  return delay === undefined ? null : new Date(now.getTime() + delay);
}
