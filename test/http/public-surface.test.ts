/**
 * What the public port tells a stranger: internal routes answer as unknown paths without the
 * cluster secret (on a node of a cluster and on a node alone), /metrics is not served there
 * without its token but on its own listener, every 401 names the Bearer scheme, and the answers
 * name no server software beyond what uWebSockets.js writes itself. Real servers on 127.0.0.1 on
 * the vitest project's backend; the cluster node runs on a fresh PostgreSQL database.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/index.js';
import { trackUncaught } from '../helpers/http-assert.js';
import { freshDatabase, testDatabaseUrl } from '../helpers/postgres.js';
import { get, type HttpResult, metricsUrl, serveStore, startTestServer, type TestServer, toResult } from '../helpers/server.js';

const SECRET = 'a-cluster-secret-of-at-least-32-characters';
const METRICS_TOKEN = 'a-metrics-token-0123456789';
const INTERNAL_PATHS = [
  '/internal/v1/images/img_1/input',
  '/internal/v1/images/img_1/result',
  '/internal/v1/batches/bat_1',
  '/internal/v1/other',
  '/internal/v1',
];
const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH'];
const uncaught = trackUncaught();

async function call(url: string, path: string, method: string, headers: Record<string, string> = {}): Promise<HttpResult> {
  const res = await fetch(`${url}${path}`, { method, headers });
  // A HEAD answer has a JSON Content-Type and no body.
  return method === 'HEAD' ? { status: res.status, headers: res.headers, body: Buffer.from(await res.arrayBuffer()) } : toResult(res);
}

/** What a stranger can compare between two answers: status, body without its request id, and the headers that are not per request. */
function seen(r: HttpResult): { status: number; body: unknown; headers: string[] } {
  const { request_id: _, ...body } = r.json ?? { text: r.body.toString('latin1') };
  const headers = [...r.headers.entries()].filter(([name]) => !['x-request-id', 'date', 'content-length'].includes(name)).map(([n, v]) => `${n}: ${v}`);
  return { status: r.status, body, headers };
}

describe('the public port', () => {
  let alone: TestServer;
  let cluster: { url: string; close(): Promise<void> };
  let dropDatabase: () => Promise<void>;

  beforeAll(async () => {
    alone = await startTestServer();
    const database = await freshDatabase(await testDatabaseUrl());
    dropDatabase = database.drop;
    const store = await openStore({ url: database.url, autoRecover: false });
    const running = await serveStore(store, mkdtempSync(join(tmpdir(), 'bgone-surface-')), {
      cluster: { secret: SECRET },
      metrics: { listen: { host: '127.0.0.1', port: 0 }, token: METRICS_TOKEN },
    });
    cluster = { url: `http://127.0.0.1:${running.server.port}`, close: running.close };
  });

  afterAll(async () => {
    await alone?.close();
    await cluster?.close();
    await dropDatabase?.();
    await uncaught.check();
  });

  it('answers every internal path and method without the cluster secret as an unknown path, in a cluster or alone', async () => {
    for (const url of [alone.url, cluster.url]) {
      for (const method of METHODS) {
        const unknown = seen(await call(url, '/no/such/path', method));
        expect(unknown.status).toBe(404);
        for (const path of INTERNAL_PATHS) {
          const strangers: Array<Record<string, string>> = [{}, { 'X-Bgone-Cluster-Secret': `${SECRET}x` }, { Authorization: 'Bearer rb-sk_0000' }];
          for (const headers of strangers) {
            expect(seen(await call(url, path, method, headers)), `${method} ${path} on ${url === alone.url ? 'a node alone' : 'a cluster node'}`).toEqual(
              unknown,
            );
          }
        }
      }
    }
    // A peer with the secret still learns the route's methods.
    const wrongMethod = await call(cluster.url, '/internal/v1/images/img_1/result', 'POST', { 'X-Bgone-Cluster-Secret': SECRET });
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.get('allow')).toBe('GET');
  });

  it('serves /metrics on its own listener, and on the public port only to its token', async () => {
    const unknown = seen(await get(alone.url, '/no/such/path'));
    expect(seen(await get(alone.url, '/metrics'))).toEqual(unknown);
    for (const authorization of [undefined, 'Bearer wrong-token-0123456789', `Basic ${METRICS_TOKEN}`, `Bearer ${METRICS_TOKEN}x`]) {
      const res = await get(cluster.url, '/metrics', { headers: authorization ? { authorization } : {} });
      expect(seen(res), String(authorization)).toEqual(unknown);
    }
    const withToken = await get(cluster.url, '/metrics', { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
    expect(withToken.status).toBe(200);
    expect(withToken.body.toString()).toMatch(/^# TYPE bgone_requests_total counter$/m);
    const own = await get(metricsUrl(alone.server), '/metrics');
    expect(own.status).toBe(200);
    expect(own.body.toString()).toMatch(/^bgone_http_backend_info\{backend="(uws|node)"\} 1$/m);
    // That listener serves nothing else.
    expect((await get(metricsUrl(alone.server), '/healthz')).status).toBe(404);
    expect((await get(metricsUrl(alone.server), '/api/v1/openapi.json')).status).toBe(404);
  });

  it('names the Bearer scheme on every 401', async () => {
    const answers = [
      await call(alone.url, '/api/v1/remove', 'POST'),
      await call(alone.url, '/api/v1/remove', 'POST', { Authorization: 'Bearer rb-sk_unknown' }),
      await call(alone.url, '/api/v1/batches', 'GET', { Authorization: 'Basic dXNlcjpwYXNz' }),
      await call(alone.url, '/api/v1/webhooks', 'GET'),
    ];
    for (const res of answers) {
      expect(res.status).toBe(401);
      expect(res.json).toMatchObject({ code: 'authentication_error' });
      expect(res.headers.get('www-authenticate')).toBe('Bearer realm="bgone"');
    }
  });

  it('names no server software, but for the header uWebSockets.js 20.30 always writes', async () => {
    for (const res of [await get(alone.url, '/healthz'), await get(alone.url, '/no/such/path'), await call(alone.url, '/api/v1/remove', 'POST')]) {
      expect(res.headers.get('server')).toBeNull();
      expect(res.headers.get('x-powered-by')).toBeNull();
      // Compiled into the binary (UWS_HTTPRESPONSE_NO_WRITEMARK unset); docs/operations.md hides it at the proxy.
      expect(res.headers.get('uwebsockets')).toBe(alone.server.backend === 'uws' ? '20' : null);
    }
  });
});
