/**
 * One request and its answer, as every route (API and dashboard) sees it: the one response writer
 * (X-Request-ID on every answer, metrics recorded once), the one JSON error body, and the one body
 * reader with its size limit. Built by the router around a backend's HttpRequest/HttpResponse.
 */
import { HTTP_STATUS, type HttpError } from './errors.js';
import { newRequestId } from './request-id.js';
import type { HttpRequest, HttpResponse, OutgoingHeaders } from './types.js';

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

export class Exchange {
  readonly requestId = newRequestId();
  /** performance.now() when the request arrived. */
  readonly started = performance.now();
  private answered = false;
  private bodyTaken = false;

  constructor(
    readonly req: HttpRequest,
    readonly res: HttpResponse,
    /** The route's label in metrics and logs (the registered path, never the raw URL). */
    readonly route: string,
    private readonly record: AnswerRecorder,
    /** Values of the route's `:name` segments (decoded). */
    readonly params: Readonly<Record<string, string>> = {},
  ) {
    res.onAborted(() => {
      if (!this.answered) this.record(this.route, 499, 'client_aborted', this.seconds());
    });
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
    this.res.send(status, { 'X-Request-ID': this.requestId, ...headers }, body);
    this.record(this.route, status, code, this.seconds());
  }

  json(status: number, body: unknown, headers: OutgoingHeaders = {}): void {
    this.send(status, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store', ...headers }, JSON.stringify(body));
  }

  /** The contract's error answer: its status from the one table, the JSON body { code, message, details?, request_id }. */
  error(err: HttpError, headers: OutgoingHeaders = {}): void {
    const body: Record<string, unknown> = { code: err.code, message: err.message, request_id: this.requestId };
    if (err.details !== undefined) body.details = err.details;
    this.send(
      HTTP_STATUS[err.code],
      { 'Content-Type': 'application/json', 'Cache-Control': 'no-store', ...headers, ...err.headers },
      JSON.stringify(body),
      err.code,
    );
  }

  /**
   * Collects the whole body, refusing past `limit` bytes (from Content-Length before a byte is read,
   * or while reading). Rejects with BodyTooLargeError or ClientGoneError.
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
      this.req.onData((chunk, isLast) => {
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
      });
    });
  }
}
