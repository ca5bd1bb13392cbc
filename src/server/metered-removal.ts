/**
 * One metered background removal after admission, shared by POST /api/v1/remove and the
 * dashboard's try-it endpoint: the upload streamed through busboy (stopping at 20 MB), option
 * validation, one credit reserved, removeBackground, the charge committed only when the answer is a
 * success, and the answer itself. The route keeps what differs (authentication, rate-limit key, its
 * own queue places) and forwards the client's abort here.
 */
import { createHash } from 'node:crypto';
import { BgoneError } from '../errors.js';
import { MEDIA_TYPES, normaliseOptions, removeBackground, type RemoveBackgroundOptions } from '../index.js';
import type { Logger } from '../logger.js';
import { MAX_FILE_BYTES } from '../options.js';
import { HttpError } from './http-errors.js';
import type { Metrics } from './metrics.js';
import { MultipartParser } from './multipart.js';
import type { ServiceStore } from './service-store.js';

export type Headers = Record<string, string>;

/** Multipart overhead allowed on top of the 20 MB image before the body itself is too large. */
export const MAX_BODY_BYTES = MAX_FILE_BYTES + 64 * 1024;

export const tooLarge = () => new HttpError('image_too_large', 'The image is larger than 20 MB.', { field: 'image_file', limit_bytes: MAX_FILE_BYTES });

/** Maps the library's error codes onto the HTTP contract. */
export function fromLibraryError(err: unknown): HttpError {
  if (err instanceof HttpError) return err;
  if (err instanceof BgoneError) {
    if (err.code === 'internal_error') return new HttpError('internal_server_error');
    return new HttpError(err.code, err.message, err.details);
  }
  return new HttpError('internal_server_error');
}

/** How the shared path talks to the route's response. */
export interface RemovalIo {
  /** Registers the body handler (uWS onData: the chunk is only valid during the call). */
  onData(handler: (chunk: ArrayBuffer, isLast: boolean) => void): void;
  /** Answers an error (only called while the response is open). */
  answerError(err: HttpError, headers: Headers): void;
  /** Answers the image (only called while the response is open). */
  answerImage(headers: Headers, body: Buffer): void;
  /** The request no longer holds a place in the route's queue (called exactly once). */
  release(): void;
}

export interface RemovalRequest {
  requestId: string;
  contentType: string;
  idempotencyKey?: string;
  accountId: number;
  keyId?: number;
  /** X-RateLimit-* headers, added to every answer. */
  rateHeaders: Headers;
  started: number; // performance.now() at the start of the request
}

export interface RemovalDeps {
  store: ServiceStore;
  model?: string | undefined;
  logger?: Logger | undefined;
  metrics?: Metrics | undefined;
}

export class MeteredRemoval {
  private parser: MultipartParser | undefined;
  private reservationId: number | null = null;
  private open = true;
  private processing = false;
  private placeHeld = true;

  constructor(
    private readonly request: RemovalRequest,
    private readonly io: RemovalIo,
    private readonly deps: RemovalDeps,
  ) {}

  /** The client went away: nothing is charged; a job already running keeps its place until it ends. */
  abort(): void {
    if (!this.open) return;
    this.open = false;
    this.parser?.abort();
    this.releaseCredit();
    if (!this.processing) this.releasePlace();
  }

  /** Answers an error before or during the upload (e.g. found by the route). */
  fail(err: HttpError, extra: Headers = {}): void {
    if (!this.open) return;
    this.open = false;
    this.parser?.abort();
    this.releaseCredit();
    this.io.answerError(err, { ...this.request.rateHeaders, ...extra });
    this.deps.logger?.info({ requestId: this.request.requestId, code: err.code, ms: Math.round(performance.now() - this.request.started) }, 'request failed');
    if (!this.processing) this.releasePlace();
  }

  /** Streams the upload and runs the job; the answer goes through io. */
  start(): void {
    const parser = new MultipartParser(this.request.contentType);
    this.parser = parser;
    let received = 0;
    this.io.onData((chunk, isLast) => {
      if (!this.open) return;
      received += chunk.byteLength;
      if (received > MAX_BODY_BYTES) return this.fail(tooLarge());
      parser.write(Buffer.from(new Uint8Array(chunk))); // copy: uWS reuses the chunk's memory
      if (isLast) parser.end();
    });
    void this.run(parser);
  }

  private async run(parser: MultipartParser): Promise<void> {
    const { requestId, accountId } = this.request;
    const { store, logger } = this.deps;
    let form;
    try {
      form = await parser.done;
    } catch (err) {
      return this.fail(fromLibraryError(err));
    }
    if (!this.open) return;
    if (!form.image || form.image.length === 0) return this.fail(new HttpError('missing_image', 'The request has no image_file part, or it is empty.', { field: 'image_file' }));
    // Options: every value outside the spec is an error, never ignored.
    const options: RemoveBackgroundOptions = {
      format: form.fields.format,
      channels: form.fields.channels,
      bgColor: form.fields.bg_color,
      size: form.fields.size,
      crop: form.fields.crop,
      padding: form.fields.padding,
      model: this.deps.model,
    };
    try {
      normaliseOptions(options);
    } catch (err) {
      return this.fail(fromLibraryError(err));
    }
    // One credit reserved; charged only when the answer is a success.
    const { idempotencyKey } = this.request;
    const imageHash = idempotencyKey ? createHash('sha256').update(form.image).digest('hex') : undefined;
    let reservation;
    try {
      reservation = store.reserve(accountId, { requestId, keyId: this.request.keyId, idempotencyKey, imageHash });
    } catch (err) {
      logger?.error({ requestId, err }, 'reservation failed');
      return this.fail(new HttpError('internal_server_error'));
    }
    if (!reservation.ok) {
      if (reservation.reason === 'payment_required') return this.fail(new HttpError('payment_required'));
      if (reservation.reason === 'account_disabled') return this.fail(new HttpError('permission_denied'));
      return this.fail(new HttpError('validation_error', 'This Idempotency-Key was already used with another image, or its first request is still in progress.', { field: 'Idempotency-Key' }));
    }
    this.reservationId = reservation.reservationId;
    let remaining = reservation.remainingAfterCharge;
    // The image work.
    let result;
    this.processing = true;
    try {
      result = await removeBackground(form.image, options);
    } catch (err) {
      this.processing = false;
      if (!(err instanceof BgoneError) || err.code === 'internal_error') logger?.error({ requestId, code: (err as BgoneError).code, detail: (err as BgoneError).detail }, 'processing failed');
      if (!this.open) return this.releasePlace();
      return this.fail(fromLibraryError(err));
    }
    this.processing = false;
    this.deps.metrics?.recordInference(result.timings.inference / 1000);
    if (!this.open) return this.releasePlace(); // abort() released the credit
    // Charge, then answer.
    let charged = 0;
    try {
      if (this.reservationId !== null) {
        remaining = store.commit(this.reservationId); // the balance from the charge's own transaction
        this.reservationId = null;
        charged = 1;
      }
    } catch (err) {
      logger?.error({ requestId, err }, 'charge failed');
      return this.fail(new HttpError('internal_server_error'));
    }
    const ms = Math.round(performance.now() - this.request.started);
    this.open = false;
    this.io.answerImage(
      {
        'Content-Type': MEDIA_TYPES[result.format],
        'X-Processing-Time-Ms': String(ms),
        'X-Image-Width': String(result.width),
        'X-Image-Height': String(result.height),
        'X-Credits-Charged': String(charged),
        'X-Credits-Remaining': String(remaining),
        'Cache-Control': 'no-store',
        ...this.request.rateHeaders,
      },
      result.data,
    );
    logger?.info({ requestId, status: 200, ms, width: result.width, height: result.height, bytes: result.data.length, charged, timings: result.timings }, 'image processed');
    this.releasePlace();
  }

  private releaseCredit(): void {
    if (this.reservationId === null) return;
    this.deps.store.release(this.reservationId);
    this.reservationId = null;
  }

  private releasePlace(): void {
    if (!this.placeHeld) return;
    this.placeHeld = false;
    this.io.release();
  }
}
