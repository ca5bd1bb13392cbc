/**
 * Header values with bytes >= 0x80 at either end, and Content-Length values that are not one number,
 * on the backend `bgone serve` picks without BGONE_HTTP (node:http): framing, authentication and
 * idempotency read the bytes the client sent, and a head whose framing is invalid gets 400 with
 * nothing behind it served (RFC 9112 §6.3). uWebSockets.js 20.30 trims such bytes before any
 * JavaScript sees the head, and closes invalid Content-Length heads unanswered: the pins at the end
 * (http-uws project only) hold the quirks docs/api.md lists for BGONE_HTTP=uws (the framing one is
 * in backends.test.ts, on a route that answers at once).
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer, testBackend } from '../helpers/server.js';

interface Reply {
  statusLines: string[];
  /** The JSON body of the first answer. */
  json: { code?: string; details?: { field?: string } } | undefined;
  text: string;
}

/**
 * Writes `bytes` on a fresh connection, half-closes unless told not to (uWS closes a connection on
 * the client's FIN, answers pending or not), and reads until the server closes (or `timeoutMs`).
 */
function exchange(port: number, bytes: Buffer, { halfClose = true, timeoutMs = 5_000 } = {}): Promise<Reply> {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true }, () => (halfClose ? socket.end(bytes) : socket.write(bytes)));
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => socket.destroy(), timeoutMs);
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      const text = Buffer.concat(chunks).toString('latin1');
      const statusLines = text.split('\r\n').filter((line) => /^HTTP\/1\.1 \d{3} /.test(line));
      const sep = text.indexOf('\r\n\r\n');
      let json: Reply['json'];
      if (sep >= 0) {
        const body = text.slice(sep + 4);
        const end = body.indexOf('HTTP/1.1 ');
        try {
          json = JSON.parse(end < 0 ? body : body.slice(0, end)) as Reply['json'];
        } catch {
          json = undefined;
        }
      }
      resolve({ statusLines, json, text });
    });
  });
}

/** A head's lines as bytes: strings as latin1, so that '\xff' is the byte 0xff on the wire. */
function head(lines: string[]): Buffer {
  return Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1');
}

const BEHIND = 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n';

describe('header bytes >= 0x80 at the ends of a value, on the default backend', () => {
  let ts: TestServer;
  beforeAll(async () => {
    ts = await startTestServer({ http: 'auto', credits: 5 });
  });
  afterAll(async () => {
    await ts?.close();
  });

  it('serves on node:http', () => {
    expect(ts.server.backend).toBe('node');
  });

  it('refuses Content-Length: 0\\xff with 400, and never serves the body as a request', async () => {
    const bytes = Buffer.concat([head(['POST /api/v1/remove HTTP/1.1', 'Host: 127.0.0.1', 'Content-Length: 0\xff']), Buffer.from(BEHIND, 'latin1')]);
    const reply = await exchange(ts.port, bytes);
    expect(reply.statusLines).toEqual(['HTTP/1.1 400 Bad Request']);
    expect(reply.json).toMatchObject({ code: 'validation_error' });
  });

  it('refuses Transfer-Encoding: chunked\\xff with 400', async () => {
    const bytes = Buffer.concat([
      head(['POST /api/v1/remove HTTP/1.1', 'Host: 127.0.0.1', 'Transfer-Encoding: chunked\xff']),
      Buffer.from(`0\r\n\r\n${BEHIND}`, 'latin1'),
    ]);
    const reply = await exchange(ts.port, bytes);
    expect(reply.statusLines).toEqual(['HTTP/1.1 400 Bad Request']);
    expect(reply.json).toMatchObject({ code: 'validation_error' });
  });

  it('does not authenticate an API key followed by bytes >= 0x80', async () => {
    for (const junk of ['\xff', '\xc3\xa9', '\x80\x80']) {
      const reply = await exchange(
        ts.port,
        head(['POST /api/v1/remove HTTP/1.1', 'Host: 127.0.0.1', `Authorization: Bearer ${ts.key}${junk}`, 'Content-Length: 0', 'Connection: close']),
      );
      expect(reply.statusLines, JSON.stringify(junk)).toEqual(['HTTP/1.1 401 Unauthorized']);
      expect(reply.json).toMatchObject({ code: 'authentication_error' });
    }
  });

  it('refuses an Idempotency-Key of bytes >= 0x80 only (or around visible ASCII) as a malformed key', async () => {
    for (const key of ['\xc3\xa9', '\xff', '\xffretry-1', 'retry-1\xff']) {
      const reply = await exchange(
        ts.port,
        head([
          'POST /api/v1/remove HTTP/1.1',
          'Host: 127.0.0.1',
          `Authorization: Bearer ${ts.key}`,
          `Idempotency-Key: ${key}`,
          'Content-Length: 0',
          'Connection: close',
        ]),
      );
      expect(reply.statusLines, JSON.stringify(key)).toEqual(['HTTP/1.1 400 Bad Request']);
      expect(reply.json).toMatchObject({ code: 'validation_error', details: { field: 'Idempotency-Key' } });
    }
  });

  it('answers a Content-Length that is not one number with 400 (RFC 9112 §6.3), serving nothing behind it', async () => {
    for (const value of ['5, 40', '5, 5', '-1', '1e3', '99999999999999999999']) {
      const bytes = Buffer.concat([
        head(['POST /api/v1/remove HTTP/1.1', 'Host: 127.0.0.1', `Content-Length: ${value}`]),
        Buffer.from(`hello${BEHIND}`, 'latin1'),
      ]);
      const reply = await exchange(ts.port, bytes);
      expect(reply.statusLines, value).toEqual(['HTTP/1.1 400 Bad Request']);
      expect(reply.json).toMatchObject({ code: 'validation_error' });
    }
  });
});

describe.runIf(testBackend() === 'uws')('BGONE_HTTP=uws: the quirks of uWebSockets.js 20.30 that docs/api.md lists', () => {
  let ts: TestServer;
  beforeAll(async () => {
    ts = await startTestServer({ http: 'uws' });
  });
  afterAll(async () => {
    await ts?.close();
  });

  it('authenticates a key followed by 0xff and drops an Idempotency-Key of bytes >= 0x80 only', async () => {
    const reply = await exchange(
      ts.port,
      head([
        'POST /api/v1/remove HTTP/1.1',
        'Host: 127.0.0.1',
        `Authorization: Bearer ${ts.key}\xff`,
        'Idempotency-Key: \xc3\xa9',
        'Content-Length: 0',
        'Connection: close',
      ]),
    );
    // Past authentication and the key's check: the empty body is what is refused.
    expect(reply.statusLines).toEqual(['HTTP/1.1 400 Bad Request']);
    expect(reply.json?.code).toBe('validation_error');
    expect(reply.json?.details?.field).not.toBe('Idempotency-Key');
  });

  it('closes a head whose Content-Length is a list unanswered', async () => {
    const reply = await exchange(ts.port, head(['POST /api/v1/remove HTTP/1.1', 'Host: 127.0.0.1', 'Content-Length: 5, 40']));
    expect(reply.text).toBe('');
  });
});
