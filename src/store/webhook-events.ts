/**
 * Every webhook event's body is built here, and only here: image.processed (the runner's part,
 * which only it knows — the result's URL and expiry — and the store's part, which only the
 * transaction that charges knows — status, credits_charged, error), an orphan's image.processed,
 * batch.completed and webhook.test. The store writes these into the outbox inside the transaction
 * of the change they report (store.batches.finish, create, failOrphans; store.webhooks.sendTest);
 * the deliverer sends the stored bytes as they are. Field order is part of the bytes signed, so
 * each builder lists its fields in the order receivers have always seen.
 */
import type { BatchImageError, ImageOutcome, WebhookEventType } from './store.js';

/** The text of webhook.test's data. */
export const WEBHOOK_TEST_MESSAGE = 'This is a test event from bgone.';

/** An outbox body, fixed when the row is written: exactly the bytes that are sent and signed. */
export function eventBody(type: WebhookEventType, nowMs: number, data: Record<string, unknown>): string {
  return JSON.stringify({ type, timestamp: new Date(nowMs).toISOString(), data });
}

/** A batch image as the runner knows it when it ends. */
export interface EndedImage {
  batchId: string;
  imageId: string;
  filename: string;
  requestId: string;
}

/** What a succeeded image adds: its result and where to fetch it until when. */
export interface ImageResultFields {
  width: number;
  height: number;
  format: string;
  resultUrl: string;
  expiresAt: Date;
}

/**
 * image.processed's first fields, built by the runner and passed to store.batches.finish as the
 * outcome's eventData; imageProcessedData then adds the store's fields after them.
 */
export function imageEventData(image: EndedImage, result?: ImageResultFields): Record<string, unknown> {
  const base = { batch_id: image.batchId, image_id: image.imageId, filename: image.filename, request_id: image.requestId };
  if (!result) return base;
  return {
    ...base,
    width: result.width,
    height: result.height,
    format: result.format,
    result_url: result.resultUrl,
    expires_at: result.expiresAt.toISOString(),
  };
}

/** image.processed's data as finish() stores it: the runner's eventData, then the fields only the store knows for sure. */
export function imageProcessedData(outcome: ImageOutcome, creditsCharged: number): Record<string, unknown> {
  return outcome.status === 'succeeded'
    ? { ...outcome.eventData, status: 'succeeded', credits_charged: creditsCharged }
    : { ...outcome.eventData, status: 'failed', credits_charged: 0, error: { code: outcome.error.code, message: outcome.error.message } };
}

/** image.processed's data for an image failed by the store itself (failOrphans): no runner is there to build it. */
export function orphanImageData(
  image: { batch_id: string; id: string; filename: string; request_id: string },
  error: BatchImageError,
): Record<string, unknown> {
  return {
    batch_id: image.batch_id,
    image_id: image.id,
    filename: image.filename,
    status: 'failed',
    credits_charged: 0,
    error: { code: error.code, message: error.message },
    request_id: image.request_id,
  };
}

export interface BatchCounts {
  succeeded: number;
  failed: number;
  credits_charged: number;
}

export function batchCompletedData(batchId: string, counts: BatchCounts): Record<string, unknown> {
  return { batch_id: batchId, succeeded: counts.succeeded, failed: counts.failed, credits_charged: counts.credits_charged };
}

/** webhook.test's data. */
export function webhookTestData(endpointId: string): Record<string, unknown> {
  return { endpoint_id: endpointId, message: WEBHOOK_TEST_MESSAGE };
}
