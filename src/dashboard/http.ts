/**
 * uWebSockets.js plumbing for the dashboard: what a handler may read from a request (captured
 * synchronously, as uWS requires), the body collected with a size limit (each chunk copied: uWS
 * reuses its memory), and replies written once, inside res.cork, never after an abort.
 */
import type uWS from 'uWebSockets.js';
import type { Metrics } from '../server/metrics.js';
import { newRequestId } from '../server/request-id.js';
import { parseCookies } from './cookies.js';
import { FormError } from './forms.js';

export interface RequestInfo {
  /** Upper case: GET, POST... */
  method: string;
  path: string;
  query: URLSearchParams;
  cookies: Map<string, string>;
  contentType: string;
  contentLength: string;
  csrfHeader: string;
  /** The Host header (for absolute URLs shown to the user). */
  host: string;
  /** The client address (X-Forwarded-For's last hop only behind a trusted proxy). */
  ip: string;
  /** Over TLS: only known behind a trusted proxy (X-Forwarded-Proto: https); uWS itself serves plain HTTP here. */
  secure: boolean;
  requestId: string;
}

/** Reads everything needed from `req`; must run synchronously at the start of the handler. */
export function readRequest(res: uWS.HttpResponse, req: uWS.HttpRequest, trustProxy: boolean): RequestInfo {
  const forwardedProto = req.getHeader('x-forwarded-proto');
  const forwardedFor = req.getHeader('x-forwarded-for');
  let ip = Buffer.from(res.getRemoteAddressAsText()).toString('utf8');
  if (trustProxy && forwardedFor) {
    const hops = forwardedFor.split(',').map((h) => h.trim()).filter(Boolean);
    if (hops.length > 0) ip = hops[hops.length - 1]!;
  }
  return {
    method: req.getMethod().toUpperCase(),
    path: req.getUrl(),
    query: new URLSearchParams(req.getQuery() ?? ''),
    cookies: parseCookies(req.getHeader('cookie')),
    contentType: req.getHeader('content-type'),
    contentLength: req.getHeader('content-length'),
    csrfHeader: req.getHeader('x-csrf-token'),
    host: req.getHeader('host'),
    ip,
    secure: trustProxy && forwardedProto.split(',')[0]!.trim().toLowerCase() === 'https',
    requestId: newRequestId(),
  };
}

export interface Reply {
  status: number;
  headers?: Record<string, string>;
  cookies?: string[];
  body?: string | Buffer;
  /** The metrics label: 'ok' or an error code (default: from the status). */
  code?: string;
}

const STATUS_TEXT: Record<number, string> = {
  200: 'OK',
  303: 'See Other',
  400: 'Bad Request',
  401: 'Unauthorized',
  402: 'Payment Required',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  413: 'Payload Too Large',
  415: 'Unsupported Media Type',
  422: 'Unprocessable Entity',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
};

/** Headers of every dashboard page: no caching of personal pages, no framing, a strict CSP. */
export const PAGE_HEADERS: Readonly<Record<string, string>> = {
  'Content-Type': 'text/html; charset=utf-8',
  'Cache-Control': 'no-store',
  'Content-Security-Policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'",
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'same-origin',
};

/** One request/response pair: tracks aborts, collects the body, answers once. */
export class Exchange {
  aborted = false;
  answered = false;
  private readonly started = performance.now();
  private readonly abortListeners: Array<() => void> = [];

  constructor(
    readonly res: uWS.HttpResponse,
    readonly info: RequestInfo,
    readonly route: string,
    private readonly metrics: Metrics | undefined,
  ) {
    res.onAborted(() => {
      this.aborted = true;
      for (const listener of this.abortListeners.splice(0)) listener();
      if (!this.answered) this.metrics?.record(this.route, 499, 'client_aborted', this.seconds());
    });
  }

  /** Whether a reply can still be written. */
  get open(): boolean {
    return !this.aborted && !this.answered;
  }

  onAbort(listener: () => void): void {
    if (this.aborted) listener();
    else this.abortListeners.push(listener);
  }

  seconds(): number {
    return (performance.now() - this.started) / 1000;
  }

  /** Collects the whole body; rejects with FormError 413 past `limit` bytes. */
  readBody(limit: number): Promise<Buffer> {
    if (Number(this.info.contentLength) > limit) return Promise.reject(new FormError('The form is too large.', 413));
    return new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      let size = 0;
      let failed = false;
      this.onAbort(() => reject(new Error('client aborted')));
      this.res.onData((chunk, isLast) => {
        if (failed) return;
        size += chunk.byteLength;
        if (size > limit) {
          failed = true;
          reject(new FormError('The form is too large.', 413));
          return;
        }
        chunks.push(Buffer.from(new Uint8Array(chunk))); // copy: uWS reuses the chunk's memory
        if (isLast) resolve(Buffer.concat(chunks, size));
      });
    });
  }

  /** Writes the reply (once; nothing after an abort). `code` labels the metrics ('ok' or an error code). */
  send(reply: Reply, code = reply.code ?? (reply.status < 400 ? 'ok' : `http_${reply.status}`)): void {
    if (!this.open) return;
    this.answered = true;
    const status = `${reply.status} ${STATUS_TEXT[reply.status] ?? 'Unknown'}`;
    this.res.cork(() => {
      this.res.writeStatus(status);
      this.res.writeHeader('X-Request-ID', this.info.requestId);
      for (const [name, value] of Object.entries(reply.headers ?? {})) this.res.writeHeader(name, value);
      for (const cookie of reply.cookies ?? []) this.res.writeHeader('Set-Cookie', cookie);
      this.res.end(reply.body ?? '');
    });
    this.metrics?.record(this.route, reply.status, code, this.seconds());
  }
}

export function htmlReply(status: number, body: string, cookies?: string[], extraHeaders: Record<string, string> = {}): Reply {
  return { status, headers: { ...PAGE_HEADERS, ...extraHeaders }, cookies, body };
}

export function redirect(location: string, cookies?: string[]): Reply {
  return { status: 303, headers: { Location: location, 'Cache-Control': 'no-store' }, cookies, body: '' };
}
