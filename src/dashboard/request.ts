/**
 * What a dashboard handler reads from a request beyond the exchange itself: cookies, the query, the
 * client's address and whether the page was reached over TLS. X-Forwarded-For and
 * X-Forwarded-Proto are believed only behind a trusted proxy (BGONE_TRUST_PROXY=true); the service
 * itself speaks plain HTTP.
 */
import type { Exchange } from '../http/exchange.js';
import { parseCookies } from './cookies.js';

export interface PageRequest {
  readonly ex: Exchange;
  readonly query: URLSearchParams;
  readonly cookies: Map<string, string>;
  /** The Host header (for absolute URLs shown to the user). */
  readonly host: string;
  /** The client address (X-Forwarded-For's last hop only behind a trusted proxy). */
  readonly ip: string;
  /** Over TLS: only known behind a trusted proxy (X-Forwarded-Proto: https). */
  readonly secure: boolean;
}

export function pageRequest(ex: Exchange, trustProxy: boolean): PageRequest {
  const { req } = ex;
  let ip = req.remoteAddress;
  const forwardedFor = req.header('x-forwarded-for');
  if (trustProxy && forwardedFor) {
    const hops = forwardedFor
      .split(',')
      .map((h) => h.trim())
      .filter(Boolean);
    if (hops.length > 0) ip = hops[hops.length - 1]!;
  }
  return {
    ex,
    query: new URLSearchParams(req.query),
    cookies: parseCookies(req.header('cookie')),
    host: req.header('host'),
    ip,
    secure: trustProxy && req.header('x-forwarded-proto').split(',')[0]!.trim().toLowerCase() === 'https',
  };
}
