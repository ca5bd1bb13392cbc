/**
 * Answers written before the body is read (a wrong key, no credits, a body declared too large) to
 * clients that are still uploading, on the backend of the vitest project: the client reads the
 * answer, never a reset (docs/contract.md, "HTTP framing"). Real server on 127.0.0.1, raw sockets
 * that send the head and part of a declared body, wait for the answer where the backend writes it
 * at once, then send the rest; and fetch with a large upload and a wrong key.
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DISCARD_MAX_BYTES } from '../../src/http/backends/request-headers.js';
import { setBalance, startTestServer, type TestServer } from '../helpers/server.js';

const REMOVE = '/api/v1/remove';
const BODY = 16 * 1024 * 1024;
const CHUNK = 64 * 1024;
const backend = process.env.BGONE_TEST_HTTP === 'uws' ? 'uws' : 'node';

interface Answer {
  status: number;
  headers: Record<string, string>;
  json: { code?: string };
}

interface Upload {
  /** The first answer, complete (head and its Content-Length of body), or undefined. */
  answer: Answer | undefined;
  /** The socket error the client saw (ECONNRESET, EPIPE), if any. */
  error: string | undefined;
  /** Body bytes the client wrote. */
  sent: number;
  /** Every answer's status line, in order. */
  statusLines: string[];
}

function parseAnswers(data: Buffer): { answers: Answer[]; statusLines: string[] } {
  const answers: Answer[] = [];
  const statusLines: string[] = [];
  let rest = data;
  for (;;) {
    const sep = rest.indexOf('\r\n\r\n');
    if (sep < 0) break;
    const [statusLine = '', ...lines] = rest.subarray(0, sep).toString('latin1').split('\r\n');
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const colon = line.indexOf(':');
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    const length = Number(headers['content-length']);
    if (rest.length < sep + 4 + length) break;
    statusLines.push(statusLine);
    answers.push({
      status: Number(statusLine.split(' ')[1]),
      headers,
      json: JSON.parse(rest.subarray(sep + 4, sep + 4 + length).toString('utf8')) as Answer['json'],
    });
    rest = rest.subarray(sep + 4 + length);
  }
  return { answers, statusLines };
}

/**
 * One connection: `head`, then `first` body bytes; then, when `waitForAnswer`, nothing until the
 * first answer is complete; then the rest of `total` (as fast as the server reads it) and `after`
 * (a request behind the body), and the client's FIN. Resolves once the connection has closed.
 */
function upload(port: number, head: string, total: number, options: { first?: number; waitForAnswer: boolean; after?: string }): Promise<Upload> {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    let data = Buffer.alloc(0);
    let error: string | undefined;
    let sent = 0;
    let answered: () => void = () => {};
    const firstAnswer = new Promise<void>((r) => {
      answered = r;
    });
    socket.on('data', (chunk: Buffer) => {
      data = Buffer.concat([data, chunk]);
      if (parseAnswers(data).answers.length > 0) answered();
    });
    // The server's FIN: the client goes on writing its body (allowHalfOpen), as an HTTP client does.
    socket.on('end', () => answered());
    socket.on('error', (err: NodeJS.ErrnoException) => {
      error ??= err.code ?? err.message;
      answered();
    });
    socket.on('close', () => {
      const { answers, statusLines } = parseAnswers(data);
      resolve({ answer: answers[0], error, sent, statusLines });
    });
    socket.on('connect', async () => {
      const write = async (bytes: Buffer | string) => {
        if (socket.destroyed || error) return;
        if (!socket.write(bytes))
          await new Promise<void>((r) => {
            socket.once('drain', r);
            socket.once('close', r);
          });
      };
      await write(head);
      const first = Math.min(options.first ?? CHUNK, total);
      await write(Buffer.alloc(first, 0x61));
      sent = first;
      if (options.waitForAnswer) await firstAnswer;
      const chunk = Buffer.alloc(CHUNK, 0x61);
      while (sent < total && !socket.destroyed && !error) {
        const n = Math.min(CHUNK, total - sent);
        await write(n === CHUNK ? chunk : chunk.subarray(0, n));
        if (!error) sent += n;
      }
      if (options.after) await write(options.after);
      if (!socket.destroyed) socket.end();
    });
  });
}

function removeHead(key: string, length: number, extra: string[] = []): string {
  return [
    `POST ${REMOVE} HTTP/1.1`,
    'Host: 127.0.0.1',
    `Authorization: Bearer ${key}`,
    'Content-Type: multipart/form-data; boundary=early',
    `Content-Length: ${length}`,
    ...extra,
    '',
    '',
  ].join('\r\n');
}

let ts: TestServer;

beforeAll(async () => {
  ts = await startTestServer({ credits: 5 });
});

afterAll(async () => {
  await ts?.close();
});

describe('an answer written before the body is read', () => {
  it('reaches a client still uploading to a keep-alive connection, reads the rest of the body and serves the next request', async () => {
    const next = 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n';
    const result = await upload(ts.port, removeHead('rb-sk_wrong-key', BODY), BODY, { waitForAnswer: true, after: next });
    expect(result.error).toBeUndefined();
    expect(result.sent).toBe(BODY);
    expect(result.answer).toMatchObject({ status: 401, json: { code: 'authentication_error' } });
    expect(result.statusLines).toEqual(['HTTP/1.1 401 Unauthorized', 'HTTP/1.1 200 OK']);
  });

  it('reaches a client that asked to close and sends its whole upload: the answer, then a close without a reset', async () => {
    const result = await upload(ts.port, removeHead('rb-sk_wrong-key', BODY, ['Connection: close']), BODY, { waitForAnswer: false });
    expect(result.error).toBeUndefined();
    expect(result.sent).toBe(BODY);
    expect(result.answer).toMatchObject({ status: 401, headers: { connection: 'close' }, json: { code: 'authentication_error' } });
    expect(result.statusLines).toHaveLength(1);
  });

  // uWS holds a closing early answer until the body has been read (docs/api.md, "HTTP backends"):
  // a client that waits for it before sending the rest waits DISCARD_IDLE_MS, then gets it and a close.
  it.runIf(backend === 'node')(
    'comes before the rest of the body to a client that asked to close, which then sends that rest without a reset, and nothing behind it is served',
    async () => {
      await setBalance(ts.store, ts.accountId, 0);
      try {
        const behind = 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n';
        const result = await upload(ts.port, removeHead(ts.key, BODY, ['Connection: close']), BODY, { waitForAnswer: true, after: behind });
        expect(result.error).toBeUndefined();
        expect(result.sent).toBe(BODY);
        expect(result.answer).toMatchObject({ status: 402, headers: { connection: 'close' }, json: { code: 'payment_required' } });
        expect(result.statusLines).toHaveLength(1);
      } finally {
        await setBalance(ts.store, ts.accountId, 5);
      }
    },
  );

  it(`answers a body declared over ${DISCARD_MAX_BYTES / 2 ** 20} MiB with Connection: close`, async () => {
    const conn = await upload(ts.port, removeHead('rb-sk_wrong-key', 512 * 1024 * 1024), CHUNK, { waitForAnswer: true });
    expect(conn.error).toBeUndefined();
    expect(conn.answer).toMatchObject({ status: 401, headers: { connection: 'close' } });
  });

  it('reaches fetch sending a large upload with a wrong key, on a kept and on a closed connection', async () => {
    for (const connection of [{}, { Connection: 'close' }] as Array<Record<string, string>>) {
      const res = await fetch(`${ts.url}${REMOVE}`, {
        method: 'POST',
        headers: { Authorization: 'Bearer rb-sk_wrong-key', 'Content-Type': 'multipart/form-data; boundary=early', ...connection },
        body: new Uint8Array(BODY),
      });
      expect(res.status).toBe(401);
      expect(((await res.json()) as { code: string }).code).toBe('authentication_error');
    }
  });
});
