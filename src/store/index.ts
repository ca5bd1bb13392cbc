/**
 * The persistence layer of bgone: accounts, API keys, credits and usage in one SQLite file.
 *
 *   const store = openStore({ path: 'data/bgone.db' });
 *   store.credits.recoverAfterCrash();            // once, at startup
 *   const auth = store.keys.authenticate(bearer); // null → 401
 *   const r = store.credits.reserve(auth.account.id, { requestId, keyId: auth.keyId });
 *   ... success → store.credits.commit(r.reservationId); failure/abort → store.credits.release(r.reservationId)
 *
 * Synchronous (better-sqlite3): each call is a short transaction on the event loop thread.
 */
import { randomUUID } from 'node:crypto';
import { Accounts } from './accounts.js';
import { type Clock, systemClock } from './clock.js';
import { Credits } from './credits.js';
import { type Db, openDatabase } from './database.js';
import { ApiKeys } from './keys.js';
import { type PlanTable, type RateLimits, resolvePlans } from './plans.js';
import { Usage } from './usage.js';

export interface StoreOptions {
  /** The database file (its folder is created if needed). */
  path: string;
  /** Default: the system clock. */
  clock?: Clock;
  /** Per-plan rate-limit overrides (requests per minute per key). */
  rateLimits?: RateLimits;
  /** A key's last_used_at is written at most this often (default 60 000 ms; 0 = on every use). */
  lastUsedResolutionMs?: number;
}

export class Store {
  readonly db: Db;
  readonly clock: Clock;
  /** The plans with the configured rate limits. */
  readonly plans: PlanTable;
  /** Identifies this instance's credit reservations (see Credits.recoverAfterCrash). */
  readonly instanceId: string;
  readonly accounts: Accounts;
  readonly keys: ApiKeys;
  readonly credits: Credits;
  readonly usage: Usage;

  constructor(options: StoreOptions) {
    const lastUsedResolutionMs = options.lastUsedResolutionMs ?? 60_000;
    if (!Number.isSafeInteger(lastUsedResolutionMs) || lastUsedResolutionMs < 0) throw new RangeError('lastUsedResolutionMs must be a non-negative integer');
    this.plans = resolvePlans(options.rateLimits);
    this.clock = options.clock ?? systemClock;
    this.instanceId = randomUUID();
    this.db = openDatabase(options.path);
    try {
      this.accounts = new Accounts(this.db, this.clock, this.plans);
      this.keys = new ApiKeys(this.db, this.clock, this.plans, this.accounts, lastUsedResolutionMs);
      this.credits = new Credits(this.db, this.clock, this.plans, this.accounts, this.instanceId);
      this.usage = new Usage(this.db, this.clock, this.accounts, this.credits);
    } catch (err) {
      this.db.close();
      throw err;
    }
  }

  get isOpen(): boolean {
    return this.db.open;
  }

  /** Closes the database (idempotent). Reservations still held are released by the next process's recoverAfterCrash(). */
  close(): void {
    if (this.db.open) this.db.close();
  }
}

export function openStore(options: StoreOptions): Store {
  return new Store(options);
}

export type { Account, CreateAccountInput } from './accounts.js';
export { type Clock, systemClock } from './clock.js';
export type { Balance, CommitResult, ReserveOptions, ReserveResult } from './credits.js';
export { IDEMPOTENCY_TTL_MS } from './credits.js';
export { type Cycle, cycleAt, cycleByIndex, cycleStart } from './cycles.js';
export { type Db, openDatabase, schemaVersion } from './database.js';
export { StoreError, type StoreErrorCode } from './errors.js';
export { API_KEY_PATTERN, API_KEY_PREFIX, type ApiKeyInfo, type Authenticated, type CreatedApiKey, hashApiKey } from './keys.js';
export { SCHEMA_VERSION } from './migrations.js';
export { isPlanName, PLAN_NAMES, PLANS, type Plan, type PlanName, type PlanTable, type RateLimits, resolvePlans } from './plans.js';
export type { AccountUsage, DayUsage, UsageSummary } from './usage.js';
export { Accounts, ApiKeys, Credits, Usage };
export { Credentials } from './credentials.js';
export { type CreatedSession, type Session, SESSION_TTL_MS, Sessions } from './sessions.js';
