/**
 * Request headers as both backends expose them: looked up by lower-case name, '' when absent,
 * repeated headers joined in arrival order. Built from the raw name/value pairs of each backend
 * (uWS's req.forEach, node's rawHeaders) so that the joining rule is the same on both: node's own
 * req.headers would silently drop a second Authorization or Content-Type instead.
 */
/**
 * The most a request head (request line and headers) may hold on either backend: node:http's own
 * default (maxHeaderSize), which answers 431 past it; the uWS backend checks the same figure itself.
 */
export const MAX_HEAD_BYTES = 16 * 1024;

/** The JSON body of the 431 answer to a head over MAX_HEAD_BYTES, the same on both backends. */
export const HEAD_TOO_LARGE_BODY = JSON.stringify({ code: 'validation_error', message: 'The request headers are larger than the server accepts.' });

/** The JSON body of the 400 answer to a request that is not valid HTTP/1.1, the same on both backends. */
export const INVALID_REQUEST_BODY = JSON.stringify({ code: 'validation_error', message: 'The request is not valid HTTP/1.1.' });

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
