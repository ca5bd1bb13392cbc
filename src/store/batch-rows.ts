/**
 * The rows of batches, their images, webhook endpoints and the outbox, kept with the same columns by
 * both implementations (times as milliseconds since the epoch), and their one conversion into the
 * interface's values, so that a batch or a delivery reads the same whichever database answered.
 */
import type { Batch, BatchImage, BatchImageStatus, WebhookDelivery, WebhookEndpoint, WebhookEventType } from './store.js';

export interface EndpointRow {
  id: string;
  account_id: number;
  url: string;
  description: string;
  created_at: number;
  disabled_at: number | null;
}
/** The secret is not among them: it is read only where a delivery is signed. */
export const ENDPOINT_COLUMNS = 'id, account_id, url, description, created_at, disabled_at';

export interface DeliveryRow {
  id: string;
  endpoint_id: string;
  account_id: number;
  type: WebhookEventType;
  body: string;
  created_at: number;
  attempts: number;
  status: 'pending' | 'delivered' | 'failed';
  next_attempt_at: number | null;
  last_status_code: number | null;
  last_error: string | null;
  delivered_at: number | null;
}
export const DELIVERY_COLUMNS =
  'id, endpoint_id, account_id, type, body, created_at, attempts, status, next_attempt_at, last_status_code, last_error, delivered_at';

export interface BatchRow {
  id: string;
  account_id: number;
  options: string;
  created_at: number;
  expires_at: number;
  completed_at: number | null;
}
export const BATCH_COLUMNS = 'id, account_id, options, created_at, expires_at, completed_at';

export interface ImageRow {
  id: string;
  batch_id: string;
  position: number;
  filename: string;
  status: BatchImageStatus;
  request_id: string;
  reservation_id: number | null;
  width: number | null;
  height: number | null;
  format: string | null;
  credits_charged: number;
  error_code: string | null;
  error_message: string | null;
  finished_at: number | null;
}
export const IMAGE_COLUMNS =
  'id, batch_id, position, filename, status, request_id, reservation_id, width, height, format, credits_charged, error_code, error_message, finished_at';

/** Image states that still wait for an outcome. */
export const UNENDED = "('queued', 'processing')";

const dateOrNull = (ms: number | null): Date | null => (ms === null ? null : new Date(ms));

export function toEndpoint(row: EndpointRow): WebhookEndpoint {
  return {
    id: row.id,
    accountId: row.account_id,
    url: row.url,
    description: row.description,
    createdAt: new Date(row.created_at),
    disabledAt: dateOrNull(row.disabled_at),
  };
}

export function toDelivery(row: DeliveryRow): WebhookDelivery {
  return {
    id: row.id,
    endpointId: row.endpoint_id,
    accountId: row.account_id,
    type: row.type,
    body: row.body,
    createdAt: new Date(row.created_at),
    attempts: row.attempts,
    status: row.status,
    nextAttemptAt: row.status === 'pending' ? dateOrNull(row.next_attempt_at) : null,
    lastStatusCode: row.last_status_code,
    lastError: row.last_error,
    deliveredAt: dateOrNull(row.delivered_at),
  };
}

export function toBatchImage(row: ImageRow): BatchImage {
  return {
    id: row.id,
    batchId: row.batch_id,
    position: row.position,
    filename: row.filename,
    status: row.status,
    requestId: row.request_id,
    width: row.width,
    height: row.height,
    format: row.format,
    creditsCharged: row.credits_charged,
    error: row.error_code === null ? null : { code: row.error_code, message: row.error_message ?? '' },
    finishedAt: dateOrNull(row.finished_at),
  };
}

/** `images`: the batch's image rows, in any order (sorted here by position). */
export function toBatch(row: BatchRow, images: readonly ImageRow[]): Batch {
  return {
    id: row.id,
    accountId: row.account_id,
    status: row.completed_at === null ? 'processing' : 'completed',
    createdAt: new Date(row.created_at),
    expiresAt: new Date(row.expires_at),
    options: JSON.parse(row.options) as Record<string, string>,
    images: [...images].sort((a, b) => a.position - b.position).map(toBatchImage),
  };
}

/** The columns of `cols` (a comma-separated list) qualified with a table alias, for joins. */
export function qualified(alias: string, cols: string): string {
  return cols
    .split(', ')
    .map((c) => `${alias}.${c}`)
    .join(', ');
}
