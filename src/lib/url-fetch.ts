/**
 * Downloads an image a client names by URL (`image_url`, `bg_image_url`) with the SSRF defence of
 * address-guard.ts. Each hop's URL text is checked (http or https, no credentials, no control
 * characters, at most MAX_URL_LENGTH characters), its host resolved once and every answer checked
 * (against the operator's allow list, when there is one), and the GET goes to exactly the address
 * checked (pinnedRequest; over https the certificate is checked against the host name, sent as
 * SNI). At most `maxRedirects` redirects are followed, each Location checked as the first URL was,
 * by its own host: a listed host that redirects to another one does not lend it its place on the
 * list. One deadline covers the whole download: resolution,
 * connection, redirects and body. The body is read up to `maxBytes` (a larger Content-Length is
 * refused before it), never decompressed (`Accept-Encoding: identity`; any other encoding is
 * refused), and its first bytes must be JPEG, PNG or WebP whatever its Content-Type says. Nothing
 * of the client's own request is sent: no cookies, no forwarded headers, `User-Agent: bgone`.
 *
 * Which failure is which: the client's URL text is `invalid_url`, and so is a redirect's Location
 * with such a problem. Everything about where a URL leads is `download_failed`, and that includes a
 * forbidden address: a host that is `localhost` or a forbidden IP literal is reported as
 * `blocked_address` like a name that resolves to one, so that the answer does not depend on how
 * the address was spelt. Any status but 200 (and a redirect's, followed) is `download_failed`,
 * 206 Partial Content among them.
 */
import type http from 'node:http';
import { AddressError, type CheckedAddress, type FetchAllowList, pinnedRequest, resolveCheckedAddress, urlHost, urlProblem } from './address-guard.js';
import { BgoneError } from './errors.js';
import { sniffFormat } from './header-size.js';
import { MAX_FILE_BYTES } from './options.js';

export type InvalidUrlReason = 'malformed' | 'scheme' | 'credentials' | 'too_long';
export type DownloadFailedReason =
  | 'blocked_address'
  | 'dns'
  | 'connection'
  | 'status'
  | 'timeout'
  | 'too_large'
  | 'too_many_redirects'
  | 'encoding'
  | 'empty'
  | 'not_image'
  | 'aborted';

/** A download refused or failed; `message` is fit for an API client and never holds the response body. */
export class UrlFetchError extends Error {
  readonly kind: 'invalid_url' | 'download_failed';
  readonly reason: InvalidUrlReason | DownloadFailedReason;
  /** The HTTP status answered, for reason 'status'. */
  readonly status?: number;

  constructor(kind: 'invalid_url', reason: InvalidUrlReason, message: string);
  constructor(kind: 'download_failed', reason: DownloadFailedReason, message: string, status?: number);
  constructor(kind: 'invalid_url' | 'download_failed', reason: InvalidUrlReason | DownloadFailedReason, message: string, status?: number) {
    super(message);
    this.name = 'UrlFetchError';
    this.kind = kind;
    this.reason = reason;
    if (status !== undefined) this.status = status;
  }
}

export interface FetchImageOptions {
  /** Lifts the address rules (loopback, private, link-local, metadata): local setups and tests. */
  allowPrivate: boolean;
  /** The operator's allow list (address-guard.ts addressAllowed): hosts and networks that may be private. */
  allow?: FetchAllowList | undefined;
  /** DNS servers to ask instead of the system's (`host` or `host:port`; tests run their own). */
  dnsServers?: readonly string[] | undefined;
  /** The most bytes the body may have (default MAX_FILE_BYTES, 20 MiB). */
  maxBytes?: number | undefined;
  /** The whole download, resolution, connection, redirects and body included (default 10 000 ms). */
  timeoutMs?: number | undefined;
  /** Redirects followed at most (default 3); one more fails. */
  maxRedirects?: number | undefined;
  /** Cancels the download: it then fails with reason 'aborted'. */
  signal?: AbortSignal | undefined;
  /** Called with the bytes of the body received so far, after each chunk. */
  onBytes?: ((total: number) => void) | undefined;
}

export const DEFAULT_FETCH_TIMEOUT_MS = 10_000;
export const DEFAULT_MAX_REDIRECTS = 3;

const SCHEMES = ['http:', 'https:'];
const REDIRECTS = new Set([301, 302, 303, 307, 308]);
const HEADERS = {
  'user-agent': 'bgone',
  accept: 'image/jpeg, image/png, image/webp',
  'accept-encoding': 'identity',
};

const failed = (reason: DownloadFailedReason, message: string, status?: number) => new UrlFetchError('download_failed', reason, message, status);

/** A size for a message: whole MiB as "20 MB" (as the rest of the API says it), else bytes. */
function sizeText(bytes: number): string {
  return bytes % (1024 * 1024) === 0 ? `${bytes / (1024 * 1024)} MB` : `${bytes} bytes`;
}

/** Whether the first bytes are those of a JPEG, PNG or WebP file (the upload's sniff). */
function looksLikeImage(head: Buffer): boolean {
  try {
    sniffFormat(head);
    return true;
  } catch {
    return false;
  }
}

/**
 * GETs `url` and returns its body, the bytes of a JPEG, PNG or WebP file. Throws a UrlFetchError;
 * on any failure the connection is closed at once.
 */
export async function fetchImageUrl(url: string, options: FetchImageOptions): Promise<Buffer> {
  const timeoutMs = options.timeoutMs ?? DEFAULT_FETCH_TIMEOUT_MS;
  // One signal for the deadline and the caller's cancel; its reason is the error to throw.
  const stop = new AbortController();
  const timer = setTimeout(() => stop.abort(failed('timeout', `The image download did not finish within ${timeoutMs / 1000} s.`)), timeoutMs);
  const cancel = () => stop.abort(failed('aborted', 'The image download was cancelled.'));
  if (options.signal?.aborted) cancel();
  else options.signal?.addEventListener('abort', cancel, { once: true });
  try {
    return await download(url, options, stop.signal);
  } catch (err) {
    // A socket destroyed by the deadline or the cancel fails with whatever error; the reason says why.
    if (stop.signal.aborted) throw stop.signal.reason;
    if (err instanceof UrlFetchError) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    throw failed('connection', `The image could not be downloaded: ${code ?? 'the connection failed'}.`);
  } finally {
    clearTimeout(timer);
    options.signal?.removeEventListener('abort', cancel);
  }
}

/** The hops, then the body. Throws a UrlFetchError, or a connection's error. */
async function download(first: string, options: FetchImageOptions, signal: AbortSignal): Promise<Buffer> {
  const maxRedirects = options.maxRedirects ?? DEFAULT_MAX_REDIRECTS;
  const maxBytes = options.maxBytes ?? MAX_FILE_BYTES;
  let raw = first;
  for (let redirects = 0; ; redirects++) {
    const url = checkedUrl(raw, options, redirects > 0);
    let target: CheckedAddress;
    try {
      target = await resolveCheckedAddress(urlHost(url), options.allowPrivate, { signal, allow: options.allow, dnsServers: options.dnsServers });
    } catch (err) {
      if (!(err instanceof AddressError)) throw err;
      if (err.reason === 'dns') throw failed('dns', `The image URL's host could not be resolved (${err.message}).`);
      throw failed('blocked_address', 'The image URL leads to a loopback, private, link-local or metadata address.');
    }
    const { req, res } = await get(url, target, signal);
    const status = res.statusCode ?? 0;
    const location = res.headers.location;
    if (REDIRECTS.has(status) && location !== undefined) {
      req.destroy();
      if (redirects === maxRedirects) throw failed('too_many_redirects', `The image URL redirected more than ${maxRedirects} times.`);
      try {
        raw = new URL(location, url).href;
      } catch {
        throw new UrlFetchError('invalid_url', 'malformed', 'The image URL redirected to a URL that is not valid.');
      }
      continue;
    }
    try {
      // Only a whole answer is the image: a 206 holds part of it, a 203 or 204 none of it as sent.
      if (status !== 200) throw failed('status', `The image URL answered HTTP ${status}.`, status);
      const encoding = (res.headers['content-encoding'] ?? 'identity').trim().toLowerCase();
      if (encoding !== 'identity')
        throw failed('encoding', 'The image URL answered with a compressed body (Content-Encoding); only uncompressed bodies are taken.');
      const declared = Number(res.headers['content-length']);
      if (declared > maxBytes) throw failed('too_large', `The image at the URL is larger than ${sizeText(maxBytes)}.`);
      return await readBody(res, maxBytes, options.onBytes);
    } finally {
      req.destroy(); // nothing more is read: the connection closes (it never serves another request)
    }
  }
}

/** The URL of a hop, once its text passes the guard's rules; `redirected`: it came from a Location. */
function checkedUrl(raw: string, { allowPrivate, allow }: FetchImageOptions, redirected: boolean): URL {
  const problem = urlProblem(raw, { allowPrivate, allow, schemes: SCHEMES });
  if (!problem) return new URL(raw);
  if (problem.reason === 'blocked_address') throw failed('blocked_address', 'The image URL leads to a loopback, private, link-local or metadata address.');
  // "The URL must not contain credentials." becomes "The image URL redirected to a URL that must not ...".
  const subject = redirected ? 'The image URL redirected to a URL that' : 'The image URL';
  throw new UrlFetchError('invalid_url', problem.reason, problem.message.replace(/^The URL/, subject));
}

/** The GET, to the address checked; resolves with the response once its headers are in. */
function get(url: URL, target: CheckedAddress, signal: AbortSignal): Promise<{ req: http.ClientRequest; res: http.IncomingMessage }> {
  signal.throwIfAborted();
  return new Promise((resolve, reject) => {
    const req = pinnedRequest(url, target, { method: 'GET', headers: HEADERS });
    // The deadline or a cancel destroys the connection, whether headers or body are awaited.
    const onAbort = () => req.destroy(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
    req.on('close', () => signal.removeEventListener('abort', onAbort));
    req.on('error', reject);
    req.on('response', (res) => {
      res.on('error', () => {}); // a response dropped unread fails on the request's side, or not at all
      resolve({ req, res });
    });
    req.end();
  });
}

/**
 * The body, at most `maxBytes` of it: past that, or once its first 12 bytes are not an image, the
 * reading stops and the caller closes the connection. Never holds more than `maxBytes`.
 */
function readBody(res: http.IncomingMessage, maxBytes: number, onBytes: FetchImageOptions['onBytes']): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let total = 0;
    let sniffed = false;
    const fail = (err: Error) => {
      res.removeAllListeners('data');
      res.pause();
      reject(err);
    };
    res.on('data', (chunk: Buffer) => {
      if (total + chunk.length > maxBytes) return fail(failed('too_large', `The image at the URL is larger than ${sizeText(maxBytes)}.`));
      chunks.push(chunk);
      total += chunk.length;
      onBytes?.(total);
      if (!sniffed && total >= 12) {
        sniffed = true;
        if (!looksLikeImage(Buffer.concat(chunks))) fail(failed('not_image', 'The file at the image URL is not a JPG, PNG or WebP image.'));
      }
    });
    res.on('end', () => {
      const body = Buffer.concat(chunks, total);
      if (total === 0) reject(failed('empty', 'The image URL answered with an empty body.'));
      else if (!sniffed && !looksLikeImage(body)) reject(failed('not_image', 'The file at the image URL is not a JPG, PNG or WebP image.'));
      else resolve(body);
    });
    res.on('error', reject);
    res.on('close', () => {
      if (!res.complete) reject(new Error('the connection closed before the body ended'));
    });
  });
}

/**
 * The library's error for a failed download of the form field `field` (`image_url`, `bg_image_url`):
 * invalid_image_url (400) for the URL's text, failed_image_download (422) for the rest, with the
 * download's message and `details` { field, reason, status? }.
 */
export function toBgoneError(err: UrlFetchError, field: string): BgoneError {
  const code = err.kind === 'invalid_url' ? 'invalid_image_url' : 'failed_image_download';
  return new BgoneError(code, err.message, { field, reason: err.reason, ...(err.status === undefined ? {} : { status: err.status }) });
}
