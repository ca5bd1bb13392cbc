/**
 * The one door to persistence. Everything outside src/store (API, dashboard, CLI, tests) goes
 * through this interface and never sees a database handle, a row or an implementation class.
 *
 * Every method is async: the SQLite implementation (sqlite/) answers synchronously inside, but a
 * PostgreSQL implementation will need the round trips, and callers are written once for both.
 * Each method is one short transaction of its own; no transaction spans two calls.
 */
import type { Clock } from './clock.js';
import type { LoginThrottleStore } from './login-throttle.js';
import type { PlanName, PlanTable } from './plans.js';
import type { RateDecision } from './rate-window.js';

// --- Values ---------------------------------------------------------------------------------------

export interface Account {
  readonly id: number;
  readonly email: string;
  /** The plan in effect now: `subscribedPlan`, or 'free' once a cancellation has taken effect. */
  readonly plan: PlanName;
  /** The plan as last set (sign-up or operator); stays as it was after a cancellation took effect. */
  readonly subscribedPlan: PlanName;
  /** Sign-up time, the anchor of the monthly billing cycles. */
  readonly createdAt: Date;
  /** When a cancelled paid plan ends (pending while in the future); null when not cancelled. */
  readonly cancelAt: Date | null;
  readonly disabled: boolean;
  readonly disabledAt: Date | null;
}

export interface CreateAccountInput {
  email: string;
  /** Default 'free'. */
  plan?: PlanName;
}

export interface ApiKeyInfo {
  readonly id: number;
  readonly accountId: number;
  /** e.g. `rb-sk_Ab3dE9`; show as `${prefix}…${last4}`. */
  readonly prefix: string;
  readonly last4: string;
  readonly createdAt: Date;
  /** Updated at most once per `lastUsedResolutionMs` (default 1 min) to keep writes off the hot path. */
  readonly lastUsedAt: Date | null;
  readonly revokedAt: Date | null;
  readonly revoked: boolean;
}

export interface CreatedApiKey {
  /** The full key: returned here once, never stored, cannot be shown again. */
  readonly key: string;
  readonly info: ApiKeyInfo;
}

/** What a valid API key opens: who is calling, and under which plan limits. */
export interface Authenticated {
  readonly keyId: number;
  readonly accountId: number;
  readonly disabled: boolean;
  readonly plan: PlanName;
  /** The plan's rate limit (requests per minute), with the configured overrides. */
  readonly rateLimitPerMinute: number;
}

export interface ReserveOptions {
  /** The response's X-Request-ID, kept with the charge for support. */
  requestId: string;
  /** The authenticated key, kept with the charge (none for the dashboard's try-it panel). */
  keyId?: number | undefined;
  /** The Idempotency-Key header (1-255 characters); requires imageHash. */
  idempotencyKey?: string | undefined;
  /** A hash of the uploaded image bytes (hex SHA-256), compared on a retry with the same idempotencyKey. */
  imageHash?: string | undefined;
}

export type ReserveResult =
  /** One credit is held: commit it after a success, release it otherwise. */
  | { ok: true; reservationId: number; alreadyCharged: false; remainingAfterCharge: number }
  /** A retry of a request already charged under this Idempotency-Key and image: process it, charge nothing. */
  | { ok: true; reservationId: null; alreadyCharged: true; remainingAfterCharge: number }
  /** No credits left in the cycle; they reset at `resetsAt`. */
  | { ok: false; reason: 'payment_required'; resetsAt: Date }
  /** Disabled account; or the Idempotency-Key is in flight, or was charged for a different image. */
  | { ok: false; reason: 'account_disabled' | 'idempotency_conflict' };

export interface CommitResult {
  chargeId: number;
  /** The cycle charged: the one whose balance admitted the reservation. */
  cycleIndex: number;
  /** Credits left in the current cycle after this charge (in-flight reservations counted as spent). */
  remaining: number;
}

export interface Balance {
  /** The plan in effect now. */
  plan: PlanName;
  /** Plan credits + granted. */
  allowance: number;
  /** Operator grants for this cycle. */
  granted: number;
  /** Charged in this cycle. */
  used: number;
  /** Held by requests in flight. */
  reserved: number;
  /** allowance - used - reserved, never negative. */
  remaining: number;
  cycleIndex: number;
  cycleStart: Date;
  cycleEnd: Date;
  rateLimitPerMinute: number;
}

export interface DayUsage {
  /** UTC day, YYYY-MM-DD. */
  day: string;
  /** Charged requests. */
  requests: number;
}

export interface AccountUsage extends Balance {
  accountId: number;
  email: string;
  disabled: boolean;
}

export interface UsageSummary {
  at: Date;
  accounts: { total: number; disabled: number; byPlan: Record<PlanName, number> };
  keys: { active: number; revoked: number };
  /** Charged requests over all accounts. */
  charged: { last24h: number; last30d: number; total: number };
  /** Reservations held by requests in flight (or left by a crash, until recoverAfterCrash). */
  inFlight: number;
  /** Every account's current cycle, oldest account first. */
  perAccount: AccountUsage[];
}

export interface Session {
  readonly id: number;
  readonly accountId: number;
  /** The synchronizer token every form of this session must send back. */
  readonly csrfToken: string;
  readonly createdAt: Date;
  readonly expiresAt: Date;
}

export interface CreatedSession {
  /** The cookie value: returned once, never stored. */
  readonly token: string;
  readonly session: Session;
}

// --- The interface --------------------------------------------------------------------------------

export interface AccountStore {
  create(input: CreateAccountInput): Promise<Account>;
  /** A Free account with this password hash and its first API key, in one transaction (dashboard sign-up). */
  createWithPassword(input: { email: string; passwordHash: string }): Promise<{ account: Account; key: string }>;
  get(id: number): Promise<Account | null>;
  getByEmail(email: string): Promise<Account | null>;
  list(): Promise<Account[]>;
  setPlan(id: number, plan: PlanName): Promise<Account>;
  cancel(id: number): Promise<Account>;
  resume(id: number): Promise<Account>;
  disable(id: number): Promise<Account>;
  enable(id: number): Promise<Account>;
  /** The encoded password hash, or null (no such account, or one without a password). */
  passwordHash(id: number): Promise<string | null>;
  setPasswordHash(id: number, encodedHash: string): Promise<void>;
}

export interface KeyStore {
  create(accountId: number): Promise<CreatedApiKey>;
  list(accountId: number): Promise<ApiKeyInfo[]>;
  get(keyId: number): Promise<ApiKeyInfo | null>;
  /** By id or displayed prefix; with `accountId`, only that account's key. null: no such key. */
  revoke(ref: number | string, options?: { accountId?: number }): Promise<ApiKeyInfo | null>;
  /** null for a malformed (checked without touching the database), unknown or revoked key. */
  authenticate(rawKey: string): Promise<Authenticated | null>;
}

export interface CreditStore {
  reserve(accountId: number, options: ReserveOptions): Promise<ReserveResult>;
  /** Charges a reservation; null when it no longer exists. */
  commit(reservationId: number): Promise<CommitResult | null>;
  /** Drops a reservation; false when it no longer exists. */
  release(reservationId: number): Promise<boolean>;
  /** Releases reservations left by a process that stopped without releasing them; returns how many. */
  recoverAfterCrash(): Promise<number>;
  balance(accountId: number): Promise<Balance>;
  grant(accountId: number, credits: number, note?: string): Promise<Balance>;
}

export interface UsageStore {
  /** Charged requests per UTC day of a cycle (default: the current one). */
  byDay(accountId: number, cycleIndex?: number): Promise<DayUsage[]>;
  summary(): Promise<UsageSummary>;
}

export interface SessionStore {
  /** Lifetime of a session from its creation. */
  readonly ttlMs: number;
  create(accountId: number): Promise<CreatedSession>;
  /** The live session of a cookie value, or null (unknown, expired, or no token). */
  get(token: string | undefined): Promise<Session | null>;
  delete(token: string | undefined): Promise<boolean>;
  deleteForAccount(accountId: number): Promise<number>;
}

export interface RateLimitStore {
  /**
   * Counts one request against `bucket` (e.g. an API key) when the sliding minute has room for it
   * under `limit` requests; a refused request is not counted. Exact across every process that
   * shares the store.
   */
  take(bucket: string, limit: number): Promise<RateDecision>;
}

export interface Store {
  /** Which implementation answers. */
  readonly kind: 'sqlite' | 'postgres';
  /** The plans with the configured rate limits. */
  readonly plans: PlanTable;
  readonly clock: Clock;
  readonly accounts: AccountStore;
  readonly keys: KeyStore;
  readonly credits: CreditStore;
  readonly usage: UsageStore;
  readonly sessions: SessionStore;
  readonly rateLimits: RateLimitStore;
  readonly loginThrottle: LoginThrottleStore;
  readonly isOpen: boolean;
  /** Resolves when the database answers a trivial query; rejects when it cannot be reached. */
  ping(): Promise<void>;
  /** Idempotent. */
  close(): Promise<void>;
}
