/**
 * The dashboard's answers as values: an HTML page, a redirect, or an asset, with their cookies.
 * Handlers return one; routes.ts writes it through the exchange (the HTTP layer's one writer).
 */
import type { Exchange } from '../http/exchange.js';

export interface Reply {
  status: number;
  headers?: Record<string, string>;
  cookies?: string[];
  body?: string | Buffer;
  /** The metrics label: 'ok' or an error code (default: from the status). */
  code?: string;
}

/**
 * Headers of every dashboard page: no caching of personal pages, no framing, a strict CSP. Its
 * form-action 'self' keeps forms (an injected one included) from posting anywhere else.
 */
export const PAGE_HEADERS: Readonly<Record<string, string>> = {
  'Content-Type': 'text/html; charset=utf-8',
  'Cache-Control': 'no-store',
  'Content-Security-Policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'same-origin',
};

export function htmlReply(status: number, body: string, cookies?: string[], extraHeaders: Record<string, string> = {}): Reply {
  return { status, headers: { ...PAGE_HEADERS, ...extraHeaders }, cookies, body };
}

export function redirect(location: string, cookies?: string[]): Reply {
  return { status: 303, headers: { Location: location, 'Cache-Control': 'no-store' }, cookies, body: '' };
}

/** Writes a reply (once; nothing after an abort). */
export function sendReply(ex: Exchange, reply: Reply, code?: string): void {
  const headers: Record<string, string | string[]> = { ...reply.headers };
  if (reply.cookies && reply.cookies.length > 0) headers['Set-Cookie'] = reply.cookies;
  ex.send(reply.status, headers, reply.body ?? '', code ?? reply.code);
}
