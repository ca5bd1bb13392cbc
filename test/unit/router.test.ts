/**
 * The router (src/http/router.ts) and the exchange's one writer (src/http/exchange.ts): exact-path
 * routing, 404 and 405 with Allow in the contract's JSON, group fallbacks, a handler's errors, the
 * request id and metrics on every answer, and readBody's limit.
 */
import { describe, expect, it } from 'vitest';
import { BodyTooLargeError } from '../../src/http/exchange.js';
import { Router } from '../../src/http/router.js';
import { ApiError } from '../../src/service/errors.js';
import { memoryRequest, RecordedResponse } from '../helpers/recorded-exchange.js';

function setup() {
  const records: Array<{ route: string; status: number; code: string }> = [];
  const router = new Router((route, status, code) => records.push({ route, status, code }));
  const call = async (method: string, path: string, headers: Record<string, string> = {}, body: Uint8Array[] = []) => {
    const res = new RecordedResponse();
    router.handle(memoryRequest(method, path, headers, body), res);
    await new Promise((r) => setImmediate(r));
    return res;
  };
  return { router, records, call };
}

describe('Router', () => {
  it('dispatches by method and exact path, with X-Request-ID on the answer and one metrics record', async () => {
    const { router, records, call } = setup();
    router.get('/healthz', (ex) => ex.json(200, { status: 'ok' }));
    const res = await call('GET', '/healthz');
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ status: 'ok' });
    expect(res.answers[0]!.headers['X-Request-ID']).toMatch(/^req_[0-9a-f]{20}$/);
    expect(records).toEqual([{ route: '/healthz', status: 200, code: 'ok' }]);
  });

  it('answers an unknown path with the JSON 404 and a known path with another method with 405 and Allow', async () => {
    const { router, records, call } = setup();
    router.get('/a', (ex) => ex.json(200, {}));
    router.post('/a', (ex) => ex.json(200, {}));
    const missing = await call('GET', '/nope');
    expect(missing.status).toBe(404);
    expect(missing.json).toMatchObject({ code: 'not_found', request_id: expect.stringMatching(/^req_/) });
    const wrong = await call('DELETE', '/a');
    expect(wrong.status).toBe(405);
    expect(wrong.json.code).toBe('method_not_allowed');
    expect(wrong.answers[0]!.headers.Allow).toBe('GET, POST');
    expect(records.map((r) => r.route)).toEqual(['other', '/a']);
  });

  it("uses a group's own fallbacks for unknown paths under its prefix", async () => {
    const { router, call } = setup();
    router.group('/dashboard/', {
      notFound: (ex) => ex.send(404, { 'Content-Type': 'text/html' }, '<p>no page</p>', 'not_found'),
      methodNotAllowed: (ex) => ex.send(405, {}, '', 'method_not_allowed'),
    });
    const res = await call('GET', '/dashboard/nope');
    expect(res.status).toBe(404);
    expect(res.answers[0]!.body).toBe('<p>no page</p>');
  });

  it('answers a thrown HttpError as itself and any other failure as the contract 500, without leaking it', async () => {
    const { router, call } = setup();
    router.get('/teapot', () => {
      throw new ApiError('validation_error', 'no tea', { field: 'tea' });
    });
    router.get('/boom', async () => {
      throw new Error('secret internals');
    });
    const teapot = await call('GET', '/teapot');
    expect(teapot.status).toBe(400);
    expect(teapot.json).toMatchObject({ code: 'validation_error', message: 'no tea', details: { field: 'tea' } });
    const boom = await call('GET', '/boom');
    expect(boom.status).toBe(500);
    expect(boom.json.code).toBe('internal_server_error');
    expect(JSON.stringify(boom.json)).not.toContain('secret');
  });

  it('matches `:name` segments, decodes them into params, and labels metrics with the pattern', async () => {
    const { router, records, call } = setup();
    router.get('/api/v1/batches/:batch/images/:image', (ex) => ex.json(200, ex.params));
    router.delete('/api/v1/batches/:batch', (ex) => ex.json(200, ex.params));
    const res = await call('GET', '/api/v1/batches/bat_1/images/img%5F2');
    expect(res.json).toEqual({ batch: 'bat_1', image: 'img_2' });
    expect(records[0]).toEqual({ route: '/api/v1/batches/:batch/images/:image', status: 200, code: 'ok' });
    expect((await call('DELETE', '/api/v1/batches/bat_9')).json).toEqual({ batch: 'bat_9' });
    expect((await call('GET', '/api/v1/batches/bat_9')).status).toBe(405);
    expect((await call('GET', '/api/v1/batches/bat_1/images/')).status).toBe(404);
    expect((await call('GET', '/api/v1/batches/bat_1/images/img/extra')).status).toBe(404);
    expect((await call('GET', '/api/v1/batches/%E0%A4%A/images/x')).status).toBe(404);
  });

  it('refuses registering the same method and path twice', () => {
    const { router } = setup();
    router.get('/x', () => {});
    expect(() => router.add('get', '/x', () => {})).toThrow(/twice/);
  });
});

describe('Exchange', () => {
  it('writes once: a second answer and an answer after an abort are dropped; an abort is recorded as 499', async () => {
    const { router, records, call } = setup();
    router.get('/twice', (ex) => {
      ex.json(200, { n: 1 });
      ex.json(500, { n: 2 });
    });
    const res = await call('GET', '/twice');
    expect(res.answers).toHaveLength(1);
    let later: (() => void) | undefined;
    router.get('/slow', (ex) => {
      later = () => ex.json(200, {});
    });
    const slow = await call('GET', '/slow');
    slow.abort();
    later!();
    expect(slow.answers).toHaveLength(0);
    expect(records.at(-1)).toMatchObject({ route: '/slow', status: 499, code: 'client_aborted' });
  });

  it('readBody collects the chunks and refuses past its limit, from Content-Length or while reading', async () => {
    const { router, call } = setup();
    const outcomes: unknown[] = [];
    router.post('/body', async (ex) => {
      try {
        outcomes.push((await ex.readBody(10)).toString());
      } catch (err) {
        outcomes.push(err instanceof BodyTooLargeError ? 'too large' : err);
      }
    });
    await call('POST', '/body', {}, [Buffer.from('hello '), Buffer.from('you')]);
    await call('POST', '/body', { 'content-length': '11' }, [Buffer.from('hello world')]);
    await call('POST', '/body', {}, [Buffer.from('hello '), Buffer.from('world!')]);
    await call('GET', '/body');
    expect(outcomes).toEqual(['hello you', 'too large', 'too large']);
  });
});
