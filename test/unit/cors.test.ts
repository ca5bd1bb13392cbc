/**
 * CORS in the router and the exchange's one writer (src/http/cors.ts, router.ts, exchange.ts): a
 * preflight answered before any route with the path's methods, every answer under a policy (404,
 * 405 and a handler's failure included) naming the origin and exposing its own headers, a listed
 * policy echoing listed origins only with Vary: Origin, nothing outside the prefixes, routes added
 * later covered, and a prefix over a route group refused either way round.
 */
import { describe, expect, it } from 'vitest';
import { API_CORS_PREFIXES, API_REQUEST_HEADERS, apiCorsPolicy, PREFLIGHT_MAX_AGE_SECONDS } from '../../src/api/cors.js';
import { type CorsPolicy, PREFLIGHT_ROUTE, Router } from '../../src/http/router.js';
import type { OutgoingHeaders } from '../../src/http/types.js';
import { ApiError } from '../../src/service/errors.js';
import { memoryRequest, RecordedResponse } from '../helpers/recorded-exchange.js';

const ANY: CorsPolicy = { origins: '*', allowHeaders: ['Authorization', 'X-Api-Key'], maxAgeSeconds: 600 };
const LISTED: CorsPolicy = { origins: ['https://app.example.com', 'http://localhost:3000'], allowHeaders: ['X-Api-Key'], maxAgeSeconds: 60 };

function setup(policy: CorsPolicy = ANY) {
  const records: Array<{ route: string; status: number; code: string }> = [];
  const router = new Router((route, status, code) => records.push({ route, status, code }));
  router.cors(['/v1/', '/api/v1/'], policy);
  router.post('/v1/segment', (ex) => ex.send(200, { 'Content-Type': 'image/png', 'X-Credits-Charged': '1', 'Cache-Control': 'no-store' }, 'png'));
  router.get('/v1/account', (ex) => ex.json(200, {}, { 'X-RateLimit-Limit': '10', Vary: 'Accept' }));
  router.delete('/api/v1/batches/:id', () => {
    throw new Error('boom');
  });
  router.post('/api/v1/remove', () => {
    throw new ApiError('authentication_error');
  });
  router.get('/healthz', (ex) => ex.json(200, { status: 'ok' }));
  const call = async (method: string, path: string, headers: Record<string, string> = {}) => {
    const res = new RecordedResponse();
    router.handle(memoryRequest(method, path, headers), res);
    await new Promise((r) => setImmediate(r));
    const answer = res.answers[0]!;
    return { status: answer.status, headers: answer.headers, body: answer.body };
  };
  return { router, records, call };
}

const preflight = (method = 'POST', headers = 'x-api-key') => ({
  Origin: 'https://app.example.com',
  'Access-Control-Request-Method': method,
  'Access-Control-Request-Headers': headers,
});

/** The Access-Control-* and Vary headers of an answer. */
function corsOf(headers: OutgoingHeaders): OutgoingHeaders {
  return Object.fromEntries(Object.entries(headers).filter(([name]) => /^access-control-|^vary$/i.test(name)));
}

describe('a preflight', () => {
  it('is answered 204 before any route: the origin, the methods of the path, the headers taken, how long to keep it; never credentials', async () => {
    const { call, records } = setup();
    const res = await call('OPTIONS', '/v1/segment', preflight());
    expect(res.status).toBe(204);
    expect(res.body).toBe('');
    expect(corsOf(res.headers)).toEqual({
      'Access-Control-Allow-Origin': '*',
      'Access-Control-Allow-Methods': 'POST',
      'Access-Control-Allow-Headers': 'Authorization, X-Api-Key',
      'Access-Control-Max-Age': '600',
    });
    expect(res.headers['X-Request-ID']).toMatch(/^req_/);
    expect(records).toEqual([{ route: PREFLIGHT_ROUTE, status: 204, code: 'preflight' }]);
    // A pattern path gives its own methods; a path with no route, those of every route under the policy.
    expect((await call('OPTIONS', '/api/v1/batches/bat_1', preflight('DELETE'))).headers['Access-Control-Allow-Methods']).toBe('DELETE');
    expect((await call('OPTIONS', '/v1/nothing-here', preflight('PUT'))).headers['Access-Control-Allow-Methods']).toBe('POST, GET, DELETE');
  });

  it('covers the routes added after the policy, and counts them in the methods of unknown paths', async () => {
    const { router, call } = setup();
    expect((await call('OPTIONS', '/v1/unknown', preflight())).headers['Access-Control-Allow-Methods']).toBe('POST, GET, DELETE');
    router.add('PUT', '/v1/account', (ex) => ex.json(200, {}));
    router.post('/v1/added-later', (ex) => ex.json(201, {}));
    expect((await call('OPTIONS', '/v1/account', preflight('PUT'))).headers['Access-Control-Allow-Methods']).toBe('GET, PUT');
    expect((await call('OPTIONS', '/v1/unknown', preflight())).headers['Access-Control-Allow-Methods']).toBe('POST, GET, PUT, DELETE');
    const later = await call('POST', '/v1/added-later', { Origin: 'https://a.example' });
    expect(later.headers['Access-Control-Allow-Origin']).toBe('*');
  });

  it('is only OPTIONS with an Origin and Access-Control-Request-Method: any other OPTIONS is the route table’s 405, with the CORS headers', async () => {
    const { call } = setup();
    const plain = await call('OPTIONS', '/v1/segment', { Origin: 'https://app.example.com' });
    expect(plain.status).toBe(405);
    expect(plain.headers.Allow).toBe('POST');
    expect(plain.headers['Access-Control-Allow-Origin']).toBe('*');
    expect((await call('OPTIONS', '/v1/segment', { 'Access-Control-Request-Method': 'POST' })).status).toBe(405);
  });

  it('outside the prefixes is not answered: OPTIONS there is a 405 or 404 without CORS headers', async () => {
    const { call } = setup();
    const health = await call('OPTIONS', '/healthz', preflight('GET'));
    expect(health.status).toBe(405);
    expect(corsOf(health.headers)).toEqual({});
    const other = await call('OPTIONS', '/v2/segment', preflight());
    expect(other.status).toBe(404);
    expect(corsOf(other.headers)).toEqual({});
    // A prefix matches whole segments: /v1 alone and /v1.0/ are not under /v1/.
    expect((await call('OPTIONS', '/v1', preflight())).status).toBe(404);
    expect((await call('OPTIONS', '/v1.0/removebg', preflight())).status).toBe(404);
  });
});

describe('answers under a policy', () => {
  it('name the origin and expose every header of the answer but the safelisted ones', async () => {
    const { call } = setup();
    const ok = await call('POST', '/v1/segment', { Origin: 'https://app.example.com' });
    expect(ok.status).toBe(200);
    expect(ok.headers['Access-Control-Allow-Origin']).toBe('*');
    expect(ok.headers['Access-Control-Expose-Headers']).toBe('X-Request-ID, X-Credits-Charged');
    expect('Access-Control-Allow-Credentials' in ok.headers).toBe(false);
    expect('Vary' in ok.headers).toBe(false);
    // Without an Origin (curl, a server) the answer is the same: '*' does not depend on it.
    expect(corsOf((await call('POST', '/v1/segment')).headers)).toEqual(corsOf(ok.headers));
  });

  it('404, 405, an HttpError and a failed handler carry them too', async () => {
    const { call } = setup();
    const from = { Origin: 'https://app.example.com' };
    const missing = await call('GET', '/v1/nothing-here', from);
    const wrong = await call('GET', '/v1/segment', from);
    const refused = await call('POST', '/api/v1/remove', from);
    const failed = await call('DELETE', '/api/v1/batches/bat_1', from);
    expect([missing.status, wrong.status, refused.status, failed.status]).toEqual([404, 405, 401, 500]);
    for (const res of [missing, wrong, refused, failed]) expect(res.headers['Access-Control-Allow-Origin']).toBe('*');
    expect(wrong.headers['Access-Control-Expose-Headers']).toBe('X-Request-ID, Allow');
    expect(refused.headers['Access-Control-Expose-Headers']).toBe('X-Request-ID, WWW-Authenticate');
  });

  it('a listed policy echoes a listed origin (any case) with Vary: Origin, joined to the route’s own Vary', async () => {
    const { call } = setup(LISTED);
    const listed = await call('GET', '/v1/account', { Origin: 'https://APP.example.com' });
    expect(corsOf(listed.headers)).toEqual({
      'Access-Control-Allow-Origin': 'https://app.example.com',
      'Access-Control-Expose-Headers': 'X-Request-ID, X-RateLimit-Limit',
      Vary: 'Accept, Origin',
    });
    const local = await call('OPTIONS', '/v1/segment', { ...preflight(), Origin: 'http://localhost:3000' });
    expect(local.headers['Access-Control-Allow-Origin']).toBe('http://localhost:3000');
    expect(local.headers['Access-Control-Max-Age']).toBe('60');
  });

  it('a listed policy gives an unlisted origin, or none, only Vary: Origin; its preflight is a bare 204 the browser refuses', async () => {
    const { call } = setup(LISTED);
    for (const headers of <Array<Record<string, string>>>[
      { Origin: 'https://evil.example' },
      { Origin: 'https://app.example.com:8443' },
      { Origin: 'null' },
      {},
    ]) {
      const res = await call('POST', '/v1/segment', headers);
      expect(res.status).toBe(200);
      expect(corsOf(res.headers), JSON.stringify(headers)).toEqual({ Vary: 'Origin' });
    }
    const pre = await call('OPTIONS', '/v1/segment', { ...preflight(), Origin: 'https://evil.example' });
    expect(pre.status).toBe(204);
    expect(corsOf(pre.headers)).toEqual({ Vary: 'Origin' });
  });

  it('paths outside the prefixes carry no CORS header', async () => {
    const { call } = setup();
    expect(corsOf((await call('GET', '/healthz', { Origin: 'https://app.example.com' })).headers)).toEqual({});
    expect(corsOf((await call('GET', '/nothing', { Origin: 'https://app.example.com' })).headers)).toEqual({});
  });

  it('the backend’s own early answers get the policy’s origin header for paths under it', () => {
    const { router } = setup();
    const refusal = { status: 431, message: 'too large' } as const;
    const headersOf = (r: Router, path: string, origin: string) => r.earlyAnswer(memoryRequest('POST', path, { Origin: origin }), refusal).headers;
    expect(corsOf(headersOf(router, '/v1/segment', 'https://a.example'))).toEqual({ 'Access-Control-Allow-Origin': '*' });
    expect(corsOf(headersOf(router, '/healthz', 'https://a.example'))).toEqual({});
    const listed = setup(LISTED).router;
    expect(corsOf(headersOf(listed, '/v1/segment', 'http://localhost:3000'))).toEqual({
      'Access-Control-Allow-Origin': 'http://localhost:3000',
      Vary: 'Origin',
    });
  });
});

describe('where a policy may go', () => {
  const fallback = { notFound: () => {}, methodNotAllowed: () => {}, cookies: true };

  it('never over a route group a cookie authenticates, whichever is registered first', () => {
    const first = new Router(() => {});
    first.group('/dashboard/', fallback);
    expect(() => first.cors(['/v1/', '/dashboard/'], ANY)).toThrow(/overlaps the route group \/dashboard\//);
    expect(() => first.cors(['/'.concat('dashboard/api/')], ANY)).toThrow(/overlaps/);
    const second = new Router(() => {});
    second.cors(['/v1/'], ANY);
    expect(() => second.group('/v1/pages/', fallback)).toThrow(/overlaps/);
    // An API group with answers of its own (a dialect's error body) may lie under one.
    second.group('/v1/', { notFound: () => {}, methodNotAllowed: () => {} });
  });

  it('a prefix is whole segments, and one prefix has one policy', () => {
    const router = new Router(() => {});
    for (const bad of ['/v1', 'v1/', '/', '//', '/v1//']) expect(() => router.cors([bad], ANY), bad).toThrow(/segment/);
    router.cors(['/v1/'], ANY);
    expect(() => router.cors(['/v1/'], LISTED)).toThrow(/twice/);
  });

  it("the API's policy: its four prefixes, the headers its clients send, two hours of preflight", () => {
    expect(API_CORS_PREFIXES).toEqual(['/api/v1/', '/v1.0/', '/v1/', '/v2/']);
    expect(apiCorsPolicy('*')).toEqual({ origins: '*', allowHeaders: API_REQUEST_HEADERS, maxAgeSeconds: PREFLIGHT_MAX_AGE_SECONDS });
    expect(API_REQUEST_HEADERS.map((h) => h.toLowerCase())).toEqual(
      expect.arrayContaining(['x-api-key', 'authorization', 'content-type', 'idempotency-key', 'accept']),
    );
    expect(PREFLIGHT_MAX_AGE_SECONDS).toBe(7200);
  });
});
