/**
 * Requests as other people's clients put them on the wire, byte for byte: the request line, each
 * header in the client's own order and spelling, and the body as its library frames it (multipart
 * boundaries and part headers, urlencoded escaping, chunked transfer coding, `Expect:
 * 100-continue`). The tests that say which client sends what (test/http/clients-*.test.ts) build
 * their requests from these pieces and read one answer back over a raw TCP connection.
 */
import net from 'node:net';

/** One part of a multipart body: its header lines exactly as the client writes them, then its bytes. */
export interface WirePart {
  headers: readonly string[];
  data: Buffer | string;
}

const bytes = (data: Buffer | string): Buffer => (Buffer.isBuffer(data) ? data : Buffer.from(data, 'utf8'));

/**
 * A multipart/form-data body: `--B` CRLF, the part's headers, CRLF CRLF, its bytes, CRLF, ...,
 * then `--B--` and, unless `finalCrlf` is false (a client that ends there), CRLF.
 */
export function multipart(boundary: string, parts: readonly WirePart[], finalCrlf = true): Buffer {
  const chunks: Buffer[] = [];
  for (const part of parts) {
    chunks.push(Buffer.from(`--${boundary}\r\n${part.headers.map((h) => `${h}\r\n`).join('')}\r\n`, 'latin1'), bytes(part.data), Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--${finalCrlf ? '\r\n' : ''}`, 'latin1'));
  return Buffer.concat(chunks);
}

/** A text part as most clients write it: only its Content-Disposition. */
export const field = (name: string, value: string): WirePart => ({ headers: [`Content-Disposition: form-data; name="${name}"`], data: value });

/** The body in chunked transfer coding, `size` bytes a chunk. */
export function chunked(body: Buffer, size = 16 * 1024): Buffer {
  const chunks: Buffer[] = [];
  for (let at = 0; at < body.length; at += size) {
    const piece = body.subarray(at, at + size);
    chunks.push(Buffer.from(`${piece.length.toString(16)}\r\n`, 'latin1'), piece, Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from('0\r\n\r\n', 'latin1'));
  return Buffer.concat(chunks);
}

/**
 * application/x-www-form-urlencoded as a library writes it: each byte outside `keep` percent-encoded
 * (upper-case hex), a space as `+`. Python's urlencode keeps letters, digits and `_.-~`; PHP's
 * http_build_query `_.-`; Faraday's `.~_-`.
 */
export function urlencoded(pairs: ReadonlyArray<readonly [string, string]>, keep: RegExp): string {
  const encode = (text: string) =>
    [...Buffer.from(text, 'utf8')]
      .map((b) => {
        const c = String.fromCharCode(b);
        if (c === ' ') return '+';
        return keep.test(c) ? c : `%${b.toString(16).toUpperCase().padStart(2, '0')}`;
      })
      .join('');
  return pairs.map(([name, value]) => `${encode(name)}=${encode(value)}`).join('&');
}
export const PYTHON_SAFE = /[A-Za-z0-9_.\-~]/;
export const PHP_SAFE = /[A-Za-z0-9_.-]/;
export const FARADAY_SAFE = /[A-Za-z0-9_.\-~]/;

/** The request's head: the request line, then each header line as given, then the blank line. */
export function head(method: string, path: string, headers: readonly string[]): Buffer {
  return Buffer.from(`${method} ${path} HTTP/1.1\r\n${headers.map((h) => `${h}\r\n`).join('')}\r\n`, 'latin1');
}

export interface WireAnswer {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
  json?: any;
  /** Interim answers seen before it (100 Continue). */
  interim: number[];
}

/**
 * Sends `requestHead` and `body` over a fresh connection and reads the final answer (framed by its
 * Content-Length). With `expectContinue` the body waits for the server's 100 Continue as curl (and
 * Guzzle, on curl) does when it sends `Expect: 100-continue`: at most a second, then it is sent anyway.
 */
export function exchange(port: number, requestHead: Buffer, body: Buffer, options: { expectContinue?: boolean; timeoutMs?: number } = {}): Promise<WireAnswer> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    const interim: number[] = [];
    let data = Buffer.alloc(0);
    let bodySent = false;
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer within ${options.timeoutMs ?? 60_000} ms (interim: ${interim.join(', ')})`));
    }, options.timeoutMs ?? 60_000);
    const sendBody = () => {
      if (bodySent) return;
      bodySent = true;
      socket.write(body);
    };
    socket.on('connect', () => {
      socket.write(requestHead);
      if (!options.expectContinue) sendBody();
      else setTimeout(sendBody, 1000).unref();
    });
    socket.on('data', (chunk: Buffer) => {
      data = Buffer.concat([data, chunk]);
      for (;;) {
        const end = data.indexOf('\r\n\r\n');
        if (end < 0) return;
        const lines = data.subarray(0, end).toString('latin1').split('\r\n');
        const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? '')?.[1]);
        const headers: Record<string, string> = {};
        for (const line of lines.slice(1)) {
          const i = line.indexOf(':');
          if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
        }
        if (status >= 100 && status < 200) {
          interim.push(status);
          data = data.subarray(end + 4);
          sendBody();
          continue;
        }
        const length = Number(headers['content-length']);
        if (!(data.length - end - 4 >= length)) return;
        clearTimeout(timer);
        socket.destroy();
        const answer: WireAnswer = { status, headers, body: data.subarray(end + 4, end + 4 + length), interim };
        if ((headers['content-type'] ?? '').startsWith('application/json')) answer.json = JSON.parse(answer.body.toString('utf8'));
        resolve(answer);
        return;
      }
    });
    socket.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

/** A random-looking boundary of `digits` hex digits, as libraries make them (fixed here: tests must repeat). */
export function hexBoundary(digits: number, seed = 7): string {
  let out = '';
  let x = seed;
  for (let i = 0; i < digits; i++) {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    out += (x >> 16).toString(16).slice(-1);
  }
  return out;
}
