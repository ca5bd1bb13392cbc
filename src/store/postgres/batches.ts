/**
 * Batches on PostgreSQL: their metadata and their images' states, shared by every node; the image
 * bytes stay in the memory of the node that took the submission (the batch's owner) until another
 * node claims one (cluster.ts), and a result in the memory of the node that ran it (its holder).
 *
 * Credits follow /remove's reservations exactly: one per accepted image reserved at submission
 * (owned by this node, so they are released with its other reservations if it dies), all or none
 * under the account's row lock; committed by the same code as a /remove charge when the image
 * succeeds; released when it fails, is cancelled or is lost. Each change, its credits and its events
 * (webhooks.ts's outbox) are one short transaction.
 *
 * Every change to a batch's images locks the batch row first (FOR UPDATE). Images of one batch
 * can end on different connections at once (this node's workers, another node's orphan sweep);
 * queueing on the batch row makes each see the others' committed images, so exactly one of them
 * finds no image left and writes batch.completed.
 */

import { BATCH_COLUMNS, type BatchRow, IMAGE_COLUMNS, type ImageRow, toBatch, UNENDED } from '../batch-rows.js';
import { BATCH_CANCELLED_ERROR, checkBatchInput, checkImageError, checkImageOutcome, checkPositiveInteger, newId } from '../batch-rules.js';
import { StoreError } from '../errors.js';
import type { Batch, BatchImageError, BatchStore, CreateBatchInput, CreateBatchResult, ImageOutcome } from '../store.js';
import { batchCompletedData, imageProcessedData, orphanImageData } from '../webhook-events.js';
import { LIVE_NODES, type PostgresContext, type Queryable } from './context.js';
import type { PostgresWebhooks } from './webhooks.js';

/** A batch with its images, read in one statement (one snapshot). */
const BATCH_WITH_IMAGES = `SELECT ${BATCH_COLUMNS.split(', ')
  .map((c) => `b.${c}`)
  .join(', ')},
  (SELECT coalesce(json_agg(i ORDER BY i.position), '[]') FROM (SELECT ${IMAGE_COLUMNS} FROM batch_images WHERE batch_id = b.id) i) AS images
  FROM batches b`;

type BatchWithImages = BatchRow & { images: ImageRow[] };

/**
 * An image `i` of batch `b` whose bytes died with their node ($1: this node, never judged): queued
 * and its holder dead, or being processed and its runner dead.
 */
const LOST = `((i.status = 'queued' AND coalesce(i.holder, b.owner) <> $1 AND coalesce(i.holder, b.owner) NOT IN (${LIVE_NODES}))
  OR (i.status = 'processing' AND coalesce(i.runner, i.holder, b.owner) <> $1 AND coalesce(i.runner, i.holder, b.owner) NOT IN (${LIVE_NODES})))`;

export class PostgresBatches implements BatchStore {
  constructor(
    private readonly ctx: PostgresContext,
    private readonly webhooks: PostgresWebhooks,
  ) {}

  async create(accountId: number, input: CreateBatchInput): Promise<CreateBatchResult> {
    checkBatchInput(input);
    // Reservations made while this node's heartbeat might have lapsed could be released under it.
    await this.ctx.ensureAlive();
    const keyId = input.keyId ?? null;
    const images = input.images.map((image, position) => ({ ...image, id: newId('img_'), position }));
    const accepted = images.filter((image) => image.error === undefined);
    return this.ctx.transaction(async (c): Promise<CreateBatchResult> => {
      const row = await this.ctx.lockAccount(c, accountId);
      if (!row) throw new StoreError('not_found', `no account ${accountId}`);
      if (row.disabled_at !== null) return { ok: false, reason: 'account_disabled' };
      const now = this.ctx.now();
      const balance = await this.ctx.balance(c, row, now);
      if (balance.remaining < accepted.length) return { ok: false, reason: 'payment_required', resetsAt: balance.cycleEnd };

      // One statement for all reservations. Identity values are drawn as the rows are inserted, in
      // the SELECT's order, so the ids ascend with the images' order.
      const held = await c.query<{ id: number }>(
        `INSERT INTO reservations (account_id, api_key_id, owner, request_id, cycle_index, created_at)
         SELECT $1, $2, $3, u.request_id, $5, $6 FROM unnest($4::text[]) WITH ORDINALITY AS u (request_id, n) ORDER BY u.n
         RETURNING id`,
        [accountId, keyId, this.ctx.nodeId, accepted.map((image) => image.requestId), balance.cycleIndex, now],
      );
      const reservationIds = held.rows.map((r) => r.id).sort((a, b) => a - b);
      const reservationOf = new Map(accepted.map((image, i) => [image.id, reservationIds[i]!]));

      const batchId = newId('bat_');
      const allRefused = accepted.length === 0;
      await c.query(
        `INSERT INTO batches (id, account_id, api_key_id, request_id, owner, options, created_at, expires_at, completed_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
        [batchId, accountId, keyId, input.requestId, this.ctx.nodeId, JSON.stringify(input.options), now, input.expiresAt.getTime(), allRefused ? now : null],
      );
      await c.query(
        `INSERT INTO batch_images (id, batch_id, position, filename, status, request_id, reservation_id, error_code, error_message, finished_at)
         SELECT u.id, $1, u.position, u.filename, u.status, u.request_id, u.reservation_id, u.error_code, u.error_message,
                CASE WHEN u.status = 'failed' THEN $2::bigint END
         FROM unnest($3::text[], $4::int[], $5::text[], $6::text[], $7::text[], $8::bigint[], $9::text[], $10::text[])
           AS u (id, position, filename, status, request_id, reservation_id, error_code, error_message)`,
        [
          batchId,
          now,
          images.map((i) => i.id),
          images.map((i) => i.position),
          images.map((i) => i.filename),
          images.map((i) => (i.error === undefined ? 'queued' : 'failed')),
          images.map((i) => i.requestId),
          images.map((i) => reservationOf.get(i.id) ?? null),
          images.map((i) => (i.error === undefined ? null : checkImageError(i.error).code)),
          images.map((i) => (i.error === undefined ? null : checkImageError(i.error).message)),
        ],
      );
      // Images refused at submission have no image.processed event (the 202 answer lists them);
      // a batch of nothing but refused images is over at once, and says so.
      if (allRefused) {
        const counts = await this.#counts(c, batchId);
        await this.webhooks.enqueue(c, accountId, 'batch.completed', batchCompletedData(batchId, counts), now);
      }
      return { ok: true, batch: (await this.#read(c, batchId))! };
    });
  }

  async get(accountId: number, batchId: string): Promise<Batch | null> {
    const { rows } = await this.ctx.pool.query<BatchWithImages>(`${BATCH_WITH_IMAGES} WHERE b.account_id = $1 AND b.id = $2 AND b.deleted_at IS NULL`, [
      accountId,
      batchId,
    ]);
    return rows[0] ? toBatch(rows[0], rows[0].images) : null;
  }

  async list(accountId: number, limit: number): Promise<Batch[]> {
    const { rows } = await this.ctx.pool.query<BatchWithImages>(
      `${BATCH_WITH_IMAGES} WHERE b.account_id = $1 AND b.deleted_at IS NULL ORDER BY b.seq DESC LIMIT $2`,
      [accountId, checkPositiveInteger('limit', limit)],
    );
    return rows.map((row) => toBatch(row, row.images));
  }

  async start(imageId: string): Promise<boolean> {
    // One statement: a concurrent cancel or sweep that ended the image makes the re-check fail.
    const { rowCount } = await this.ctx.pool.query(
      `UPDATE batch_images SET status = 'processing', runner = $2
       WHERE id = $1 AND status = 'queued' AND batch_id IN (SELECT id FROM batches WHERE deleted_at IS NULL)`,
      [imageId, this.ctx.nodeId],
    );
    return (rowCount ?? 0) > 0;
  }

  finish(imageId: string, outcome: ImageOutcome): Promise<Batch | null> {
    checkImageOutcome(outcome);
    return this.ctx.transaction(async (c): Promise<Batch | null> => {
      const { rows: found } = await c.query<{ batch_id: string }>('SELECT batch_id FROM batch_images WHERE id = $1', [imageId]);
      if (!found[0]) return null;
      const batch = await this.#lockBatch(c, found[0].batch_id);
      // Read again under the batch's lock: the state another transaction may have just committed.
      const image = (await c.query<ImageRow>(`SELECT ${IMAGE_COLUMNS} FROM batch_images WHERE id = $1`, [imageId])).rows[0]!;
      if (batch.deleted_at !== null || (image.status !== 'queued' && image.status !== 'processing')) {
        // Ended already (cancelled, lost, finished twice): whatever it still holds goes back.
        if (image.reservation_id !== null) await c.query('DELETE FROM reservations WHERE id = $1', [image.reservation_id]);
        return null;
      }
      const now = this.ctx.now();
      let charged = 0;
      if (outcome.status === 'succeeded') {
        // Gone only if a recovery released it under a live image (it never should): the result is
        // then given free rather than charged past the balance that no longer holds its credit.
        if (image.reservation_id !== null && (await this.ctx.commitReservation(c, image.reservation_id))) charged = 1;
        await this.#endImage(c, imageId, { status: 'succeeded', width: outcome.width, height: outcome.height, format: outcome.format, charged }, now);
        // The node that ran it keeps the result: any other node fetches it from this one (cluster.ts).
        await c.query('UPDATE batch_images SET holder = $2 WHERE id = $1', [imageId, this.ctx.nodeId]);
      } else {
        if (image.reservation_id !== null) await c.query('DELETE FROM reservations WHERE id = $1', [image.reservation_id]);
        await this.#endImage(c, imageId, { status: 'failed', error: outcome.error }, now);
      }
      await this.webhooks.enqueue(c, batch.account_id, 'image.processed', imageProcessedData(outcome, charged), now);
      await this.#completeIfDone(c, batch.account_id, batch.id, now);
      return this.#read(c, batch.id);
    });
  }

  delete(accountId: number, batchId: string): Promise<boolean> {
    return this.ctx.transaction(async (c) => {
      const { rows } = await c.query('SELECT 1 FROM batches WHERE account_id = $1 AND id = $2 AND deleted_at IS NULL FOR UPDATE', [accountId, batchId]);
      if (rows.length === 0) return false;
      const now = this.ctx.now();
      await c.query('UPDATE batches SET deleted_at = $2, completed_at = coalesce(completed_at, $2) WHERE id = $1', [batchId, now]);
      await this.#failUnended(c, batchId, BATCH_CANCELLED_ERROR, now);
      return true;
    });
  }

  /**
   * Fails the images whose bytes died with their node, never this node's: a queued image whose
   * holder (by default the batch's owner) has no live heartbeat (by its own lapse), and an image
   * being processed whose runner has none. One short transaction per batch, so a sweep over many
   * batches holds no lock for long. Returns how many images it failed.
   */
  async failOrphans(error: BatchImageError): Promise<number> {
    const checked = checkImageError(error);
    const { rows: candidates } = await this.ctx.pool.query<{ id: string }>(
      `SELECT b.id FROM batches b WHERE b.completed_at IS NULL
         AND EXISTS (SELECT 1 FROM batch_images i WHERE i.batch_id = b.id AND ${LOST})
       ORDER BY b.seq`,
      [this.ctx.nodeId],
    );
    let failed = 0;
    for (const { id } of candidates) {
      failed += await this.ctx.transaction(async (c) => {
        // Locked and checked again: another node's sweep may have ended them, or their node come back.
        const { rows } = await c.query<{ account_id: number }>('SELECT account_id FROM batches WHERE id = $1 AND completed_at IS NULL FOR UPDATE', [id]);
        const batch = rows[0];
        if (!batch) return 0;
        const { rows: lost } = await c.query<ImageRow>(
          `SELECT ${IMAGE_COLUMNS} FROM batch_images WHERE id IN (
             SELECT i.id FROM batch_images i JOIN batches b ON b.id = i.batch_id WHERE i.batch_id = $2 AND ${LOST})
           ORDER BY position`,
          [this.ctx.nodeId, id],
        );
        if (lost.length === 0) return 0;
        const now = this.ctx.now();
        await this.#fail(c, lost, checked, now);
        for (const image of lost) await this.webhooks.enqueue(c, batch.account_id, 'image.processed', orphanImageData(image, checked), now);
        await this.#completeIfDone(c, batch.account_id, id, now);
        return lost.length;
      });
    }
    return failed;
  }

  async #lockBatch(c: Queryable, batchId: string): Promise<{ id: string; account_id: number; deleted_at: number | null }> {
    const { rows } = await c.query<{ id: string; account_id: number; deleted_at: number | null }>(
      'SELECT id, account_id, deleted_at FROM batches WHERE id = $1 FOR UPDATE',
      [batchId],
    );
    return rows[0]!;
  }

  async #endImage(
    c: Queryable,
    imageId: string,
    end: { status: 'succeeded'; width: number; height: number; format: string; charged: number } | { status: 'failed'; error: BatchImageError },
    nowMs: number,
  ): Promise<void> {
    const ok = end.status === 'succeeded';
    await c.query(
      `UPDATE batch_images SET status = $2, width = $3, height = $4, format = $5, credits_charged = $6, error_code = $7, error_message = $8,
         finished_at = $9, reservation_id = NULL
       WHERE id = $1`,
      [
        imageId,
        end.status,
        ok ? end.width : null,
        ok ? end.height : null,
        ok ? end.format : null,
        ok ? end.charged : 0,
        ok ? null : end.error.code,
        ok ? null : end.error.message,
        nowMs,
      ],
    );
  }

  /** Under the batch's lock: fails its unended images with `error` and releases their credits; returns them as they were. */
  async #failUnended(c: Queryable, batchId: string, error: BatchImageError, nowMs: number): Promise<ImageRow[]> {
    const { rows } = await c.query<ImageRow>(`SELECT ${IMAGE_COLUMNS} FROM batch_images WHERE batch_id = $1 AND status IN ${UNENDED} ORDER BY position`, [
      batchId,
    ]);
    if (rows.length === 0) return rows;
    await this.#fail(c, rows, error, nowMs);
    return rows;
  }

  /** Under the batch's lock: fails these unended images with `error` and releases their credits. */
  async #fail(c: Queryable, rows: ImageRow[], error: BatchImageError, nowMs: number): Promise<void> {
    const held = rows.map((r) => r.reservation_id).filter((id): id is number => id !== null);
    if (held.length > 0) await c.query('DELETE FROM reservations WHERE id = ANY($1::bigint[])', [held]);
    await c.query(
      `UPDATE batch_images SET status = 'failed', credits_charged = 0, error_code = $2, error_message = $3, finished_at = $4, reservation_id = NULL
       WHERE id = ANY($1::text[])`,
      [rows.map((r) => r.id), error.code, error.message, nowMs],
    );
  }

  /** Under the batch's lock: once no image of the batch waits any more, the batch is completed and says so (once). */
  async #completeIfDone(c: Queryable, accountId: number, batchId: string, nowMs: number): Promise<void> {
    const counts = await this.#counts(c, batchId);
    if (counts.unended > 0) return;
    const { rowCount } = await c.query('UPDATE batches SET completed_at = $2 WHERE id = $1 AND completed_at IS NULL', [batchId, nowMs]);
    if ((rowCount ?? 0) === 0) return;
    await this.webhooks.enqueue(c, accountId, 'batch.completed', batchCompletedData(batchId, counts), nowMs);
  }

  async #counts(c: Queryable, batchId: string): Promise<{ unended: number; succeeded: number; failed: number; credits_charged: number }> {
    const { rows } = await c.query<{ unended: number; succeeded: number; failed: number; credits_charged: number }>(
      `SELECT count(*) FILTER (WHERE status IN ${UNENDED}) AS unended,
              count(*) FILTER (WHERE status = 'succeeded') AS succeeded,
              count(*) FILTER (WHERE status = 'failed') AS failed,
              coalesce(sum(credits_charged), 0) AS credits_charged
       FROM batch_images WHERE batch_id = $1`,
      [batchId],
    );
    return rows[0]!;
  }

  async #read(c: Queryable, batchId: string): Promise<Batch | null> {
    const { rows } = await c.query<BatchWithImages>(`${BATCH_WITH_IMAGES} WHERE b.id = $1`, [batchId]);
    return rows[0] ? toBatch(rows[0], rows[0].images) : null;
  }
}
