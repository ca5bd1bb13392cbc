/**
 * The Store on PostgreSQL (pg): any number of bgone processes ("nodes") on one database act as one
 * service. Every method is one statement or one short transaction under READ COMMITTED. This class
 * only composes the areas beside it (accounts, keys, credits, usage, sessions, rate windows, login
 * throttle, webhooks, batches) on one pool, and runs the node's heartbeat (node.ts).
 *
 * Each store instance is a node with a random id that owns the reservations it makes and keeps a
 * heartbeat row fresh. Once a node's heartbeat lapses, any other node's recoverAfterCrash() (also
 * run on every heartbeat tick) releases its reservations. A live node's reservations are never
 * released.
 */

import { randomBytes, randomUUID } from 'node:crypto';
import type pg from 'pg';
import { ORPHAN_ERROR } from '../batch-rules.js';
import { type Clock, systemClock } from '../clock.js';
import type { LoginThrottleStore } from '../login-throttle.js';
import { type PlanTable, type RateLimits, resolvePlans } from '../plans.js';
import { checkDurationMs, checkMaxKeys, LAST_USED_RESOLUTION_MS, MAX_KEYS_PER_ACCOUNT, SESSION_TTL_MS } from '../rules.js';
import type { AccountStore, BatchStore, ClusterStore, CreditStore, KeyStore, RateLimitStore, SessionStore, Store, UsageStore, WebhookStore } from '../store.js';
import { PostgresAccounts } from './accounts.js';
import { PostgresBatches } from './batches.js';
import { PostgresCluster } from './cluster.js';
import type { PostgresContext } from './context.js';
import { PostgresCredits } from './credits.js';
import { PostgresKeys } from './keys.js';
import { PostgresLoginThrottle } from './login-throttle.js';
import { migrate } from './migrations.js';
import { NodeHeartbeat } from './node.js';
import { accountRow, createPool, inTransaction, withClient } from './pool.js';
import { PostgresRateWindows } from './rate-windows.js';
import { PostgresSessions } from './sessions.js';
import { PostgresUsage } from './usage.js';
import { PostgresWebhooks } from './webhooks.js';

export interface PostgresStoreOptions {
  /** postgres://user:password@host:port/database */
  url: string;
  /** Default: the system clock. Heartbeats use the database's clock instead. */
  clock?: Clock | undefined;
  /** Per-plan rate-limit overrides (requests per minute per key). */
  rateLimits?: RateLimits | undefined;
  /** A key's last_used_at is written at most this often (default 60 000 ms; 0 = on every use). */
  lastUsedResolutionMs?: number | undefined;
  /** Lifetime of a dashboard session from login (default 12 h). */
  sessionTtlMs?: number | undefined;
  /** Active (unrevoked) API keys an account may hold (default 10); keys.create refuses one more with StoreError 'key_limit'. */
  maxKeysPerAccount?: number | undefined;
  /**
   * How long a node keeps what it read of a valid API key (default 1000 ms; 0: never): a revocation,
   * a disabled account or a plan change made on another node takes effect here within this bound
   * (postgres/keys.ts).
   */
  keyCacheMs?: number | undefined;
  /** Connections per node (default 10). */
  poolSize?: number | undefined;
  /** A statement running longer is cancelled (default 5000 ms). */
  statementTimeoutMs?: number | undefined;
  /** Waiting longer for a connection (new or from the pool) fails the call (default 5000 ms). */
  connectionTimeoutMs?: number | undefined;
  /**
   * This node is dead once its heartbeat is older than this, and the others release its
   * reservations (default 30 000 ms). Declared in its row: each node is judged by its own value.
   */
  heartbeatLapseMs?: number | undefined;
  /**
   * Release dead nodes' reservations and fail their batches' unended images (ORPHAN_ERROR) on
   * every heartbeat tick (default true), so a running service recovers without anyone calling
   * recoverAfterCrash() or failOrphans(). Off: only explicit calls do.
   */
  autoRecover?: boolean | undefined;
}

export const DEFAULT_POOL_SIZE = 10;
export const DEFAULT_STATEMENT_TIMEOUT_MS = 5000;
export const DEFAULT_CONNECTION_TIMEOUT_MS = 5000;
export const DEFAULT_HEARTBEAT_LAPSE_MS = 30_000;
export const DEFAULT_KEY_CACHE_MS = 1000;
/** Stale rate-limit windows and login failures are deleted at most this often, on the heartbeat tick. */
const COUNTER_PURGE_INTERVAL_MS = 60 * 1000;

function positiveInteger(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 1) throw new RangeError(`${name} must be a positive integer, got ${String(value)}`);
  return value;
}

export class PostgresStore implements Store {
  readonly kind = 'postgres' as const;
  readonly plans: PlanTable;
  readonly clock: Clock;
  readonly accounts: AccountStore;
  readonly keys: KeyStore;
  readonly credits: CreditStore;
  readonly usage: UsageStore;
  readonly sessions: SessionStore;
  readonly rateLimits: RateLimitStore;
  readonly loginThrottle: LoginThrottleStore;
  readonly webhooks: WebhookStore;
  readonly batches: BatchStore;
  readonly cluster: ClusterStore;
  /** This instance's node id: owner of its reservations and key of its heartbeat row. */
  readonly nodeId = randomUUID();
  readonly #pool: pg.Pool;
  /** Rate-limit counts: commits that do not wait for the disk (pool.ts). */
  readonly #countersPool: pg.Pool;
  readonly #heartbeat: NodeHeartbeat;
  readonly #credits: PostgresCredits;
  readonly #rateWindows: PostgresRateWindows;
  readonly #loginThrottle: PostgresLoginThrottle;
  readonly #autoRecover: boolean;
  #open = true;
  #lastCounterPurgeMs = Number.NEGATIVE_INFINITY;

  /** Use openPostgresStore(): the constructor checks the options and connects lazily; open() migrates and registers the node. */
  constructor(options: PostgresStoreOptions) {
    if (typeof options.url !== 'string' || options.url.length === 0) throw new RangeError('url must be a postgres:// connection string');
    const lastUsedResolutionMs = checkDurationMs('lastUsedResolutionMs', options.lastUsedResolutionMs ?? LAST_USED_RESOLUTION_MS, true);
    const maxKeysPerAccount = checkMaxKeys(options.maxKeysPerAccount ?? MAX_KEYS_PER_ACCOUNT);
    const sessionTtlMs = checkDurationMs('sessionTtlMs', options.sessionTtlMs ?? SESSION_TTL_MS, false);
    const poolSize = positiveInteger('poolSize', options.poolSize ?? DEFAULT_POOL_SIZE);
    const statementTimeoutMs = checkDurationMs('statementTimeoutMs', options.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS, false);
    const connectionTimeoutMs = checkDurationMs('connectionTimeoutMs', options.connectionTimeoutMs ?? DEFAULT_CONNECTION_TIMEOUT_MS, false);
    const heartbeatLapseMs = checkDurationMs('heartbeatLapseMs', options.heartbeatLapseMs ?? DEFAULT_HEARTBEAT_LAPSE_MS, false);
    const keyCacheMs = checkDurationMs('keyCacheMs', options.keyCacheMs ?? DEFAULT_KEY_CACHE_MS, true);
    this.#autoRecover = options.autoRecover ?? true;
    this.plans = resolvePlans(options.rateLimits);
    this.clock = options.clock ?? systemClock;
    const pool = createPool({ url: options.url, poolSize, statementTimeoutMs, connectionTimeoutMs });
    this.#pool = pool;
    const countersPool = createPool({ url: options.url, poolSize: Math.min(2, poolSize), statementTimeoutMs, connectionTimeoutMs, asyncCommit: true });
    this.#countersPool = countersPool;
    const now = () => this.clock().getTime();

    this.#heartbeat = new NodeHeartbeat(pool, this.nodeId, heartbeatLapseMs, () => this.#tick());
    const ensureAlive = () => this.#heartbeat.ensureAlive();
    const keys = new PostgresKeys(pool, now, this.plans, lastUsedResolutionMs, maxKeysPerAccount, keyCacheMs);
    /** A change of the account's plan or state through this node: its keys' cached lookups go. */
    const changed = async <T>(accountId: number, change: Promise<T>): Promise<T> => {
      try {
        return await change;
      } finally {
        keys.forgetAccount(accountId);
      }
    };
    const accounts = new PostgresAccounts(pool, now, this.plans, keys);
    const credits = new PostgresCredits(pool, now, this.plans, this.nodeId, ensureAlive);
    this.#credits = credits;
    const usage = new PostgresUsage(pool, this.clock, credits);
    const sessions = new PostgresSessions(pool, now, sessionTtlMs);

    // Bound once here, so a method taken off the store (a callback) keeps working like a closure.
    this.accounts = {
      create: (input) => accounts.create(input),
      createWithPassword: (input) => accounts.createWithPassword(input),
      get: (id) => accounts.get(id),
      getByEmail: (email) => accounts.getByEmail(email),
      list: () => accounts.list(),
      setPlan: (id, plan) => changed(id, accounts.setPlan(id, plan)),
      cancel: (id) => changed(id, accounts.cancel(id)),
      resume: (id) => changed(id, accounts.resume(id)),
      disable: (id) => changed(id, accounts.disable(id)),
      enable: (id) => changed(id, accounts.enable(id)),
      passwordHash: (id) => accounts.passwordHash(id),
      setPasswordHash: (id, encodedHash) => accounts.setPasswordHash(id, encodedHash),
    };
    this.keys = {
      create: (accountId) => keys.create(accountId),
      list: (accountId) => keys.list(accountId),
      get: (keyId) => keys.get(keyId),
      revoke: (ref, revokeOptions) => keys.revoke(ref, revokeOptions),
      authenticate: (rawKey) => keys.authenticate(rawKey),
    };
    this.credits = {
      reserve: (accountId, reserveOptions) => credits.reserve(accountId, reserveOptions),
      commit: (reservationId) => credits.commit(reservationId),
      release: (reservationId) => credits.release(reservationId),
      recoverAfterCrash: () => credits.recoverAfterCrash(),
      balance: (accountId) => credits.balance(accountId),
      grant: (accountId, amount, note) => credits.grant(accountId, amount, note),
    };
    this.usage = {
      byDay: (accountId, cycleIndex) => usage.byDay(accountId, cycleIndex),
      summary: () => usage.summary(),
    };
    this.sessions = {
      ttlMs: sessions.ttlMs,
      create: (accountId) => sessions.create(accountId),
      get: (token) => sessions.get(token),
      delete: (token) => sessions.delete(token),
      deleteForAccount: (accountId) => sessions.deleteForAccount(accountId),
    };

    this.#rateWindows = new PostgresRateWindows(countersPool, now);
    this.rateLimits = { take: (bucket, limit) => this.#rateWindows.take(bucket, limit) };
    this.#loginThrottle = new PostgresLoginThrottle(pool, (fn) => inTransaction(pool, fn), now);
    this.loginThrottle = this.#loginThrottle;

    // Batches reserve and charge through the same steps as /remove, inside their own transactions.
    const context: PostgresContext = {
      pool,
      nodeId: this.nodeId,
      now,
      transaction: (fn) => inTransaction(pool, fn),
      lockAccount: (c, accountId) => accountRow(c, accountId, true),
      balance: (c, row, atMs) => credits.balanceIn(c, row, atMs),
      commitReservation: (c, reservationId) => credits.commitIn(c, reservationId),
      ensureAlive,
    };
    const webhooks = new PostgresWebhooks(context);
    this.webhooks = webhooks;
    this.batches = new PostgresBatches(context, webhooks);
    this.cluster = new PostgresCluster(context, this.#heartbeat);
  }

  /** Migrates the database (under an advisory lock), registers this node and starts its heartbeat. */
  async open(): Promise<void> {
    await withClient(this.#pool, (client) => migrate(client));
    await this.#heartbeat.start();
  }

  get isOpen(): boolean {
    return this.#open;
  }

  async ping(): Promise<void> {
    await this.#pool.query('SELECT 1');
  }

  /**
   * The first call on the database writes the row; nodes asking at once all keep the first row
   * committed (ON CONFLICT waits for it), and the read that follows, a statement of its own, sees it.
   */
  async serverKey(): Promise<Buffer> {
    await this.#pool.query('INSERT INTO server_key (id, secret, created_at) VALUES (1, $1, $2) ON CONFLICT (id) DO NOTHING', [
      randomBytes(32),
      this.clock().getTime(),
    ]);
    const { rows } = await this.#pool.query<{ secret: Buffer }>('SELECT secret FROM server_key WHERE id = 1');
    return rows[0]!.secret;
  }

  /**
   * Idempotent. Stops the heartbeat and deletes this node's row: whatever it still holds is then
   * released by the next recoverAfterCrash() of any node, without waiting for the lapse.
   */
  async close(): Promise<void> {
    if (!this.#open) return;
    this.#open = false;
    try {
      await this.#heartbeat.stop();
    } finally {
      await Promise.all([this.#pool.end(), this.#countersPool.end()]);
    }
  }

  /** The heartbeat tick's work, after each beat. */
  async #tick(): Promise<void> {
    if (this.#autoRecover) {
      // Images first: the sweep releases each lost image's credit with the image, in one
      // transaction; recovery then releases the dead nodes' other reservations.
      await this.batches.failOrphans(ORPHAN_ERROR);
      await this.#credits.recoverAfterCrash();
    }
    const now = this.clock().getTime();
    if (now - this.#lastCounterPurgeMs >= COUNTER_PURGE_INTERVAL_MS) {
      this.#lastCounterPurgeMs = now;
      await this.#rateWindows.purge();
      await this.#loginThrottle.purge();
    }
  }
}

/**
 * Opens the store on a PostgreSQL database: checks the options, applies the pending migrations
 * (several nodes may start at once) and registers this node with its heartbeat. Throws StoreError
 * 'schema_too_new' for a database from a newer build, and the driver's error when the server
 * cannot be reached.
 */
export async function openPostgresStore(options: PostgresStoreOptions): Promise<PostgresStore> {
  const store = new PostgresStore(options);
  try {
    await store.open();
  } catch (err) {
    await store.close();
    throw err;
  }
  return store;
}
