/**
 * The persistence layer of bgone: accounts, API keys, credits, usage, dashboard sessions, webhooks
 * and batches behind one interface (store.ts), with two implementations: SQLite (sqlite/, the
 * embedded default, one process per file) and PostgreSQL (postgres/, one ledger for any number of
 * nodes).
 *
 * Where credits live: each account's balance for its billing cycle is in the store, and a request
 * holds one credit as a reservation from before its work until it is charged (commit) or given
 * back (release); a batch reserves one per image when it is created. src/service/metering.ts is
 * the one caller of reserve / commit / release for requests:
 *
 *   const store = await openStore({ path: 'data/bgone.db' });      // or { url: 'postgres://...' }
 *   await store.credits.recoverAfterCrash();            // once, at startup
 *   const auth = await store.keys.authenticate(bearer); // null → 401
 *   const r = await store.credits.reserve(auth.accountId, { requestId, keyId: auth.keyId });
 *   ... success → store.credits.commit(r.reservationId); failure/abort → store.credits.release(r.reservationId)
 *
 * This module is the only door: code outside src/store imports from here and never from sqlite/ or postgres/.
 */

import { openPostgresStore, type PostgresStoreOptions } from './postgres/postgres-store.js';
import { SqliteStore, type SqliteStoreOptions } from './sqlite/sqlite-store.js';
import type { Store } from './store.js';

/**
 * How to open the store: a SQLite file (`path`; the embedded default for one process), or a
 * PostgreSQL database (`url`; one ledger for several nodes), with the clock, rate limits and time
 * windows it applies.
 */
export type StoreOptions = SqliteStoreOptions | PostgresStoreOptions;

/** Opens (creating and migrating it if needed) the store. Throws StoreError 'schema_too_new' for a database from a newer build. */
export async function openStore(options: StoreOptions): Promise<Store> {
  if ('url' in options) return openPostgresStore(options);
  return new SqliteStore(options);
}

export { BATCH_CANCELLED_ERROR, ORPHAN_ERROR } from './batch-rules.js';
export { type Clock, systemClock } from './clock.js';
export { ClusterSecretMismatch } from './cluster-store.js';
export { type Cycle, cycleAt, cycleByIndex, cycleStart } from './cycles.js';
export { StoreError, type StoreErrorCode } from './errors.js';
export { DEFAULT_LOGIN_LIMITS, type LimitDecision, type LimitRule, type LoginAttempt, type LoginLimits } from './login-throttle.js';
export { isPlanName, PLAN_NAMES, PLANS, type Plan, type PlanName, type PlanTable, type RateLimits, resolvePlans } from './plans.js';
export { RATE_WINDOW_MS, type RateDecision } from './rate-window.js';
export { releaseUntilDone } from './release-retry.js';
export { IDEMPOTENCY_TTL_MS, LAST_USED_RESOLUTION_MS, normalizeEmail, SESSION_TTL_MS } from './rules.js';
export { API_KEY_PATTERN, API_KEY_PREFIX } from './secrets.js';
export type * from './store.js';
export { isDatabaseUnavailable } from './unavailable.js';
export { type EndedImage, type ImageResultFields, imageEventData } from './webhook-events.js';
