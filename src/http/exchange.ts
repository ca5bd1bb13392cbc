/**
 * One request and its answer, as every route (API and dashboard) sees it: the one response writer
 * (X-Request-ID on every answer, the CORS headers where the router gives them, metrics recorded
 * once), the one JSON error body, and the one body reader with its size limit, whole (readBody) or
 * as a multipart form (readForm). Built by the router around a backend's HttpRequest/HttpResponse.
 *
 * Routes (src/api, src/batches, src/dashboard) need nothing else of src/http but the router and
 * the types: the form's types and the request id's form are exported from here, because they are
 * this module's vocabulary (what readForm resolves with, what X-Request-ID carries). The error
 * contract the answers are written in is the service's (src/service/errors.ts), the one import of
 * src/http from outside it: the exchange writes that contract's body, the router its 404/405/500.
 */
import { withCorsHeaders } from './cors.js';
import { type HttpError, httpError } from './errors.js';
import { type FormShape, MultipartParser, type ParsedForm } from './multipart.js';
import { newRequestId } from './request-id.js';
import { TextFormParser, textFormKind } from './text-form.js';
import type { HttpRequest, HttpResponse, OutgoingHeaders } from './types.js';

export type { FormShape, ParsedForm, UploadedImage } from './multipart.js';
/** The form of X-Request-ID; a route gives one to work that outlives its request too (each batch image). */
export { newRequestId } from './request-id.js';

/** The challenge of every 401: API keys are Bearer tokens (`Authorization: Bearer rb-sk_...`). */
const BEARER_CHALLENGE: OutgoingHeaders = { 'WWW-Authenticate': 'Bearer realm="bgone"' };

/**
 * A route's own error answer: the status and the JSON body it writes for an HttpError (a dialect
 * of the API with another error shape). Headers of the error and of the call are still added.
 */
export type ErrorRenderer = (err: HttpError, requestId: string) => { status: number; body: unknown };

/** What the exchange reports when it is answered or abandoned (metrics). */
export type AnswerRecorder = (route: string, status: number, code: string, seconds: number) => void;

/** Thrown by readBody past its limit (the caller decides which answer that is). */
export class BodyTooLargeError extends Error {
  constructor(readonly limit: number) {
    super(`The request body is larger than ${limit} bytes.`);
    this.name = 'BodyTooLargeError';
  }
}

/** Thrown by readBody when the client went away before the body was complete. */
export class ClientGoneError extends Error {
  constructor() {
    super('The client went away.');
    this.name = 'ClientGoneError';
  }
}

/** The answer when an admitted request's body misses its deadline: 408, and the connection closed (the rest of the body is never read). */
export function bodyTimeoutError(ms: number): HttpError {
  const seconds = Math.round(ms / 100) / 10;
  return httpError(
    'request_timeout',
    `The request body did not arrive within ${seconds} s. Nothing was charged.`,
    { limit_seconds: seconds },
    { Connection: 'close' },
  );
}

/**
 * The answer when an upload brings less than the minimum in one window: 408 like the deadline,
 * because a client this slow would miss it anyway, but said at once instead of after a minute.
 */
export function bodyTooSlowError(rate: BodyMinRate): HttpError {
  const seconds = Math.round(rate.windowMs / 100) / 10;
  return httpError(
    'request_timeout',
    `The request body brought less than ${rate.bytesPerWindow} bytes in ${seconds} s, the least an upload must bring in each such window. Nothing was charged.`,
    { min_bytes: rate.bytesPerWindow, window_seconds: seconds },
    { Connection: 'close' },
  );
}

/** The least an upload must bring in each window of its body (or the rest of its body). */
export interface BodyMinRate {
  bytesPerWindow: number;
  windowMs: number;
}

/** What readForm accepts besides the body deadline and the minimum rate. */
export interface FormLimits<F extends string = string> {
  /** The form's text fields, file parts and their sizes, as the route declares them. */
  form: FormShape<F>;
  /** The most bytes of the whole body, multipart framing included; past it the read stops with `tooLarge()`. */
  maxBodyBytes: number;
  tooLarge: () => Error;
  /**
   * Asked with the bytes received so far as each chunk arrives; an error it returns stops the read
   * with that error (the batch memory budget, which the bytes must keep fitting).
   */
  check?: ((bytesSoFar: number) => Error | undefined) | undefined;
  /** Also take the form as application/json or application/x-www-form-urlencoded (text-form.ts; no file parts then). */
  textBodies?: boolean | undefined;
}

type BodyHandler = (chunk: Uint8Array, isLast: boolean) => void;

export class Exchange {
  readonly requestId = newRequestId();
  /** performance.now() when the request arrived. */
  readonly started = performance.now();
  private answered = false;
  private bodyTaken = false;
  /** The body deadline (ms after the request arrived; 0: none), set at admission. */
  private bodyDeadlineMs = 0;
  private bodyTimer: NodeJS.Timeout | undefined;
  /** The minimum rate (set at admission), and the timer that checks it window by window. */
  private bodyMinRate: BodyMinRate | undefined;
  private rateTimer: NodeJS.Timeout | undefined;
  private readonly bodyCompleteListeners: Array<() => void> = [];
  /** The route's error renderer (renderErrors); none: the contract's body. */
  private renderer: ErrorRenderer | undefined;

  constructor(
    readonly req: HttpRequest,
    readonly res: HttpResponse,
    /** The route's label in metrics and logs (the registered path, never the raw URL). */
    readonly route: string,
    private readonly record: AnswerRecorder,
    /** Values of the route's `:name` segments (decoded). */
    readonly params: Readonly<Record<string, string>> = {},
    /** The CORS headers of every answer (the router's, for a path under a CORS policy: cors.ts). */
    private readonly cors?: OutgoingHeaders | undefined,
  ) {
    res.onAborted(() => {
      this.clearBodyTimer();
      if (!this.answered) this.record(this.route, 499, 'client_aborted', this.seconds());
    });
  }

  /**
   * Gives the body a deadline, `ms` after the request arrived (admission sets it): a client that
   * trickles its upload must not hold an admission place for as long as it likes. Applies to the
   * body read through onBody() or readBody() from then on.
   */
  limitBodyTime(ms: number, minRate?: BodyMinRate): void {
    this.bodyDeadlineMs = ms;
    this.bodyMinRate = minRate && minRate.bytesPerWindow > 0 && minRate.windowMs > 0 ? minRate : undefined;
  }

  /** Runs `listener` once the last chunk of the body has arrived (admission moves the request from uploads to jobs). */
  onBodyComplete(listener: () => void): void {
    this.bodyCompleteListeners.push(listener);
  }

  /**
   * Subscribes to the body (once, as HttpRequest.onData) under the body deadline: when the last
   * chunk has not arrived by then, `timedOut` runs once with the 408 request_timeout error (whose
   * headers close the connection), and no chunk follows. The same happens, earlier, when a window
   * of the minimum rate ends with fewer bytes than it asks (a stalled or trickling upload must not
   * hold its place, or the batch memory it declared, for the whole deadline). Nothing runs after
   * the answer or an abort.
   */
  onBody(handler: BodyHandler, timedOut: (err: HttpError) => void): void {
    let expired = false;
    const expire = (err: HttpError) => {
      this.clearBodyTimer();
      if (!this.open) return;
      expired = true;
      timedOut(err);
    };
    if (this.bodyDeadlineMs > 0 && this.open) {
      const deadline = this.bodyDeadlineMs;
      this.bodyTimer = setTimeout(() => expire(bodyTimeoutError(deadline)), Math.max(0, deadline - (performance.now() - this.started)));
    }
    let inWindow = 0;
    const rate = this.bodyMinRate;
    if (rate && this.open) {
      // Windows count from the subscription: the time before it (authentication, admission) is ours.
      this.rateTimer = setInterval(() => {
        if (inWindow < rate.bytesPerWindow) expire(bodyTooSlowError(rate));
        inWindow = 0;
      }, rate.windowMs);
    }
    this.req.onData((chunk, isLast) => {
      if (expired) return;
      inWindow += chunk.byteLength;
      if (isLast) {
        this.clearBodyTimer();
        for (const listener of this.bodyCompleteListeners.splice(0)) listener();
      }
      handler(chunk, isLast);
    });
  }

  private clearBodyTimer(): void {
    if (this.bodyTimer) clearTimeout(this.bodyTimer);
    this.bodyTimer = undefined;
    if (this.rateTimer) clearInterval(this.rateTimer);
    this.rateTimer = undefined;
  }

  /** Whether an answer can still be written. */
  get open(): boolean {
    return !this.answered && !this.res.aborted;
  }

  get aborted(): boolean {
    return this.res.aborted;
  }

  onAbort(listener: () => void): void {
    this.res.onAborted(listener);
  }

  seconds(): number {
    return (performance.now() - this.started) / 1000;
  }

  /**
   * Writes the answer (once; nothing after an abort). `code` labels the metrics: 'ok' or an error
   * code (default: from the status).
   */
  send(status: number, headers: OutgoingHeaders, body: string | Uint8Array, code = status < 400 ? 'ok' : `http_${status}`): void {
    if (!this.open) return;
    this.answered = true;
    this.clearBodyTimer();
    const all = { 'X-Request-ID': this.requestId, ...headers };
    this.res.send(status, this.cors ? withCorsHeaders(all, this.cors) : all, body);
    this.record(this.route, status, code, this.seconds());
  }

  json(status: number, body: unknown, headers: OutgoingHeaders = {}): void {
    this.send(status, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store', ...headers }, JSON.stringify(body));
  }

  /**
   * Writes every later error() of this exchange with `renderer`: set by a route before admission,
   * so the refusals of the shared path (authentication, rate limit, credits, body, validation) come
   * out in that route's shape too.
   */
  renderErrors(renderer: ErrorRenderer): void {
    this.renderer = renderer;
  }

  /**
   * The error answer: the error's status, the JSON body { code, message, details?, request_id }, or
   * what the route's renderer makes of the error. A 401 names the scheme the API takes (RFC 9110 §11.6.1).
   */
  error(err: HttpError, headers: OutgoingHeaders = {}): void {
    const { status, body } = this.renderer ? this.renderer(err, this.requestId) : { status: err.status, body: this.contractBody(err) };
    this.send(
      status,
      { 'Content-Type': 'application/json', 'Cache-Control': 'no-store', ...(status === 401 ? BEARER_CHALLENGE : {}), ...headers, ...err.headers },
      JSON.stringify(body),
      err.code,
    );
  }

  private contractBody(err: HttpError): Record<string, unknown> {
    const body: Record<string, unknown> = { code: err.code, message: err.message, request_id: this.requestId };
    if (err.details !== undefined) body.details = err.details;
    return body;
  }

  /**
   * Collects the whole body, refusing past `limit` bytes (from Content-Length before a byte is read,
   * or while reading). Rejects with BodyTooLargeError, ClientGoneError, or past the body deadline
   * with the 408 request_timeout HttpError (to be answered as it is).
   */
  readBody(limit: number): Promise<Buffer> {
    if (this.bodyTaken) return Promise.reject(new Error('the body was already read'));
    this.bodyTaken = true;
    const declared = Number(this.req.header('content-length'));
    if (declared > limit) return Promise.reject(new BodyTooLargeError(limit));
    return new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      let size = 0;
      let settled = false;
      this.onAbort(() => {
        if (settled) return;
        settled = true;
        reject(new ClientGoneError());
      });
      this.onBody(
        (chunk, isLast) => {
          if (settled) return;
          size += chunk.byteLength;
          if (size > limit) {
            settled = true;
            reject(new BodyTooLargeError(limit));
            return;
          }
          if (chunk.byteLength > 0) chunks.push(Buffer.from(chunk)); // copy: the backend may reuse the chunk's memory
          if (isLast) {
            settled = true;
            resolve(Buffer.concat(chunks, size));
          }
        },
        (err) => {
          if (settled) return;
          settled = true;
          reject(err);
        },
      );
    });
  }

  /**
   * Streams the body through the multipart parser (multipart.ts, which holds the image in memory
   * only) under the body deadline and the minimum rate. Resolves with the form; rejects with the
   * parser's HttpError (malformed form, image too large...), `tooLarge()`, `check`'s error, the 408
   * of a body too late or too slow, or ClientGoneError, whichever comes first: parsing stops there.
   */
  readForm<F extends string>(limits: FormLimits<F>): Promise<ParsedForm<F>> {
    if (this.bodyTaken) return Promise.reject(new Error('the body was already read'));
    this.bodyTaken = true;
    const declared = Number(this.req.header('content-length')) || 0;
    if (declared > limits.maxBodyBytes) return Promise.reject(limits.tooLarge());
    const contentType = this.req.header('content-type');
    const textKind = limits.textBodies ? textFormKind(contentType) : undefined;
    // A text form is read chunk by chunk as it arrives and keeps none of them (its base64 decoded
    // as it comes); the multipart parser keeps its file parts' chunks, so they are copied.
    const parser = textKind ? new TextFormParser(textKind, limits.form, declared) : new MultipartParser(contentType, limits.form);
    return new Promise((resolve, reject) => {
      let received = 0;
      let settled = false;
      const stop = (err: unknown) => {
        if (settled) return;
        settled = true;
        parser.abort();
        reject(err);
      };
      this.onAbort(() => stop(new ClientGoneError()));
      this.onBody((chunk, isLast) => {
        if (settled) return;
        received += chunk.byteLength;
        if (received > limits.maxBodyBytes) return stop(limits.tooLarge());
        const refused = limits.check?.(received);
        if (refused) return stop(refused);
        if (chunk.byteLength > 0) {
          if (parser instanceof TextFormParser) parser.write(chunk);
          else parser.write(Buffer.from(chunk)); // copy: the backend may reuse the chunk's memory
        }
        if (isLast) parser.end();
      }, stop);
      parser.done.then((form) => {
        if (settled) return;
        settled = true;
        resolve(form);
      }, stop);
    });
  }
}
