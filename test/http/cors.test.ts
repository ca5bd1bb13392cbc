/**
 * CORS on the API's routes, over real HTTP on a fresh service (BGONE_CORS_ORIGINS; api/cors.ts):
 * preflights on each dialect's paths (bgone's /api/v1, remove.bg's /v1.0, Photoroom's /v1 and /v2)
 * answered 204 without authentication, rate limit or charge; every answer there, the admission's
 * refusals (401, 403, 402, 429, 503), 400, 404 and 405 and the backend's own early answers
 * included, naming the origin and exposing its headers; a list of origins echoing listed ones only;
 * `off` answering as without CORS; and nothing of it on /dashboard, /healthz and /readyz.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PHOTOS } from '../helpers/constants.js';
import { startDashboardServer } from '../helpers/dashboard-server.js';
import { trackUncaught } from '../helpers/http-assert.js';
import { rawConnection, rawExchange } from '../helpers/http-raw.js';
import { readPhoto } from '../helpers/paths.js';
import { blob, credits, type HttpResult, metricsUrl, startTestServer, type TestServer, toResult, waitFor } from '../helpers/server.js';

const teddy = readPhoto(PHOTOS.teddy); // 284x398
const PAGE = 'https://app.example.com';

let ts: TestServer;
const servers: TestServer[] = [];
const uncaught = trackUncaught();

beforeAll(async () => {
  ts = await startTestServer({ plan: 'pro' });
});

afterAll(async () => {
  await Promise.all([ts, ...servers].map((s) => s?.close()));
});

async function server(options: Parameters<typeof startTestServer>[0]): Promise<TestServer> {
  const s = await startTestServer(options);
  servers.push(s);
  return s;
}

/** A preflight as Chromium sends it: the method asked for, the request headers lower-cased and sorted. */
function preflight(url: string, method: string, headers = 'content-type,x-api-key', origin = PAGE): Promise<HttpResult> {
  return fetch(url, {
    method: 'OPTIONS',
    headers: { Origin: origin, 'Access-Control-Request-Method': method, 'Access-Control-Request-Headers': headers },
  }).then(toResult);
}

/** A call from a page of `origin` (fetch sets no Origin of its own on a server). */
function call(url: string, init: RequestInit & { headers?: Record<string, string> } = {}, origin = PAGE): Promise<HttpResult> {
  return fetch(url, { ...init, headers: { Origin: origin, ...init.headers } }).then(toResult);
}

function form(fields: Record<string, string> = {}, image: Buffer | null = teddy): FormData {
  const f = new FormData();
  for (const [name, value] of Object.entries(fields)) f.append(name, value);
  if (image) f.append('image_file', blob(image, 'image/jpeg'), 'teddy.jpg');
  return f;
}

/** The names Access-Control-Expose-Headers lists, lower-cased. */
function exposed(res: HttpResult): string[] {
  return (res.headers.get('access-control-expose-headers') ?? '')
    .split(',')
    .map((h) => h.trim().toLowerCase())
    .filter(Boolean);
}

/** Every header of the answer that a page could not read without its being exposed. */
function unsafelisted(res: HttpResult): string[] {
  const safe = [
    'cache-control',
    'content-language',
    'content-length',
    'content-type',
    'expires',
    'last-modified',
    'pragma',
    'connection',
    'date',
    'keep-alive',
    'vary',
    'uwebsockets',
  ];
  return [...res.headers.keys()].filter((h) => !safe.includes(h) && !h.startsWith('access-control-'));
}

/** An answer a page of any origin may read: `*`, every header of it exposed, never credentials. */
function expectOpen(res: HttpResult): void {
  expect(res.headers.get('access-control-allow-origin'), `${res.status} ${res.body.toString().slice(0, 200)}`).toBe('*');
  expect(res.headers.get('access-control-allow-credentials')).toBeNull();
  expect(exposed(res)).toEqual(expect.arrayContaining(unsafelisted(res)));
}

function expectNoCors(res: HttpResult): void {
  expect([...res.headers.keys()].filter((h) => h.startsWith('access-control-'))).toEqual([]);
}

describe('preflights', () => {
  it.each([
    ['/api/v1/remove', 'POST', 'POST'],
    ['/api/v1/batches', 'POST', 'POST, GET'],
    ['/api/v1/batches/bat_0123456789abcdef', 'DELETE', 'GET, DELETE'],
    ['/api/v1/batches/bat_0/images/img_0', 'GET', 'GET'],
    ['/api/v1/webhooks', 'POST', 'POST, GET'],
    ['/api/v1/webhooks/wh_0/test', 'POST', 'POST'],
    ['/api/v1/openapi.json', 'GET', 'GET'],
    ['/v1.0/removebg', 'POST', 'POST'],
    ['/v1.0/account', 'GET', 'GET'],
    ['/v1/segment', 'POST', 'POST'],
  ])('%s: 204 with the path’s methods, the headers clients send, two hours, no credentials', async (path, method, methods) => {
    const res = await preflight(`${ts.url}${path}`, method, 'authorization,content-type,idempotency-key,x-api-key');
    expect(res.status).toBe(204);
    expect(res.body.length).toBe(0);
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
    expect(res.headers.get('access-control-allow-methods')).toBe(methods);
    expect(res.headers.get('access-control-allow-headers')?.toLowerCase().split(', ')).toEqual(
      expect.arrayContaining(['x-api-key', 'authorization', 'content-type', 'idempotency-key', 'accept']),
    );
    expect(res.headers.get('access-control-max-age')).toBe('7200');
    expect(res.headers.get('access-control-allow-credentials')).toBeNull();
    expect(res.headers.get('x-request-id')).toMatch(/^req_/);
  });

  it('a path no route has under the prefixes (Photoroom’s /v2/) is answered too, so that the page can read its 404', async () => {
    const pre = await preflight(`${ts.url}/v2/templates`, 'POST');
    expect(pre.status).toBe(204);
    expect(pre.headers.get('access-control-allow-origin')).toBe('*');
    expect(pre.headers.get('access-control-allow-methods')).toMatch(/POST/);
    const missing = await call(`${ts.url}/v2/templates`, { method: 'POST', headers: { 'x-api-key': ts.key } });
    expect(missing.status).toBe(404);
    expectOpen(missing);
  });

  it('need no key, are not rate-limited and charge nothing; they are counted as preflights', async () => {
    const s = await server({ rateLimits: { free: 1, pro: 1, ultra: 1, mega: 1 } });
    const before = await credits(s);
    for (let i = 0; i < 5; i++) expect((await preflight(`${s.url}/v1.0/removebg`, 'POST')).status).toBe(204);
    // The removal they asked for still has its one request of the minute (refused by validation: nothing to charge).
    const first = await call(`${s.url}/v1.0/removebg`, { method: 'POST', headers: { 'X-Api-Key': s.key }, body: form({ size: 'huge' }) });
    expect(first.status).toBe(400);
    expect(first.headers.get('x-ratelimit-limit')).toBe('1');
    expect(first.headers.get('x-ratelimit-remaining')).toBe('0');
    expect(await credits(s)).toEqual(before);
    const metrics = await fetch(`${metricsUrl(s.server)}/metrics`).then((r) => r.text());
    expect(metrics).toMatch(/bgone_requests_total\{[^}]*route="preflight"[^}]*status="204"[^}]*\} 5/);
  });
});

describe('answers a page reads', () => {
  it("bgone's own: the image and every result header, Authorization: Bearer", async () => {
    const res = await call(`${ts.url}/api/v1/remove`, { method: 'POST', headers: { Authorization: `Bearer ${ts.key}` }, body: form({ size: 'preview' }) });
    expect(res.status).toBe(200);
    expectOpen(res);
    expect(exposed(res)).toEqual(
      expect.arrayContaining([
        'x-request-id',
        'x-model',
        'x-processing-time-ms',
        'x-image-width',
        'x-image-height',
        'x-foreground-top',
        'x-foreground-left',
        'x-foreground-width',
        'x-foreground-height',
        'x-credits-charged',
        'x-credits-remaining',
        'x-ratelimit-limit',
        'x-ratelimit-remaining',
        'x-ratelimit-reset',
      ]),
    );
    expect(exposed(res)).not.toContain('content-type');
  });

  it("remove.bg's: X-Width, X-Height, X-Type, the foreground box, the credits charged", async () => {
    const res = await call(`${ts.url}/v1.0/removebg`, { method: 'POST', headers: { 'X-Api-Key': ts.key }, body: form() });
    expect(res.status).toBe(200);
    expectOpen(res);
    expect(exposed(res)).toEqual(
      expect.arrayContaining(['x-width', 'x-height', 'x-type', 'x-foreground-top', 'x-foreground-width', 'x-credits-charged', 'x-ratelimit-limit']),
    );
    const account = await call(`${ts.url}/v1.0/account`, { headers: { 'X-Api-Key': ts.key } });
    expect(account.status).toBe(200);
    expectOpen(account);
  });

  it("Photoroom's, and the OpenAPI document", async () => {
    const res = await call(`${ts.url}/v1/segment`, { method: 'POST', headers: { 'x-api-key': ts.key }, body: form({ size: 'preview' }) });
    expect(res.status).toBe(200);
    expectOpen(res);
    expect(exposed(res)).toContain('x-credits-charged');
    const doc = await call(`${ts.url}/api/v1/openapi.json`);
    expect(doc.status).toBe(200);
    expectOpen(doc);
  });
});

describe('refusals a page reads', () => {
  it('a bad key (401 and 403, each dialect’s body), a bad request, an unknown path and a wrong method', async () => {
    const bearer = await call(`${ts.url}/api/v1/remove`, { method: 'POST', headers: { Authorization: 'Bearer rb-sk_wrong' }, body: form() });
    expect(bearer.status).toBe(401);
    expectOpen(bearer);
    expect(exposed(bearer)).toContain('www-authenticate');
    expect(bearer.json.code).toBe('authentication_error');
    const removebg = await call(`${ts.url}/v1.0/removebg`, { method: 'POST', headers: { 'X-Api-Key': 'rb-sk_wrong' }, body: form() });
    expect(removebg.status).toBe(403);
    expectOpen(removebg);
    expect(removebg.json.errors[0].code).toBe('auth_failed');
    const photoroom = await call(`${ts.url}/v1/segment`, { method: 'POST', body: form() });
    expect(photoroom.status).toBe(403);
    expectOpen(photoroom);
    const missing = await call(`${ts.url}/api/v1/remove`, { method: 'POST', headers: { Authorization: `Bearer ${ts.key}` }, body: form({}, null) });
    expect(missing.status).toBe(400);
    expectOpen(missing);
    for (const [path, status] of [
      ['/v1.0/improve-nothing', 404],
      ['/api/v1/nothing', 404],
      ['/v1.0/removebg', 405],
    ] as const) {
      const res = await call(`${ts.url}${path}`);
      expect(res.status, path).toBe(status);
      expectOpen(res);
    }
  });

  it('402 for credits, 429 for the rate limit (Retry-After and the limits exposed)', async () => {
    const broke = await server({ credits: 0 });
    const paid = await call(`${broke.url}/api/v1/remove`, { method: 'POST', headers: { Authorization: `Bearer ${broke.key}` }, body: form() });
    expect(paid.status).toBe(402);
    expectOpen(paid);
    const limited = await server({ rateLimits: { free: 1, pro: 1, ultra: 1, mega: 1 } });
    // A removal refused by validation takes the minute's one request; the next is over the limit.
    const remove = () =>
      call(`${limited.url}/api/v1/remove`, { method: 'POST', headers: { Authorization: `Bearer ${limited.key}` }, body: form({ format: 'bmp' }) });
    expect((await remove()).status).toBe(400);
    const res = await remove();
    expect(res.status).toBe(429);
    expectOpen(res);
    expect(exposed(res)).toEqual(expect.arrayContaining(['retry-after', 'x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset']));
  });

  it('503 when the upload places are full, with Retry-After exposed', async () => {
    const s = await server({ uploadLimit: 1 });
    const holder = rawConnection(s.port, 30_000);
    await holder.ready;
    holder.write(
      `POST /api/v1/remove HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${s.key}\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: 100000\r\n\r\n`,
    );
    try {
      await waitFor(() => s.server.inFlight() === 1, 'the first upload to hold its place');
      const res = await call(`${s.url}/api/v1/remove`, { method: 'POST', headers: { Authorization: `Bearer ${s.key}` }, body: form() });
      expect(res.status).toBe(503);
      expectOpen(res);
      expect(exposed(res)).toContain('retry-after');
    } finally {
      holder.destroy();
    }
  });

  it("the backend's own answers to a path under the prefixes: a refused framing on both backends, a head over 16 KB where the backend answers it itself", async () => {
    const framing = await rawExchange(
      ts.port,
      `POST /v1.0/removebg HTTP/1.1\r\nHost: x\r\nOrigin: ${PAGE}\r\nX-Api-Key: ${ts.key}\r\nTransfer-Encoding: gzip\r\n\r\n`,
    );
    expect(framing.status).toBe(400);
    expect(framing.headers['access-control-allow-origin']).toBe('*');
    const big = await rawExchange(
      ts.port,
      `POST /v1.0/removebg HTTP/1.1\r\nHost: x\r\nOrigin: ${PAGE}\r\nX-Junk: ${'j'.repeat(100 * 1024)}\r\nContent-Length: 0\r\n\r\n`,
    );
    expect(big.status).toBe(431);
    // uWS hands the head over; node:http's parser refuses it, and its request line and headers are read from the bytes it was given.
    expect(big.headers['access-control-allow-origin']).toBe('*');
    expect(big.json.errors[0].code).toBe('request_header_fields_too_large');
  });
});

describe('BGONE_CORS_ORIGINS', () => {
  it('a list: a listed origin is echoed with Vary: Origin; another gets Vary only, and its preflight no CORS header', async () => {
    const s = await server({ cors: [PAGE, 'http://localhost:3000'] });
    const listed = await call(`${s.url}/v1.0/account`, { headers: { 'X-Api-Key': s.key } }, 'http://localhost:3000');
    expect(listed.status).toBe(200);
    expect(listed.headers.get('access-control-allow-origin')).toBe('http://localhost:3000');
    expect(listed.headers.get('vary')).toBe('Origin');
    expect(exposed(listed)).toEqual(expect.arrayContaining(unsafelisted(listed)));
    const pre = await preflight(`${s.url}/v1.0/removebg`, 'POST');
    expect(pre.headers.get('access-control-allow-origin')).toBe(PAGE);
    expect(pre.headers.get('access-control-allow-methods')).toBe('POST');
    for (const origin of ['https://evil.example', 'https://app.example.com:8443', 'http://app.example.com']) {
      const res = await call(`${s.url}/v1.0/account`, { headers: { 'X-Api-Key': s.key } }, origin);
      expect(res.status, origin).toBe(200);
      expectNoCors(res);
      expect(res.headers.get('vary')).toBe('Origin');
      const refused = await preflight(`${s.url}/v1.0/removebg`, 'POST', 'x-api-key', origin);
      expect(refused.status).toBe(204);
      expectNoCors(refused);
    }
  });

  it('off: no CORS header anywhere, and a preflight is the 405 it was', async () => {
    const s = await server({ cors: 'off' });
    const pre = await preflight(`${s.url}/v1.0/removebg`, 'POST');
    expect(pre.status).toBe(405);
    expectNoCors(pre);
    const res = await call(`${s.url}/v1.0/account`, { headers: { 'X-Api-Key': s.key } });
    expect(res.status).toBe(200);
    expectNoCors(res);
    expect(res.headers.get('vary')).toBeNull();
  });
});

describe('never outside the API', () => {
  it('/dashboard (its pages, its try-it endpoint, a preflight to it), /healthz and /readyz carry no CORS header', async () => {
    const dash = await startDashboardServer();
    try {
      for (const path of ['/dashboard/login', '/dashboard', '/dashboard/nothing']) expectNoCors(await call(`${dash.url}${path}`, { redirect: 'manual' }));
      const pre = await preflight(`${dash.url}/dashboard/try`, 'POST', 'x-csrf-token');
      expect(pre.status).not.toBe(204);
      expectNoCors(pre);
      const tryIt = await call(`${dash.url}/dashboard/try`, { method: 'POST', body: form() });
      expect(tryIt.status).toBeGreaterThanOrEqual(400);
      expectNoCors(tryIt);
      for (const path of ['/healthz', '/readyz']) {
        const res = await call(`${dash.url}${path}`);
        expect(res.status).toBe(200);
        expectNoCors(res);
        expectNoCors(await preflight(`${dash.url}${path}`, 'GET'));
      }
      // The API on the same server is open.
      expectOpen(await call(`${dash.url}/api/v1/openapi.json`));
    } finally {
      await dash.close();
    }
  });

  it('let nothing go unhandled', async () => {
    await uncaught.check();
  });
});
