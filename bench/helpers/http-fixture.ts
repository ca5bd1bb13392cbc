/**
 * The service under test for bench/http.ts: a throw-away SQLite store in a temporary folder with one
 * account on the Mega plan (credits and rate limit far beyond what the benchmark uses), the HTTP
 * server on 127.0.0.1 with an ephemeral port, and the multipart body of POST /api/v1/remove.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { createLogger } from '../../src/config/logger.js';
import { loadBackend } from '../../src/http/backend-select.js';
import { type RunningServer, startServer } from '../../src/server.js';
import { openStore, type Store } from '../../src/store/index.js';

export const HOST = '127.0.0.1';
export const REMOVE_PATH = '/api/v1/remove';

export interface ServiceFixture {
  server: RunningServer;
  store: Store;
  apiKey: string;
  accountId: number;
  url: string;
  queueLimit: number;
  /** Closes the server and the store and deletes the temporary folder (idempotent). */
  close(): Promise<void>;
}

export async function startService(options: {
  queueLimit: number;
  grant: number;
  rateLimitPerMinute: number;
  http: 'auto' | 'uws' | 'node';
}): Promise<ServiceFixture> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bgone-bench-http-'));
  let store: Store | undefined;
  let server: RunningServer | undefined;
  let closed = false;
  const close = async (): Promise<void> => {
    if (closed) return;
    closed = true;
    try {
      await server?.close();
    } finally {
      await store?.close();
      rmSync(dir, { recursive: true, force: true });
    }
  };
  try {
    store = await openStore({ path: path.join(dir, 'bench.db'), rateLimits: { mega: options.rateLimitPerMinute } });
    const account = await store.accounts.create({ email: 'bench-http@example.com', plan: 'mega' });
    await store.credits.grant(account.id, options.grant, 'bench:http');
    const { key } = await store.keys.create(account.id);
    server = await startServer({
      host: HOST,
      port: 0,
      queueLimit: options.queueLimit,
      // One account sends every request: its own in-flight cap must not be what is measured.
      accountInFlight: options.queueLimit,
      overloadRetryAfter: 1,
      drainTimeout: 30,
      store,
      http: loadBackend(options.http).backend,
      logger: createLogger('silent'),
    });
    return { server, store, apiKey: key, accountId: account.id, url: `http://${HOST}:${server.port}${REMOVE_PATH}`, queueLimit: options.queueLimit, close };
  } catch (err) {
    await close();
    throw err;
  }
}

/** A multipart/form-data body with the image in image_file and the given text fields. */
export function multipartBody(image: Buffer, filename: string, fields: Record<string, string>): { body: Buffer; contentType: string } {
  const boundary = `----bgone-bench-${randomBytes(12).toString('hex')}`;
  const parts: Buffer[] = [];
  for (const [name, value] of Object.entries(fields)) {
    parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`, 'utf8'));
  }
  parts.push(
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="image_file"; filename="${filename}"\r\nContent-Type: image/jpeg\r\n\r\n`, 'utf8'),
  );
  parts.push(image);
  parts.push(Buffer.from(`\r\n--${boundary}--\r\n`, 'utf8'));
  return { body: Buffer.concat(parts), contentType: `multipart/form-data; boundary=${boundary}` };
}

export interface SingleResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  ms: number;
}

/** One request on its own connection (closed afterwards), to check the answer before the load. */
export function postOnce(url: string, body: Buffer, headers: Record<string, string>, timeoutMs: number): Promise<SingleResponse> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const req = http.request(
      url,
      { method: 'POST', agent: false, headers: { ...headers, 'Content-Length': String(body.length), Connection: 'close' } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks), ms: performance.now() - started }));
      },
    );
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(body);
  });
}
