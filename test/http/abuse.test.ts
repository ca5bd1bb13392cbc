/**
 * The abuse limits of docs/contract.md ("Abuse limits", and the boundary on request headers) through
 * real HTTP, on the backend of the vitest project (http-uws, http-node): startServer on 127.0.0.1:0
 * with the dashboard mounted, a SQLite file in a temp folder, the real model. Every refusal is
 * checked for its status and code, and for the account's balance staying as it was.
 *
 * - The body deadline (BGONE_BODY_TIMEOUT): a client that sends half a body and then trickles gets
 *   408 request_timeout and its connection closed, on /remove, /batches, /webhooks and the
 *   dashboard's try-it; its admission place is free again.
 * - The per-account in-flight cap (BGONE_ACCOUNT_IN_FLIGHT): slow uploads of one account cannot
 *   take the places of another.
 * - Rate limits per account as well as per key; at most 10 active keys per account (dashboard, CLI).
 * - Refusals for credits come before the body: 402 while the client has sent headers only.
 * - A client that disconnects keeps its rate-limit count and (while its job runs) its place; a job
 *   still queued for the native core is dropped before inference.
 * - Idempotency-Key replays only the same image with the same options.
 * - Request headers over the limit get 431 and the connection closed (or, where uWS 20.30 itself
 *   drops the head, at least the connection closed).
 */
import { mkdtempSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import { mountDashboard } from '../../src/dashboard/index.js';
import { configure, librarySettings, queueSize } from '../../src/lib/index.js';
import type { ServerOptions } from '../../src/server.js';
import { type Clock, openStore, type RateLimits, type Store } from '../../src/store/index.js';
import { killChildren, runCli } from '../helpers/cli-process.js';
import { PHOTOS } from '../helpers/constants.js';
import { message } from '../helpers/dashboard-client.js';
import { expectError, trackUncaught } from '../helpers/http-assert.js';
import { asHttpResult, multipartBody, type Part } from '../helpers/http-raw.js';
import { readFixture, readPhoto } from '../helpers/paths.js';
import { credits, get, type HttpResult, postImage, serveStore, setBalance, waitFor } from '../helpers/server.js';

const REMOVE = '/api/v1/remove';
const teddy = readPhoto(PHOTOS.teddy);
const llama = readPhoto(PHOTOS.llama);
/** 2989x1680: a job that keeps the native core busy for a few seconds at size=full. */
const bigSwan = readFixture('swan-big.jpg');
const UNLIMITED: RateLimits = { free: 100_000, pro: 100_000, ultra: 100_000, mega: 100_000 };
const uncaught = trackUncaught();

interface AbuseServer {
  url: string;
  port: number;
  store: Store;
  server: Awaited<ReturnType<typeof serveStore>>['server'];
  accountId: number;
  key: string;
  dbPath: string;
  /** A second account with its own key and balance. */
  other: { accountId: number; key: string };
  close(): Promise<void>;
}

const live = new Set<AbuseServer>();

/** A server with the dashboard mounted and two accounts ("client" and "other"), each with one key. */
async function serve(
  options: Partial<ServerOptions> & { credits?: number; rateLimits?: RateLimits; clock?: Clock; maxKeysPerAccount?: number } = {},
): Promise<AbuseServer> {
  const dir = mkdtempSync(join(tmpdir(), 'bgone-abuse-'));
  const dbPath = join(dir, 'db.sqlite');
  const { credits: balance, rateLimits, clock, maxKeysPerAccount, ...serverOptions } = options;
  const store = await openStore({ path: dbPath, clock, rateLimits: rateLimits ?? UNLIMITED, maxKeysPerAccount, lastUsedResolutionMs: 0 });
  const account = await store.accounts.create({ email: 'client@example.com' });
  if (balance !== undefined) await setBalance(store, account.id, balance);
  const other = await store.accounts.create({ email: 'other@example.com' });
  const logger = createLogger('silent');
  const { server, close } = await serveStore(store, dir, { ...serverOptions, mount: (context) => mountDashboard(context, { store, logger }) });
  const s: AbuseServer = {
    url: `http://127.0.0.1:${server.port}`,
    port: server.port,
    store,
    server,
    accountId: account.id,
    key: (await store.keys.create(account.id)).key,
    dbPath,
    other: { accountId: other.id, key: (await store.keys.create(other.id)).key },
    close: async () => {
      live.delete(s);
      await close();
    },
  };
  live.add(s);
  return s;
}

afterEach(async () => {
  await uncaught.check();
  for (const s of live) expect((await get(s.url, '/healthz')).status).toBe(200);
});

afterAll(async () => {
  killChildren();
  for (const s of [...live]) await s.close();
});

// --- A raw client ---------------------------------------------------------------------------------

interface RawAnswer {
  status: number | null;
  headers: Record<string, string>;
  json?: any;
  /** ms from connecting to the complete answer (null: none came). */
  answeredMs: number | null;
}

/**
 * A TCP client that writes what it is told, reads one HTTP/1.1 answer (Content-Length framed) and
 * notices when the server closes the connection. It never closes it itself unless told to.
 */
function rawClient(port: number) {
  const socket = net.connect(port, '127.0.0.1');
  const started = performance.now();
  let data = Buffer.alloc(0);
  let trickle: NodeJS.Timeout | undefined;
  let resolveAnswer!: (a: RawAnswer) => void;
  const answer = new Promise<RawAnswer>((resolve) => {
    resolveAnswer = resolve;
  });
  const parse = (): RawAnswer | undefined => {
    const sep = data.indexOf('\r\n\r\n');
    if (sep < 0) return undefined;
    const [statusLine, ...lines] = data.subarray(0, sep).toString('latin1').split('\r\n');
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const i = line.indexOf(':');
      if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
    }
    const body = data.subarray(sep + 4);
    if (body.length < Number(headers['content-length'] ?? 0)) return undefined;
    const json = (headers['content-type'] ?? '').startsWith('application/json') ? JSON.parse(body.toString('utf8')) : undefined;
    return { status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine ?? '')?.[1]), headers, json, answeredMs: performance.now() - started };
  };
  socket.on('data', (chunk: Buffer) => {
    data = Buffer.concat([data, chunk]);
    const parsed = parse();
    if (parsed) resolveAnswer(parsed);
  });
  socket.on('error', () => {}); // a write after the server closed: EPIPE / ECONNRESET
  /** Resolves with the ms at which the connection ended (the server closed it, or destroy()). */
  const closed = new Promise<number>((resolve) =>
    socket.on('close', () => {
      if (trickle) clearInterval(trickle);
      resolveAnswer(parse() ?? { status: null, headers: {}, answeredMs: null });
      resolve(performance.now() - started);
    }),
  );
  const ready = new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  return {
    ready,
    answer,
    closed,
    write: (bytes: Buffer | string) => void socket.write(bytes),
    /** Sends one byte of `bytes` every `ms` (a slow client that never finishes in time). */
    trickle(bytes: Buffer, ms: number) {
      let at = 0;
      trickle = setInterval(() => {
        if (at < bytes.length && !socket.destroyed) socket.write(bytes.subarray(at, ++at));
      }, ms);
    },
    destroy: () => socket.destroy(),
  };
}

/** A request head; `length` is the Content-Length. */
function head(method: string, path: string, headers: Record<string, string>, length: number): string {
  const lines = [`${method} ${path} HTTP/1.1`, 'Host: 127.0.0.1', ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`), `Content-Length: ${length}`];
  return `${lines.join('\r\n')}\r\n\r\n`;
}

/** A multipart /remove (or batch, or try-it) body with the teddy photo, and its Content-Type. */
function imageForm(boundary: string, fields: Record<string, string> = {}, image = teddy): { body: Buffer; type: string } {
  const parts: Part[] = [
    ...Object.entries(fields).map(([name, data]) => ({ name, data })),
    { name: 'image_file', filename: 'photo.jpg', type: 'image/jpeg', data: image },
  ];
  return { body: multipartBody(boundary, parts), type: `multipart/form-data; boundary=${boundary}` };
}

/** Starts a request whose body arrives only half, then one byte every 200 ms: never complete in time. */
async function stalledRequest(port: number, method: string, path: string, headers: Record<string, string>, body: Buffer) {
  const client = rawClient(port);
  await client.ready;
  client.write(head(method, path, headers, body.length));
  client.write(body.subarray(0, body.length >> 1));
  client.trickle(body.subarray(body.length >> 1), 200);
  return client;
}

/** A dashboard session of the account: its cookie and CSRF token (as the try-it page's script sends them). */
async function session(store: Store, accountId: number): Promise<{ cookie: string; csrf: string }> {
  const { token, session: created } = await store.sessions.create(accountId);
  return { cookie: `bgone_session=${token}`, csrf: created.csrfToken };
}

/** The inference count of the server's metrics (bgone_inference_seconds_count). */
async function inferences(s: AbuseServer): Promise<number> {
  const text = await s.server.metrics.render();
  return Number(/^bgone_inference_seconds_count(?:\{[^}]*\})? (\d+)$/m.exec(text)?.[1] ?? 0);
}

async function expectBalanceUnchanged<T>(s: AbuseServer, run: () => Promise<T>): Promise<T> {
  const before = await credits(s);
  const result = await run();
  expect(await credits(s), 'credits after the refused request').toEqual(before);
  return result;
}

/** An answer that is the contract's error, and a connection the server closed. */
async function expectTimedOut(client: ReturnType<typeof rawClient>, deadlineMs: number): Promise<void> {
  const answer = await client.answer;
  expect({ status: answer.status, code: answer.json?.code }).toEqual({ status: 408, code: 'request_timeout' });
  expectError(asHttpResult({ status: answer.status, headers: answer.headers, json: answer.json }), 408, 'request_timeout');
  expect(answer.headers.connection).toBe('close');
  expect(answer.answeredMs!).toBeGreaterThanOrEqual(deadlineMs - 100);
  expect(answer.answeredMs!).toBeLessThan(deadlineMs + 5000);
  // The server closes the connection: the client did not (it was still trickling).
  const closedAt = await Promise.race([client.closed, new Promise<null>((resolve) => setTimeout(() => resolve(null), 5000))]);
  expect(closedAt, 'the server closed the connection after the 408').not.toBeNull();
}

// --- 1. The body deadline -------------------------------------------------------------------------

describe('the body deadline (BGONE_BODY_TIMEOUT)', () => {
  it('/remove: half a body, then a trickle → 408 request_timeout at the deadline, connection closed, nothing charged, place freed', async () => {
    const s = await serve({ bodyTimeout: 1, credits: 5 });
    try {
      const { body, type } = imageForm('SlowBoundary', { size: 'preview' });
      await expectBalanceUnchanged(s, async () => {
        const client = await stalledRequest(s.port, 'POST', REMOVE, { Authorization: `Bearer ${s.key}`, 'Content-Type': type }, body);
        await waitFor(() => s.server.inFlight() === 1, 'the upload to be admitted');
        await expectTimedOut(client, 1000);
      });
      await waitFor(() => s.server.inFlight() === 0, 'the admission place to be free');
      // A complete upload afterwards is served normally.
      const ok = await postImage(s.url, s.key, { size: 'preview' }, teddy);
      expect(ok.status).toBe(200);
    } finally {
      await s.close();
    }
  });

  it('/batches and /webhooks: the same 408 and closed connection; no batch and no endpoint is created', async () => {
    const s = await serve({ bodyTimeout: 1, credits: 5 });
    try {
      const auth = { Authorization: `Bearer ${s.key}` };
      const { body, type } = imageForm('SlowBatch', { size: 'preview' });
      await expectBalanceUnchanged(s, async () => {
        const batch = await stalledRequest(s.port, 'POST', '/api/v1/batches', { ...auth, 'Content-Type': type }, body);
        const hook = await stalledRequest(
          s.port,
          'POST',
          '/api/v1/webhooks',
          { ...auth, 'Content-Type': 'application/json' },
          Buffer.from(JSON.stringify({ url: 'https://example.com/hooks', description: 'slow' })),
        );
        await expectTimedOut(batch, 1000);
        await expectTimedOut(hook, 1000);
      });
      expect(await s.store.batches.list(s.accountId, 10)).toEqual([]);
      expect(await s.store.webhooks.list(s.accountId)).toEqual([]);
      await waitFor(() => s.server.inFlight() === 0, 'the admission places to be free');
    } finally {
      await s.close();
    }
  });

  it("the dashboard's try-it: the same 408 and closed connection, nothing charged", async () => {
    const s = await serve({ bodyTimeout: 1, credits: 5 });
    try {
      const { cookie, csrf } = await session(s.store, s.accountId);
      const { body, type } = imageForm('SlowTry', { size: 'preview' });
      await expectBalanceUnchanged(s, async () => {
        const client = await stalledRequest(s.port, 'POST', '/dashboard/try', { Cookie: cookie, 'X-CSRF-Token': csrf, 'Content-Type': type }, body);
        await expectTimedOut(client, 1000);
      });
      await waitFor(() => s.server.inFlight() === 0, 'the admission place to be free');
    } finally {
      await s.close();
    }
  });
});

// --- 2. The per-account in-flight cap --------------------------------------------------------------

describe('the per-account in-flight cap (BGONE_ACCOUNT_IN_FLIGHT)', () => {
  it("one account's slow uploads hold its cap (429 for its next request, from any key) while another account is served normally", async () => {
    const s = await serve({ accountInFlight: 2, queueLimit: 16, overloadRetryAfter: 3, credits: 5 });
    const slow: Array<ReturnType<typeof rawClient>> = [];
    try {
      const { body, type } = imageForm('TrickleBoundary', { size: 'preview' });
      for (let i = 0; i < 2; i++) {
        const client = rawClient(s.port);
        await client.ready;
        client.write(head('POST', REMOVE, { Authorization: `Bearer ${s.key}`, 'Content-Type': type }, body.length));
        client.write(body.subarray(0, 1000));
        client.trickle(body.subarray(1000), 100);
        slow.push(client);
      }
      await waitFor(() => s.server.inFlight() === 2, 'both slow uploads to be admitted');

      const secondKey = (await s.store.keys.create(s.accountId)).key;
      for (const key of [s.key, secondKey]) {
        const refused = await expectBalanceUnchanged(s, () => postImage(s.url, key, { size: 'preview' }, teddy));
        const error = expectError(refused, 429, 'rate_limit_exceeded');
        expect(error.details).toEqual({ in_flight_limit: 2 });
        expect(refused.headers.get('retry-after')).toBe('3');
        expect(refused.headers.get('x-ratelimit-limit')).toMatch(/^\d+$/);
      }
      // Another account is not held back by the first one's slow clients.
      const served = await postImage(s.url, s.other.key, { size: 'preview' }, teddy);
      expect(served.status).toBe(200);
      expect(served.headers.get('x-credits-charged')).toBe('1');
      expect(s.server.inFlight()).toBe(2);

      for (const client of slow) client.destroy();
      await waitFor(() => s.server.inFlight() === 0, 'the slow uploads to give their places back');
      expect((await postImage(s.url, s.key, { size: 'preview' }, teddy)).status).toBe(200);
    } finally {
      for (const client of slow) client.destroy();
      await s.close();
    }
  });
});

// --- 2b. Uploads and jobs are separate budgets; uploads must keep a minimum rate -------------------

/** Starts uploads that send their head and 1000 bytes, then one byte every 100 ms (never complete in time). */
async function tricklingUploads(port: number, key: string, count: number, clients: Array<ReturnType<typeof rawClient>>): Promise<void> {
  const { body, type } = imageForm('TrickleBoundary', { size: 'preview' });
  for (let i = 0; i < count; i++) {
    const client = rawClient(port);
    clients.push(client);
    await client.ready;
    client.write(head('POST', REMOVE, { Authorization: `Bearer ${key}`, 'Content-Type': type }, body.length));
    client.write(body.subarray(0, 1000));
    client.trickle(body.subarray(1000), 100);
  }
}

describe('uploads in progress and jobs in progress are separate budgets (BGONE_UPLOAD_LIMIT)', () => {
  it("with the default limits, 4 accounts × 4 trickling uploads take 16 places, and a fifth account's /remove is still served", async () => {
    // The defaults: BGONE_QUEUE_LIMIT 16, BGONE_ACCOUNT_IN_FLIGHT 4, BGONE_UPLOAD_LIMIT 64. The
    // minimum upload rate is off here: the two budgets alone must keep the fifth account served.
    const s = await serve({ queueLimit: 16, accountInFlight: 4, bodyMinRate: { bytesPerSecond: 0 }, credits: 5 });
    const slow: Array<ReturnType<typeof rawClient>> = [];
    try {
      const accounts = [s.key, s.other.key];
      for (let i = 3; i <= 4; i++) {
        const account = await s.store.accounts.create({ email: `trickle${i}@example.com` });
        accounts.push((await s.store.keys.create(account.id)).key);
      }
      for (const key of accounts) await tricklingUploads(s.port, key, 4, slow);
      await waitFor(() => s.server.inFlight() === 16, 'the 16 trickling uploads to be admitted');
      const fifth = await s.store.accounts.create({ email: 'fifth@example.com' });
      const served = await postImage(s.url, (await s.store.keys.create(fifth.id)).key, { size: 'preview' }, teddy);
      expect(served.status).toBe(200);
      expect(served.headers.get('x-credits-charged')).toBe('1');
      // The trickling clients still hold their places (their accounts are at their own cap).
      expect(s.server.inFlight()).toBe(16);
      expectError(await postImage(s.url, s.key, { size: 'preview' }, teddy), 429, 'rate_limit_exceeded');
    } finally {
      for (const client of slow) client.destroy();
      await waitFor(() => s.server.inFlight() === 0, 'the slow uploads to give their places back');
      await s.close();
    }
  });

  it('past BGONE_UPLOAD_LIMIT uploads, a new upload is 503 overloaded with Retry-After before its body is read, uncharged', async () => {
    const s = await serve({ queueLimit: 16, uploadLimit: 2, overloadRetryAfter: 4, bodyMinRate: { bytesPerSecond: 0 }, credits: 5 });
    const slow: Array<ReturnType<typeof rawClient>> = [];
    try {
      await tricklingUploads(s.port, s.key, 2, slow);
      await waitFor(() => s.server.inFlight() === 2, 'the 2 trickling uploads to be admitted');
      const refused = await expectBalanceUnchanged(s, () => postImage(s.url, s.other.key, { size: 'preview' }, teddy));
      expect(expectError(refused, 503, 'overloaded').message).toMatch(/uploads in progress/);
      expect(refused.headers.get('retry-after')).toBe('4');
      // A request without a body needs no upload place.
      expect((await get(s.url, '/api/v1/batches', { headers: { Authorization: `Bearer ${s.other.key}` } })).status).toBe(200);
    } finally {
      for (const client of slow) client.destroy();
      await waitFor(() => s.server.inFlight() === 0, 'the slow uploads to give their places back');
      await s.close();
    }
  });
});

describe('the minimum upload rate (BGONE_BODY_MIN_RATE), and no upload cut without an answer', () => {
  it('an upload that brings less than the minimum in a window gets 408 at that window, long before the body deadline; one above it is served', async () => {
    const s = await serve({ bodyTimeout: 60, bodyMinRate: { bytesPerSecond: 2000, windowMs: 1000 }, credits: 5 });
    try {
      const { body, type } = imageForm('SlowRate', { size: 'preview' });
      await expectBalanceUnchanged(s, async () => {
        const client = await stalledRequest(s.port, 'POST', REMOVE, { Authorization: `Bearer ${s.key}`, 'Content-Type': type }, body);
        await expectTimedOut(client, 1000);
        const answer = await client.answer;
        expect(answer.json.details).toEqual({ min_bytes: 2000, window_seconds: 1 });
        expect(answer.answeredMs!).toBeLessThan(4000);
      });
      await waitFor(() => s.server.inFlight() === 0, 'the admission place to be free');
      // 2500 bytes every 500 ms (5000 a second, over several windows): served.
      const client = rawClient(s.port);
      await client.ready;
      client.write(head('POST', REMOVE, { Authorization: `Bearer ${s.key}`, 'Content-Type': type }, body.length));
      for (let at = 0; at < body.length; at += 2500) {
        client.write(body.subarray(at, at + 2500));
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
      expect(body.length).toBeGreaterThan(5 * 2500); // it took several windows
      expect((await client.answer).status).toBe(200);
      client.destroy();
    } finally {
      await s.close();
    }
  });

  it('with no minimum rate, an upload slower than 16 KB/s is answered 408 at the body deadline on both backends (uWS no longer cuts it at ~10 s)', {
    timeout: 40_000,
  }, async () => {
    const s = await serve({ bodyTimeout: 14, bodyMinRate: { bytesPerSecond: 0 }, credits: 5 });
    try {
      const { body, type } = imageForm('SlowUws', { size: 'preview' });
      const client = await stalledRequest(s.port, 'POST', REMOVE, { Authorization: `Bearer ${s.key}`, 'Content-Type': type }, body);
      await expectTimedOut(client, 14_000);
    } finally {
      await s.close();
    }
  });

  it('with the defaults (16 KiB a second over 10 s), a 5 KB/s upload is answered 408 after its first window, on both backends', {
    timeout: 40_000,
  }, async () => {
    const s = await serve({ credits: 5 });
    try {
      const { body, type } = imageForm('FiveKbps', { size: 'preview' }, bigSwan);
      expect(body.length).toBeGreaterThan(150_000); // it cannot finish within the first window at this rate
      const client = rawClient(s.port);
      await client.ready;
      client.write(head('POST', REMOVE, { Authorization: `Bearer ${s.key}`, 'Content-Type': type }, body.length));
      let at = 0;
      const sender = setInterval(() => {
        client.write(body.subarray(at, at + 500));
        at += 500;
      }, 100);
      try {
        await expectTimedOut(client, 10_000);
        expect((await client.answer).json.details).toEqual({ min_bytes: 163_840, window_seconds: 10 });
      } finally {
        clearInterval(sender);
      }
    } finally {
      await s.close();
    }
  });
});

// --- 3. Rate limits per account; keys per account ------------------------------------------------

describe('rate limits per account as well as per key', () => {
  it('more keys do not raise the limit: 3 per minute across two keys, then a fresh key is refused too; the headers show the account count', async () => {
    const minute = Date.UTC(2030, 0, 1, 12, 0, 0);
    const s = await serve({ rateLimits: { free: 3 }, clock: () => new Date(minute + 30_000) });
    try {
      const second = (await s.store.keys.create(s.accountId)).key;
      // Cheap requests refused by validation: they count against the limit, and charge nothing.
      const bad = (key: string) => postImage(s.url, key, { format: 'bmp' }, teddy);
      const answers: HttpResult[] = [];
      for (const key of [s.key, s.key, second]) answers.push(await expectBalanceUnchanged(s, () => bad(key)));
      expect(answers.map((r) => r.status)).toEqual([400, 400, 400]);
      expect(answers.map((r) => r.headers.get('x-ratelimit-remaining'))).toEqual(['2', '1', '0']); // the account's count, not the second key's (2)
      const third = (await s.store.keys.create(s.accountId)).key;
      for (const key of [second, third]) {
        const refused = await expectBalanceUnchanged(s, () => bad(key));
        expectError(refused, 429, 'rate_limit_exceeded');
        expect(refused.headers.get('retry-after')).toBe('30');
        expect(refused.headers.get('x-ratelimit-limit')).toBe('3');
        expect(refused.headers.get('x-ratelimit-remaining')).toBe('0');
      }
      // Another account has its own minute.
      expect((await bad(s.other.key)).status).toBe(400);
    } finally {
      await s.close();
    }
  });
});

describe('at most 10 active keys per account (BGONE_MAX_KEYS_PER_ACCOUNT)', () => {
  it('the dashboard refuses the 11th with a clear message, and creates it once one is revoked', async () => {
    const s = await serve();
    try {
      const { cookie, csrf } = await session(s.store, s.accountId);
      const create = async () => {
        const res = await fetch(`${s.url}/dashboard/keys`, {
          method: 'POST',
          headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams({ csrf }).toString(),
          redirect: 'manual',
        });
        return { status: res.status, html: await res.text() };
      };
      for (let i = 1; i < 10; i++) expect((await create()).status).toBe(200); // the account's first key exists already
      const refused = await create();
      expect(refused.status).toBe(409);
      expect(message(refused.html)).toMatch(/already has 10 active API keys.*Revoke one/);
      expect((await s.store.keys.list(s.accountId)).filter((k) => !k.revoked)).toHaveLength(10);
      const [oldest] = await s.store.keys.list(s.accountId);
      await s.store.keys.revoke(oldest!.id);
      expect((await create()).status).toBe(200);
    } finally {
      await s.close();
    }
  });

  it('`bgone keys create` prints why and exits 1; BGONE_MAX_KEYS_PER_ACCOUNT raises the cap', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'bgone-abuse-cli-'));
    const db = join(dir, 'db.sqlite');
    const store = await openStore({ path: db });
    try {
      const account = await store.accounts.create({ email: 'keys@example.com' });
      for (let i = 0; i < 10; i++) await store.keys.create(account.id);
    } finally {
      await store.close();
    }
    const refused = await runCli(dir, ['keys', 'create', '--account', 'keys@example.com', '--db', db]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/already has 10 active API keys.*revoke one/);
    expect(refused.stdout).not.toMatch(/rb-sk_/);
    const raised = await runCli(dir, ['keys', 'create', '--account', 'keys@example.com', '--db', db], { BGONE_MAX_KEYS_PER_ACCOUNT: '11' });
    expect(raised.code).toBe(0);
    expect(raised.stdout).toMatch(/API key \(shown once\): rb-sk_/);
  });
});

// --- 4. Credits are checked before the body ------------------------------------------------------

describe('a request refused for credits is refused before its body is read', () => {
  it('/remove, /batches and try-it with a balance of 0: 402 while the client has sent its headers only', async () => {
    const s = await serve({ credits: 0 });
    try {
      const { cookie, csrf } = await session(s.store, s.accountId);
      const type = 'multipart/form-data; boundary=NeverSent';
      const requests: Array<[string, Record<string, string>]> = [
        [REMOVE, { Authorization: `Bearer ${s.key}`, 'Content-Type': type }],
        ['/api/v1/batches', { Authorization: `Bearer ${s.key}`, 'Content-Type': type }],
        ['/dashboard/try', { Cookie: cookie, 'X-CSRF-Token': csrf, 'Content-Type': type }],
      ];
      for (const [path, headers] of requests) {
        const answer = await expectBalanceUnchanged(s, async () => {
          const client = rawClient(s.port);
          await client.ready;
          // 5 MB announced, not one byte of it sent.
          client.write(head('POST', path, headers, 5 * 1024 * 1024));
          const a = await Promise.race([client.answer, new Promise<null>((resolve) => setTimeout(() => resolve(null), 10_000))]);
          client.destroy();
          return a;
        });
        expect(answer, `${path}: an answer without the body`).not.toBeNull();
        expectError(asHttpResult({ status: answer!.status, headers: answer!.headers, json: answer!.json }), 402, 'payment_required');
        expect(answer!.headers['x-ratelimit-limit']).toMatch(/^\d+$/);
      }
      await waitFor(() => s.server.inFlight() === 0, 'no place held');
    } finally {
      await s.close();
    }
  });
});

// --- 5. Clients that leave ------------------------------------------------------------------------

describe('a client that disconnects', () => {
  it('during processing: its request still counts against the rate limit and holds its place until the job ends; it is not charged', async () => {
    const minute = Date.UTC(2030, 0, 1, 12, 0, 0);
    const s = await serve({ rateLimits: { free: 5 }, clock: () => new Date(minute + 30_000), accountInFlight: 1, credits: 5 });
    try {
      const start = await credits(s);
      const { body, type } = imageForm('LeaveBoundary', { size: 'full' }, bigSwan);
      const leaving = rawClient(s.port);
      await leaving.ready;
      leaving.write(head('POST', REMOVE, { Authorization: `Bearer ${s.key}`, 'Content-Type': type }, body.length));
      leaving.write(body);
      await waitFor(async () => (await credits(s)).reserved === 1 && queueSize() === 1, 'the job to be inside the native core');
      leaving.destroy();
      await waitFor(async () => (await credits(s)).reserved === 0, 'the reservation to be released');
      // The job still runs: the account's one place is still taken.
      expect(queueSize()).toBe(1);
      const held = await postImage(s.url, s.key, { size: 'preview' }, teddy);
      expect(expectError(held, 429, 'rate_limit_exceeded').details).toEqual({ in_flight_limit: 1 });
      await waitFor(() => s.server.inFlight() === 0 && queueSize() === 0, 'the abandoned job to end', 60_000);
      const ok = await postImage(s.url, s.key, { size: 'preview' }, teddy);
      expect(ok.status).toBe(200);
      // 5 per minute: the abandoned request, the 429 and this one were all counted.
      expect(ok.headers.get('x-ratelimit-remaining')).toBe('2');
      expect(await credits(s)).toEqual({ used: start.used + 1, reserved: 0, remaining: 4 }); // only the last one was charged
    } finally {
      await s.close();
    }
  });

  it('while queued for the native core: the job is dropped before inference, and its place and credit come back at once', async () => {
    const s = await serve({ credits: 5 });
    const concurrency = librarySettings().nativeConcurrency;
    configure({ nativeConcurrency: 1 });
    try {
      const start = await credits(s);
      const before = await inferences(s);
      // One long job takes the only place in the native core.
      let longDone = false;
      const long = postImage(s.url, s.other.key, { size: 'full' }, bigSwan).then((r) => {
        longDone = true;
        return r;
      });
      await waitFor(() => queueSize() === 1, 'the long job to start');
      const { body, type } = imageForm('QueuedBoundary', { size: 'preview' });
      const queued = rawClient(s.port);
      await queued.ready;
      queued.write(head('POST', REMOVE, { Authorization: `Bearer ${s.key}`, 'Content-Type': type }, body.length));
      queued.write(body);
      await waitFor(() => queueSize() === 2, 'the second job to wait in the queue');
      expect((await credits(s)).reserved).toBe(1);
      queued.destroy();
      await waitFor(() => queueSize() === 1, 'the queued job to be dropped');
      expect(longDone, 'the queued job left the queue while the long one was still running').toBe(false);
      await waitFor(() => s.server.inFlight() === 1, 'its admission place to come back');
      expect(await credits(s)).toEqual(start);
      const done = await long;
      expect(done.status).toBe(200);
      await waitFor(() => queueSize() === 0 && s.server.inFlight() === 0, 'everything to end');
      expect(await inferences(s), 'inferences run: the long job only').toBe(before + 1);
      expect(await credits(s)).toEqual(start); // the long job was the other account's
    } finally {
      configure({ nativeConcurrency: concurrency });
      await s.close();
    }
  });
});

// --- 6. Idempotency-Key --------------------------------------------------------------------------

describe('Idempotency-Key replays only the same image with the same options', () => {
  it('same image and options (however spelt) → replayed uncharged; another image or other options → 400 validation_error, uncharged', async () => {
    const s = await serve({ credits: 10 });
    try {
      const start = await credits(s);
      const key = { 'idempotency-key': 'order-42' };
      const first = await postImage(s.url, s.key, { size: 'preview' }, teddy, key);
      expect(first.status).toBe(200);
      expect(first.headers.get('x-credits-charged')).toBe('1');
      // The defaults spelt out are the same options: a replay.
      const replay = await postImage(s.url, s.key, { size: 'preview', format: 'png', crop: 'false' }, teddy, key);
      expect(replay.status).toBe(200);
      expect(replay.headers.get('x-credits-charged')).toBe('0');
      expect(replay.body.equals(first.body)).toBe(true);

      const cases: Array<[string, Record<string, string>, Buffer]> = [
        ['another image', { size: 'preview' }, llama],
        ['another size', { size: 'medium' }, teddy],
        ['another format', { size: 'preview', format: 'webp' }, teddy],
        ['a background colour', { size: 'preview', bg_color: 'red' }, teddy],
      ];
      for (const [what, fields, image] of cases) {
        const refused = await expectBalanceUnchanged(s, () => postImage(s.url, s.key, fields, image, key));
        const error = expectError(refused, 400, 'validation_error');
        expect(error.details, what).toEqual({ field: 'Idempotency-Key' });
        expect(error.message).toMatch(/another image or other options/);
      }
      expect((await credits(s)).used).toBe(start.used + 1);
    } finally {
      await s.close();
    }
  });
});

// --- 7. Request headers over the limit ------------------------------------------------------------

describe('request headers over the limit', () => {
  it('100 KB in one header line: 431 validation_error and the connection closed, on both backends; the server keeps serving', async () => {
    const s = await serve();
    try {
      for (const path of [REMOVE, '/healthz']) {
        const client = rawClient(s.port);
        await client.ready;
        client.write(`POST ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${s.key}\r\nX-Junk: ${'j'.repeat(100 * 1024)}\r\nContent-Length: 0\r\n\r\n`);
        const answer = await client.answer;
        expect(answer.status).toBe(431);
        expect(answer.json).toMatchObject({ code: 'validation_error' });
        expect(answer.headers.connection).toBe('close');
        const closedAt = await Promise.race([client.closed, new Promise<null>((resolve) => setTimeout(() => resolve(null), 5000))]);
        expect(closedAt, 'the server closed the connection').not.toBeNull();
      }
      expect((await get(s.url, '/healthz')).status).toBe(200);
    } finally {
      await s.close();
    }
  });

  it('100 KB over 1000 header lines: node:http answers 431; uWS 20.30 drops the head itself, and closes the connection at once', async () => {
    const s = await serve();
    try {
      const client = rawClient(s.port);
      await client.ready;
      const lines = Array.from({ length: 1000 }, (_, i) => `X-Junk-${i}: ${'j'.repeat(90)}\r\n`).join('');
      client.write(`GET /healthz HTTP/1.1\r\nHost: x\r\n${lines}\r\n`);
      const closedAt = await Promise.race([client.closed, new Promise<null>((resolve) => setTimeout(() => resolve(null), 5000))]);
      expect(closedAt, 'the connection was closed').not.toBeNull();
      const answer = await client.answer;
      if (s.server.backend === 'node') {
        expect(answer.status).toBe(431);
        expect(answer.json).toMatchObject({ code: 'validation_error' });
      } else {
        // uWS 20.30 parses at most 48 header lines and has no hook to let us answer: no answer, but no open connection either.
        expect(answer.status).toBeNull();
      }
      expect((await get(s.url, '/healthz')).status).toBe(200);
    } finally {
      await s.close();
    }
  });

  it('60 short header lines (a small head): node:http serves it; uWS 20.30 never answers, and its idle timeout closes the connection', async () => {
    const s = await serve();
    try {
      const client = rawClient(s.port);
      await client.ready;
      const lines = Array.from({ length: 60 }, (_, i) => `X-H${i}: v\r\n`).join('');
      client.write(`GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n${lines}\r\n`);
      const closedAt = await Promise.race([client.closed, new Promise<null>((resolve) => setTimeout(() => resolve(null), 20_000))]);
      expect(closedAt, 'the connection was closed').not.toBeNull();
      const answer = await client.answer;
      if (s.server.backend === 'node') expect(answer.status).toBe(200);
      else {
        expect(answer.status).toBeNull();
        expect(closedAt!).toBeGreaterThan(5000); // uWS's 10 s idle timeout, not us
      }
    } finally {
      await s.close();
    }
  });
});
