/**
 * Requests that fetch cannot make: hand-written bytes over node:net (malformed bodies, huge header
 * lines, bodies cut short) and streamed uploads over node:http that watch how much was sent when
 * the answer arrived.
 */
import http from 'node:http';
import net from 'node:net';
import type { HttpResult } from './server.js';

export interface RawResponse {
  /** null when the connection ended (or timed out) without a complete response head. */
  status: number | null;
  headers: Record<string, string>;
  body: Buffer;
  json?: any;
  /** How the exchange ended. */
  end: 'response' | 'closed' | 'timeout';
  error?: string;
}

function parseHead(head: string): { status: number; headers: Record<string, string> } {
  const [statusLine, ...lines] = head.split('\r\n');
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(statusLine ?? '');
  if (!m) throw new Error(`bad status line ${JSON.stringify(statusLine)}`);
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const i = line.indexOf(':');
    if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
  }
  return { status: Number(m[1]), headers };
}

export interface RawOptions {
  /** Give up after this long (default 10 s). */
  timeoutMs?: number;
  /** Destroy the socket right after writing (a client that goes away mid-request). */
  destroyAfterWrite?: boolean;
}

export interface RawConnection {
  /** Resolves once connected (or once the attempt failed). */
  ready: Promise<void>;
  write(bytes: Buffer | string): void;
  /** Resets the connection (a client that goes away). */
  destroy(): void;
  /** The response (or how the connection ended without one). */
  response: Promise<RawResponse>;
  socket: net.Socket;
}

/** A TCP connection to the server that reads one HTTP/1.1 response (Content-Length framed), then closes. */
export function rawConnection(port: number, timeoutMs = 10_000): RawConnection {
  const socket = net.connect(port, '127.0.0.1');
  let data = Buffer.alloc(0);
  let settled = false;
  let error: string | undefined;
  let resolveResponse!: (r: RawResponse) => void;
  const response = new Promise<RawResponse>((resolve) => {
    resolveResponse = resolve;
  });
  const finish = (end: RawResponse['end']) => {
    if (settled) return;
    settled = true;
    clearTimeout(timer);
    socket.destroy();
    const sep = data.indexOf('\r\n\r\n');
    let head: ReturnType<typeof parseHead> | undefined;
    try {
      head = sep < 0 ? undefined : parseHead(data.subarray(0, sep).toString('latin1'));
    } catch (err) {
      error = (err as Error).message;
    }
    if (!head) return resolveResponse({ status: null, headers: {}, body: data, end: end === 'response' ? 'closed' : end, error });
    const { status, headers } = head;
    const body = data.subarray(sep + 4);
    let json: unknown;
    if ((headers['content-type'] ?? '').startsWith('application/json')) {
      try {
        json = JSON.parse(body.toString('utf8'));
      } catch {
        json = undefined;
      }
    }
    resolveResponse({ status, headers, body, json, end, error });
  };
  const timer = setTimeout(() => finish('timeout'), timeoutMs);
  socket.on('data', (chunk: Buffer) => {
    data = Buffer.concat([data, chunk]);
    const sep = data.indexOf('\r\n\r\n');
    if (sep < 0) return;
    let length: number;
    try {
      length = Number(parseHead(data.subarray(0, sep).toString('latin1')).headers['content-length'] ?? NaN);
    } catch (err) {
      error = (err as Error).message;
      return finish('closed');
    }
    if (Number.isFinite(length) && data.length - sep - 4 >= length) finish('response');
  });
  socket.on('error', (err: NodeJS.ErrnoException) => {
    error = err.code ?? err.message;
  });
  socket.on('close', () => finish('closed'));
  // Also settles when the connection fails, so that callers go on to `response` (status null).
  const ready = new Promise<void>((resolve) => {
    socket.once('connect', () => resolve());
    socket.once('close', () => resolve());
  });
  return {
    ready,
    write: (bytes) => void socket.write(bytes),
    destroy: () => socket.destroy(),
    response,
    socket,
  };
}

/** Writes `bytes` to a fresh TCP connection and reads one HTTP/1.1 response, then closes the connection. */
export async function rawExchange(port: number, bytes: Buffer | string, options: RawOptions = {}): Promise<RawResponse> {
  const conn = rawConnection(port, options.timeoutMs);
  await conn.ready;
  conn.write(bytes);
  if (options.destroyAfterWrite) setTimeout(() => conn.destroy(), 50); // let the bytes leave before the reset
  return conn.response;
}

export interface Part {
  name: string;
  filename?: string;
  type?: string;
  data: Buffer | string;
}

/** A multipart/form-data body with the given boundary (the closing delimiter unless `close` is false). */
export function multipartBody(boundary: string, parts: Part[], close = true): Buffer {
  const chunks: Buffer[] = [];
  for (const p of parts) {
    let head = `--${boundary}\r\nContent-Disposition: form-data; name="${p.name}"`;
    if (p.filename !== undefined) head += `; filename="${p.filename}"`;
    head += '\r\n';
    if (p.type !== undefined) head += `Content-Type: ${p.type}\r\n`;
    chunks.push(Buffer.from(`${head}\r\n`, 'latin1'), Buffer.isBuffer(p.data) ? p.data : Buffer.from(p.data, 'utf8'), Buffer.from('\r\n', 'latin1'));
  }
  if (close) chunks.push(Buffer.from(`--${boundary}--\r\n`, 'latin1'));
  return Buffer.concat(chunks);
}

/** A POST /api/v1/remove request head; Content-Length is omitted when `length` is undefined. */
export function requestHead(key: string | null, contentType: string | null, length: number | undefined, extra: string[] = []): string {
  const lines = ['POST /api/v1/remove HTTP/1.1', 'Host: 127.0.0.1', 'Connection: close'];
  if (key !== null) lines.push(`Authorization: Bearer ${key}`);
  if (contentType !== null) lines.push(`Content-Type: ${contentType}`);
  if (length !== undefined) lines.push(`Content-Length: ${length}`);
  lines.push(...extra);
  return `${lines.join('\r\n')}\r\n\r\n`;
}

export interface UploadOutcome {
  status: number | null;
  json?: any;
  headers: http.IncomingHttpHeaders;
  /** Bytes of the body handed to the socket when the response head arrived (null: no response). */
  sentWhenAnswered: number | null;
  /** Body bytes the client meant to send. */
  total: number;
  clientError?: string;
}

/**
 * Streams (node:http) a multipart upload whose image part is `imageBytes` bytes of filler, 1 MB at
 * a time with back-pressure. It stops sending as soon as the response head arrives, and pauses
 * (waits for the answer without sending more) once `pauseAfter` body bytes are out: a server that
 * needs the whole body to answer never answers then. (Writing on after an early answer would race
 * with the server closing the connection: the client may see EPIPE instead of the answer.) With
 * `chunked`, no Content-Length is sent (Transfer-Encoding: chunked).
 */
export function streamUpload(port: number, key: string, imageBytes: number, chunked: boolean, pauseAfter = Infinity): Promise<UploadOutcome> {
  const boundary = 'bgoneStreamBoundary';
  const head = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="image_file"; filename="big.jpg"\r\nContent-Type: image/jpeg\r\n\r\n`,
    'latin1',
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`, 'latin1');
  const total = head.length + imageBytes + tail.length;
  const headers: http.OutgoingHttpHeaders = { authorization: `Bearer ${key}`, 'content-type': `multipart/form-data; boundary=${boundary}` };
  if (!chunked) headers['content-length'] = total;
  return new Promise((resolve) => {
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/api/v1/remove', headers, agent: false });
    let sent = 0;
    let answeredAt: number | null = null;
    let settled = false;
    let clientError: string | undefined;
    const done = (outcome: Omit<UploadOutcome, 'sentWhenAnswered' | 'total' | 'clientError'>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req.destroy();
      resolve({ ...outcome, sentWhenAnswered: answeredAt, total, clientError });
    };
    const timer = setTimeout(() => done({ status: null, headers: {} }), 60_000);
    req.on('response', (res) => {
      answeredAt = sent;
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        let json: unknown;
        try {
          json = JSON.parse(body);
        } catch {
          json = undefined;
        }
        done({ status: res.statusCode ?? null, headers: res.headers, json });
      });
      res.on('error', () => done({ status: res.statusCode ?? null, headers: res.headers }));
    });
    req.on('error', (err: NodeJS.ErrnoException) => {
      clientError = err.code ?? err.message;
      // The server may reset the connection right after its answer: give the response a moment.
      setTimeout(() => done({ status: null, headers: {} }), 2000);
    });
    const filler = Buffer.alloc(1 << 20, 0x5a);
    let fillerLeft = imageBytes;
    const pump = () => {
      if (settled || answeredAt !== null) return;
      if (sent === 0) {
        sent += head.length;
        if (!req.write(head)) return void req.once('drain', pump);
      }
      while (fillerLeft > 0) {
        if (settled || answeredAt !== null || sent >= pauseAfter) return;
        const n = Math.min(filler.length, fillerLeft);
        fillerLeft -= n;
        sent += n;
        if (!req.write(n === filler.length ? filler : filler.subarray(0, n))) return void req.once('drain', pump);
      }
      sent += tail.length;
      req.end(tail);
    };
    pump();
  });
}

/** A raw or streamed response in the shape fetch-based helpers return (for the shared assertions). */
export function asHttpResult(r: { status: number | null; headers: Record<string, string | string[] | undefined>; json?: any; body?: Buffer }): HttpResult {
  const headers = new Headers();
  for (const [name, value] of Object.entries(r.headers)) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) headers.append(name, v);
  }
  return { status: r.status ?? 0, headers, body: r.body ?? Buffer.alloc(0), json: r.json };
}

/**
 * The same upload over a raw socket with Transfer-Encoding: chunked (no Content-Length), 1 MB per
 * chunk with back-pressure: it stops sending as soon as any response byte arrives or once
 * `pauseAfter` body bytes are out, and reports how much of the body had been sent by then.
 */
export function rawChunkedUpload(port: number, key: string, imageBytes: number, pauseAfter = Infinity): Promise<UploadOutcome> {
  const boundary = 'bgoneChunkedBoundary';
  const head = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="image_file"; filename="big.jpg"\r\nContent-Type: image/jpeg\r\n\r\n`,
    'latin1',
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`, 'latin1');
  const total = head.length + imageBytes + tail.length;
  const conn = rawConnection(port, 60_000);
  let sent = 0;
  let answeredAt: number | null = null;
  const filler = Buffer.alloc(1 << 20, 0x5a);
  const frame = (data: Buffer) => Buffer.concat([Buffer.from(`${data.length.toString(16)}\r\n`, 'latin1'), data, Buffer.from('\r\n', 'latin1')]);
  return new Promise((resolve) => {
    void conn.ready.then(() => {
      const socket = conn.socket;
      socket.once('data', () => {
        answeredAt = sent;
      });
      socket.write(requestHead(key, `multipart/form-data; boundary=${boundary}`, undefined, ['Transfer-Encoding: chunked']));
      socket.write(frame(head));
      sent += head.length;
      let left = imageBytes;
      const pump = () => {
        while (left > 0 && answeredAt === null && !socket.destroyed) {
          if (sent >= pauseAfter) return;
          const n = Math.min(filler.length, left);
          left -= n;
          sent += n;
          if (!socket.write(frame(n === filler.length ? filler : filler.subarray(0, n)))) return void socket.once('drain', pump);
        }
        if (answeredAt === null && !socket.destroyed) {
          sent += tail.length;
          socket.write(Buffer.concat([frame(tail), Buffer.from('0\r\n\r\n', 'latin1')]));
        }
      };
      pump();
    });
    void conn.response.then((r) => resolve({ status: r.status, json: r.json, headers: r.headers, sentWhenAnswered: answeredAt, total, clientError: r.error }));
  });
}
