/**
 * Batches and webhooks: the rules both store implementations apply the same way, kept out of the
 * SQL so that they cannot drift apart: the ids and secrets they issue, the errors the store itself
 * writes on images, and the checks on what callers pass in. The event bodies of the outbox are
 * built in webhook-events.ts.
 */
import { randomBytes } from 'node:crypto';
import { StoreError } from './errors.js';
import { checkId } from './rules.js';
import type { BatchImageError, ClaimCaps, CreateBatchInput, DeliveryOutcome, ImageOutcome } from './store.js';

/**
 * The error of an image that a lost process left unended (failOrphans): the API, the SQLite start
 * and every PostgreSQL node's sweep write this same one, so a client sees one message whichever
 * node noticed the loss.
 */
export const ORPHAN_ERROR: Readonly<BatchImageError> = Object.freeze({
  code: 'internal_server_error',
  message: 'The service restarted before this image was processed; it was not charged.',
});

/** The error of an image whose batch was deleted before it ended. */
export const BATCH_CANCELLED_ERROR: Readonly<BatchImageError> = Object.freeze({
  code: 'cancelled',
  message: 'The batch was deleted before this image was processed.',
});

/** What a delivery left pending records when its endpoint answered 410 Gone on another delivery. */
export const ENDPOINT_DISABLED_ERROR = 'endpoint disabled (410 Gone)';

/** 18 random bytes: 24 base64url characters (144 bits), so ids are unguessable as well as unique. */
const ID_BYTES = 18;
const SECRET_BYTES = 32;
const MAX_URL_LENGTH = 2048;
const MAX_DESCRIPTION_LENGTH = 1000;
const MAX_FILENAME_LENGTH = 1000;
const MAX_ERROR_TEXT_LENGTH = 1000;

export type IdPrefix = 'wh_' | 'bat_' | 'img_' | 'msg_';

/** A fresh public id: the prefix and 24 URL-safe random characters. */
export function newId(prefix: IdPrefix): string {
  return prefix + randomBytes(ID_BYTES).toString('base64url');
}

/**
 * A webhook signing secret as the Standard Webhooks specification writes it: `whsec_` + standard
 * base64 (with its padding) of 32 random bytes. Kept as is: the store must give it back to sign.
 */
export function generateWebhookSecret(): string {
  return `whsec_${randomBytes(SECRET_BYTES).toString('base64')}`;
}

function invalid(message: string): StoreError {
  return new StoreError('invalid_argument', message);
}

function checkText(name: string, value: unknown, min: number, max: number): string {
  if (typeof value !== 'string' || value.length < min || value.length > max) throw invalid(`${name} must be a string of ${min} to ${max} characters`);
  return value;
}

/** A positive whole number (limits, leases, counts). */
export function checkPositiveInteger(name: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) throw invalid(`${name} must be a positive integer`);
  return value;
}

/** The endpoint fields; the API checks the URL's scheme and address (the store only keeps it). */
export function checkEndpointInput(input: { url: unknown; description: unknown; maxEndpoints: unknown }): void {
  checkText('url', input.url, 1, MAX_URL_LENGTH);
  checkText('description', input.description, 0, MAX_DESCRIPTION_LENGTH);
  checkPositiveInteger('maxEndpoints', input.maxEndpoints);
}

export function checkImageError(error: unknown): BatchImageError {
  const e = error as BatchImageError | null;
  if (typeof e !== 'object' || e === null) throw invalid('error must be {code, message}');
  checkText('error.code', e.code, 1, 255);
  checkText('error.message', e.message, 1, MAX_ERROR_TEXT_LENGTH);
  return { code: e.code, message: e.message };
}

/** A batch submission: at least one image, each with its request id and file name. */
export function checkBatchInput(input: CreateBatchInput): void {
  checkId('requestId', input.requestId, true);
  if (typeof input.options !== 'object' || input.options === null) throw invalid('options must be an object of strings');
  for (const [name, value] of Object.entries(input.options)) {
    if (typeof value !== 'string') throw invalid(`option ${name} must be a string`);
  }
  if (!(input.expiresAt instanceof Date) || Number.isNaN(input.expiresAt.getTime())) throw invalid('expiresAt must be a valid Date');
  if (!Array.isArray(input.images) || input.images.length === 0) throw invalid('a batch needs at least one image');
  for (const image of input.images) {
    checkId('image requestId', image.requestId, true);
    checkText('filename', image.filename, 0, MAX_FILENAME_LENGTH);
    if (image.error !== undefined) checkImageError(image.error);
  }
}

export function checkImageOutcome(outcome: ImageOutcome): void {
  if (typeof outcome.eventData !== 'object' || outcome.eventData === null) throw invalid('eventData must be an object');
  if (outcome.status === 'succeeded') {
    checkPositiveInteger('width', outcome.width);
    checkPositiveInteger('height', outcome.height);
    checkText('format', outcome.format, 1, 32);
  } else if (outcome.status === 'failed') {
    checkImageError(outcome.error);
  } else {
    throw invalid(`unknown outcome status: ${JSON.stringify((outcome as { status: unknown }).status)}`);
  }
}

/** A delivery's new state after one attempt, from its state before (a delivered row stays delivered). */
export interface AttemptUpdate {
  status: 'pending' | 'delivered' | 'failed';
  nextAttemptAt: number | null;
  deliveredAt: number | null;
  /** When it was delivered or failed (what the retention period counts from); null while pending. */
  endedAt: number | null;
}

/**
 * The state an attempt leaves a delivery in. A row already delivered (a lapsed claim sent twice)
 * is never downgraded by a late failure of the other copy; a 410 ends the row whatever retry the
 * caller planned, since its endpoint gets nothing more.
 */
export function afterAttempt(
  before: { status: string; delivered_at: number | null; next_attempt_at: number | null; ended_at: number | null },
  outcome: DeliveryOutcome,
  nowMs: number,
): AttemptUpdate {
  if (before.status === 'delivered')
    return { status: 'delivered', nextAttemptAt: null, deliveredAt: before.delivered_at, endedAt: before.ended_at ?? before.delivered_at };
  if (outcome.delivered) return { status: 'delivered', nextAttemptAt: null, deliveredAt: nowMs, endedAt: nowMs };
  if (outcome.nextAttemptAt === null || outcome.disableEndpoint) return { status: 'failed', nextAttemptAt: null, deliveredAt: null, endedAt: nowMs };
  return { status: 'pending', nextAttemptAt: outcome.nextAttemptAt.getTime(), deliveredAt: null, endedAt: null };
}

/** Live claims per endpoint and per account when claimDue is given no caps: in effect none. */
export const NO_CLAIM_CAPS: ClaimCaps = { perEndpoint: 1_000_000, perAccount: 1_000_000 };

export function checkClaimCaps(caps: ClaimCaps): void {
  checkPositiveInteger('caps.perEndpoint', caps.perEndpoint);
  checkPositiveInteger('caps.perAccount', caps.perAccount);
}

/**
 * The rows claimDue takes, in SQL both databases run (named parameters: SQLite's @name, rewritten
 * to $n for PostgreSQL): a CTE `picked` of (seq, account_slot, endpoint_slot).
 *
 * Each enabled endpoint offers its oldest due, unclaimed rows, at most min(perEndpoint, limit) of
 * them, each found by an index probe after the one before it (webhook_deliveries_pending_by_endpoint,
 * a recursive CTE: SQLite takes no correlated OFFSET): the cost grows with
 * the number of endpoints, never with the rows an endpoint has piled up, so an endpoint with a
 * hundred thousand due rows costs a claim what one with one row does. A row's endpoint_slot is its
 * rank among its endpoint's offered rows after the endpoint's live claims; its account_slot, its
 * rank among its account's rows after the account's live claims, ranked by endpoint_slot so that
 * each endpoint gets one before any gets two. Rows past either cap wait; the rest are taken by
 * account_slot, then endpoint_slot: round-robin across accounts, then across endpoints.
 */
export const FAIR_DUE_SQL = `
  WITH RECURSIVE
  offered (endpoint_id, account_id, seq, next_attempt_at, n) AS (
    SELECT e.id, d.account_id, d.seq, d.next_attempt_at, 1
    FROM webhook_endpoints e
    JOIN webhook_deliveries d ON d.seq = (
      SELECT x.seq FROM webhook_deliveries x
      WHERE x.endpoint_id = e.id AND x.status = 'pending' AND x.next_attempt_at <= @now
        AND (x.claimed_until IS NULL OR x.claimed_until <= @now)
      ORDER BY x.next_attempt_at, x.seq LIMIT 1
    )
    WHERE e.disabled_at IS NULL
    UNION ALL
    SELECT o.endpoint_id, d.account_id, d.seq, d.next_attempt_at, o.n + 1
    FROM offered o
    JOIN webhook_deliveries d ON d.seq = (
      SELECT x.seq FROM webhook_deliveries x
      WHERE x.endpoint_id = o.endpoint_id AND x.status = 'pending' AND x.next_attempt_at <= @now
        AND (x.claimed_until IS NULL OR x.claimed_until <= @now)
        AND (x.next_attempt_at, x.seq) > (o.next_attempt_at, o.seq)
      ORDER BY x.next_attempt_at, x.seq LIMIT 1
    )
    WHERE o.n < CASE WHEN CAST(@perEndpoint AS integer) < CAST(@limit AS integer) THEN CAST(@perEndpoint AS integer) ELSE CAST(@limit AS integer) END
  ),
  live AS MATERIALIZED (
    SELECT endpoint_id, account_id FROM webhook_deliveries WHERE status = 'pending' AND claimed_until > @now
  ),
  live_endpoint AS (SELECT endpoint_id, count(*) AS n FROM live GROUP BY endpoint_id),
  live_account AS (SELECT account_id, count(*) AS n FROM live GROUP BY account_id),
  due AS (
    SELECT o.seq, o.account_id, o.next_attempt_at,
      row_number() OVER (PARTITION BY o.endpoint_id ORDER BY o.next_attempt_at, o.seq) + coalesce(le.n, 0) AS endpoint_slot
    FROM offered o
    LEFT JOIN live_endpoint le ON le.endpoint_id = o.endpoint_id
  ),
  ranked AS (
    SELECT due.seq, due.next_attempt_at, due.endpoint_slot,
      row_number() OVER (PARTITION BY due.account_id ORDER BY due.endpoint_slot, due.next_attempt_at, due.seq) + coalesce(la.n, 0) AS account_slot
    FROM due LEFT JOIN live_account la ON la.account_id = due.account_id
    WHERE due.endpoint_slot <= @perEndpoint
  ),
  picked AS (
    SELECT seq, account_slot, endpoint_slot FROM ranked WHERE account_slot <= @perAccount
    ORDER BY account_slot, endpoint_slot, next_attempt_at, seq LIMIT @limit
  )`;

/** An error text as stored: a few words, bounded so a hostile endpoint cannot grow the outbox. */
export function clipError(error: string | null): string | null {
  return error === null ? null : error.slice(0, MAX_ERROR_TEXT_LENGTH);
}
