/**
 * The Store on PostgreSQL (pg): any number of bgone processes ("nodes") on one database act as one
 * service. Every method is one statement or one short transaction under READ COMMITTED; credits
 * stay exact across nodes because a reservation is admitted while its account row is locked
 * (SELECT ... FOR UPDATE) and the balance it checks is read in one statement (one snapshot).
 *
 * Each store instance is a node with a random id that owns the reservations it makes and keeps a
 * heartbeat row (the database's clock) fresh every few seconds. A node that stops (kill -9, lost
 * machine) stops beating; once its heartbeat is older than the `heartbeatLapseMs` it declared in
 * its row (its own setting, so nodes configured differently never misjudge each other), any other
 * node's recoverAfterCrash() (also run on every heartbeat tick) releases its reservations. A live
 * node's reservations are never released.
 */

import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { ORPHAN_ERROR } from '../batch-rules.js';
import { type Clock, systemClock } from '../clock.js';
import { cycleAt, cycleByIndex } from '../cycles.js';
import { StoreError } from '../errors.js';
import type { LoginThrottleStore } from '../login-throttle.js';
import { PLAN_NAMES, type PlanName, type PlanTable, type RateLimits, resolvePlans } from '../plans.js';
import {
  ACCOUNT_COLUMNS,
  type AccountRow,
  KEY_COLUMNS,
  type KeyAccountRow,
  type KeyRow,
  type ReservationRow,
  SESSION_COLUMNS,
  type SessionRow,
  toAccount,
  toAuthenticated,
  toKeyInfo,
  toSession,
} from '../rows.js';
import {
  checkDurationMs,
  checkEmail,
  checkGrant,
  checkId,
  checkMaxKeys,
  checkPasswordHash,
  checkPlan,
  effectivePlanAt,
  IDEMPOTENCY_TTL_MS,
  keyLimitError,
  LAST_USED_RESOLUTION_MS,
  MAX_KEYS_PER_ACCOUNT,
  normalizeEmail,
  SESSION_TTL_MS,
} from '../rules.js';
import {
  DISPLAY_PREFIX_LENGTH,
  generateApiKey,
  generateSessionToken,
  hashApiKey,
  hashSessionToken,
  isWellFormedApiKey,
  isWellFormedSessionToken,
} from '../secrets.js';
import type {
  Account,
  AccountStore,
  AccountUsage,
  ApiKeyInfo,
  Balance,
  BatchStore,
  CommitResult,
  CreatedApiKey,
  CreatedSession,
  CreditStore,
  DayUsage,
  KeyStore,
  RateLimitStore,
  ReserveOptions,
  ReserveResult,
  SessionStore,
  Store,
  UsageStore,
  UsageSummary,
  WebhookStore,
} from '../store.js';
import { isDatabaseUnavailable } from '../unavailable.js';
import { PostgresBatches } from './batches.js';
import { DB_NOW_MS, type PostgresContext } from './context.js';
import { PostgresLoginThrottle } from './login-throttle.js';
import { migrate } from './migrations.js';
import { PostgresRateWindows } from './rate-windows.js';
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
/** A node beats this often at most, and at least three times per lapse, so one late beat never kills it. */
const MAX_HEARTBEAT_INTERVAL_MS = 5000;
/** Expired idempotency records and sessions are deleted at most this often (lazily). */
const PURGE_INTERVAL_MS = 10 * 60 * 1000;
/** Stale rate-limit windows and login failures are deleted at most this often, on the heartbeat tick. */
const COUNTER_PURGE_INTERVAL_MS = 60 * 1000;
const DAY_MS = 24 * 60 * 60 * 1000;
/** Serialization failure, deadlock: the transaction is retried as a whole. */
const RETRYABLE = new Set(['40001', '40P01']);
const TX_ATTEMPTS = 5;

/** BIGINT (oid 20) as a JS number: ids, counts and ms timestamps all stay far below 2^53. */
const TYPES = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === 20 ? (value: string) => Number(value) : pg.types.getTypeParser(oid, format ?? 'text')) as typeof pg.types.getTypeParser,
};

type Queryable = Pick<pg.PoolClient, 'query'>;

function notFound(id: number): StoreError {
  return new StoreError('not_found', `no account ${id}`);
}

function positiveInteger(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 1) throw new RangeError(`${name} must be a positive integer, got ${String(value)}`);
  return value;
}

/** What a balance is computed from: one snapshot of the cycle's usage row and reservations. */
interface CycleCounts {
  used: number;
  granted: number;
  reserved: number;
}

/** Reads a cycle's counts in one statement, so a commit running meanwhile is seen wholly or not at all. */
const CYCLE_COUNTS_SQL = `SELECT
  coalesce((SELECT used FROM cycle_usage WHERE account_id = $1 AND cycle_index = $2), 0) AS used,
  coalesce((SELECT granted FROM cycle_usage WHERE account_id = $1 AND cycle_index = $2), 0) AS granted,
  (SELECT count(*) FROM reservations WHERE account_id = $1 AND cycle_index = $2) AS reserved`;

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
  readonly #rateWindows: PostgresRateWindows;
  readonly #loginThrottle: PostgresLoginThrottle;
  /** This instance's node id: owner of its reservations and key of its heartbeat row. */
  readonly nodeId = randomUUID();
  readonly #pool: pg.Pool;
  readonly #lastUsedResolutionMs: number;
  readonly #maxKeysPerAccount: number;
  readonly #heartbeatLapseMs: number;
  readonly #autoRecover: boolean;
  #heartbeat: NodeJS.Timeout | undefined;
  #heartbeatIntervalMs = MAX_HEARTBEAT_INTERVAL_MS;
  /** performance.now() of the last successful beat. */
  #lastBeatAt = Number.NEGATIVE_INFINITY;
  #open = true;
  #lastIdemPurgeMs = Number.NEGATIVE_INFINITY;
  #lastSessionPurgeMs = Number.NEGATIVE_INFINITY;
  #lastCounterPurgeMs = Number.NEGATIVE_INFINITY;
  /** Reservations whose release failed while the database was unreachable: retried on every tick. */
  readonly #pendingReleases = new Set<number>();

  /** Use openPostgresStore(): the constructor checks the options and connects lazily; open() migrates and registers the node. */
  constructor(options: PostgresStoreOptions) {
    if (typeof options.url !== 'string' || options.url.length === 0) throw new RangeError('url must be a postgres:// connection string');
    this.#lastUsedResolutionMs = checkDurationMs('lastUsedResolutionMs', options.lastUsedResolutionMs ?? LAST_USED_RESOLUTION_MS, true);
    this.#maxKeysPerAccount = checkMaxKeys(options.maxKeysPerAccount ?? MAX_KEYS_PER_ACCOUNT);
    const sessionTtlMs = checkDurationMs('sessionTtlMs', options.sessionTtlMs ?? SESSION_TTL_MS, false);
    const poolSize = positiveInteger('poolSize', options.poolSize ?? DEFAULT_POOL_SIZE);
    const statementTimeoutMs = checkDurationMs('statementTimeoutMs', options.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS, false);
    const connectionTimeoutMs = checkDurationMs('connectionTimeoutMs', options.connectionTimeoutMs ?? DEFAULT_CONNECTION_TIMEOUT_MS, false);
    this.#heartbeatLapseMs = checkDurationMs('heartbeatLapseMs', options.heartbeatLapseMs ?? DEFAULT_HEARTBEAT_LAPSE_MS, false);
    this.#autoRecover = options.autoRecover ?? true;
    this.plans = resolvePlans(options.rateLimits);
    this.clock = options.clock ?? systemClock;
    this.#pool = new pg.Pool({
      connectionString: options.url,
      max: poolSize,
      connectionTimeoutMillis: connectionTimeoutMs,
      statement_timeout: statementTimeoutMs,
      // A transaction left open by a bug must not hold an account's lock forever.
      idle_in_transaction_session_timeout: Math.max(statementTimeoutMs * 2, 10_000),
      application_name: 'bgone',
      types: TYPES,
    });
    // An idle connection dropped by the server (restart, failover) is discarded by the pool; the
    // next query opens a new one. Without a listener the error would crash the process.
    this.#pool.on('error', () => {});

    this.accounts = {
      create: async (input) => this.#createAccount(this.#pool, checkEmail(input.email), checkPlan(input.plan ?? 'free'), null),
      createWithPassword: async ({ email, passwordHash }) => {
        const checkedEmail = checkEmail(email);
        const hash = checkPasswordHash(passwordHash);
        // The account, its password and its first key exist together or not at all.
        return this.#transaction(async (c) => {
          const account = await this.#createAccount(c, checkedEmail, 'free', hash);
          return { account, key: (await this.#createKey(c, account.id)).key };
        });
      },
      get: async (id) => {
        const row = await this.#accountRow(this.#pool, id);
        return row ? toAccount(row, this.#now()) : null;
      },
      getByEmail: async (email) => {
        const { rows } = await this.#pool.query<AccountRow>(`SELECT ${ACCOUNT_COLUMNS} FROM accounts WHERE email_normalized = $1`, [normalizeEmail(email)]);
        return rows[0] ? toAccount(rows[0], this.#now()) : null;
      },
      list: async () => {
        const { rows } = await this.#pool.query<AccountRow>(`SELECT ${ACCOUNT_COLUMNS} FROM accounts ORDER BY id`);
        const now = this.#now();
        return rows.map((row) => toAccount(row, now));
      },
      setPlan: async (id, plan) => this.#updateAccount(id, 'plan = $2, cancel_at = NULL', [checkPlan(plan)]),
      cancel: (id) => this.#cancel(id),
      resume: (id) => this.#resume(id),
      // Its dashboard sessions end in the same transaction: none outlives the disabling.
      disable: (id) =>
        this.#transaction(async (c) => {
          const account = await this.#updateAccount(id, 'disabled_at = coalesce(disabled_at, $2)', [this.#now()], c);
          await c.query('DELETE FROM sessions WHERE account_id = $1', [id]);
          return account;
        }),
      enable: (id) => this.#updateAccount(id, 'disabled_at = NULL', []),
      passwordHash: async (id) => {
        const { rows } = await this.#pool.query<{ password_hash: string | null }>('SELECT password_hash FROM accounts WHERE id = $1', [id]);
        return rows[0]?.password_hash ?? null;
      },
      setPasswordHash: async (id, encodedHash) => {
        const { rowCount } = await this.#pool.query('UPDATE accounts SET password_hash = $2 WHERE id = $1', [id, checkPasswordHash(encodedHash)]);
        if (rowCount === 0) throw notFound(id);
      },
    };

    this.keys = {
      create: (accountId) => this.#transaction((c) => this.#createKey(c, accountId)),
      list: async (accountId) => {
        const { rows } = await this.#pool.query<KeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE account_id = $1 ORDER BY id`, [accountId]);
        return rows.map(toKeyInfo);
      },
      get: async (keyId) => {
        const { rows } = await this.#pool.query<KeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE id = $1`, [keyId]);
        return rows[0] ? toKeyInfo(rows[0]) : null;
      },
      revoke: (ref, options) => this.#revoke(ref, options?.accountId),
      authenticate: (rawKey) => this.#authenticate(rawKey),
    };

    this.credits = {
      reserve: (accountId, options) => this.#reserve(accountId, options),
      commit: (reservationId) => this.#commit(reservationId),
      release: async (reservationId) => {
        try {
          const { rowCount } = await this.#pool.query('DELETE FROM reservations WHERE id = $1', [reservationId]);
          return (rowCount ?? 0) > 0;
        } catch (err) {
          // Kept and retried by the heartbeat tick: a live node's reservation is never released by
          // the others, so without the retry an outage would hold the credit until this node stops.
          if (isDatabaseUnavailable(err)) this.#pendingReleases.add(reservationId);
          throw err;
        }
      },
      recoverAfterCrash: () => this.#recover(),
      balance: async (accountId) => {
        const row = await this.#accountRow(this.#pool, accountId);
        if (!row) throw notFound(accountId);
        return this.#balance(this.#pool, row, this.#now());
      },
      grant: async (accountId, amount, note) => this.#grant(accountId, checkGrant(amount), note ?? null),
    };

    this.usage = {
      byDay: (accountId, cycleIndex) => this.#byDay(accountId, cycleIndex),
      summary: () => this.#summary(),
    };

    this.sessions = {
      ttlMs: sessionTtlMs,
      create: (accountId) => this.#createSession(accountId, sessionTtlMs),
      get: async (token) => {
        if (!isWellFormedSessionToken(token)) return null;
        const { rows } = await this.#pool.query<SessionRow>(`SELECT ${SESSION_COLUMNS} FROM sessions WHERE token_hash = $1`, [hashSessionToken(token)]);
        const row = rows[0];
        return row && row.expires_at > this.#now() ? toSession(row) : null;
      },
      delete: async (token) => {
        if (!isWellFormedSessionToken(token)) return false;
        const { rowCount } = await this.#pool.query('DELETE FROM sessions WHERE token_hash = $1', [hashSessionToken(token)]);
        return (rowCount ?? 0) > 0;
      },
      deleteForAccount: async (accountId) => {
        const { rowCount } = await this.#pool.query('DELETE FROM sessions WHERE account_id = $1', [accountId]);
        return rowCount ?? 0;
      },
    };

    const nowMs = () => this.#now();
    this.#rateWindows = new PostgresRateWindows(this.#pool, nowMs);
    this.rateLimits = { take: (bucket, limit) => this.#rateWindows.take(bucket, limit) };
    this.#loginThrottle = new PostgresLoginThrottle(this.#pool, (fn) => this.#transaction(fn), nowMs);
    this.loginThrottle = this.#loginThrottle;

    // Batches reserve and charge through the same steps as /remove, inside their own transactions.
    const context: PostgresContext = {
      pool: this.#pool,
      nodeId: this.nodeId,
      now: nowMs,
      transaction: (fn) => this.#transaction(fn),
      lockAccount: (c, accountId) => this.#accountRow(c, accountId, true),
      balance: (c, row, atMs) => this.#balance(c, row, atMs),
      commitReservation: (c, reservationId) => this.#commitIn(c, reservationId),
      ensureAlive: () => this.#ensureAlive(),
    };
    const webhooks = new PostgresWebhooks(context);
    this.webhooks = webhooks;
    this.batches = new PostgresBatches(context, webhooks);
  }

  /** Migrates the database (under an advisory lock), registers this node and starts its heartbeat. */
  async open(): Promise<void> {
    const client = await this.#pool.connect();
    try {
      await migrate(client);
    } finally {
      client.release();
    }
    await this.#beat();
    const interval = Math.max(1, Math.min(MAX_HEARTBEAT_INTERVAL_MS, Math.floor(this.#heartbeatLapseMs / 3)));
    this.#heartbeatIntervalMs = interval;
    this.#heartbeat = setInterval(() => void this.#tick(), interval);
    this.#heartbeat.unref();
  }

  get isOpen(): boolean {
    return this.#open;
  }

  async ping(): Promise<void> {
    await this.#pool.query('SELECT 1');
  }

  /**
   * Idempotent. Stops the heartbeat and deletes this node's row: whatever it still holds is then
   * released by the next recoverAfterCrash() of any node, without waiting for the lapse.
   */
  async close(): Promise<void> {
    if (!this.#open) return;
    this.#open = false;
    clearInterval(this.#heartbeat);
    try {
      // Deleting the node row lets any other node release what this one still holds at once.
      await this.#pool.query('DELETE FROM nodes WHERE id = $1', [this.nodeId]);
    } catch {
      // Database unreachable: the row lapses by itself.
    } finally {
      await this.#pool.end();
    }
  }

  #now(): number {
    return this.clock().getTime();
  }

  async #beat(): Promise<void> {
    // An upsert: a node that was paused past its lapse (and reaped) comes back as a live node.
    await this.#pool.query(
      `INSERT INTO nodes (id, started_at, heartbeat_at, lapse_ms) VALUES ($1, ${DB_NOW_MS}, ${DB_NOW_MS}, $2)
       ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at`,
      [this.nodeId, this.#heartbeatLapseMs],
    );
    this.#lastBeatAt = performance.now();
  }

  /**
   * Beats now unless a beat succeeded within the last interval and a half. After an outage or a
   * pause longer than the lapse, the others may count this node as dead and release what it
   * reserves; a reservation made before the next tick's beat could be released under a request
   * still processing it. Beating first makes any reservation that follows belong to a live node.
   */
  async #ensureAlive(): Promise<void> {
    if (performance.now() - this.#lastBeatAt > this.#heartbeatIntervalMs * 1.5) await this.#beat();
  }

  async #tick(): Promise<void> {
    try {
      await this.#beat();
      for (const id of this.#pendingReleases) {
        await this.#pool.query('DELETE FROM reservations WHERE id = $1', [id]);
        this.#pendingReleases.delete(id);
      }
      if (this.#autoRecover) {
        // Images first: the sweep releases each lost image's credit with the image, in one
        // transaction; #recover then releases the dead nodes' other reservations.
        await this.batches.failOrphans(ORPHAN_ERROR);
        await this.#recover();
      }
      const now = this.#now();
      if (now - this.#lastCounterPurgeMs >= COUNTER_PURGE_INTERVAL_MS) {
        this.#lastCounterPurgeMs = now;
        await this.#rateWindows.purge();
        await this.#loginThrottle.purge();
      }
    } catch {
      // Database unreachable or store closing: the next tick tries again.
    }
  }

  async #transaction<T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const client = await this.#pool.connect();
      let broken = false;
      try {
        await client.query('BEGIN');
        const result = await fn(client);
        await client.query('COMMIT');
        return result;
      } catch (err) {
        try {
          await client.query('ROLLBACK');
        } catch {
          broken = true; // the connection is gone: drop it from the pool
        }
        const code = (err as { code?: unknown }).code;
        if (typeof code !== 'string' || !RETRYABLE.has(code) || attempt >= TX_ATTEMPTS) throw err;
      } finally {
        client.release(broken);
      }
    }
  }

  async #accountRow(q: Queryable, id: number, forUpdate = false): Promise<AccountRow | undefined> {
    const { rows } = await q.query<AccountRow>(`SELECT ${ACCOUNT_COLUMNS} FROM accounts WHERE id = $1${forUpdate ? ' FOR UPDATE' : ''}`, [id]);
    return rows[0];
  }

  // --- Accounts -----------------------------------------------------------------------------------

  async #createAccount(q: Queryable, email: string, plan: PlanName, passwordHash: string | null): Promise<Account> {
    const now = this.#now();
    const { rows } = await q.query<AccountRow>(
      `INSERT INTO accounts (email, email_normalized, plan, created_at, password_hash) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (email_normalized) DO NOTHING RETURNING ${ACCOUNT_COLUMNS}`,
      [email, normalizeEmail(email), plan, now, passwordHash],
    );
    if (!rows[0]) throw new StoreError('email_taken', `an account with email ${email} already exists`);
    return toAccount(rows[0], now);
  }

  async #updateAccount(id: number, set: string, params: unknown[], db: Queryable = this.#pool): Promise<Account> {
    const { rows } = await db.query<AccountRow>(`UPDATE accounts SET ${set} WHERE id = $1 RETURNING ${ACCOUNT_COLUMNS}`, [id, ...params]);
    if (!rows[0]) throw notFound(id);
    return toAccount(rows[0], this.#now());
  }

  #cancel(id: number): Promise<Account> {
    return this.#transaction(async (c) => {
      const row = await this.#accountRow(c, id, true);
      if (!row) throw notFound(id);
      const now = this.#now();
      if (row.cancel_at !== null && row.cancel_at > now) return toAccount(row, now); // already pending
      const plan = effectivePlanAt(row.plan, row.cancel_at, now);
      if (!this.plans[plan].paid) throw new StoreError('invalid_state', `account ${id} has no paid plan to cancel (plan: ${plan})`);
      const end = cycleAt(new Date(row.created_at), new Date(now)).end.getTime();
      await c.query('UPDATE accounts SET cancel_at = $2 WHERE id = $1', [id, end]);
      return toAccount({ ...row, cancel_at: end }, now);
    });
  }

  #resume(id: number): Promise<Account> {
    return this.#transaction(async (c) => {
      const row = await this.#accountRow(c, id, true);
      if (!row) throw notFound(id);
      const now = this.#now();
      if (row.cancel_at === null) return toAccount(row, now);
      if (row.cancel_at <= now) throw new StoreError('invalid_state', `the cancellation of account ${id} already took effect; set a plan again instead`);
      await c.query('UPDATE accounts SET cancel_at = NULL WHERE id = $1', [id]);
      return toAccount({ ...row, cancel_at: null }, now);
    });
  }

  // --- API keys -----------------------------------------------------------------------------------

  /**
   * Inside a transaction (`q` is its client): the account row is locked first, so that creations
   * for one account on any number of nodes are counted against the cap one after another.
   */
  async #createKey(q: Queryable, accountId: number): Promise<CreatedApiKey> {
    if (!(await this.#accountRow(q, accountId, true))) throw notFound(accountId);
    const { rows: active } = await q.query<{ n: number }>('SELECT count(*) AS n FROM api_keys WHERE account_id = $1 AND revoked_at IS NULL', [accountId]);
    if (Number(active[0]?.n ?? 0) >= this.#maxKeysPerAccount) throw keyLimitError(accountId, this.#maxKeysPerAccount);
    const now = this.#now();
    for (;;) {
      const key = generateApiKey();
      // No row: no such account, or (rarely) a display prefix already taken, then drawn again.
      const { rows } = await q.query<KeyRow>(
        `INSERT INTO api_keys (account_id, key_hash, prefix, last4, created_at)
         SELECT id, $2, $3, $4, $5 FROM accounts WHERE id = $1
         ON CONFLICT DO NOTHING RETURNING ${KEY_COLUMNS}`,
        [accountId, hashApiKey(key), key.slice(0, DISPLAY_PREFIX_LENGTH), key.slice(-4), now],
      );
      if (rows[0]) return { key, info: toKeyInfo(rows[0]) };
      if (!(await this.#accountRow(q, accountId))) throw notFound(accountId);
    }
  }

  async #revoke(ref: number | string, accountId: number | undefined): Promise<ApiKeyInfo | null> {
    let where: string;
    let value: unknown;
    if (typeof ref === 'number') [where, value] = ['id = $1', ref];
    else if (isWellFormedApiKey(ref)) [where, value] = ['key_hash = $1', hashApiKey(ref)];
    else [where, value] = ['prefix = $1', ref];
    const { rows } = await this.#pool.query<KeyRow>(
      `UPDATE api_keys SET revoked_at = coalesce(revoked_at, $2)
       WHERE ${where} AND ($3::bigint IS NULL OR account_id = $3) RETURNING ${KEY_COLUMNS}`,
      [value, this.#now(), accountId ?? null],
    );
    return rows[0] ? toKeyInfo(rows[0]) : null;
  }

  async #authenticate(rawKey: unknown) {
    if (!isWellFormedApiKey(rawKey)) return null;
    const { rows } = await this.#pool.query<KeyAccountRow>(
      `SELECT k.id, k.account_id, k.last_used_at, k.revoked_at, a.plan, a.cancel_at, a.disabled_at
       FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.key_hash = $1`,
      [hashApiKey(rawKey)],
    );
    const row = rows[0];
    if (!row || row.revoked_at !== null) return null;
    const now = this.#now();
    if (row.last_used_at === null || now - row.last_used_at >= this.#lastUsedResolutionMs) {
      await this.#pool.query('UPDATE api_keys SET last_used_at = $2 WHERE id = $1', [row.id, now]);
    }
    return toAuthenticated(row, this.plans, now);
  }

  // --- Credits ------------------------------------------------------------------------------------

  #compute(row: AccountRow, nowMs: number, counts: CycleCounts): Balance {
    const cycle = cycleAt(new Date(row.created_at), new Date(nowMs));
    const plan = this.plans[effectivePlanAt(row.plan, row.cancel_at, nowMs)];
    const allowance = plan.credits + counts.granted;
    return {
      plan: plan.name,
      allowance,
      granted: counts.granted,
      used: counts.used,
      reserved: counts.reserved,
      remaining: Math.max(0, allowance - counts.used - counts.reserved),
      cycleIndex: cycle.index,
      cycleStart: cycle.start,
      cycleEnd: cycle.end,
      rateLimitPerMinute: plan.rateLimitPerMinute,
    };
  }

  async #balance(q: Queryable, row: AccountRow, nowMs: number): Promise<Balance> {
    const { index } = cycleAt(new Date(row.created_at), new Date(nowMs));
    const { rows } = await q.query<CycleCounts>(CYCLE_COUNTS_SQL, [row.id, index]);
    return this.#compute(row, nowMs, rows[0]!);
  }

  /**
   * Holds one credit, in one short transaction: the account row is locked (reserves of one account
   * queue there, from any node), then one statement reads the cycle's usage, its reservations and
   * the Idempotency-Key's state, and the reservation is inserted only while used + reserved < allowance.
   */
  async #reserve(accountId: number, options: ReserveOptions): Promise<ReserveResult> {
    checkId('requestId', options.requestId, true);
    checkId('idempotencyKey', options.idempotencyKey, false);
    if (options.idempotencyKey !== undefined) checkId('imageHash (required with idempotencyKey)', options.imageHash, true);
    const { idempotencyKey, imageHash } = options;
    await this.#ensureAlive();
    const now = this.#now();
    if (now - this.#lastIdemPurgeMs >= PURGE_INTERVAL_MS) {
      this.#lastIdemPurgeMs = now;
      await this.#pool.query('DELETE FROM idempotency_keys WHERE created_at <= $1', [now - IDEMPOTENCY_TTL_MS]);
    }
    return this.#transaction(async (c): Promise<ReserveResult> => {
      const row = await this.#accountRow(c, accountId, true);
      if (!row) throw notFound(accountId);
      if (row.disabled_at !== null) return { ok: false, reason: 'account_disabled' };
      const { index } = cycleAt(new Date(row.created_at), new Date(now));
      const { rows } = await c.query<CycleCounts & { in_flight: boolean; charged_hash: string | null }>(
        `${CYCLE_COUNTS_SQL},
         EXISTS (SELECT 1 FROM reservations WHERE account_id = $1 AND idempotency_key = $3) AS in_flight,
         (SELECT image_hash FROM idempotency_keys WHERE account_id = $1 AND idempotency_key = $3 AND created_at > $4) AS charged_hash`,
        [accountId, index, idempotencyKey ?? null, now - IDEMPOTENCY_TTL_MS],
      );
      const counts = rows[0]!;
      const b = this.#compute(row, now, counts);
      if (idempotencyKey !== undefined) {
        if (counts.in_flight) return { ok: false, reason: 'idempotency_conflict' };
        if (counts.charged_hash !== null) {
          if (counts.charged_hash !== imageHash) return { ok: false, reason: 'idempotency_conflict' };
          return { ok: true, reservationId: null, alreadyCharged: true, remainingAfterCharge: b.remaining };
        }
      }
      if (b.remaining <= 0) return { ok: false, reason: 'payment_required', resetsAt: b.cycleEnd };
      const inserted = await c.query<{ id: number }>(
        `INSERT INTO reservations (account_id, api_key_id, owner, request_id, idempotency_key, image_hash, cycle_index, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id`,
        [
          accountId,
          options.keyId ?? null,
          this.nodeId,
          options.requestId,
          idempotencyKey ?? null,
          idempotencyKey !== undefined ? imageHash! : null,
          index,
          now,
        ],
      );
      return { ok: true, reservationId: inserted.rows[0]!.id, alreadyCharged: false, remainingAfterCharge: b.remaining - 1 };
    });
  }

  /** Turns a reservation into a charge, in one transaction; the DELETE makes a second commit (from any node) find nothing. */
  #commit(reservationId: number): Promise<CommitResult | null> {
    return this.#transaction((c) => this.#commitIn(c, reservationId));
  }

  /** commit()'s body, inside the caller's transaction (also a batch image's charge, batches.ts). */
  async #commitIn(c: Queryable, reservationId: number): Promise<CommitResult | null> {
    const deleted = await c.query<Omit<ReservationRow, 'id'>>(
      'DELETE FROM reservations WHERE id = $1 RETURNING account_id, api_key_id, request_id, idempotency_key, image_hash, cycle_index',
      [reservationId],
    );
    const r = deleted.rows[0];
    if (!r) return null; // committed or released already: never charged twice
    const now = this.#now();
    const charge = await c.query<{ id: number }>(
      'INSERT INTO charges (account_id, api_key_id, request_id, cycle_index, charged_at) VALUES ($1, $2, $3, $4, $5) RETURNING id',
      [r.account_id, r.api_key_id, r.request_id, r.cycle_index, now],
    );
    const chargeId = charge.rows[0]!.id;
    await c.query(
      `INSERT INTO cycle_usage (account_id, cycle_index, used) VALUES ($1, $2, 1)
       ON CONFLICT (account_id, cycle_index) DO UPDATE SET used = cycle_usage.used + 1`,
      [r.account_id, r.cycle_index],
    );
    if (r.idempotency_key !== null) {
      await c.query(
        `INSERT INTO idempotency_keys (account_id, idempotency_key, image_hash, charge_id, created_at) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (account_id, idempotency_key) DO UPDATE
         SET image_hash = excluded.image_hash, charge_id = excluded.charge_id, created_at = excluded.created_at`,
        [r.account_id, r.idempotency_key, r.image_hash, chargeId, now],
      );
    }
    const row = (await this.#accountRow(c, r.account_id))!;
    return { chargeId, cycleIndex: r.cycle_index, remaining: (await this.#balance(c, row, now)).remaining };
  }

  /**
   * Releases the reservations of every node without a live heartbeat (stopped, killed, closed),
   * never this node's nor a live one's, and forgets the dead nodes. Also purges expired
   * idempotency records. Returns how many reservations were released.
   *
   * A reservation still held by an unended batch image is left alone: only the transaction that
   * ends the image releases it (failOrphans, finish, delete). A node's heartbeat can lapse between
   * the orphan sweep and this statement, and the node come back (a pause, not a death); had its
   * images' credits been released here, it would then process them with nothing left to charge.
   * If the node is really dead, the sweep fails those images and releases their credits with them.
   * Such an image's batch is unended: the few unended batches are all that is looked through.
   */
  async #recover(): Promise<number> {
    await this.#pool.query('DELETE FROM idempotency_keys WHERE created_at <= $1', [this.#now() - IDEMPOTENCY_TTL_MS]);
    const { rows } = await this.#pool.query<{ n: number }>(
      `WITH live AS (SELECT id FROM nodes WHERE heartbeat_at > ${DB_NOW_MS} - lapse_ms),
       held_by_images AS (
         SELECT i.reservation_id AS id FROM batches b JOIN batch_images i ON i.batch_id = b.id
         WHERE b.completed_at IS NULL AND i.reservation_id IS NOT NULL),
       released AS (DELETE FROM reservations WHERE owner <> $1 AND owner NOT IN (SELECT id FROM live)
         AND id NOT IN (SELECT id FROM held_by_images) RETURNING 1),
       reaped AS (DELETE FROM nodes WHERE id <> $1 AND id NOT IN (SELECT id FROM live))
       SELECT count(*) AS n FROM released`,
      [this.nodeId],
    );
    return rows[0]!.n;
  }

  #grant(accountId: number, credits: number, note: string | null): Promise<Balance> {
    return this.#transaction(async (c) => {
      const row = await this.#accountRow(c, accountId, true);
      if (!row) throw notFound(accountId);
      const now = this.#now();
      const { index } = cycleAt(new Date(row.created_at), new Date(now));
      await c.query('INSERT INTO grants (account_id, cycle_index, credits, note, granted_at) VALUES ($1, $2, $3, $4, $5)', [
        accountId,
        index,
        credits,
        note,
        now,
      ]);
      await c.query(
        `INSERT INTO cycle_usage (account_id, cycle_index, granted) VALUES ($1, $2, $3)
         ON CONFLICT (account_id, cycle_index) DO UPDATE SET granted = cycle_usage.granted + excluded.granted`,
        [accountId, index, credits],
      );
      return this.#balance(c, row, now);
    });
  }

  // --- Usage --------------------------------------------------------------------------------------

  async #byDay(accountId: number, cycleIndex: number | undefined): Promise<DayUsage[]> {
    const row = await this.#accountRow(this.#pool, accountId);
    if (!row) throw notFound(accountId);
    const anchor = new Date(row.created_at);
    const cycle = cycleIndex === undefined ? cycleAt(anchor, this.clock()) : cycleByIndex(anchor, cycleIndex);
    const first = Math.floor(cycle.start.getTime() / DAY_MS);
    const last = Math.floor((cycle.end.getTime() - 1) / DAY_MS);
    const counts = new Array<number>(last - first + 1).fill(0);
    const { rows } = await this.#pool.query<{ day: number; requests: number }>(
      `SELECT charged_at / ${DAY_MS} AS day, count(*) AS requests FROM charges
       WHERE account_id = $1 AND cycle_index = $2 GROUP BY day ORDER BY day`,
      [accountId, cycle.index],
    );
    // A request admitted just before the cycle ended and committed after counts on its last day.
    for (const { day, requests } of rows) counts[Math.min(Math.max(day, first), last) - first]! += requests;
    return counts.map((requests, i) => ({ day: new Date((first + i) * DAY_MS).toISOString().slice(0, 10), requests }));
  }

  /** One consistent snapshot (REPEATABLE READ, read only) of every account's current cycle and the totals. */
  async #summary(): Promise<UsageSummary> {
    const client = await this.#pool.connect();
    try {
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      try {
        const now = this.#now();
        const accounts = (await client.query<AccountRow>(`SELECT ${ACCOUNT_COLUMNS} FROM accounts ORDER BY id`)).rows;
        const usage = (
          await client.query<{ account_id: number; cycle_index: number; used: number; granted: number }>(
            'SELECT account_id, cycle_index, used, granted FROM cycle_usage',
          )
        ).rows;
        const reserved = (
          await client.query<{ account_id: number; cycle_index: number; n: number }>(
            'SELECT account_id, cycle_index, count(*) AS n FROM reservations GROUP BY account_id, cycle_index',
          )
        ).rows;
        const totals = (
          await client.query<{ active: number; revoked: number; last24h: number; last30d: number; total: number; in_flight: number }>(
            `SELECT (SELECT count(*) FROM api_keys WHERE revoked_at IS NULL) AS active,
                  (SELECT count(*) FROM api_keys WHERE revoked_at IS NOT NULL) AS revoked,
                  (SELECT count(*) FROM charges WHERE charged_at >= $1) AS last24h,
                  (SELECT count(*) FROM charges WHERE charged_at >= $2) AS last30d,
                  (SELECT count(*) FROM charges) AS total,
                  (SELECT count(*) FROM reservations) AS in_flight`,
            [now - DAY_MS, now - 30 * DAY_MS],
          )
        ).rows[0]!;
        await client.query('COMMIT');
        const key = (account: number, cycle: number) => `${account}:${cycle}`;
        const usageOf = new Map(usage.map((u) => [key(u.account_id, u.cycle_index), u]));
        const reservedOf = new Map(reserved.map((r) => [key(r.account_id, r.cycle_index), r.n]));
        const byPlan = Object.fromEntries(PLAN_NAMES.map((name) => [name, 0])) as Record<PlanName, number>;
        let disabled = 0;
        const perAccount: AccountUsage[] = accounts.map((row) => {
          const { index } = cycleAt(new Date(row.created_at), new Date(now));
          const u = usageOf.get(key(row.id, index));
          const balance = this.#compute(row, now, { used: u?.used ?? 0, granted: u?.granted ?? 0, reserved: reservedOf.get(key(row.id, index)) ?? 0 });
          byPlan[balance.plan]++;
          if (row.disabled_at !== null) disabled++;
          return { accountId: row.id, email: row.email, disabled: row.disabled_at !== null, ...balance };
        });
        return {
          at: new Date(now),
          accounts: { total: perAccount.length, disabled, byPlan },
          keys: { active: totals.active, revoked: totals.revoked },
          charged: { last24h: totals.last24h, last30d: totals.last30d, total: totals.total },
          inFlight: totals.in_flight,
          perAccount,
        };
      } catch (err) {
        await client.query('ROLLBACK').catch(() => {});
        throw err;
      }
    } finally {
      client.release();
    }
  }

  // --- Sessions -----------------------------------------------------------------------------------

  async #createSession(accountId: number, ttlMs: number): Promise<CreatedSession> {
    const now = this.#now();
    if (now - this.#lastSessionPurgeMs >= PURGE_INTERVAL_MS) {
      this.#lastSessionPurgeMs = now;
      await this.#pool.query('DELETE FROM sessions WHERE expires_at <= $1', [now]);
    }
    const token = generateSessionToken();
    const { rows } = await this.#pool.query<SessionRow>(
      `INSERT INTO sessions (token_hash, account_id, csrf_token, created_at, expires_at)
       SELECT $1, id, $3, $4, $5 FROM accounts WHERE id = $2 RETURNING ${SESSION_COLUMNS}`,
      [hashSessionToken(token), accountId, generateSessionToken(), now, now + ttlMs],
    );
    if (!rows[0]) throw notFound(accountId);
    return { token, session: toSession(rows[0]) };
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
