/**
 * Waiting for a SQLite file that another process holds, without blocking the event loop.
 *
 * SQLite answers SQLITE_BUSY while another process holds the lock a statement needs (an operator
 * command's write, a backup, a `sqlite3` shell in a transaction). better-sqlite3 is synchronous, so
 * a busy timeout waits inside the call with the whole process stopped: a 5 s timeout blocked every
 * request, /healthz included, for 5 s per call. So once the file is open, the connection has no
 * busy timeout (a busy statement fails at once), and whenFree() runs the call again from a timer,
 * with growing pauses, for up to BUSY_WAIT_MS in all; between attempts the event loop serves
 * everything else. Every call it runs is one statement or one transaction, which SQLite (or
 * better-sqlite3's transaction wrapper) rolls back whole when busy, so running it again is safe.
 */
import { setTimeout as sleep } from 'node:timers/promises';

/** How long a call waits for a busy file in all before failing with SQLITE_BUSY (→ 503). */
export const BUSY_WAIT_MS = 5000;
const FIRST_PAUSE_MS = 2;
/** Pauses grow to this: a lock released is noticed within it, and a retry costs microseconds. */
const MAX_PAUSE_MS = 50;

/** SQLITE_BUSY and its extended codes (SQLITE_BUSY_RECOVERY, SQLITE_BUSY_SNAPSHOT, ...). */
export function isBusy(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.startsWith('SQLITE_BUSY');
}

/**
 * Runs `call` (synchronously, at once), and again after a pause each time it fails with
 * SQLITE_BUSY, until it succeeds, fails otherwise, or `waitMs` have passed (then its last
 * SQLITE_BUSY is thrown).
 */
export async function whenFree<T>(call: () => T, waitMs = BUSY_WAIT_MS): Promise<T> {
  const started = performance.now();
  for (let pause = FIRST_PAUSE_MS; ; pause = Math.min(pause * 2, MAX_PAUSE_MS)) {
    try {
      return call();
    } catch (err) {
      const waited = performance.now() - started;
      if (!isBusy(err) || waited >= waitMs) throw err;
      await sleep(Math.min(pause, waitMs - waited));
    }
  }
}
