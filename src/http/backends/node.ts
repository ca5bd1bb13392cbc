/**
 * The HTTP backend on node:http, for every Node version and libc where no uWebSockets.js binary
 * loads. It keeps the rules of ../types.ts the way node:http already works: an unread request body
 * stays in the kernel (node stops reading the socket once the request's small buffer is full), the
 * body is written with the socket's own backpressure (node keeps a reference to the buffer, never a
 * copy), and a request the parser refuses gets a small JSON answer instead of an exception.
 */
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Backend, EarlyAnswer, HttpRequest, HttpResponse, Listener, OutgoingHeaders, RequestHandler } from '../types.js';
import { prepareAnswer } from './answer.js';
import { canonicalAddress } from './remote-address.js';
import {
  ambiguousFraming,
  DISCARD_IDLE_MS,
  DISCARD_MAX_BYTES,
  declaredBodyLength,
  discardsWhole,
  HEAD_TOO_LARGE,
  HEAD_TOO_SLOW,
  INVALID_REQUEST,
  MAX_HEAD_BYTES,
  plainEarlyAnswer,
  RequestHeaders,
  refusedHead,
} from './request-headers.js';

export interface NodeBackendOptions {
  /** Time for a request's head to arrive, in ms (default 10 s, uWS's idle timeout). */
  headersTimeoutMs?: number;
  /** How long an idle keep-alive connection is kept, in ms (default 10 s, as uWS). */
  keepAliveTimeoutMs?: number;
  /** Time for a whole request, head and body, to arrive, in ms; 0 disables it (default: node's, 300 s). */
  requestTimeoutMs?: number;
}

const DEFAULT_HEADERS_TIMEOUT_MS = 10_000;
const DEFAULT_KEEP_ALIVE_TIMEOUT_MS = 10_000;
/** How often node checks the two request timeouts above (its default, 30 s, would stretch them). */
const TIMEOUT_CHECK_INTERVAL_MS = 1_000;
/** A client that was answered 400/431 and never closes its side is cut after this. */
const CLIENT_ERROR_LINGER_MS = 5_000;

type BodyHandler = (chunk: Uint8Array, isLast: boolean) => void;

const EMPTY = new Uint8Array(0);

interface ListenerState {
  /** stopAccepting() was called: answers carry Connection: close. */
  draining: boolean;
  /** Sockets with an answer not yet finished: a parse error there cannot be answered in between. */
  busy: WeakMap<Duplex, number>;
  /** Sockets whose parser failed behind answers not yet finished: closed once those are written. */
  closeWhenAnswered: WeakSet<Duplex>;
  /** The last request parsed on each socket. */
  lastRequest: WeakMap<Duplex, IncomingMessage>;
}

class NodeResponse implements HttpResponse {
  aborted = false;
  sent = false;
  private readonly abortListeners: Array<() => void> = [];
  private subscribed = false;

  constructor(
    private readonly req: IncomingMessage,
    private readonly res: ServerResponse,
    private readonly isHead: boolean,
    private readonly state: ListenerState,
  ) {
    // 'close' also follows a normal finish; only a close before the last byte was handed to the
    // kernel is the client going away. Errors of either stream (a reset mid-upload) mean the same,
    // and a listener must exist so that they never become an uncaught exception.
    res.on('close', () => {
      if (!res.writableFinished) this.abort();
    });
    req.on('error', () => this.abort());
    res.on('error', () => this.abort());
  }

  onAborted(listener: () => void): void {
    if (this.aborted) listener();
    else if (!this.res.writableFinished) this.abortListeners.push(listener);
  }

  subscribe(handler: BodyHandler): void {
    if (this.subscribed) throw new Error('onData may be called only once per request');
    this.subscribed = true;
    // Attaching 'data' lets node read the socket again; 'end' comes once the body (maybe empty) is done.
    this.req.on('data', (chunk: Buffer) => {
      if (!this.sent && !this.aborted) handler(chunk, false);
    });
    this.req.on('end', () => {
      if (!this.sent && !this.aborted) handler(EMPTY, true);
    });
  }

  send(status: number, headers: OutgoingHeaders, body: string | Uint8Array): void {
    if (this.sent || this.aborted) return;
    // An early answer: the route read none of a body that is still arriving.
    const declared = declaredBodyLength(this.req.headers['content-length'] ?? '', this.req.headers['transfer-encoding'] ?? '');
    const early = !this.subscribed && !this.req.complete && declared !== 0;
    const answer = prepareAnswer(status, headers, body, this.isHead, this.state.draining || (early && !discardsWhole(declared)));
    this.sent = true;
    // node itself closes after an answer to a request with Connection: close (or HTTP/1.0).
    if (early && (answer.close || !this.res.shouldKeepAlive)) this.discardThenClose();
    const head = answer.headers;
    if (answer.contentLength) head.push('Content-Length', String(answer.body.byteLength));
    if (answer.close) head.push('Connection', 'close');
    this.res.writeHead(answer.status, answer.reason, head);
    if (answer.bodyOnWire && answer.body.byteLength > 0) this.res.end(answer.body);
    else this.res.end();
  }

  /**
   * An early answer that closes the connection while the body is still arriving. node would end
   * it with destroySoon(): a FIN after the answer, then the socket closed as soon as that is written,
   * and the kernel answers the body still on its way with a reset, which can reach the client
   * before it has read the answer (a client writing its upload sees ECONNRESET or EPIPE instead).
   * Here the FIN goes out after the answer (the client may stop sending) and the body is read
   * and dropped: the socket closes when the client closes its side, past DISCARD_MAX_BYTES, or
   * after DISCARD_IDLE_MS without a byte. Nothing sent behind the body is served.
   */
  private discardThenClose(): void {
    const socket = this.req.socket as Socket & { destroySoon?: () => void };
    this.state.closeWhenAnswered.add(socket);
    socket.destroySoon = () => socket.end();
    const idle = setTimeout(() => socket.destroy(), DISCARD_IDLE_MS);
    idle.unref();
    socket.once('close', () => clearTimeout(idle));
    let dropped = 0;
    // Listening makes node read the socket again (the request was paused until a route read it).
    this.req.on('data', (chunk: Buffer) => {
      dropped += chunk.byteLength;
      if (dropped > DISCARD_MAX_BYTES) socket.destroy();
      else idle.refresh();
    });
  }

  private abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    for (const listener of this.abortListeners.splice(0)) listener();
  }
}

class NodeRequest implements HttpRequest {
  readonly method: string;
  readonly path: string;
  readonly query: string;
  readonly remoteAddress: string;
  private readonly headers = new RequestHeaders();

  constructor(
    req: IncomingMessage,
    private readonly response: NodeResponse,
  ) {
    this.method = (req.method ?? 'GET').toUpperCase();
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    this.path = q < 0 ? url : url.slice(0, q);
    this.query = q < 0 ? '' : url.slice(q + 1);
    const raw = req.rawHeaders;
    for (let i = 0; i + 1 < raw.length; i += 2) this.headers.add(raw[i]!, raw[i + 1]!);
    // Read now: a socket that is gone has no remoteAddress any more.
    this.remoteAddress = canonicalAddress(req.socket.remoteAddress ?? '');
  }

  header(name: string): string {
    return this.headers.get(name);
  }

  onData(handler: BodyHandler): void {
    this.response.subscribe(handler);
  }
}

/**
 * The answer to a request node's parser refused (400), whose head was too large (431) or too slow
 * (408), as the router answers it for the request line and headers node had been given (a head
 * sent in one piece), written on the socket with its framing.
 */
function clientErrorAnswer(err: NodeJS.ErrnoException & { rawPacket?: Buffer }, earlyAnswer: EarlyAnswer): string {
  const refusal =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? ({ status: 431, message: HEAD_TOO_LARGE } as const)
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? ({ status: 408, message: HEAD_TOO_SLOW } as const)
        : ({ status: 400, message: INVALID_REQUEST } as const);
  const { status, headers, body } = earlyAnswer(refusedHead(err.rawPacket), refusal);
  const lines = Object.entries(headers).flatMap(([name, value]) => (typeof value === 'string' ? [value] : value).map((v) => `${name}: ${v}\r\n`));
  return `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\n${lines.join('')}Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;
}

class NodeListener implements Listener {
  readonly backend = 'node' as const;
  readonly port: number;
  private closed = false;

  constructor(
    private readonly server: http.Server,
    private readonly state: ListenerState,
  ) {
    this.port = (server.address() as AddressInfo).port;
  }

  stopAccepting(): void {
    this.state.draining = true;
    if (this.closed) return;
    this.closed = true;
    this.server.close();
    this.server.closeIdleConnections();
  }

  closeAll(): void {
    this.stopAccepting();
    this.server.closeAllConnections();
  }
}

export function nodeBackend(options: NodeBackendOptions = {}): Backend {
  const requestTimeout = options.requestTimeoutMs;
  let headersTimeout = options.headersTimeoutMs ?? DEFAULT_HEADERS_TIMEOUT_MS;
  // node refuses a head timeout longer than the whole-request timeout.
  if (requestTimeout !== undefined && requestTimeout > 0) headersTimeout = Math.min(headersTimeout, requestTimeout);
  return {
    name: 'node',
    listen(host: string, port: number, handler: RequestHandler, earlyAnswer: EarlyAnswer = plainEarlyAnswer): Promise<Listener> {
      const state: ListenerState = { draining: false, busy: new WeakMap(), closeWhenAnswered: new WeakSet(), lastRequest: new WeakMap() };
      const server = http.createServer(
        {
          headersTimeout,
          // Named, not left to node's default (or --max-http-header-size): the uWS backend checks the same figure.
          maxHeaderSize: MAX_HEAD_BYTES,
          keepAliveTimeout: options.keepAliveTimeoutMs ?? DEFAULT_KEEP_ALIVE_TIMEOUT_MS,
          ...(requestTimeout === undefined ? {} : { requestTimeout }),
          connectionsCheckingInterval: TIMEOUT_CHECK_INTERVAL_MS,
        },
        (req, res) => {
          const socket = req.socket;
          // A request parsed behind a refused one on the same connection is never served.
          if (state.closeWhenAnswered.has(socket)) return;
          state.busy.set(socket, (state.busy.get(socket) ?? 0) + 1);
          state.lastRequest.set(socket, req);
          res.once('close', () => {
            const left = (state.busy.get(socket) ?? 1) - 1;
            state.busy.set(socket, left);
            if (left === 0 && state.closeWhenAnswered.has(socket)) socket.end();
          });
          const response = new NodeResponse(req, res, req.method === 'HEAD', state);
          const request = new NodeRequest(req, response);
          // node's parser reads `Transfer-Encoding: gzip, chunked` as chunked, and hands on a request
          // whose only coding is not chunked before failing on its body: both are refused as the
          // uWS backend refuses them (request-headers.ts).
          if (ambiguousFraming(request.header('content-length'), request.header('transfer-encoding'))) {
            state.closeWhenAnswered.add(socket);
            const answer = earlyAnswer(request, { status: 400, message: INVALID_REQUEST });
            response.send(answer.status, { ...answer.headers, Connection: 'close' }, answer.body);
            return;
          }
          handler(request, response);
        },
      );
      const answered = new WeakSet<Duplex>();
      server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
        // The parser may report the same broken connection more than once; answer it once.
        if (answered.has(socket)) return;
        answered.add(socket);
        if (err.code === 'ECONNRESET' || !socket.writable) {
          socket.destroy();
          return;
        }
        if ((state.busy.get(socket) ?? 0) > 0) {
          // The bytes refused come after complete requests (behind a Connection: close request, or
          // a refused head): their answers are written first, in order, then the connection closes,
          // and what the parser refused is never served. A body cut short is the client leaving.
          if (state.closeWhenAnswered.has(socket) || state.lastRequest.get(socket)?.complete) state.closeWhenAnswered.add(socket);
          else socket.destroy();
          return;
        }
        // end(), not destroy(): a client still sending its oversized head would get a reset and
        // could lose the answer. It closes its side after reading; the timer is for one that does not.
        socket.end(clientErrorAnswer(err, earlyAnswer));
        setTimeout(() => socket.destroy(), CLIENT_ERROR_LINGER_MS).unref();
      });
      return new Promise((resolve, reject) => {
        const failed = (err: Error) => reject(new Error(`node:http cannot listen on ${host}:${port}: ${err.message}`));
        server.once('error', failed);
        server.listen(port, host, () => {
          server.off('error', failed);
          // Later errors are failed accepts (EMFILE...): node would throw them, uWS skips them; the
          // server keeps listening either way, so skipping is the same behaviour on both.
          server.on('error', () => {});
          resolve(new NodeListener(server, state));
        });
      });
    },
  };
}
