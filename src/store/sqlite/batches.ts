/**
 * Batches on SQLite: their metadata and their images' states; the image bytes and results stay in
 * the process's memory (the API's), never here.
 *
 * Credits follow /remove's reservations exactly (credits.ts): one reserved per accepted image at
 * submission, all or none, committed as a /remove charge when the image succeeds and released
 * when it fails, is cancelled or is lost. Each change, its credit movement and the events it emits
 * (webhooks.ts's outbox) are one write transaction, so a crash can never leave a charge without its
 * image.processed event, an event for a change that did not happen, or a credit held by an ended image.
 *
 * A batch carries the owner tag of the store instance that holds its images in memory: after a
 * restart, failOrphans() fails the images of every other instance (the lost process's).
 */

import { BATCH_COLUMNS, type BatchRow, IMAGE_COLUMNS, type ImageRow, qualified, toBatch, UNENDED } from '../batch-rows.js';
import { BATCH_CANCELLED_ERROR, checkBatchInput, checkImageError, checkImageOutcome, checkPositiveInteger, newId } from '../batch-rules.js';
import type { Clock } from '../clock.js';
import type { Batch, BatchImageError, BatchImageStatus, CreateBatchInput, CreateBatchResult, ImageOutcome } from '../store.js';
import { batchCompletedData, imageProcessedData, orphanImageData } from '../webhook-events.js';
import type { Accounts } from './accounts.js';
import type { Credits } from './credits.js';
import type { Db } from './database.js';
import type { Webhooks } from './webhooks.js';

/** A batch row with what only the store reads: who owns it, whether it was deleted. */
type FullBatchRow = BatchRow & { deleted_at: number | null };

const I_COLUMNS = qualified('i', IMAGE_COLUMNS);

export class Batches {
  private readonly insertBatchStmt;
  private readonly insertImageStmt;
  private readonly batchStmt;
  private readonly visibleBatchStmt;
  private readonly listStmt;
  private readonly imagesStmt;
  private readonly imageStmt;
  private readonly startStmt;
  private readonly endImageStmt;
  private readonly countsStmt;
  private readonly completeStmt;
  private readonly deleteStmt;
  private readonly unendedOfBatchStmt;
  private readonly orphansStmt;
  private readonly createTx;
  private readonly finishTx;
  private readonly deleteTx;
  private readonly orphansTx;
  private readonly readTx;
  private readonly listTx;

  constructor(
    db: Db,
    private readonly clock: Clock,
    private readonly accounts: Accounts,
    private readonly credits: Credits,
    private readonly webhooks: Webhooks,
  ) {
    this.insertBatchStmt = db.prepare<[string, number, number | null, string, string, string, number, number, number | null]>(
      `INSERT INTO batches (id, account_id, api_key_id, request_id, owner, options, created_at, expires_at, completed_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    this.insertImageStmt = db.prepare<[string, string, number, string, BatchImageStatus, string, number | null, string | null, string | null, number | null]>(
      `INSERT INTO batch_images (id, batch_id, position, filename, status, request_id, reservation_id, error_code, error_message, finished_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    this.batchStmt = db.prepare<[string], FullBatchRow>(`SELECT ${BATCH_COLUMNS}, deleted_at FROM batches WHERE id = ?`);
    this.visibleBatchStmt = db.prepare<[number, string], BatchRow>(
      `SELECT ${BATCH_COLUMNS} FROM batches WHERE account_id = ? AND id = ? AND deleted_at IS NULL`,
    );
    this.listStmt = db.prepare<[number, number], BatchRow>(
      `SELECT ${BATCH_COLUMNS} FROM batches WHERE account_id = ? AND deleted_at IS NULL ORDER BY seq DESC LIMIT ?`,
    );
    this.imagesStmt = db.prepare<[string], ImageRow>(`SELECT ${IMAGE_COLUMNS} FROM batch_images WHERE batch_id = ? ORDER BY position`);
    this.imageStmt = db.prepare<[string], ImageRow>(`SELECT ${IMAGE_COLUMNS} FROM batch_images WHERE id = ?`);
    this.startStmt = db.prepare<[string]>(
      `UPDATE batch_images SET status = 'processing'
       WHERE id = ? AND status = 'queued' AND batch_id IN (SELECT id FROM batches WHERE deleted_at IS NULL)`,
    );
    this.endImageStmt = db.prepare<[BatchImageStatus, number | null, number | null, string | null, number, string | null, string | null, number, string]>(
      `UPDATE batch_images SET status = ?, width = ?, height = ?, format = ?, credits_charged = ?, error_code = ?, error_message = ?,
         finished_at = ?, reservation_id = NULL
       WHERE id = ?`,
    );
    this.countsStmt = db.prepare<[string], { unended: number; succeeded: number; failed: number; credits_charged: number }>(
      `SELECT count(*) FILTER (WHERE status IN ${UNENDED}) AS unended,
              count(*) FILTER (WHERE status = 'succeeded') AS succeeded,
              count(*) FILTER (WHERE status = 'failed') AS failed,
              coalesce(sum(credits_charged), 0) AS credits_charged
       FROM batch_images WHERE batch_id = ?`,
    );
    this.completeStmt = db.prepare<[number, string]>('UPDATE batches SET completed_at = ? WHERE id = ? AND completed_at IS NULL');
    this.deleteStmt = db.prepare<[number, number, string]>('UPDATE batches SET deleted_at = ?, completed_at = coalesce(completed_at, ?) WHERE id = ?');
    this.unendedOfBatchStmt = db.prepare<[string], ImageRow>(`SELECT ${IMAGE_COLUMNS} FROM batch_images WHERE batch_id = ? AND status IN ${UNENDED}`);
    this.orphansStmt = db.prepare<[string], ImageRow & { account_id: number }>(
      `SELECT ${I_COLUMNS}, b.account_id
       FROM batch_images i JOIN batches b ON b.id = i.batch_id
       WHERE b.completed_at IS NULL AND b.owner <> ? AND i.status IN ${UNENDED}
       ORDER BY b.seq, i.position`,
    );

    this.createTx = db.transaction((accountId: number, input: CreateBatchInput): CreateBatchResult => {
      const row = this.accounts.requireRow(accountId);
      if (row.disabled_at !== null) return { ok: false, reason: 'account_disabled' };
      const now = this.clock().getTime();
      const keyId = input.keyId ?? null;
      const accepted = input.images.filter((image) => image.error === undefined);
      const held = this.credits.reserveManyInTransaction(
        row,
        accepted.map((image) => ({ requestId: image.requestId, keyId })),
        now,
      );
      if (!held.ok) return { ok: false, reason: 'payment_required', resetsAt: held.resetsAt };
      const batchId = newId('bat_');
      const allRefused = accepted.length === 0;
      this.insertBatchStmt.run(
        batchId,
        accountId,
        keyId,
        input.requestId,
        this.credits.ownerTag,
        JSON.stringify(input.options),
        now,
        input.expiresAt.getTime(),
        allRefused ? now : null,
      );
      let next = 0;
      input.images.forEach((image, position) => {
        if (image.error === undefined) {
          this.insertImageStmt.run(newId('img_'), batchId, position, image.filename, 'queued', image.requestId, held.reservationIds[next++]!, null, null, null);
        } else {
          const { code, message } = checkImageError(image.error);
          this.insertImageStmt.run(newId('img_'), batchId, position, image.filename, 'failed', image.requestId, null, code, message, now);
        }
      });
      // Images refused at submission have no image.processed event (the 202 answer lists them);
      // a batch of nothing but refused images is over at once, and says so.
      if (allRefused) this.webhooks.enqueue(accountId, 'batch.completed', batchCompletedData(batchId, this.counts(batchId)), now);
      return { ok: true, batch: this.read(batchId)! };
    });

    this.finishTx = db.transaction((imageId: string, outcome: ImageOutcome): Batch | null => {
      const image = this.imageStmt.get(imageId);
      if (!image) return null;
      const batch = this.batchStmt.get(image.batch_id)!;
      if (batch.deleted_at !== null || (image.status !== 'queued' && image.status !== 'processing')) {
        // Ended already (cancelled, lost, finished twice): whatever it still holds goes back.
        if (image.reservation_id !== null) this.credits.release(image.reservation_id);
        return null;
      }
      const now = this.clock().getTime();
      let charged = 0;
      if (outcome.status === 'succeeded') {
        // Gone only if a recovery released it under a live image (it never should): the result is
        // then given free rather than charged past the balance that no longer holds its credit.
        if (image.reservation_id !== null && this.credits.chargeReservation(image.reservation_id)) charged = 1;
        this.endImageStmt.run('succeeded', outcome.width, outcome.height, outcome.format, charged, null, null, now, imageId);
      } else {
        if (image.reservation_id !== null) this.credits.release(image.reservation_id);
        this.endImageStmt.run('failed', null, null, null, 0, outcome.error.code, outcome.error.message, now, imageId);
      }
      this.webhooks.enqueue(batch.account_id, 'image.processed', imageProcessedData(outcome, charged), now);
      this.completeIfDone(batch.account_id, batch.id, now);
      return this.read(batch.id);
    });

    this.deleteTx = db.transaction((accountId: number, batchId: string): boolean => {
      if (!this.visibleBatchStmt.get(accountId, batchId)) return false;
      const now = this.clock().getTime();
      this.deleteStmt.run(now, now, batchId);
      const { code, message } = BATCH_CANCELLED_ERROR;
      for (const image of this.unendedOfBatchStmt.all(batchId)) {
        if (image.reservation_id !== null) this.credits.release(image.reservation_id);
        this.endImageStmt.run('failed', null, null, null, 0, code, message, now, image.id);
      }
      return true;
    });

    this.orphansTx = db.transaction((error: BatchImageError): number => {
      const orphans = this.orphansStmt.all(this.credits.ownerTag);
      const now = this.clock().getTime();
      const batches = new Map<string, number>();
      for (const image of orphans) {
        if (image.reservation_id !== null) this.credits.release(image.reservation_id);
        this.endImageStmt.run('failed', null, null, null, 0, error.code, error.message, now, image.id);
        this.webhooks.enqueue(image.account_id, 'image.processed', orphanImageData(image, error), now);
        batches.set(image.batch_id, image.account_id);
      }
      for (const [batchId, accountId] of batches) this.completeIfDone(accountId, batchId, now);
      return orphans.length;
    });

    // Reads in one transaction: a batch and its images from one snapshot.
    this.readTx = db.transaction((accountId: number, batchId: string): Batch | null =>
      this.visibleBatchStmt.get(accountId, batchId) ? this.read(batchId) : null,
    );
    this.listTx = db.transaction((accountId: number, limit: number): Batch[] =>
      this.listStmt.all(accountId, limit).map((row) => toBatch(row, this.imagesStmt.all(row.id))),
    );
  }

  create(accountId: number, input: CreateBatchInput): CreateBatchResult {
    checkBatchInput(input);
    return this.createTx.immediate(accountId, input);
  }

  get(accountId: number, batchId: string): Batch | null {
    return this.readTx(accountId, batchId);
  }

  list(accountId: number, limit: number): Batch[] {
    return this.listTx(accountId, checkPositiveInteger('limit', limit));
  }

  start(imageId: string): boolean {
    return this.startStmt.run(imageId).changes > 0;
  }

  finish(imageId: string, outcome: ImageOutcome): Batch | null {
    checkImageOutcome(outcome);
    return this.finishTx.immediate(imageId, outcome);
  }

  delete(accountId: number, batchId: string): boolean {
    return this.deleteTx.immediate(accountId, batchId);
  }

  /**
   * Fails the unended images of every batch owned by another store instance: at start, those a
   * previous process (crashed, killed, stopped mid-batch) left behind, whose bytes died with it.
   * One service process per file (the owner lock), so no live process's images are among them.
   */
  failOrphans(error: BatchImageError): number {
    return this.orphansTx.immediate(checkImageError(error));
  }

  /** Inside a transaction: once no image of the batch waits any more, the batch is completed and says so. */
  private completeIfDone(accountId: number, batchId: string, nowMs: number): void {
    const counts = this.counts(batchId);
    if (counts.unended > 0) return;
    if (this.completeStmt.run(nowMs, batchId).changes === 0) return; // completed already: one event only
    this.webhooks.enqueue(accountId, 'batch.completed', batchCompletedData(batchId, counts), nowMs);
  }

  private counts(batchId: string) {
    return this.countsStmt.get(batchId)!;
  }

  private read(batchId: string): Batch | null {
    const row = this.batchStmt.get(batchId);
    return row ? toBatch(row, this.imagesStmt.all(batchId)) : null;
  }
}
