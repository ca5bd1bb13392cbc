/**
 * What both backends do with a route's send(status, headers, body) before writing a byte: the
 * checks (a bad status or header throws, and the answer counts as not sent), the status line's
 * reason phrase, the framing headers the backend owns, and whether a body goes on the wire at all.
 */
import { STATUS_CODES, validateHeaderName, validateHeaderValue } from 'node:http';
import type { OutgoingHeaders } from '../types.js';

export interface PreparedAnswer {
  status: number;
  /** Node's own table, so that both backends write the same status line. */
  reason: string;
  /** Name/value pairs in order, an array header once per value; without the framing headers below. */
  headers: string[];
  body: Uint8Array;
  /** False for HEAD requests and for 1xx/204/304, which carry no body (RFC 9110 §6.4.1). */
  bodyOnWire: boolean;
  /** Whether Content-Length is written: every answer but 1xx/204/304 (HEAD gets the GET's length). */
  contentLength: boolean;
  /** Close the connection after this answer (the route asked for it, or the server is draining). */
  close: boolean;
}

/**
 * Content-Length and Transfer-Encoding describe the bytes the backend writes, so only the backend
 * writes them; Connection is turned into `close` so that each backend can end the connection its
 * own way (node: the header; uWS: end(body, true)).
 */
const FRAMING = new Set(['content-length', 'transfer-encoding', 'connection']);

const EMPTY = new Uint8Array(0);

export function prepareAnswer(status: number, headers: OutgoingHeaders, body: string | Uint8Array, isHead: boolean, draining: boolean): PreparedAnswer {
  if (!Number.isInteger(status) || status < 100 || status > 599) throw new RangeError(`invalid HTTP status ${status}`);
  const pairs: string[] = [];
  let close = draining;
  for (const [name, value] of Object.entries(headers)) {
    validateHeaderName(name);
    const values = typeof value === 'string' ? [value] : value;
    for (const v of values) validateHeaderValue(name, v);
    const lower = name.toLowerCase();
    if (lower === 'connection') {
      if (
        values.some((v) =>
          v
            .toLowerCase()
            .split(',')
            .some((token) => token.trim() === 'close'),
        )
      )
        close = true;
      continue;
    }
    if (FRAMING.has(lower)) continue;
    for (const v of values) pairs.push(name, v);
  }
  const noBodyStatus = status < 200 || status === 204 || status === 304;
  return {
    status,
    reason: STATUS_CODES[status] ?? 'Unknown',
    headers: pairs,
    body: noBodyStatus ? EMPTY : typeof body === 'string' ? Buffer.from(body, 'utf8') : body,
    bodyOnWire: !noBodyStatus && !isHead,
    contentLength: !noBodyStatus,
    close,
  };
}
