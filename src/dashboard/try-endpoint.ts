/**
 * POST /dashboard/try: the try-it panel's request. Full API keys are never stored, so the browser
 * cannot call /api/v1/remove with one; this endpoint authenticates by session (plus the session's
 * CSRF token in X-CSRF-Token) and otherwise runs the API's path: the same multipart parser and
 * limits, option validation (normaliseOptions), a credit reserved in the store before the work and
 * committed only on success (released on failure or abort), removeBackground, and the same answers:
 * the image with the API's headers, or the JSON error body of the API's closed list of codes.
 * Rate-limited per account with the plan's limit.
 */
import { BgoneError } from '../errors.js';
import type { Logger } from '../logger.js';
import { MEDIA_TYPES, normaliseOptions, removeBackground, type RemoveBackgroundOptions } from '../index.js';
import { MAX_FILE_BYTES } from '../options.js';
import { HTTP_STATUS, HttpError } from '../server/http-errors.js';
import type { Metrics } from '../server/metrics.js';
import { MultipartParser } from '../server/multipart.js';
import type { RateLimiter } from '../server/rate-limit.js';
import type { Account, Session, Store } from '../store/index.js';
import { checkSessionToken } from './csrf.js';
import type { Exchange } from './http.js';

// As the API: multipart overhead allowed on top of the 20 MB image.
const MAX_BODY_BYTES = MAX_FILE_BYTES + 64 * 1024;

export interface TryDeps {
  store: Store;
  model?: string | undefined;
  metrics?: Metrics | undefined;
  logger?: Logger | undefined;
  rateLimiter: RateLimiter;
  /** Try-it requests processed at once in this process; beyond it 503 overloaded. */
  maxInFlight: number;
  overloadRetryAfter: number;
}

type Headers = Record<string, string>;

function fromLibraryError(err: unknown): HttpError {
  if (err instanceof HttpError) return err;
  if (err instanceof BgoneError) return err.code === 'internal_error' ? new HttpError('internal_server_error') : new HttpError(err.code, err.message, err.details);
  return new HttpError('internal_server_error');
}

export class TryEndpoint {
  private inFlight = 0;

  constructor(private readonly deps: TryDeps) {}

  /** `auth` is the session found from the cookie (null: none or expired) and its account. */
  handle(ex: Exchange, auth: { session: Session; account: Account } | null): void {
    const { store, logger } = this.deps;
    const requestId = ex.info.requestId;
    let parser: MultipartParser | undefined;
    let reservationId: number | null = null;
    let holdsPlace = false;
    const finish = () => {
      if (holdsPlace) {
        holdsPlace = false;
        this.inFlight--;
      }
    };
    ex.onAbort(() => {
      parser?.abort();
      if (reservationId !== null) {
        store.credits.release(reservationId); // the browser went away: never charged
        reservationId = null;
      }
      finish();
    });
    const fail = (err: HttpError, extra: Headers = {}) => {
      parser?.abort();
      if (reservationId !== null) {
        store.credits.release(reservationId);
        reservationId = null;
      }
      finish();
      if (!ex.open) return;
      const body: Record<string, unknown> = { code: err.code, message: err.message, request_id: requestId };
      if (err.details !== undefined) body.details = err.details;
      ex.send(
        { status: Number(HTTP_STATUS[err.code].slice(0, 3)), headers: { 'Content-Type': 'application/json', 'Cache-Control': 'no-store', ...extra, ...err.headers }, body: JSON.stringify(body) },
        err.code,
      );
    };

    // 1. Session and its CSRF token (sent as a header by the page's script).
    if (!auth) return fail(new HttpError('authentication_error', 'Not logged in, or the session has expired. Log in to the dashboard again.'));
    if (!checkSessionToken(auth.session.csrfToken, ex.info.csrfHeader)) {
      return fail(new HttpError('permission_denied', 'Missing or invalid CSRF token: reload the page and try again.', { field: 'X-CSRF-Token' }));
    }
    const account = auth.account;
    if (account.disabled) return fail(new HttpError('permission_denied'));
    // 2. The plan's rate limit, per account.
    const limit = store.plans[account.plan].rateLimitPerMinute;
    const rate = this.deps.rateLimiter.take(`dashboard:${account.id}`, limit);
    const rh: Headers = { 'X-RateLimit-Limit': String(rate.limit), 'X-RateLimit-Remaining': String(rate.remaining), 'X-RateLimit-Reset': String(rate.reset) };
    if (!rate.allowed) return fail(new HttpError('rate_limit_exceeded'), { ...rh, 'Retry-After': String(rate.retryAfter) });
    // 3. Load shedding, before reading the body.
    if (this.inFlight >= this.deps.maxInFlight) return fail(new HttpError('overloaded'), { ...rh, 'Retry-After': String(this.deps.overloadRetryAfter) });
    const tooLarge = () => new HttpError('image_too_large', 'The image is larger than 20 MB.', { field: 'image_file', limit_bytes: MAX_FILE_BYTES });
    if (ex.info.contentLength && Number(ex.info.contentLength) > MAX_BODY_BYTES) return fail(tooLarge(), rh);
    this.inFlight++;
    holdsPlace = true;

    // 4. The upload, streamed through the API's parser.
    parser = new MultipartParser(ex.info.contentType);
    let received = 0;
    ex.res.onData((chunk, isLast) => {
      if (!ex.open) return;
      received += chunk.byteLength;
      if (received > MAX_BODY_BYTES) return fail(tooLarge(), rh);
      parser!.write(Buffer.from(new Uint8Array(chunk))); // copy: uWS reuses the chunk's memory
      if (isLast) parser!.end();
    });

    void (async () => {
      let form;
      try {
        form = await parser!.done;
      } catch (err) {
        return fail(fromLibraryError(err), rh);
      }
      if (!ex.open) return;
      if (!form.image || form.image.length === 0) return fail(new HttpError('missing_image', 'The request has no image_file part, or it is empty.', { field: 'image_file' }), rh);
      // 5. Options, validated like the API's.
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
        return fail(fromLibraryError(err), rh);
      }
      // 6. One credit reserved in the store; committed only after a success.
      let reservation;
      try {
        reservation = store.credits.reserve(account.id, { requestId });
      } catch (err) {
        logger?.error({ requestId, err }, 'try-it reservation failed');
        return fail(new HttpError('internal_server_error'), rh);
      }
      if (!reservation.ok) {
        if (reservation.reason === 'payment_required') return fail(new HttpError('payment_required'), rh);
        return fail(new HttpError('permission_denied'), rh);
      }
      reservationId = reservation.reservationId;
      // 7. The image work.
      let result;
      try {
        result = await removeBackground(form.image, options);
      } catch (err) {
        if (!(err instanceof BgoneError) || err.code === 'internal_error') logger?.error({ requestId, code: (err as BgoneError).code }, 'try-it processing failed');
        return fail(fromLibraryError(err), rh);
      }
      this.deps.metrics?.recordInference(result.timings.inference / 1000);
      if (!ex.open) return; // the abort handler released the reservation
      // 8. Charge, then answer.
      try {
        if (reservationId !== null) {
          store.credits.commit(reservationId);
          reservationId = null;
        }
      } catch (err) {
        logger?.error({ requestId, err }, 'try-it charge failed');
        return fail(new HttpError('internal_server_error'), rh);
      }
      const remaining = store.credits.balance(account.id).remaining;
      finish();
      ex.send({
        status: 200,
        headers: {
          'Content-Type': MEDIA_TYPES[result.format],
          'X-Processing-Time-Ms': String(Math.round(ex.seconds() * 1000)),
          'X-Image-Width': String(result.width),
          'X-Image-Height': String(result.height),
          'X-Credits-Charged': '1',
          'X-Credits-Remaining': String(remaining),
          'Cache-Control': 'no-store',
          ...rh,
        },
        body: result.data,
      });
      logger?.info({ requestId, status: 200, accountId: account.id, width: result.width, height: result.height, charged: 1 }, 'try-it image processed');
    })();
  }
}
