/**
 * The HTTP service on uWebSockets.js: POST /api/v1/remove plus health, readiness, metrics and the
 * OpenAPI document. The route only parses, authenticates and meters; the image work is the library's
 * removeBackground. Order of checks: auth, rate limit, load shedding (all before reading the body),
 * then the streamed upload, option validation, credit reservation, processing, and the charge only
 * once the answer is a success.
 */
import uWS from 'uWebSockets.js';
import { queueSize } from '../index.js';
import type { Logger } from '../logger.js';
import { HTTP_STATUS, HttpError, type HttpErrorCode } from './http-errors.js';
import { MAX_BODY_BYTES, MeteredRemoval, tooLarge, type Headers } from './metered-removal.js';
import { Metrics } from './metrics.js';
import { openApiDocument } from './openapi.js';
import { RateLimiter, rateLimitHeaders } from './rate-limit.js';
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

const REMOVE_PATH = '/api/v1/remove';

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
    let removal: MeteredRemoval | undefined;
    let answered = false;
    res.onAborted(() => {
      answered = true;
      metrics.record(REMOVE_PATH, 499, 'client_aborted', (performance.now() - started) / 1000);
      logger.info({ requestId, event: 'aborted' }, 'client aborted');
      removal?.abort();
    });
    // Refusals before admission: nothing is reserved and no place is held yet.
    const refuse = (err: HttpError, extra: Headers = {}) => {
      answered = true;
      answerError(res, REMOVE_PATH, started, requestId, err, extra);
    };

    if (draining) return refuse(new HttpError('overloaded', 'The server is shutting down.'), { 'Retry-After': String(options.overloadRetryAfter) });
    // 1. Authentication (a malformed key never reaches the database).
    const key = bearer(authorization);
    let auth: Authenticated | null = null;
    try {
      auth = key ? store.authenticate(key) : null;
    } catch (err) {
      logger.error({ requestId, err }, 'authentication failed');
      return refuse(new HttpError('internal_server_error'));
    }
    if (!auth) return refuse(new HttpError('authentication_error'));
    // 2. Rate limit of the plan (its headers go on every authenticated answer, 403 included).
    const rate = rateLimiter.take(String(auth.keyId), auth.rateLimitPerMinute);
    const rh = rateLimitHeaders(rate);
    if (!rate.allowed) return refuse(new HttpError('rate_limit_exceeded'), { ...rh, 'Retry-After': String(rate.retryAfter) });
    if (auth.disabled) return refuse(new HttpError('permission_denied'), rh);
    // 3. Load shedding before reading a byte of the body: fast and uncharged.
    if (admitted >= options.queueLimit) return refuse(new HttpError('overloaded'), { ...rh, 'Retry-After': String(options.overloadRetryAfter) });
    if (contentLength && Number(contentLength) > MAX_BODY_BYTES) return refuse(tooLarge(), rh);
    if (idempotencyKey.length > 255 || /[^\x21-\x7e]/.test(idempotencyKey)) {
      return refuse(new HttpError('validation_error', 'Idempotency-Key must be 1 to 255 visible ASCII characters.', { field: 'Idempotency-Key' }), rh);
    }
    // 4. Admitted: the upload, options, credit, image work and charge (metered-removal.ts).
    admitted++;
    removal = new MeteredRemoval(
      { requestId, contentType, idempotencyKey: idempotencyKey || undefined, accountId: auth.accountId, keyId: auth.keyId, rateHeaders: rh, started },
      {
        onData: (handler) => res.onData(handler),
        answerError: (err, headers) => {
          if (answered) return;
          answered = true;
          answerError(res, REMOVE_PATH, started, requestId, err, headers);
        },
        answerImage: (headers, body) => {
          if (answered) return;
          answered = true;
          writeResponse(res, '200 OK', { 'X-Request-ID': requestId, ...headers }, body);
          metrics.record(REMOVE_PATH, 200, 'ok', (performance.now() - started) / 1000);
        },
        release: () => {
          admitted--;
          if (draining && admitted === 0) drainedResolve?.();
        },
      },
      { store, model: options.model, logger, metrics },
    );
    removal.start();
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
