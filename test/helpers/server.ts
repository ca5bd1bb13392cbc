/**
 * A real bgone HTTP server for the server-*.test.ts files: a fresh SQLite file in its own temp
 * folder, one account with an exact credit balance, one API key, and startServer listening on an
 * ephemeral port of 127.0.0.1. Requests go through Node's own fetch/FormData/Blob.
 */

import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BackendChoice, CorsOrigins } from '../../src/config/defaults.js';
import { createLogger } from '../../src/config/logger.js';
import { loadBackend } from '../../src/http/backend-select.js';
import type { Backend } from '../../src/http/types.js';
import { type RunningServer, type ServerOptions, startServer } from '../../src/server.js';
import { type Clock, openStore, type PlanName, type RateLimits, type Store } from '../../src/store/index.js';

export interface TestServerOptions {
  /** Plan of the account (default 'free'). */
  plan?: PlanName;
  /** Exact credits left in the current cycle (default: the plan's allowance). */
  credits?: number;
  /** Requests whose body has arrived, admitted at once (default 16). */
  queueLimit?: number;
  /** Requests whose body is arriving, admitted at once (default: the server's, 64). */
  uploadLimit?: number;
  /** Per-plan rate limits (default: 100 000 per minute for every plan, so that limits never interfere). */
  rateLimits?: RateLimits;
  /** The store's clock (cycles, sessions, rate-limit windows). */
  clock?: Clock;
  /** Seconds close() waits for in-flight requests (default 30). */
  drainTimeout?: number;
  /** Seconds in Retry-After of a 503 (default 5). */
  overloadRetryAfter?: number;
  /** BGONE_CORS_ORIGINS (default: the service's, '*'). */
  cors?: CorsOrigins;
  /** The HTTP backend by BGONE_HTTP's choice (default: the vitest project's, testBackend()). */
  http?: BackendChoice;
}

export interface TestServer {
  /** e.g. http://127.0.0.1:40123 (no trailing slash). */
  url: string;
  port: number;
  key: string;
  keyId: number;
  accountId: number;
  store: Store;
  server: RunningServer;
  dir: string;
  dbPath: string;
  close(): Promise<void>;
}

const UNLIMITED: RateLimits = { free: 100_000, pro: 100_000, ultra: 100_000, mega: 100_000 };

/** Brings the account's balance to exactly `credits`: grants above the allowance, real charges below it. */
export async function setBalance(store: Store, accountId: number, credits: number): Promise<void> {
  const { remaining } = await store.credits.balance(accountId);
  if (credits > remaining) await store.credits.grant(accountId, credits - remaining, 'test');
  for (let i = remaining; i > credits; i--) {
    const r = await store.credits.reserve(accountId, { requestId: `req_setup${i}` });
    if (!r.ok || r.reservationId === null) throw new Error(`cannot consume a credit: ${JSON.stringify(r)}`);
    if (!(await store.credits.commit(r.reservationId))) throw new Error(`reservation ${r.reservationId} vanished before its charge`);
  }
  const after = (await store.credits.balance(accountId)).remaining;
  if (after !== credits) throw new Error(`balance is ${after}, wanted ${credits}`);
}

/**
 * A Free account of its own whose credits are all spent, and its key: a client without credits,
 * made in a moment (a Free allowance is small), leaving the server's own account as it is.
 */
export async function keyWithoutCredits(ts: Pick<TestServer, 'store'>): Promise<{ accountId: number; key: string }> {
  const account = await ts.store.accounts.create({ email: `broke-${randomUUID()}@example.com`, plan: 'free' });
  await setBalance(ts.store, account.id, 0);
  const { key } = await ts.store.keys.create(account.id);
  return { accountId: account.id, key };
}

export async function startTestServer(options: TestServerOptions = {}): Promise<TestServer> {
  const dir = mkdtempSync(join(tmpdir(), 'bgone-server-'));
  const dbPath = join(dir, 'db.sqlite');
  const store = await openStore({ path: dbPath, clock: options.clock, rateLimits: options.rateLimits ?? UNLIMITED });
  try {
    const account = await store.accounts.create({ email: 'client@example.com', plan: options.plan ?? 'free' });
    if (options.credits !== undefined) await setBalance(store, account.id, options.credits);
    const { key, info } = await store.keys.create(account.id);
    const { server, close } = await serveStore(store, dir, {
      queueLimit: options.queueLimit ?? 16,
      uploadLimit: options.uploadLimit,
      overloadRetryAfter: options.overloadRetryAfter ?? 5,
      drainTimeout: options.drainTimeout ?? 30,
      cors: options.cors,
      ...(options.http ? { http: loadBackend(options.http).backend } : {}),
    });
    return { url: `http://127.0.0.1:${server.port}`, port: server.port, key, keyId: info.id, accountId: account.id, store, server, dir, dbPath, close };
  } catch (err) {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

/**
 * The HTTP backend under test: the vitest project's (BGONE_TEST_HTTP=uws|node, see
 * vitest.config.ts), or the automatic choice when a file runs outside a project.
 */
export function testBackend(): 'auto' | 'uws' | 'node' {
  const chosen = process.env.BGONE_TEST_HTTP;
  return chosen === 'uws' || chosen === 'node' ? chosen : 'auto';
}

/** The backend of testBackend(), loaded, for startServer (which takes a backend, as `bgone serve` chooses it). */
export function testHttpBackend(): Backend {
  return loadBackend(testBackend()).backend;
}

/** Requests one account may hold at once in the test servers unless a test sets it: suites firing many in parallel from one account never meet the cap. */
const UNCAPPED_ACCOUNT_IN_FLIGHT = 1000;

/** What every test server shares: 127.0.0.1 on an ephemeral port, silent logs, the test's backend. */
export function testServerOptions(store: Store): ServerOptions {
  return {
    host: '127.0.0.1',
    port: 0,
    queueLimit: 16,
    overloadRetryAfter: 5,
    drainTimeout: 30,
    store,
    logger: createLogger('silent'),
    http: testHttpBackend(),
  };
}

/**
 * Starts startServer over `store` on 127.0.0.1 (ephemeral port, silent logs). close() is idempotent:
 * it stops the server, then closes the store, then removes the test's temp folder `dir`.
 */
export async function serveStore(store: Store, dir: string, options: Partial<ServerOptions> = {}): Promise<{ server: RunningServer; close(): Promise<void> }> {
  const server = await startServer({
    ...testServerOptions(store),
    accountInFlight: UNCAPPED_ACCOUNT_IN_FLIGHT,
    metrics: { listen: { host: '127.0.0.1', port: 0 } },
    ...options,
  });
  let closed = false;
  return {
    server,
    close: async () => {
      if (closed) return;
      closed = true;
      await server.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The base URL of a test server's metrics listener (serveStore gives every one). */
export function metricsUrl(server: RunningServer): string {
  if (server.metricsPort === undefined) throw new Error('this server has no metrics listener');
  return `http://127.0.0.1:${server.metricsPort}`;
}

export interface ImagePart {
  data: Buffer | Uint8Array;
  /** Default 'photo.jpg'. */
  filename?: string;
  /** Default 'image/jpeg'. */
  type?: string;
}

export interface HttpResult {
  status: number;
  headers: Headers;
  body: Buffer;
  /** The parsed body when the response is JSON. */
  json?: any;
}

export async function toResult(res: Response): Promise<HttpResult> {
  const body = Buffer.from(await res.arrayBuffer());
  let json: unknown;
  if ((res.headers.get('content-type') ?? '').startsWith('application/json')) json = JSON.parse(body.toString('utf8'));
  return { status: res.status, headers: res.headers, body, json };
}

/** A Blob of the bytes (copied into a plain ArrayBuffer, as the DOM typings want). */
export function blob(data: Buffer | Uint8Array, type: string): Blob {
  return new Blob([new Uint8Array(data)], { type });
}

/** The multipart form of a remove request: option fields first, then the image part (if any). */
export function removeForm(fields: Record<string, string>, image?: Buffer | Uint8Array | ImagePart | null): FormData {
  const form = new FormData();
  for (const [name, value] of Object.entries(fields)) form.append(name, value);
  if (image) {
    const part: ImagePart = image instanceof Uint8Array ? { data: image } : image;
    form.append('image_file', blob(part.data, part.type ?? 'image/jpeg'), part.filename ?? 'photo.jpg');
  }
  return form;
}

/**
 * POST /api/v1/remove with `Authorization: Bearer <key>` (none when key is null), the given option
 * fields and the image as the image_file part (none when image is null/undefined).
 */
export async function postImage(
  url: string,
  key: string | null,
  fields: Record<string, string>,
  image?: Buffer | Uint8Array | ImagePart | null,
  headers: Record<string, string> = {},
): Promise<HttpResult> {
  const h: Record<string, string> = { ...headers };
  if (key !== null) h.authorization = `Bearer ${key}`;
  const res = await fetch(`${url}/api/v1/remove`, { method: 'POST', headers: h, body: removeForm(fields, image) });
  return toResult(res);
}

export async function get(url: string, path: string, init: RequestInit = {}): Promise<HttpResult> {
  return toResult(await fetch(`${url}${path}`, init));
}

/** Polls until `predicate` is true (every 10 ms), failing after `timeoutMs`. */
export async function waitFor(predicate: () => boolean | Promise<boolean>, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** The parts of an account's balance that a request could change. */
export async function credits(ts: Pick<TestServer, 'store' | 'accountId'>): Promise<{ used: number; reserved: number; remaining: number }> {
  const { used, reserved, remaining } = await ts.store.credits.balance(ts.accountId);
  return { used, reserved, remaining };
}

/** A photo server on 127.0.0.1 (an image URL's other end): GET `path` answers `photo` as a JPEG, any other path 404. */
export async function servePhoto(path: string, photo: Buffer): Promise<{ base: string; close(): Promise<void> }> {
  const server = createServer((req, res) => {
    if (req.url !== path) {
      res.writeHead(404);
      res.end('no');
      return;
    }
    res.writeHead(200, { 'Content-Type': 'image/jpeg', 'Content-Length': photo.length });
    res.end(photo);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
