/**
 * The one door to persistence. Everything outside src/store (API, dashboard, CLI, tests) goes
 * through this interface and never sees a database handle, a row or an implementation class.
 *
 * Every method is async: the SQLite implementation (sqlite/) answers synchronously inside, but a
 * PostgreSQL implementation will need the round trips, and callers are written once for both.
 * Each method is one short transaction; no transaction spans two calls of one caller. The
 * metering path's calls (reserve, commit, release, rate-limit counts, key lookups) made close
 * together share one (groups.ts), each with its own outcome.
 */
import type { Clock } from './clock.js';
import type { ClusterStore } from './cluster-store.js';
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
  /**
   * The request's fingerprint (hex SHA-256 of the image bytes and the normalised options), compared
   * on a retry with the same idempotencyKey: another value is an idempotency_conflict.
   */
  imageHash?: string | undefined;
}

export type ReserveResult =
  /** One credit is held: commit it after a success, release it otherwise. */
  | { ok: true; reservationId: number; alreadyCharged: false; remainingAfterCharge: number }
  /** A retry of a request already charged under this Idempotency-Key, image and options: process it, charge nothing. */
  | { ok: true; reservationId: null; alreadyCharged: true; remainingAfterCharge: number }
  /** No credits left in the cycle; they reset at `resetsAt`. */
  | { ok: false; reason: 'payment_required'; resetsAt: Date }
  /**
   * Disabled account; or the Idempotency-Key was charged, or is in flight, for a different image or
   * options (idempotency_conflict); or it is in flight for this same image and options
   * (idempotency_in_progress: its first request may still succeed, or its node may have died and
   * its reservation not yet been released).
   */
  | { ok: false; reason: 'account_disabled' | 'idempotency_conflict' | 'idempotency_in_progress' };

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

// --- Batches and webhooks (docs/contract.md, "Async batches and webhooks") ---------------------------

/** A webhook endpoint of an account. Its secret is returned once, by create(). */
export interface WebhookEndpoint {
  /** `wh_` + random. */
  readonly id: string;
  readonly accountId: number;
  readonly url: string;
  readonly description: string;
  readonly createdAt: Date;
  /** Set when a delivery got `410 Gone`: no event is written for it any more. */
  readonly disabledAt: Date | null;
}

export interface CreatedWebhookEndpoint {
  readonly endpoint: WebhookEndpoint;
  /** `whsec_` + base64 of 32 random bytes: shown once. */
  readonly secret: string;
}

export type WebhookEventType = 'image.processed' | 'batch.completed' | 'webhook.test';

/**
 * One event on its way to one endpoint: a row of the outbox. Its id is the `webhook-id` header,
 * the same on every retry; its body is fixed when the row is written (in the transaction of the
 * state change it reports).
 */
export interface WebhookDelivery {
  /** `msg_` + random. */
  readonly id: string;
  readonly endpointId: string;
  readonly accountId: number;
  readonly type: WebhookEventType;
  /** The JSON body `{"type", "timestamp", "data"}`, exactly as it is sent and signed. */
  readonly body: string;
  readonly createdAt: Date;
  /** Attempts made so far. */
  readonly attempts: number;
  readonly status: 'pending' | 'delivered' | 'failed';
  /** When the next attempt is due (pending only). */
  readonly nextAttemptAt: Date | null;
  /** The status code of the last attempt; null when it got no HTTP answer (or none was made). */
  readonly lastStatusCode: number | null;
  /** Why the last attempt failed, in a few words (no response body is kept). */
  readonly lastError: string | null;
  readonly deliveredAt: Date | null;
}

/** A due delivery claimed by this node for a while, with what it needs to send it. */
export interface ClaimedDelivery extends WebhookDelivery {
  readonly url: string;
  readonly secret: string;
}

/** The outcome of one delivery attempt. */
export interface DeliveryOutcome {
  /** A 2xx came back in time. */
  delivered: boolean;
  statusCode: number | null;
  error: string | null;
  /** When to try again; null: no more attempts (delivered, or failed for good). */
  nextAttemptAt: Date | null;
  /** The endpoint answered 410 Gone: disable it (and fail its pending deliveries). */
  disableEndpoint: boolean;
}

/** At most this many live claims at once (claimDue). */
export interface ClaimCaps {
  perEndpoint: number;
  perAccount: number;
}

export interface WebhookStore {
  /** null when the account already has `maxEndpoints` endpoints (disabled ones count too). */
  create(accountId: number, input: { url: string; description: string; maxEndpoints: number }): Promise<CreatedWebhookEndpoint | null>;
  list(accountId: number): Promise<WebhookEndpoint[]>;
  get(accountId: number, endpointId: string): Promise<WebhookEndpoint | null>;
  /** Deletes the endpoint and its outbox rows; false when the account has no such endpoint. */
  delete(accountId: number, endpointId: string): Promise<boolean>;
  /** Writes a `webhook.test` event for this endpoint, due now; false when the account has no such endpoint. */
  sendTest(accountId: number, endpointId: string): Promise<boolean>;
  /**
   * Claims up to `limit` deliveries that are due (pending, next attempt in the past, not claimed
   * by a live claim), each for `leaseMs`: no other node or worker gets a row while its claim holds.
   * A claim that lapses (a dead node) makes the row due again.
   *
   * Fair, not first in first out: rows are taken round-robin, across accounts first, then across
   * each account's endpoints, oldest due first within one endpoint. With `caps`, live claims count
   * against them on every node: an endpoint never has more than `perEndpoint` rows claimed at once,
   * an account never more than `perAccount`, so an endpoint that never answers holds a few senders,
   * never all of them.
   */
  claimDue(limit: number, leaseMs: number, caps?: ClaimCaps): Promise<ClaimedDelivery[]>;
  /**
   * Deletes up to `limit` delivered or failed rows that ended before `endedBefore` (the retention
   * period); pending rows are kept whatever their age. Returns how many it deleted.
   */
  prune(endedBefore: Date, limit: number): Promise<number>;
  /** Records one attempt (attempts + 1) and ends the claim. */
  recordAttempt(deliveryId: string, outcome: DeliveryOutcome): Promise<void>;
  /** The endpoint's most recent deliveries, newest first (the dashboard's list). */
  deliveries(accountId: number, endpointId: string, limit: number): Promise<WebhookDelivery[]>;
  /** Deliveries of any of the account's endpoints (the operator CLI: all accounts when accountId is undefined). */
  recentDeliveries(accountId: number | undefined, limit: number): Promise<WebhookDelivery[]>;
  /** Makes a failed or pending delivery due now again (operator retry); false when there is no such row. */
  retry(deliveryId: string): Promise<boolean>;
}

export type BatchImageStatus = 'queued' | 'processing' | 'succeeded' | 'failed';

export interface BatchImageError {
  code: string;
  message: string;
}

export interface BatchImage {
  /** `img_` + random. */
  readonly id: string;
  readonly batchId: string;
  /** Its place in the upload, from 0. */
  readonly position: number;
  readonly filename: string;
  /** As stored; the API shows a succeeded image past its expiresAt as `expired`. */
  readonly status: BatchImageStatus;
  /** The X-Request-ID its result is served with and its charge is kept under. */
  readonly requestId: string;
  readonly width: number | null;
  readonly height: number | null;
  readonly format: string | null;
  readonly creditsCharged: number;
  readonly error: BatchImageError | null;
  readonly finishedAt: Date | null;
}

export interface Batch {
  /** `bat_` + random. */
  readonly id: string;
  readonly accountId: number;
  readonly status: 'processing' | 'completed';
  readonly createdAt: Date;
  /** When its results expire (created + the result TTL). */
  readonly expiresAt: Date;
  /** The /remove option fields applied to every image, as sent. */
  readonly options: Record<string, string>;
  readonly images: BatchImage[];
}

export interface NewBatchImage {
  filename: string;
  requestId: string;
  /** Refused at submission (sniff or header check): stored as failed, no credit reserved. */
  error?: BatchImageError | undefined;
}

export interface CreateBatchInput {
  keyId?: number | undefined;
  /** The submission's X-Request-ID. */
  requestId: string;
  options: Record<string, string>;
  images: NewBatchImage[];
  /** created + the result TTL. */
  expiresAt: Date;
}

export type CreateBatchResult =
  | { ok: true; batch: Batch }
  /** The balance cannot cover every accepted image: nothing was written. */
  | { ok: false; reason: 'payment_required'; resetsAt: Date }
  | { ok: false; reason: 'account_disabled' };

/**
 * How an image ended, with image.processed's first fields as the runner built them
 * (webhook-events.ts imageEventData); the store adds the status fields after them.
 */
export type ImageOutcome =
  | { status: 'succeeded'; width: number; height: number; format: string; eventData: Record<string, unknown> }
  | { status: 'failed'; error: BatchImageError; eventData: Record<string, unknown> };

export interface BatchStore {
  /**
   * In one transaction: the batch, its images (accepted ones `queued`, refused ones `failed`), and
   * one credit reserved per accepted image (owned by this node), or nothing at all when the balance
   * cannot cover them. Images refused at submission get no image.processed event (the 202 answer
   * reports them). A batch whose images all failed at submission is `completed` at once, and its
   * batch.completed event is written then.
   */
  create(accountId: number, input: CreateBatchInput): Promise<CreateBatchResult>;
  /** null for another account's or a deleted batch. */
  get(accountId: number, batchId: string): Promise<Batch | null>;
  /** The account's most recent batches, newest first. */
  list(accountId: number, limit: number): Promise<Batch[]>;
  /** queued → processing; false when the image is no longer queued (cancelled, failed). */
  start(imageId: string): Promise<boolean>;
  /**
   * Ends a queued or processing image, in one transaction: succeeded → its reservation is
   * committed (1 credit, creditsCharged 1); failed → released. Writes `image.processed` for each of
   * the account's enabled endpoints, and `batch.completed` when it was the batch's last image.
   * The event's data is `outcome.eventData` plus `status`, `credits_charged` (and `error`).
   * Returns the batch after the change; null when the image had already ended or its batch was
   * deleted (its reservation is then released, nothing charged, no event).
   */
  finish(imageId: string, outcome: ImageOutcome): Promise<Batch | null>;
  /**
   * DELETE of a batch: marks it deleted (get() answers null from then on), and every image not yet
   * ended is failed with code `cancelled` and its reservation released. No event. false when the
   * account has no such batch.
   */
  delete(accountId: number, batchId: string): Promise<boolean>;
  /**
   * Fails the images that a lost process left unended, as finish() fails one (reservation
   * released, image.processed written, batch.completed when it was the last), with `error`
   * (`internal_server_error`, the service restarted). SQLite (one process per file): at start,
   * every unended image. PostgreSQL: the images of batches owned by nodes without a live heartbeat
   * (never this node's), at start and on every heartbeat tick, with the same error. The event data
   * of such an image is built by the store: batch_id, image_id, filename, status, credits_charged,
   * error, request_id. Returns how many images it failed.
   */
  failOrphans(error: BatchImageError): Promise<number>;
}

export type { ClaimedImage, ClusterStore, PeerNode } from './cluster-store.js';

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
  /** Refuses the account's charges from now on and deletes its dashboard sessions, in one transaction. */
  disable(id: number): Promise<Account>;
  enable(id: number): Promise<Account>;
  /** The encoded password hash, or null (no such account, or one without a password). */
  passwordHash(id: number): Promise<string | null>;
  setPasswordHash(id: number, encodedHash: string): Promise<void>;
}

export interface KeyStore {
  /** A new key; StoreError 'key_limit' when the account already holds its maximum of active keys (default 10). */
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
  /**
   * Releases reservations left by a process that stopped without releasing them; returns how many.
   * A credit held by an unended batch image goes back only with its image (BatchStore.failOrphans).
   */
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

/** A live node as its peers reach it. */
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
  readonly webhooks: WebhookStore;
  readonly batches: BatchStore;
  /** Several nodes sharing batch work (PostgreSQL); absent where one node does all of it (SQLite). */
  readonly cluster?: ClusterStore | undefined;
  readonly isOpen: boolean;
  /**
   * The database's own secret: 32 random bytes, written by the first call on a fresh database (one
   * row, created atomically however many processes ask at once) and the same for every process on
   * that database from then on, across restarts. Keys that every node must share are derived from
   * it (the dashboard's pre-login CSRF tokens).
   */
  serverKey(): Promise<Buffer>;
  /** Resolves when the database answers a trivial query; rejects when it cannot be reached. */
  ping(): Promise<void>;
  /** Idempotent. */
  close(): Promise<void>;
}
