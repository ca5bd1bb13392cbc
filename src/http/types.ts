/**
 * The small request/response interface every route is written against. Two backends implement it
 * (backends/uws.ts on uWebSockets.js, backends/node.ts on node:http); routes never see either.
 *
 * Rules both backends keep, so that a route behaves the same on each:
 * - Everything about the request line and headers is readable at any time (uWS only lends them
 *   during the handler's synchronous part, so its backend copies them up front).
 * - The body is delivered once, in order, through onData. A chunk is only valid during the call
 *   (uWS reuses its memory): copy what you keep. Until a route subscribes, the backend holds the
 *   body back (the socket is paused), so a route may await something before it reads the body.
 * - send() writes the whole answer once; later calls and calls after an abort do nothing. Large
 *   bodies are written with backpressure (a slow reader never makes the server copy the body).
 * - onAborted listeners run once when the client goes away before the answer was fully written.
 */

/** Header values as routes write them; an array writes the header once per value (Set-Cookie). */
export type OutgoingHeaders = Record<string, string | readonly string[]>;

export interface HttpRequest {
  /** Upper case: GET, POST... */
  readonly method: string;
  /** The path without the query string, as sent (percent-encoding kept). */
  readonly path: string;
  /** The query string without '?', '' when none. */
  readonly query: string;
  /** The peer's address as text (IPv4, or IPv6 without brackets). */
  readonly remoteAddress: string;
  /**
   * A header by its name (case-insensitive); '' when absent. Repeated headers are joined in
   * arrival order with ', ' (Cookie with '; '), none dropped, on both backends.
   */
  header(name: string): string;
  /**
   * Subscribes to the body (once: a second call throws). `isLast` is true on the final call, which
   * may carry an empty chunk; a request without a body gets one call with an empty chunk and isLast
   * true. No call comes after send() or after an abort.
   */
  onData(handler: (chunk: Uint8Array, isLast: boolean) => void): void;
}

export interface HttpResponse {
  /** The client went away before the answer was complete. */
  readonly aborted: boolean;
  /** send() wrote the answer (it stays false for a send() after an abort, which writes nothing). */
  readonly sent: boolean;
  /** Runs once if the client goes away before the answer is fully written (at once if it already has). */
  onAborted(listener: () => void): void;
  /**
   * Writes status, headers and body, once. The backend owns Content-Length, Transfer-Encoding and
   * Connection (`Connection: close` from a route is honoured); HEAD, 1xx, 204 and 304 answers go
   * out without a body. An invalid status or header value throws before anything is written, and
   * the answer then still counts as not sent.
   */
  send(status: number, headers: OutgoingHeaders, body: string | Uint8Array): void;
}

export type RequestHandler = (req: HttpRequest, res: HttpResponse) => void;

export type BackendName = 'uws' | 'node';

/** A listening server of one backend. */
export interface Listener {
  readonly backend: BackendName;
  readonly port: number;
  /**
   * Stops accepting new connections; requests in flight go on and their answers carry
   * `Connection: close`. Idle keep-alive connections close at once on node:http; uWS has no handle
   * on them, so they end at its 10 s idle timeout or at closeAll().
   */
  stopAccepting(): void;
  /** Closes every remaining connection (after the drain). */
  closeAll(): void;
}

/** What a backend refuses by itself, before any handler: a head over the size limit, an ambiguous framing, a head too slow. */
export interface EarlyRefusal {
  status: 400 | 408 | 431;
  message: string;
}

/** The request an early answer is for: what is known of it (node:http's parser may know the path only). */
export interface EarlyRequest {
  readonly path: string;
  header(name: string): string;
}

/**
 * The answer a backend writes for an early refusal, from the router: the status, headers (the
 * route group's CORS headers among them) and body its path's group answers with (a dialect's error
 * body under its prefix), or the contract's. `req` is undefined when not even the path is known.
 */
export type EarlyAnswer = (req: EarlyRequest | undefined, refusal: EarlyRefusal) => { status: number; headers: OutgoingHeaders; body: string };

export interface Backend {
  readonly name: BackendName;
  /**
   * Listens on host:port (0: a free port) and hands every request to `handler`; what it refuses by
   * itself is answered as `earlyAnswer` says.
   */
  listen(host: string, port: number, handler: RequestHandler, earlyAnswer?: EarlyAnswer): Promise<Listener>;
}
