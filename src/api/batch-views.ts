/** The JSON of a batch and its images, as the batch endpoints answer them (docs/contract.md). */
import { resultPath } from '../batches/batch-runner.js';
import type { Batch, BatchImage } from '../store/index.js';

/**
 * When a succeeded image's result expires: the result TTL from the moment it ended (its
 * finished_at), so an image that waited long in the queue is kept as long as any other. Null for
 * an image that has no result.
 */
export function imageExpiresAt(image: BatchImage, resultTtlMs: number): number | null {
  if (image.status !== 'succeeded' || !image.finishedAt) return null;
  return image.finishedAt.getTime() + resultTtlMs;
}

/** A succeeded image is shown as `expired` once its result is past its time. */
export function imageStatus(image: BatchImage, nowMs: number, resultTtlMs: number): string {
  const expiresAt = imageExpiresAt(image, resultTtlMs);
  return expiresAt !== null && expiresAt <= nowMs ? 'expired' : image.status;
}

/**
 * The batch's `expires_at`: when its last result known so far expires. That is the submission's
 * time plus the TTL until an image ends later than the submission, then that image's expiry.
 */
function batchExpiresAt(batch: Batch, resultTtlMs: number): number {
  let latest = batch.expiresAt.getTime();
  for (const image of batch.images) latest = Math.max(latest, imageExpiresAt(image, resultTtlMs) ?? latest);
  return latest;
}

export function batchView(batch: Batch, nowMs: number, publicUrl: string, resultTtlMs: number): Record<string, unknown> {
  return {
    id: batch.id,
    status: batch.status,
    created_at: batch.createdAt.toISOString(),
    expires_at: new Date(batchExpiresAt(batch, resultTtlMs)).toISOString(),
    options: batch.options,
    images: batch.images.map((image) => {
      const status = imageStatus(image, nowMs, resultTtlMs);
      const expiresAt = imageExpiresAt(image, resultTtlMs);
      return {
        id: image.id,
        filename: image.filename,
        status,
        width: image.width,
        height: image.height,
        format: image.format,
        credits_charged: image.creditsCharged,
        result_url: status === 'succeeded' ? `${publicUrl}${resultPath(batch.id, image.id)}` : null,
        expires_at: expiresAt === null ? null : new Date(expiresAt).toISOString(),
        error: image.error,
      };
    }),
  };
}
