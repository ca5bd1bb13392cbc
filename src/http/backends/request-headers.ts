/**
 * Request headers as both backends expose them: looked up by lower-case name, '' when absent,
 * repeated headers joined in arrival order. Built from the raw name/value pairs of each backend
 * (uWS's req.forEach, node's rawHeaders) so that the joining rule is the same on both: node's own
 * req.headers would silently drop a second Authorization or Content-Type instead.
 */
import type { EarlyAnswer } from '../types.js';

/**
 * The most a request head (request line and headers) may hold on either backend: node:http's own
 * default (maxHeaderSize), which answers 431 past it; the uWS backend checks the same figure itself.
 */
export const MAX_HEAD_BYTES = 16 * 1024;

/** The message of the 431 answer to a head over MAX_HEAD_BYTES, the same on both backends. */
export const HEAD_TOO_LARGE = 'The request headers are larger than the server accepts.';

/** The message of the 400 answer to a request that is not valid HTTP/1.1, the same on both backends. */
export const INVALID_REQUEST = 'The request is not valid HTTP/1.1.';

/** The message of the 408 answer to a head that did not arrive in time. */
export const HEAD_TOO_SLOW = 'The request did not arrive in time.';

/** The early answer when no router gives one: the contract's body, without a request id. */
export const plainEarlyAnswer: EarlyAnswer = (_req, { status, message }) => ({
  status,
  headers: { 'Content-Type': 'application/json' },
  body: JSON.stringify({ code: 'validation_error', message }),
});

/**
 * What a refused head says of its request, from the bytes node's parser had been given (a head sent
 * in one piece: the request line and the headers read so far): the path, and a header lookup over
 * the lines there. Undefined without a request line.
 */
export function refusedHead(raw: Buffer | undefined): { path: string; header(name: string): string } | undefined {
  if (!raw) return undefined;
  const text = raw.subarray(0, MAX_HEAD_BYTES * 4).toString('latin1');
  const m = /^[A-Z]{1,16} (\/[\x21-\x7e]*) HTTP\/1\.[01]\r?\n/.exec(text);
  if (!m) return undefined;
  const q = m[1]!.indexOf('?');
  const path = q < 0 ? m[1]! : m[1]!.slice(0, q);
  const headers = new RequestHeaders();
  for (const line of text.slice(m[0].length).split(/\r?\n/)) {
    if (line === '') break;
    const colon = line.indexOf(':');
    if (colon > 0) headers.add(line.slice(0, colon), line.slice(colon + 1).trim());
  }
  return { path, header: (name) => headers.get(name) };
}

/**
 * Whether a request's body framing is ambiguous (RFC 9112 §6.3), given its Content-Length and
 * Transfer-Encoding headers as RequestHeaders joins them ('' when absent). Refused: more than one
 * Content-Length (even with equal values, as node:http refuses them) or one that is not a number;
 * both headers at once; any transfer coding but exactly `chunked` (case aside). A server and a proxy
 * in front of it that read such a request differently would see a different next request.
 */
export function ambiguousFraming(contentLength: string, transferEncoding: string): boolean {
  if (transferEncoding !== '') return contentLength !== '' || transferEncoding.trim().toLowerCase() !== 'chunked';
  return contentLength !== '' && !/^[0-9]+$/.test(contentLength.trim());
}

/**
 * The most body bytes either backend reads and drops after an answer written before the route read
 * any of the body (an early refusal: key, rate limit, credits, load, Content-Length), so that a
 * client still uploading reads that answer instead of a reset. It holds the largest body of
 * `POST /api/v1/remove` and its dialects (an image of 20 MB as a file and in base64, about 47 MiB)
 * and is bytes on the wire only: nothing is buffered. A body declared larger (or chunked, of unknown
 * size) gets the answer with `Connection: close`; the connection closes past this many bytes.
 */
export const DISCARD_MAX_BYTES = 64 * 1024 * 1024;

/** A body being read and dropped that brings nothing for this long is cut (the connection closed). */
export const DISCARD_IDLE_MS = 5_000;

/**
 * The body length a head declares ('' for a header that is absent): its Content-Length, 0 with
 * neither header, undefined with Transfer-Encoding: chunked (not known in advance). Called on heads
 * that passed ambiguousFraming.
 */
export function declaredBodyLength(contentLength: string, transferEncoding: string): number | undefined {
  if (transferEncoding !== '') return undefined;
  return contentLength === '' ? 0 : Number(contentLength.trim());
}

/** Whether a body of `declared` bytes (declaredBodyLength) is read to its end after an early answer. */
export function discardsWhole(declared: number | undefined): boolean {
  return declared !== undefined && declared <= DISCARD_MAX_BYTES;
}

/** Whether a Connection header's value holds the `close` option (RFC 9112 §9.6). */
export function asksToClose(connection: string): boolean {
  return connection.split(',').some((token) => token.trim().toLowerCase() === 'close');
}

export class RequestHeaders {
  private readonly values = new Map<string, string>();
  /** Bytes of the header lines as they were on the wire ("name: value\r\n"), about. */
  bytes = 0;

  add(name: string, value: string): void {
    this.bytes += name.length + value.length + 4;
    const key = name.toLowerCase();
    const previous = this.values.get(key);
    // Cookie pairs are separated by '; ' (RFC 6265 §5.4), every other list by ', ' (RFC 9110 §5.3).
    this.values.set(key, previous === undefined ? value : `${previous}${key === 'cookie' ? '; ' : ', '}${value}`);
  }

  get(name: string): string {
    return this.values.get(name.toLowerCase()) ?? '';
  }
}
