/**
 * The Store on SQLite (better-sqlite3): one file, one connection per store; rate-limit counters
 * and login throttles in the owning process's memory. The classes beside this
 * file answer synchronously, each call one short transaction on the event loop thread; this class
 * is the only thing that puts them behind the async interface (store.ts), so nothing outside
 * src/store sees a statement, a row or the connection. Each call goes through whenFree (busy.ts):
 * while another process holds the file, the call waits between attempts, never inside one.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type { Statement } from 'better-sqlite3';
import { type Clock, systemClock } from '../clock.js';
import { Grouped } from '../groups.js';
import { type LoginThrottleStore, MemoryLoginThrottle } from '../login-throttle.js';
import { type PlanTable, type RateLimits, resolvePlans } from '../plans.js';
import { MemoryRateWindows } from '../rate-window.js';
import { checkDurationMs, checkMaxKeys, checkPasswordHash, LAST_USED_RESOLUTION_MS, MAX_KEYS_PER_ACCOUNT, SESSION_TTL_MS } from '../rules.js';
import type {
  AccountStore,
  BatchStore,
  CommitResult,
  CreditStore,
  KeyStore,
  RateLimitStore,
  ReserveOptions,
  ReserveResult,
  SessionStore,
  Store,
  UsageStore,
  WebhookStore,
} from '../store.js';
import { Accounts } from './accounts.js';
import { Batches } from './batches.js';
import { whenFree } from './busy.js';
import { Credentials } from './credentials.js';
import { Credits } from './credits.js';
import { type Db, openDatabase } from './database.js';
import { ApiKeys } from './keys.js';
import { acquireOwnerLock, type OwnerLock } from './owner-lock.js';
import { Sessions } from './sessions.js';
import { Usage } from './usage.js';
import { Webhooks } from './webhooks.js';

export interface SqliteStoreOptions {
  /** The database file (its folder is created if needed); ':memory:' for a private in-memory database. */
  path: string;
  /** Default: the system clock. */
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
   * Open as the file's one service process (`bgone serve`): takes the owner lock (owner-lock.ts),
   * or throws StoreError 'locked' while another live service holds it. Operator commands leave it off.
   */
  serviceOwner?: boolean | undefined;
}

/**
 * Reservations, charges and releases per group (../groups.ts): one write transaction and one
 * commit to disk (synchronous=FULL) for up to this many, where each alone paid one. The commit
 * dominates a transaction's time; this many items add about a millisecond to it, so a group holds
 * the event loop about as long as one call did, and far less per call.
 */
const MAX_GROUP = 32;

export class SqliteStore implements Store {
  readonly kind = 'sqlite' as const;
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
  readonly #db: Db;
  readonly #ping: Statement<[], unknown>;
  readonly #insertServerKey: Statement<[Buffer, number]>;
  readonly #selectServerKey: Statement<[], { secret: Buffer }>;
  readonly #ownerLock: OwnerLock | undefined;

  constructor(options: SqliteStoreOptions) {
    const lastUsedResolutionMs = checkDurationMs('lastUsedResolutionMs', options.lastUsedResolutionMs ?? LAST_USED_RESOLUTION_MS, true);
    const sessionTtlMs = checkDurationMs('sessionTtlMs', options.sessionTtlMs ?? SESSION_TTL_MS, false);
    const maxKeysPerAccount = checkMaxKeys(options.maxKeysPerAccount ?? MAX_KEYS_PER_ACCOUNT);
    this.plans = resolvePlans(options.rateLimits);
    this.clock = options.clock ?? systemClock;
    // The lock before the file is touched: a second service must not even migrate it.
    this.#ownerLock = options.serviceOwner && options.path !== ':memory:' ? acquireOwnerLock(options.path) : undefined;
    let db: Db;
    try {
      db = openDatabase(options.path);
    } catch (err) {
      this.#ownerLock?.release();
      throw err;
    }
    this.#db = db;
    this.#ping = db.prepare<[], unknown>('SELECT 1');
    this.#insertServerKey = db.prepare<[Buffer, number]>('INSERT INTO server_key (id, secret, created_at) VALUES (1, ?, ?) ON CONFLICT (id) DO NOTHING');
    this.#selectServerKey = db.prepare<[], { secret: Buffer }>('SELECT secret FROM server_key WHERE id = 1');
    try {
      const accounts = new Accounts(db, this.clock, this.plans);
      const credentials = new Credentials(db);
      const keys = new ApiKeys(db, this.clock, this.plans, accounts, lastUsedResolutionMs, maxKeysPerAccount);
      // Tags this instance's reservations: recoverAfterCrash releases every other instance's.
      const credits = new Credits(db, this.clock, this.plans, accounts, randomUUID());
      const usage = new Usage(db, this.clock, accounts, credits);
      const sessions = new Sessions(db, this.clock, sessionTtlMs);
      const webhooks = new Webhooks(db, this.clock, accounts);
      // Batches share the credits' owner tag: failOrphans fails every other instance's images.
      const batches = new Batches(db, this.clock, accounts, credits, webhooks);

      // Sign-up: the account, its password and its first key exist together or not at all.
      const createWithPassword = db.transaction((email: string, passwordHash: string) => {
        const account = accounts.create({ email, plan: 'free' });
        credentials.setPasswordHash(account.id, passwordHash);
        return { account, key: keys.create(account.id).key };
      });

      this.accounts = {
        create: (input) => whenFree(() => accounts.create(input)),
        createWithPassword: ({ email, passwordHash }) => whenFree(() => createWithPassword.immediate(email, checkPasswordHash(passwordHash))),
        get: (id) => whenFree(() => accounts.get(id)),
        getByEmail: (email) => whenFree(() => accounts.getByEmail(email)),
        list: () => whenFree(() => accounts.list()),
        setPlan: (id, plan) => whenFree(() => accounts.setPlan(id, plan)),
        cancel: (id) => whenFree(() => accounts.cancel(id)),
        resume: (id) => whenFree(() => accounts.resume(id)),
        disable: (id) => whenFree(() => accounts.disable(id)),
        enable: (id) => whenFree(() => accounts.enable(id)),
        passwordHash: (id) => whenFree(() => credentials.passwordHash(id)),
        setPasswordHash: (id, encodedHash) => whenFree(() => credentials.setPasswordHash(id, encodedHash)),
      };
      this.keys = {
        create: (accountId) => whenFree(() => keys.create(accountId)),
        list: (accountId) => whenFree(() => keys.list(accountId)),
        get: (keyId) => whenFree(() => keys.get(keyId)),
        revoke: (ref, options) => whenFree(() => keys.revoke(ref, options)),
        authenticate: (rawKey) => whenFree(() => keys.authenticate(rawKey)),
      };
      const reserves = new Grouped<{ accountId: number; options: ReserveOptions }, ReserveResult>(
        (items) => whenFree(() => credits.reserveGroup(items)),
        MAX_GROUP,
      );
      const commits = new Grouped<number, CommitResult | null>((ids) => whenFree(() => credits.commitGroup(ids)), MAX_GROUP);
      const releases = new Grouped<number, boolean>((ids) => whenFree(() => credits.releaseGroup(ids)), MAX_GROUP);
      this.credits = {
        reserve: async (accountId, options) => {
          Credits.checkReserve(options);
          return reserves.submit({ accountId, options });
        },
        commit: (reservationId) => commits.submit(reservationId),
        release: (reservationId) => releases.submit(reservationId),
        recoverAfterCrash: () => whenFree(() => credits.recoverAfterCrash()),
        balance: (accountId) => whenFree(() => credits.balance(accountId)),
        grant: (accountId, amount, note) => whenFree(() => credits.grant(accountId, amount, note)),
      };
      this.usage = {
        byDay: (accountId, cycleIndex) => whenFree(() => usage.byDay(accountId, cycleIndex)),
        summary: () => whenFree(() => usage.summary()),
      };
      this.sessions = {
        ttlMs: sessions.ttlMs,
        create: (accountId) => whenFree(() => sessions.create(accountId)),
        get: (token) => whenFree(() => sessions.get(token)),
        delete: (token) => whenFree(() => sessions.delete(token)),
        deleteForAccount: (accountId) => whenFree(() => sessions.deleteForAccount(accountId)),
      };
      this.webhooks = {
        create: (accountId, input) => whenFree(() => webhooks.create(accountId, input)),
        list: (accountId) => whenFree(() => webhooks.list(accountId)),
        get: (accountId, endpointId) => whenFree(() => webhooks.get(accountId, endpointId)),
        delete: (accountId, endpointId) => whenFree(() => webhooks.delete(accountId, endpointId)),
        sendTest: (accountId, endpointId) => whenFree(() => webhooks.sendTest(accountId, endpointId)),
        claimDue: (limit, leaseMs, caps) => whenFree(() => webhooks.claimDue(limit, leaseMs, caps)),
        prune: (endedBefore, limit) => whenFree(() => webhooks.prune(endedBefore, limit)),
        recordAttempt: (deliveryId, outcome) => whenFree(() => webhooks.recordAttempt(deliveryId, outcome)),
        deliveries: (accountId, endpointId, limit) => whenFree(() => webhooks.deliveries(accountId, endpointId, limit)),
        recentDeliveries: (accountId, limit) => whenFree(() => webhooks.recentDeliveries(accountId, limit)),
        retry: (deliveryId) => whenFree(() => webhooks.retry(deliveryId)),
      };
      this.batches = {
        create: (accountId, input) => whenFree(() => batches.create(accountId, input)),
        get: (accountId, batchId) => whenFree(() => batches.get(accountId, batchId)),
        list: (accountId, limit) => whenFree(() => batches.list(accountId, limit)),
        start: (imageId) => whenFree(() => batches.start(imageId)),
        finish: (imageId, outcome) => whenFree(() => batches.finish(imageId, outcome)),
        delete: (accountId, batchId) => whenFree(() => batches.delete(accountId, batchId)),
        failOrphans: (error) => whenFree(() => batches.failOrphans(error)),
      };
    } catch (err) {
      db.close();
      this.#ownerLock?.release();
      throw err;
    }
    // Counters that only the owning process reads: in its memory, no write per request. One
    // service process per file is enforced by the owner lock.
    const nowMs = () => this.clock().getTime();
    const rateWindows = new MemoryRateWindows(nowMs);
    this.rateLimits = { take: async (bucket, limit) => rateWindows.take(bucket, limit) };
    const throttle = new MemoryLoginThrottle(nowMs);
    this.loginThrottle = {
      begin: async (email, ip, limits) => throttle.begin(email, ip, limits),
      forgive: async (attempt) => throttle.forgive(attempt),
      succeed: async (attempt) => throttle.succeed(attempt),
    };
  }

  get isOpen(): boolean {
    return this.#db.open;
  }

  async ping(): Promise<void> {
    await whenFree(() => this.#ping.get());
  }

  /** The first call on the file writes the row; every later one, in any process, reads it. */
  serverKey(): Promise<Buffer> {
    return whenFree(() => {
      this.#insertServerKey.run(randomBytes(32), this.clock().getTime());
      return this.#selectServerKey.get()!.secret;
    });
  }

  /** Idempotent. Reservations still held are released by the next process's recoverAfterCrash(). */
  async close(): Promise<void> {
    if (this.#db.open) this.#db.close();
    this.#ownerLock?.release();
  }

  /**
   * For tests of the SQLite implementation only (pragmas, file contents, rows a test must see
   * hashed): the connection of a store opened on SQLite. Application code never calls this; it
   * goes through the Store interface.
   */
  static databaseOf(store: Store): Db {
    if (!(store instanceof SqliteStore)) throw new TypeError(`not a SQLite store (kind: ${store.kind})`);
    return store.#db;
  }
}
