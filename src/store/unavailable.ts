/**
 * Whether a store failure means the database cannot be reached right now (connection refused,
 * reset or timed out; the server shutting down or still starting; SQLite busy past its timeout),
 * as opposed to a bug. The HTTP layer answers the first kind 503 with Retry-After, since the same
 * request can succeed once the database is back, and the second kind 500.
 */
import { StoreError } from './errors.js';

const NETWORK_ERRORS = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'EPIPE']);
/** PostgreSQL: admin_shutdown, crash_shutdown, cannot_connect_now (SQLSTATE class 57P). */
const SERVER_GOING_AWAY = new Set(['57P01', '57P02', '57P03']);
/** The pg driver's own errors when no connection can be had or one dies mid-query. */
const DRIVER_MESSAGES = /^(timeout exceeded when trying to connect|Connection terminated)/;

export function isDatabaseUnavailable(err: unknown): boolean {
  if (err instanceof StoreError) return err.code === 'unavailable';
  const { code, message } = (err ?? {}) as { code?: unknown; message?: unknown };
  if (typeof code === 'string') {
    if (NETWORK_ERRORS.has(code) || SERVER_GOING_AWAY.has(code)) return true;
    if (code.startsWith('08')) return true; // SQLSTATE class 08: connection exception
    if (code.startsWith('SQLITE_BUSY')) return true; // and its extended codes (SQLITE_BUSY_RECOVERY, ...)
  }
  return typeof message === 'string' && DRIVER_MESSAGES.test(message);
}
