/**
 * The HTTP service on uWebSockets.js: POST /api/v1/remove plus health, readiness, metrics and the
 * OpenAPI document. The route only parses, authenticates and meters; the image work is the library's
 * removeBackground. Order of checks: auth, rate limit, load shedding (all before reading the body),
 * then the streamed upload, option validation, credit reservation, processing, and the charge only
 * once the answer is a success.
 */
import { createHash } from 'node:crypto';
import uWS from 'uWebSockets.js';
import { BgoneError } from '../errors.js';
import { MEDIA_TYPES, normaliseOptions, queueSize, removeBackground, type RemoveBackgroundOptions } from '../index.js';
import { MAX_FILE_BYTES } from '../options.js';
import type { Logger } from '../logger.js';
import { HTTP_STATUS, HttpError, type HttpErrorCode } from './http-errors.js';
import { Metrics } from './metrics.js';
import { MultipartParser } from './multipart.js';
import { openApiDocument } from './openapi.js';
import { RateLimiter } from './rate-limit.js';
import { newRequestId } from './request-id.js';
import type { Authenticated, ServiceStore } from './service-store.js';

export interface ServerOptions {
  host: string;
  port: number;
  model?: string | undefined;
  queueLimit: number;
  overloadRetryAfter: number;
  drainTimeout: number;
  store: ServiceStore;
  logger: Logger;
  /** Milliseconds since the epoch; injectable for tests of the rate limiter. */
  now?: () => number;
  /** Registers more routes (e.g. the dashboard) before the catch-all 404. */
  extraRoutes?: (app: uWS.TemplatedApp, metrics: Metrics) => void;
}

export interface RunningServer {
  port: number;
  /** Stops accepting connections, waits for in-flight requests (up to drainTimeout), resolves. */
  close(): Promise<void>;
  metrics: Metrics;
  inFlight(): number;
}

type Headers = Record<string, string>;

const REMOVE_PATH = '/api/v1/remove';
// Multipart overhead allowed on top of the image before the body itself counts as too large.
const MAX_BODY_BYTES = MAX_FILE_BYTES + 64 * 1024;

function writeResponse(res: uWS.HttpResponse, status: string, headers: Headers, body: string | Buffer): void {
  res.cork(() => {
    res.writeStatus(status);
    for (const [k, v] of Object.entries(headers)) res.writeHeader(k, v);
    res.end(body);
  });
}

function statusNumber(status: string): number {
  return Number(status.slice(0, 3));
}

function bearer(header: string): string | null {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return m ? m[1]! : null;
}

function rateHeaders(d: { limit: number; remaining: number; reset: number }): Headers {
  return { 'X-RateLimit-Limit': String(d.limit), 'X-RateLimit-Remaining': String(d.remaining), 'X-RateLimit-Reset': String(d.reset) };
}

/** Maps the library's error codes onto the HTTP contract. */
function fromLibraryError(err: unknown): HttpError {
  if (err instanceof HttpError) return err;
  if (err instanceof BgoneError) {
    if (err.code === 'internal_error') return new HttpError('internal_server_error');
    return new HttpError(err.code, err.message, err.details);
  }
  return new HttpError('internal_server_error');
}

export async function startServer(options: ServerOptions): Promise<RunningServer> {
  if (typeof (uWS as unknown as { getParts?: unknown }).getParts !== 'function') {
    throw new Error('uWebSockets.js did not load its native binary (it would fall back to a slow JavaScript server); refusing to start');
  }
  const { store, logger } = options;
  const now = options.now ?? Date.now;
  const rateLimiter = new RateLimiter(now);
  let admitted = 0; // requests past auth that hold a place (uploading, queued or processing)
  let draining = false;
  let listenSocket: uWS.us_listen_socket | false = false;
  const metrics = new Metrics(() => queueSize());
  let drainedResolve: (() => void) | undefined;

  const app = uWS.App();

  function answerError(res: uWS.HttpResponse, route: string, started: number, requestId: string, err: HttpError, extra: Headers = {}): void {
    const status = HTTP_STATUS[err.code];
    const body: Record<string, unknown> = { code: err.code, message: err.message, request_id: requestId };
    if (err.details !== undefined) body.details = err.details;
    writeResponse(res, status, { 'Content-Type': 'application/json', 'X-Request-ID': requestId, 'Cache-Control': 'no-store', ...extra, ...err.headers }, JSON.stringify(body));
    metrics.record(route, statusNumber(status), err.code, (performance.now() - started) / 1000);
  }

  function simpleError(code: HttpErrorCode, route: string) {
    return (res: uWS.HttpResponse) => {
      const started = performance.now();
      answerError(res, route, started, newRequestId(), new HttpError(code));
    };
  }

  function json(res: uWS.HttpResponse, route: string, status: string, body: unknown, extra: Headers = {}): void {
    const started = performance.now();
    writeResponse(res, status, { 'Content-Type': 'application/json', 'X-Request-ID': newRequestId(), 'Cache-Control': 'no-store', ...extra }, JSON.stringify(body));
    metrics.record(route, statusNumber(status), 'ok', (performance.now() - started) / 1000);
  }

  app.post(REMOVE_PATH, (res, req) => {
    const started = performance.now();
    const requestId = newRequestId();
    // uWS request data is only valid synchronously: read every header now.
    const authorization = req.getHeader('authorization');
    const contentType = req.getHeader('content-type');
    const contentLength = req.getHeader('content-length');
    const idempotencyKey = req.getHeader('idempotency-key');
    let aborted = false;
    let parser: MultipartParser | undefined;
    let reservationId: number | null = null;
    let holdsPlace = false;
    let processing = false;
    const finish = () => {
      if (holdsPlace) {
        holdsPlace = false;
        admitted--;
        if (draining && admitted === 0) drainedResolve?.();
      }
    };
    res.onAborted(() => {
      aborted = true;
      parser?.abort();
      if (reservationId !== null) {
        store.release(reservationId); // the client is gone: never charged
        reservationId = null;
      }
      metrics.record(REMOVE_PATH, 499, 'client_aborted', (performance.now() - started) / 1000);
      logger.info({ requestId, event: 'aborted' }, 'client aborted');
      // A job already in the native core keeps its place until it ends: a client that gives up
      // and retries must not pile work up past the queue limit.
      if (!processing) finish();
    });
    const fail = (err: HttpError, extra: Headers = {}) => {
      if (aborted) return;
      parser?.abort();
      if (reservationId !== null) {
        store.release(reservationId);
        reservationId = null;
      }
      answerError(res, REMOVE_PATH, started, requestId, err, extra);
      aborted = true; // nothing more may be written to this response
      logger.info({ requestId, status: statusNumber(HTTP_STATUS[err.code]), code: err.code, ms: Math.round(performance.now() - started) }, 'request failed');
      finish();
    };

    if (draining) return fail(new HttpError('overloaded', 'The server is shutting down.'), { 'Retry-After': String(options.overloadRetryAfter) });
    // 1. Authentication (a malformed key never reaches the database).
    const key = bearer(authorization);
    let auth: Authenticated | null = null;
    try {
      auth = key ? store.authenticate(key) : null;
    } catch (err) {
      logger.error({ requestId, err }, 'authentication failed');
      return fail(new HttpError('internal_server_error'));
    }
    if (!auth) return fail(new HttpError('authentication_error'));
    if (auth.disabled) return fail(new HttpError('permission_denied'));
    // 2. Rate limit of the plan.
    const rate = rateLimiter.take(String(auth.keyId), auth.rateLimitPerMinute);
    const rh = rateHeaders(rate);
    if (!rate.allowed) return fail(new HttpError('rate_limit_exceeded'), { ...rh, 'Retry-After': String(rate.retryAfter) });
    // 3. Load shedding before reading a byte of the body: fast and uncharged.
    if (admitted >= options.queueLimit) return fail(new HttpError('overloaded'), { ...rh, 'Retry-After': String(options.overloadRetryAfter) });
    if (contentLength && Number(contentLength) > MAX_BODY_BYTES) {
      return fail(new HttpError('image_too_large', 'The image is larger than 20 MB.', { field: 'image_file', limit_bytes: MAX_FILE_BYTES }), rh);
    }
    if (idempotencyKey.length > 255 || /[^\x21-\x7e]/.test(idempotencyKey)) {
      return fail(new HttpError('validation_error', 'Idempotency-Key must be 1 to 255 visible ASCII characters.', { field: 'Idempotency-Key' }), rh);
    }
    admitted++;
    holdsPlace = true;
    const account = auth;

    // 4. The upload, streamed through busboy; stops at the 20 MB limit.
    parser = new MultipartParser(contentType);
    let received = 0;
    res.onData((chunk, isLast) => {
      if (aborted) return;
      received += chunk.byteLength;
      if (received > MAX_BODY_BYTES) {
        return fail(new HttpError('image_too_large', 'The image is larger than 20 MB.', { field: 'image_file', limit_bytes: MAX_FILE_BYTES }), rh);
      }
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
      if (aborted) return;
      if (!form.image || form.image.length === 0) return fail(new HttpError('missing_image', 'The request has no image_file part, or it is empty.', { field: 'image_file' }), rh);
      // 5. Options: every value outside the spec is an error, never ignored.
      const libOptions: RemoveBackgroundOptions = {
        format: form.fields.format,
        channels: form.fields.channels,
        bgColor: form.fields.bg_color,
        size: form.fields.size,
        crop: form.fields.crop,
        padding: form.fields.padding,
        model: options.model,
      };
      try {
        normaliseOptions(libOptions);
      } catch (err) {
        return fail(fromLibraryError(err), rh);
      }
      // 6. Reserve one credit; charged only when the answer is a success.
      const imageHash = idempotencyKey ? createHash('sha256').update(form.image).digest('hex') : undefined;
      let reservation;
      try {
        reservation = store.reserve(account.accountId, { requestId, keyId: account.keyId, idempotencyKey: idempotencyKey || undefined, imageHash });
      } catch (err) {
        logger.error({ requestId, err }, 'reservation failed');
        return fail(new HttpError('internal_server_error'), rh);
      }
      if (!reservation.ok) {
        if (reservation.reason === 'payment_required') return fail(new HttpError('payment_required'), rh);
        if (reservation.reason === 'account_disabled') return fail(new HttpError('permission_denied'), rh);
        return fail(new HttpError('validation_error', 'This Idempotency-Key was already used with another image, or its first request is still in progress.', { field: 'Idempotency-Key' }), rh);
      }
      reservationId = reservation.reservationId;
      // 7. The image work.
      let result;
      processing = true;
      try {
        result = await removeBackground(form.image, libOptions);
      } catch (err) {
        processing = false;
        if (!(err instanceof BgoneError) || err.code === 'internal_error') logger.error({ requestId, code: (err as BgoneError).code, detail: (err as BgoneError).detail }, 'processing failed');
        if (aborted) return finish();
        return fail(fromLibraryError(err), rh);
      }
      processing = false;
      metrics.recordInference(result.timings.inference / 1000);
      if (aborted) return finish(); // onAborted released the reservation
      // 8. Charge, then answer.
      let charged = 0;
      try {
        if (reservationId !== null) {
          store.commit(reservationId);
          reservationId = null;
          charged = 1;
        }
      } catch (err) {
        logger.error({ requestId, err }, 'charge failed');
        return fail(new HttpError('internal_server_error'), rh);
      }
      const remaining = store.remaining(account.accountId);
      const ms = Math.round(performance.now() - started);
      writeResponse(
        res,
        '200 OK',
        {
          'Content-Type': MEDIA_TYPES[result.format],
          'X-Request-ID': requestId,
          'X-Processing-Time-Ms': String(ms),
          'X-Image-Width': String(result.width),
          'X-Image-Height': String(result.height),
          'X-Credits-Charged': String(charged),
          'X-Credits-Remaining': String(remaining),
          'Cache-Control': 'no-store',
          ...rh,
        },
        result.data,
      );
      aborted = true;
      metrics.record(REMOVE_PATH, 200, 'ok', ms / 1000);
      logger.info({ requestId, status: 200, ms, width: result.width, height: result.height, bytes: result.data.length, charged, timings: result.timings }, 'image processed');
      finish();
    })();
  });

  app.get('/healthz', (res) => json(res, '/healthz', '200 OK', { status: 'ok' }));
  app.get('/readyz', (res) => {
    if (draining) json(res, '/readyz', '503 Service Unavailable', { status: 'draining' });
    else json(res, '/readyz', '200 OK', { status: 'ready', queue: queueSize(), in_flight: admitted });
  });
  app.get('/metrics', (res) => {
    const body = metrics.render();
    res.cork(() => {
      res.writeStatus('200 OK');
      res.writeHeader('Content-Type', 'text/plain; version=0.0.4');
      res.writeHeader('X-Request-ID', newRequestId());
      res.end(body);
    });
  });
  app.get('/api/v1/openapi.json', (res) => json(res, '/api/v1/openapi.json', '200 OK', openApiDocument(), { 'Cache-Control': 'public, max-age=300' }));
  options.extraRoutes?.(app, metrics);
  app.any(REMOVE_PATH, simpleError('method_not_allowed', REMOVE_PATH));
  for (const path of ['/healthz', '/readyz', '/metrics', '/api/v1/openapi.json']) app.any(path, simpleError('method_not_allowed', path));
  app.any('/*', simpleError('not_found', 'other'));

  const port = await new Promise<number>((resolve, reject) => {
    app.listen(options.host, options.port, (socket) => {
      if (!socket) return reject(new Error(`cannot listen on ${options.host}:${options.port}`));
      listenSocket = socket;
      resolve(uWS.us_socket_local_port(socket));
    });
  });

  return {
    port,
    metrics,
    inFlight: () => admitted,
    close: async () => {
      draining = true;
      if (listenSocket) {
        uWS.us_listen_socket_close(listenSocket);
        listenSocket = false;
      }
      if (admitted > 0) {
        await new Promise<void>((resolve) => {
          drainedResolve = resolve;
          setTimeout(resolve, options.drainTimeout * 1000).unref();
        });
      }
      // uWS 20.30 has no App.close(): keep-alive sockets end with the process (SIGTERM exits after this).
      (app as unknown as { close?: () => void }).close?.();
    },
  };
}
