/** The JSON of a batch and its images, as the batch endpoints answer them (docs/contract.md). */
import { resultPath } from '../batches/batch-runner.js';
import type { Batch, BatchImage } from '../store/index.js';

/** A succeeded image is shown as `expired` once its batch's results are past their time. */
export function imageStatus(image: BatchImage, batch: Batch, nowMs: number): string {
  return image.status === 'succeeded' && batch.expiresAt.getTime() <= nowMs ? 'expired' : image.status;
}

export function batchView(batch: Batch, nowMs: number, publicUrl: string): Record<string, unknown> {
  return {
    id: batch.id,
    status: batch.status,
    created_at: batch.createdAt.toISOString(),
    expires_at: batch.expiresAt.toISOString(),
    options: batch.options,
    images: batch.images.map((image) => {
      const status = imageStatus(image, batch, nowMs);
      return {
        id: image.id,
        filename: image.filename,
        status,
        width: image.width,
        height: image.height,
        format: image.format,
        credits_charged: image.creditsCharged,
        result_url: status === 'succeeded' ? `${publicUrl}${resultPath(batch.id, image.id)}` : null,
        error: image.error,
      };
    }),
  };
}
