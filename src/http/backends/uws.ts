/**
 * The HTTP backend on uWebSockets.js (native): one catch-all route hands every request to the
 * handler through the interface of ../types.ts. What uWS needs that routes must not see:
 * - the request (method, URL, headers, address) is only readable while uWS's callback runs: it is
 *   copied at once;
 * - onAborted and onData must be registered before the callback returns (uWS ends the process
 *   otherwise, and the body's first chunks, or a GET's one empty chunk, arrive right after it);
 * - until the route subscribes, chunks are copied into a queue and the socket is paused, so a route
 *   may await (auth, admission) before reading the body without the server buffering the upload;
 * - a response object must not be touched after onAborted or after the answer is complete (uWS
 *   throws): every write goes through send(), which knows both.
 * - a head over MAX_HEAD_BYTES that uWS passes on (one arriving in a single read) gets the same
 *   431 as on node:http, and the connection is closed. What uWS 20.30 refuses itself it answers
 *   with nothing (it has no hook to let us): a head over 4 KB spread over several reads, or over
 *   its 512 KB receive buffer, or with more than 48 header lines and over 4 KB, is closed at once;
 *   one with more than 48 header lines in under 4 KB is ignored until its 10 s idle timeout
 *   closes the connection.
 * - uWS 20.30 frames a body by the first Content-Length and ignores transfer codings other than
 *   chunked; heads that are ambiguous get node:http's 400 before their body is read. It closes a
 *   connection that brings a request while an answer is pending (no pipelining behind pending
 *   answers): an answer that closes the connection is written once uWS has parsed all it read, so
 *   that nothing pipelined behind it is ever served.
 * The module is passed in (backend-select.ts loads the right native build), so nothing here
 * imports a uWS package.
 */
import type * as Uws from 'uWebSockets.js';
import type { Backend, EarlyAnswer, HttpRequest, HttpResponse, Listener, OutgoingHeaders, RequestHandler } from '../types.js';
import { type PreparedAnswer, prepareAnswer } from './answer.js';
import { canonicalAddress } from './remote-address.js';
import {
  ambiguousFraming,
  asksToClose,
  DISCARD_IDLE_MS,
  DISCARD_MAX_BYTES,
  declaredBodyLength,
  discardsWhole,
  HEAD_TOO_LARGE,
  INVALID_REQUEST,
  MAX_HEAD_BYTES,
  plainEarlyAnswer,
  RequestHeaders,
} from './request-headers.js';

/** The native module's API (the same in the npm build 20.30 and upstream's 20.x releases, for what we use). */
export type UwsModule = typeof Uws;

type BodyHandler = (chunk: Uint8Array, isLast: boolean) => void;

/**
 * Bodies up to this size are written with end(body, true) when the connection must close after the
 * answer: uWS then closes it itself, at the price of copying an unsent rest into its own buffer,
 * which is nothing for error bodies and redirects. Larger bodies go through tryEnd (no copy) with a
 * Connection: close header, and the client closes.
 */
const CLOSE_WITH_END_MAX_BYTES = 64 * 1024;

/**
 * uWS's resume() re-arms its 10 s idle timeout, and nothing public disarms it again once the body
 * has arrived: a response still being computed (a queued image) would be cut after 10 s. While such
 * a response is pending, pause()+resume() re-arms it well before it fires. The same is done while a
 * subscribed body arrives: uWS re-arms that timeout only after each 160 KB received, so it would
 * close, without an answer, an upload slower than 16 KB/s after about 10 s.
 */
const REARM_IDLE_TIMEOUT_MS = 4_000;

/** What a response needs to know about its listener. */
interface ListenerState {
  /** stopAccepting() was called: answers ask the client to close the connection. */
  draining: boolean;
}

class UwsResponse implements HttpResponse {
  aborted = false;
  sent = false;
  /** The request asked for the connection to close after its answer (Connection: close). */
  closeAfter = false;
  /**
   * end(body, true) writes `Connection: close` itself unless the request's Connection value is five
   * bytes long (uWS 20.30 then takes it for `close`, and echoes nothing): the backend writes it then.
   */
  closeNotEchoed = false;
  /** The body length the head declares (declaredBodyLength: undefined when chunked). */
  declared: number | undefined = 0;
  /** A closing early answer held until the body it answers has been read and dropped. */
  private held: PreparedAnswer | undefined;
  private dropped = 0;
  private heldTimer: NodeJS.Timeout | undefined;
  /** The answer is fully handed to uWS: the native response must not be touched any more. */
  private complete = false;
  private readonly abortListeners: Array<() => void> = [];
  private bodyHandler: BodyHandler | undefined;
  /** Copies of the chunks that arrived before the route subscribed. */
  private queued: Uint8Array[] = [];
  private queuedLast = false;
  private bodyDone = false;
  private paused = false;
  private rearmTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly res: Uws.HttpResponse,
    private readonly isHead: boolean,
    private readonly listener: ListenerState,
  ) {
    res.onAborted(() => this.abort());
    res.onData((chunk, isLast) => this.receive(chunk, isLast));
  }

  onAborted(listener: () => void): void {
    if (this.aborted) listener();
    else if (!this.complete) this.abortListeners.push(listener);
  }

  /** HttpRequest.onData lands here: the body flow is tied to the native response. */
  subscribe(handler: BodyHandler): void {
    if (this.bodyHandler) throw new Error('onData may be called only once per request');
    this.bodyHandler = handler;
    const queued = this.queued;
    this.queued = [];
    for (let i = 0; i < queued.length; i++) {
      if (this.sent || this.aborted) return; // the route answered (or the client left) mid-body
      handler(queued[i]!, this.queuedLast && i === queued.length - 1);
    }
    if (this.sent || this.aborted) return;
    const wasPaused = this.paused;
    if (wasPaused) {
      this.paused = false;
      this.res.resume();
    }
    // A body still arriving is held to the route's own rules (the body deadline, the minimum rate),
    // answered with 408 on both backends: uWS's idle timeout, which cuts an upload that brings less
    // than 16 KB a second with no answer at all, is kept off meanwhile.
    if (!this.bodyDone || wasPaused) this.keepIdleTimeoutOff();
  }

  send(status: number, headers: OutgoingHeaders, body: string | Uint8Array): void {
    if (this.sent || this.aborted) return;
    // An early answer: the route read none of a body that is still arriving.
    const early = !this.bodyHandler && !this.bodyDone && this.declared !== 0;
    const answer = prepareAnswer(status, headers, body, this.isHead, this.listener.draining || this.closeAfter || (early && !discardsWhole(this.declared)));
    this.sent = true;
    this.stopRearming();
    this.queued = [];
    if (early && answer.close) {
      this.holdUntilDropped(answer);
      return;
    }
    if (answer.close) {
      // Written once uWS has parsed all it read: while it parses, the socket is corked and uWS
      // closes nothing, so a request pipelined behind this one would be served after it. Left
      // pending, this answer makes uWS close the connection when such a request arrives instead
      // (it refuses pipelining behind a pending answer): what follows a closing answer is never served.
      setImmediate(() => this.write(answer));
      return;
    }
    this.write(answer);
  }

  private write(answer: PreparedAnswer): void {
    if (this.aborted) return;
    const res = this.res;
    res.cork(() => {
      if (this.paused) {
        // Unread body bytes may still be on their way: uWS reads and drops them after the answer.
        this.paused = false;
        res.resume();
      }
      res.writeStatus(`${answer.status} ${answer.reason}`);
      const pairs = answer.headers;
      for (let i = 0; i < pairs.length; i += 2) res.writeHeader(pairs[i]!, pairs[i + 1]!);
      const bytes = answer.body;
      if (!answer.bodyOnWire) {
        // Only the argument-less endWithoutBody() is usable: with a length, 20.30 counts the answer
        // as unfinished (it waits for those bytes); an explicit undefined becomes a length of 2^63.
        if (answer.contentLength) res.writeHeader('Content-Length', String(bytes.byteLength));
        if (answer.close) res.writeHeader('Connection', 'close');
        res.endWithoutBody();
        this.complete = true;
        return;
      }
      if (answer.close && bytes.byteLength <= CLOSE_WITH_END_MAX_BYTES) {
        if (this.closeNotEchoed) res.writeHeader('Connection', 'close');
        res.end(bytes, true);
        this.complete = true;
        return;
      }
      if (answer.close) res.writeHeader('Connection', 'close');
      this.writeWithBackpressure(bytes);
    });
  }

  /**
   * A closing answer while the body is still arriving. uWS ends it with a close() that the kernel
   * turns into a reset while body bytes keep coming, and a client still writing its upload can see
   * that reset before the answer; once an answer is complete the native response can no longer be
   * closed, so a keep-alive answer would leave uWS reading whatever the client sends. The answer is
   * held instead while the body is read and dropped, and written (closing) at its end, past
   * DISCARD_MAX_BYTES, or after DISCARD_IDLE_MS without a byte.
   */
  private holdUntilDropped(answer: PreparedAnswer): void {
    this.held = answer;
    if (this.paused) {
      this.paused = false;
      this.res.resume();
    }
    this.heldTimer = setTimeout(() => this.release(), DISCARD_IDLE_MS);
    this.heldTimer.unref();
    this.keepIdleTimeoutOff();
  }

  private release(): void {
    const answer = this.held;
    if (!answer) return;
    this.held = undefined;
    this.stopRearming();
    // After uWS has parsed what it read, as every closing answer (see send()).
    setImmediate(() => this.write(answer));
  }

  /** tryEnd writes what the socket takes now; onWritable goes on from uWS's offset, never copying the body. */
  private writeWithBackpressure(bytes: Uint8Array): void {
    const res = this.res;
    const total = bytes.byteLength;
    const start = res.getWriteOffset();
    const [, done] = res.tryEnd(bytes, total);
    if (done) {
      this.complete = true;
      return;
    }
    res.onWritable((offset) => {
      const [ok, finished] = res.tryEnd(bytes.subarray(offset - start), total);
      if (finished) this.complete = true;
      return ok;
    });
  }

  private receive(chunk: ArrayBuffer, isLast: boolean): void {
    if (isLast) this.bodyDone = true;
    if (this.held) {
      this.dropped += chunk.byteLength;
      if (isLast || this.dropped > DISCARD_MAX_BYTES) this.release();
      else this.heldTimer?.refresh();
      return;
    }
    if (this.sent || this.aborted) return;
    if (this.bodyHandler) {
      this.bodyHandler(new Uint8Array(chunk), isLast);
      return;
    }
    // uWS reuses the chunk's memory after this call: keep a copy until the route subscribes.
    this.queued.push(new Uint8Array(chunk.slice(0)));
    this.queuedLast = isLast;
    if (!isLast && !this.paused) {
      this.paused = true;
      this.res.pause();
    }
  }

  private keepIdleTimeoutOff(): void {
    if (this.rearmTimer) return;
    this.rearmTimer = setInterval(() => {
      if ((this.sent && !this.held) || this.aborted) return this.stopRearming();
      this.res.pause();
      this.res.resume();
    }, REARM_IDLE_TIMEOUT_MS);
    this.rearmTimer.unref();
  }

  private stopRearming(): void {
    if (this.rearmTimer) clearInterval(this.rearmTimer);
    this.rearmTimer = undefined;
    if (this.heldTimer) clearTimeout(this.heldTimer);
    this.heldTimer = undefined;
  }

  private abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    this.held = undefined;
    this.stopRearming();
    this.queued = [];
    for (const listener of this.abortListeners.splice(0)) listener();
  }
}

class UwsRequest implements HttpRequest {
  readonly method: string;
  readonly path: string;
  readonly query: string;
  readonly remoteAddress: string;
  private readonly headers = new RequestHeaders();

  constructor(
    req: Uws.HttpRequest,
    res: Uws.HttpResponse,
    method: string,
    private readonly response: UwsResponse,
  ) {
    this.method = method;
    this.path = req.getUrl();
    this.query = req.getQuery() ?? '';
    req.forEach((name, value) => {
      this.headers.add(name, value);
    });
    this.remoteAddress = canonicalAddress(Buffer.from(res.getRemoteAddressAsText()).toString('latin1'));
  }

  /** The head's size as sent: "METHOD /path?query HTTP/1.1\r\n", the header lines and the blank line. */
  get headBytes(): number {
    return this.method.length + this.path.length + (this.query ? this.query.length + 1 : 0) + 12 + this.headers.bytes + 2;
  }

  header(name: string): string {
    return this.headers.get(name);
  }

  onData(handler: BodyHandler): void {
    this.response.subscribe(handler);
  }
}

class UwsListener implements Listener {
  readonly backend = 'uws' as const;
  private listenSocket: Uws.us_listen_socket | undefined;

  constructor(
    private readonly uws: UwsModule,
    private readonly app: Uws.TemplatedApp,
    listenSocket: Uws.us_listen_socket,
    private readonly state: ListenerState,
  ) {
    this.listenSocket = listenSocket;
    this.port = uws.us_socket_local_port(listenSocket as unknown as Uws.us_socket);
  }

  readonly port: number;

  /**
   * Closes the listening socket; requests in flight go on and their answers carry Connection:
   * close. uWS gives no handle on idle keep-alive connections: they end at their 10 s idle
   * timeout, or at closeAll().
   */
  stopAccepting(): void {
    this.state.draining = true;
    if (!this.listenSocket) return;
    this.uws.us_listen_socket_close(this.listenSocket);
    this.listenSocket = undefined;
  }

  /** App.close() (both builds have it, though 20.30's typings omit it) closes every connection. */
  closeAll(): void {
    this.stopAccepting();
    (this.app as unknown as { close?: () => void }).close?.();
  }
}

export function uwsBackend(uws: UwsModule): Backend {
  return {
    name: 'uws',
    listen(host: string, port: number, handler: RequestHandler, earlyAnswer: EarlyAnswer = plainEarlyAnswer): Promise<Listener> {
      const state: ListenerState = { draining: false };
      const app = uws.App();
      app.any('/*', (res, req) => {
        const method = req.getMethod().toUpperCase();
        const response = new UwsResponse(res, method === 'HEAD', state);
        const request = new UwsRequest(req, res, method, response);
        response.closeNotEchoed = request.header('connection').length === 5;
        // uWS sets no size limit of its own on a head that arrives in one read (up to its 512 KB
        // receive buffer): refuse what node:http refuses, with the same 431, and close.
        if (request.headBytes > MAX_HEAD_BYTES) {
          const answer = earlyAnswer(request, { status: 431, message: HEAD_TOO_LARGE });
          response.send(answer.status, { ...answer.headers, Connection: 'close' }, answer.body);
          return;
        }
        // uWS frames a body by the first Content-Length, and reads a body with any transfer coding
        // but chunked as having none: what follows would be parsed as the next request. node:http
        // refuses such heads with 400; so does this backend, before the body is read, and the
        // connection closes (a closing answer: see UwsResponse.send).
        if (ambiguousFraming(request.header('content-length'), request.header('transfer-encoding'))) {
          const answer = earlyAnswer(request, { status: 400, message: INVALID_REQUEST });
          response.send(answer.status, { ...answer.headers, Connection: 'close' }, answer.body);
          return;
        }
        // uWS 20.30 closes after an answer only where the request's Connection value is exactly
        // five bytes long, and never while it parses: the client's Connection: close is honoured
        // here, so that nothing pipelined behind such a request is served.
        response.closeAfter = asksToClose(request.header('connection'));
        response.declared = declaredBodyLength(request.header('content-length'), request.header('transfer-encoding'));
        handler(request, response);
      });
      return new Promise((resolve, reject) => {
        app.listen(host, port, (listenSocket) => {
          if (!listenSocket) reject(new Error(`uWebSockets.js cannot listen on ${host}:${port}`));
          else resolve(new UwsListener(uws, app, listenSocket, state));
        });
      });
    },
  };
}
