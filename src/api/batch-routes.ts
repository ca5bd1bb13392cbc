/**
 * Async batches (docs/contract.md, "Async batches and webhooks"):
 *
 *   POST   /api/v1/batches                            1-50 images + the /remove options → 202
 *   GET    /api/v1/batches                            the account's recent batches
 *   GET    /api/v1/batches/:id                        one batch and its images
 *   GET    /api/v1/batches/:id/images/:image          a result, with the headers of a /remove success
 *   DELETE /api/v1/batches/:id                        cancels queued images, drops results → 204
 *
 * Every request goes through the one admission path (key, rate limits, in-flight caps, load
 * shedding). A submission is refused before its body is read when the account has no credit left
 * (402) or its declared size does not fit the batch memory budget (503) or the account's share of
 * it (429); its body must arrive within the body deadline and at the minimum upload rate (408); the options are validated for the whole request (400); each
 * image is sniffed and its header checked as it arrives (a refused one is listed as failed, not
 * charged); one credit per accepted image is reserved in the same transaction that writes the
 * batch (402 for the whole request when the balance cannot cover them). The work itself runs in
 * batches/batch-runner.ts.
 */

import type { BatchMemoryBudget, BudgetRefusal } from '../batches/batch-memory-budget.js';
import { type BatchRunner, inputBytes, type QueuedImage } from '../batches/batch-runner.js';
import type { PeerResults } from '../cluster/peer-results.js';
import type { Logger } from '../config/logger.js';
import { type Exchange, newRequestId, type ParsedForm } from '../http/exchange.js';
import type { Router } from '../http/router.js';
import { type EncodedFormat, MEDIA_TYPES, type PreparedJob } from '../lib/index.js';
import { prepareShared, type SharedPreparation } from '../lib/prepare-request.js';
import type { Admission, AdmitOptions, Ticket } from '../service/admission.js';
import { ApiError } from '../service/errors.js';
import { reservationRefusal } from '../service/metering.js';
import { type ModelsAllowed, requestModel } from '../service/model-access.js';
import { hasControlCharacter } from '../service/user-text.js';
import type { BatchImageError, NewBatchImage, Store } from '../store/index.js';
import { keyedHandler } from './api-key.js';
import { batchView, imageExpiresAt } from './batch-views.js';
import { bgoneOptions } from './dialects/bgone.js';
import { BG_IMAGE_FIELD, batchForm, IMAGE_FIELD } from './form-fields.js';
import { fromLibraryError } from './metered-removal.js';

export const BATCHES_PATH = '/api/v1/batches';
export const MAX_BATCH_IMAGES = 50;
/** All images of one batch together. */
export const MAX_BATCH_IMAGE_BYTES = 200 * 1024 * 1024;
/** The multipart framing allowed around them. */
const MAX_BATCH_BODY_BYTES = MAX_BATCH_IMAGE_BYTES + (MAX_BATCH_IMAGES + 1) * 64 * 1024;
const DEFAULT_LIST_LIMIT = 20;
const MAX_LIST_LIMIT = 100;

export interface BatchDeps {
  store: Store;
  admission: Admission;
  runner: BatchRunner;
  budget: BatchMemoryBudget;
  /** How long results are kept. */
  resultTtlMs: number;
  publicUrl: () => string;
  /** Seconds in Retry-After when the memory budget is full. */
  overloadRetryAfter: number;
  model?: string | undefined;
  /** BGONE_MODELS_ALLOWED: the models a batch may name besides the default. */
  modelsAllowed?: ModelsAllowed | undefined;
  logger?: Logger | undefined;
  /** An event was written at submission (a batch whose images all failed there): deliver it. */
  onEvent?: (() => void) | undefined;
  /** Several nodes: results held elsewhere are fetched from their node, and a DELETE reaches every node. */
  peers?: PeerResults | undefined;
}

const tooLarge = () => new ApiError('image_too_large', 'The batch is larger than 200 MB in all.', { field: 'image_file', limit_bytes: MAX_BATCH_IMAGE_BYTES });

const noSuchBatch = () => new ApiError('not_found', 'No such batch.');

/**
 * An image prepared on arrival (its bytes and header, the crop caps for its size, its memory
 * estimate: the options were validated once for the batch), and kept for the run; or why it is
 * refused, in the contract's terms.
 */
function prepareImage(data: Buffer, shared: SharedPreparation): { job: PreparedJob } | { error: BatchImageError } {
  if (data.length === 0) return { error: { code: 'missing_image', message: 'The image_file part is empty.' } };
  try {
    return { job: shared.job(data) };
  } catch (err) {
    const httpError = fromLibraryError(err);
    return { error: { code: httpError.code, message: httpError.message } };
  }
}

export function mountBatches(router: Router, deps: BatchDeps): void {
  const { store, runner, budget, logger } = deps;

  const withTicket = (handler: (ex: Exchange, ticket: Ticket) => Promise<void>, route?: AdmitOptions) => keyedHandler(deps, handler, route);

  // Metered: an account without credits is refused (402) before a byte of the batch is read.
  router.post(
    BATCHES_PATH,
    withTicket((ex, ticket) => submit(ex, ticket), { body: { maxBytes: MAX_BATCH_BODY_BYTES, tooLarge }, metered: true }),
  );

  async function submit(ex: Exchange, ticket: Ticket): Promise<void> {
    const { accountId, keyId } = ticket.principal;
    const retryAfter = { 'Retry-After': String(deps.overloadRetryAfter) };
    // The client gone (or its connection closed as the server stops) ends a background's download.
    const gone = new AbortController();
    ex.onAbort(() => gone.abort());
    // The whole budget is full (503, the server's load), or this account holds its share of it
    // (429, its own limit: its uploads, queued images and kept results; DELETE frees the latter).
    const refusal = (why: BudgetRefusal) =>
      why === 'server'
        ? new ApiError('overloaded', 'The server holds too many batch images now; retry after the time in Retry-After.', undefined, retryAfter)
        : new ApiError(
            'rate_limit_exceeded',
            `This account holds its share of the batch memory (${budget.accountLimit} bytes) in uploads, queued images and kept results; retry after the time in Retry-After, or delete batches whose results it has fetched.`,
            { batch_memory_limit_bytes: budget.accountLimit },
            retryAfter,
          );
    // Memory first, before a byte is read: the declared size must fit the budget. A body without
    // Content-Length takes its bytes as they arrive, and is refused where it stops fitting. Bytes
    // declared and not sent are held only as long as the minimum upload rate lets the body go on.
    const declared = Number(ex.req.header('content-length')) || 0;
    const refused = budget.tryTake(accountId, declared);
    if (refused) throw refusal(refused);
    let taken = declared;
    let accepted: QueuedImage[] = [];
    try {
      const form = await readForm(ex, (bytes) => {
        if (bytes <= taken) return undefined;
        const why = budget.tryTake(accountId, bytes - taken);
        if (!why) taken = bytes;
        return why;
      });
      const formImages = form.files[IMAGE_FIELD] ?? [];
      if (formImages.length === 0) throw new ApiError('missing_image', 'The request has no image_file part.', { field: 'image_file' });
      // File names are kept with the batch and sent in its events: the whole request is refused.
      const badName = formImages.findIndex((image) => hasControlCharacter(image.filename));
      if (badName !== -1)
        throw new ApiError('validation_error', 'An image_file part has a file name with a control character (NUL, line breaks and the like).', {
          field: 'image_file',
          position: badName,
        });
      const fields: Record<string, string> = Object.fromEntries(Object.entries(form.fields).filter(([, v]) => v !== undefined)) as Record<string, string>;
      const background = form.files[BG_IMAGE_FIELD]?.[0];
      if (background) fields[BG_IMAGE_FIELD] = background.filename || 'file'; // stored as sent: the file's name
      // The batch's options, its background (a file part, or a URL downloaded once for every image,
      // ended when the client goes away) checked once for all its images, its header and its data.
      const { bgImageUrl: _downloaded, ...options } = bgoneOptions({ files: {}, fields: form.fields }, deps.model);
      let shared: SharedPreparation;
      try {
        shared = await prepareShared(bgoneOptions({ files: { [BG_IMAGE_FIELD]: form.files[BG_IMAGE_FIELD] }, fields: form.fields }, deps.model), {
          checkModel: (name) => requestModel(name, deps.model, deps.modelsAllowed),
          downloading: () => ticket.downloading(),
          signal: gone.signal,
          owned: true,
        });
      } catch (err) {
        if (gone.signal.aborted) return; // the client left during the download: nobody to answer
        throw fromLibraryError(err);
      }
      const prepared = formImages.map((image) => prepareImage(image.data, shared));
      const images: NewBatchImage[] = formImages.map((image, i) => {
        const outcome = prepared[i]!;
        return { filename: image.filename, requestId: newRequestId(), error: 'error' in outcome ? outcome.error : undefined };
      });
      const now = store.clock();
      const result = await store.batches.create(accountId, {
        keyId,
        requestId: ex.requestId,
        options: fields,
        images,
        expiresAt: new Date(now.getTime() + deps.resultTtlMs),
      });
      if (!result.ok) {
        throw reservationRefusal(result.reason, deps.overloadRetryAfter, 'The credits left in this billing cycle do not cover every image of the batch.', {
          images: images.filter((i) => !i.error).length,
        });
      }
      const { batch } = result;
      accepted = batch.images
        .filter((image) => image.status === 'queued')
        .map((image) => ({
          imageId: image.id,
          batchId: batch.id,
          accountId,
          filename: image.filename,
          requestId: image.requestId,
          data: formImages[image.position]!.data,
          job: (prepared[image.position] as { job: PreparedJob }).job,
          options,
        }));
      // From here the queued images hold their bytes; the rest of what was taken goes back.
      const kept = accepted.reduce((sum, image) => sum + inputBytes(image), 0);
      budget.give(accountId, taken - kept);
      taken = 0;
      runner.enqueue(accepted);
      if (batch.status === 'completed') deps.onEvent?.();
      logger?.info({ requestId: ex.requestId, batch: batch.id, images: batch.images.length, accepted: accepted.length }, 'batch accepted');
      ex.json(202, batchView(batch, now.getTime(), deps.publicUrl(), deps.resultTtlMs), ticket.rateHeaders);
    } catch (err) {
      if (err instanceof OverBudget) throw refusal(err.why);
      throw err;
    } finally {
      budget.give(accountId, taken);
    }
  }

  router.get(
    BATCHES_PATH,
    withTicket(async (ex, ticket) => {
      const raw = new URLSearchParams(ex.req.query).get('limit');
      const limit = raw === null ? DEFAULT_LIST_LIMIT : Number(raw);
      if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIST_LIMIT)
        throw new ApiError('validation_error', `limit must be an integer from 1 to ${MAX_LIST_LIMIT}.`, { field: 'limit' });
      const batches = await store.batches.list(ticket.principal.accountId, limit);
      const now = store.clock().getTime();
      ex.json(200, { data: batches.map((batch) => batchView(batch, now, deps.publicUrl(), deps.resultTtlMs)) }, ticket.rateHeaders);
    }),
  );

  router.get(
    `${BATCHES_PATH}/:batch`,
    withTicket(async (ex, ticket) => {
      const batch = await store.batches.get(ticket.principal.accountId, ex.params.batch!);
      if (!batch) throw noSuchBatch();
      ex.json(200, batchView(batch, store.clock().getTime(), deps.publicUrl(), deps.resultTtlMs), ticket.rateHeaders);
    }),
  );

  router.delete(
    `${BATCHES_PATH}/:batch`,
    withTicket(async (ex, ticket) => {
      const id = ex.params.batch!;
      if (!(await store.batches.delete(ticket.principal.accountId, id))) throw noSuchBatch();
      runner.forget(id);
      await deps.peers?.forget(id);
      logger?.info({ requestId: ex.requestId, batch: id }, 'batch deleted');
      ex.send(204, { ...ticket.rateHeaders, 'Cache-Control': 'no-store' }, '');
    }),
  );

  router.get(
    `${BATCHES_PATH}/:batch/images/:image`,
    withTicket(async (ex, ticket) => {
      const batch = await store.batches.get(ticket.principal.accountId, ex.params.batch!);
      const image = batch?.images.find((i) => i.id === ex.params.image);
      if (!batch || !image) throw new ApiError('not_found', 'No such batch image.');
      if (image.status === 'queued' || image.status === 'processing') throw new ApiError('result_not_ready', undefined, { status: image.status });
      if (image.status === 'failed') throw new ApiError('not_found', 'This image failed: it has no result.', { status: 'failed', error: image.error });
      if (imageExpiresAt(image, deps.resultTtlMs)! <= store.clock().getTime()) throw new ApiError('result_expired');
      // Held here, or by the node that ran it (several nodes); gone when that node died or restarted.
      const held = runner.result(image.id) ?? (await deps.peers?.fetch(image.id));
      if (!held) throw new ApiError('result_expired', 'This result is no longer held by any node (the node that held it stopped or restarted).');
      ex.send(
        200,
        {
          ...ticket.rateHeaders,
          'Content-Type': MEDIA_TYPES[held.format as EncodedFormat],
          'X-Image-Width': String(held.width),
          'X-Image-Height': String(held.height),
          'X-Request-ID': held.requestId,
          'X-Credits-Charged': '0',
          'Cache-Control': 'no-store',
        },
        held.data,
      );
    }),
  );
}

/** Thrown by readForm when the body stops fitting the memory budget. */
class OverBudget extends Error {
  constructor(readonly why: BudgetRefusal) {
    super('over the batch memory budget');
  }
}

/**
 * Reads the form with the batch limits, under the body deadline (past it, the 408 that closes the
 * connection); `overBudget(bytesSoFar)` is asked as bytes arrive and stops the read (OverBudget)
 * when it answers why they do not fit.
 */
function readForm(ex: Exchange, overBudget: (bytes: number) => BudgetRefusal | undefined): Promise<ParsedForm> {
  return ex.readForm({
    form: batchForm(MAX_BATCH_IMAGES, MAX_BATCH_IMAGE_BYTES),
    maxBodyBytes: MAX_BATCH_BODY_BYTES,
    tooLarge,
    check: (bytes) => {
      const why = overBudget(bytes);
      return why ? new OverBudget(why) : undefined;
    },
  });
}
