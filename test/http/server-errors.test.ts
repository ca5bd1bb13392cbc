/**
 * The error table of docs/contract.md through real HTTP: every code with its status, the JSON body
 * { code, message, request_id = X-Request-ID, details? }, Content-Type application/json, conformance
 * to the service's own OpenAPI document, and not one credit charged. After each case the server
 * still answers /healthz.
 *
 * Real parts only: startServer on 127.0.0.1:0, a SQLite file in a temp folder, the real model and
 * photos. Images that need a decoder to make (the uniform grey JPEG) are made by sharp in a child
 * process, so that sharp never shares libvips with the addon in this process. internal_server_error
 * is produced for real by closing the store under a running server. The server runs in this
 * process, so every test also fails on an exception nobody handled (it would kill `bgone serve`).
 */
import { execFileSync } from 'node:child_process';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { PHOTOS } from '../helpers/constants.js';
import { expectConforms, expectError, openApi, trackUncaught } from '../helpers/http-assert.js';
import { pngClaiming } from '../helpers/http-images.js';
import type { OpenApiDocument } from '../helpers/http-openapi.js';
import { asHttpResult, multipartBody, rawChunkedUpload, rawConnection, requestHead, streamUpload } from '../helpers/http-raw.js';
import { REPO_ROOT, readFixture, readPhoto } from '../helpers/paths.js';
import { blob, credits, get, type HttpResult, postImage, startTestServer, type TestServer, toResult, waitFor } from '../helpers/server.js';

const REMOVE = '/api/v1/remove';
const MB = 1024 * 1024;
const teddy = readPhoto(PHOTOS.teddy);

let ts: TestServer;
let doc: OpenApiDocument;
/** Every server started by this file that is still running: each must answer /healthz after every test. */
const live = new Set<TestServer>();
const uncaught = trackUncaught();

async function serve(options: Parameters<typeof startTestServer>[0] = {}): Promise<TestServer> {
  const s = await startTestServer(options);
  live.add(s);
  return s;
}

async function stop(s: TestServer): Promise<void> {
  live.delete(s);
  await s.close();
}

beforeAll(async () => {
  ts = await serve();
  doc = await openApi(ts.url);
});

afterAll(async () => {
  for (const s of [...live]) await stop(s);
});

afterEach(async () => {
  await uncaught.check();
  for (const s of live) {
    const health = await get(s.url, '/healthz');
    expect({ status: health.status, body: health.json }).toEqual({ status: 200, body: { status: 'ok' } });
  }
});

/**
 * Runs a request that must fail with `status`/`code`, charging nothing: the account's used,
 * reserved and remaining credits are the same before and after. The response must conform to the
 * OpenAPI document (for POST /api/v1/remove unless `method`/`path` say otherwise).
 */
async function expectUncharged(
  server: TestServer,
  status: number,
  code: string | string[],
  request: () => Promise<HttpResult>,
  where: { method?: string; path?: string } = {},
) {
  const before = await credits(server);
  const res = await request();
  if (Array.isArray(code)) expect(code, `code ${JSON.stringify(res.json?.code)} (status ${res.status})`).toContain(res.json?.code);
  const body = expectError(res, status, Array.isArray(code) ? res.json.code : code);
  expectConforms(doc, where.method ?? 'POST', where.path ?? REMOVE, res);
  expect(await credits(server), 'credits after the failed request').toEqual(before);
  return { res, body };
}

describe('400 missing_image', () => {
  it('no image_file part (only an option field)', async () => {
    const { body } = await expectUncharged(ts, 400, 'missing_image', () => postImage(ts.url, ts.key, { format: 'png' }, null));
    expect(body.details).toMatchObject({ field: 'image_file' });
  });

  it('an empty form (just the closing boundary)', async () => {
    await expectUncharged(ts, 400, 'missing_image', () => postImage(ts.url, ts.key, {}, null));
  });

  it('an empty image_file part (0 bytes)', async () => {
    const { body } = await expectUncharged(ts, 400, 'missing_image', () => postImage(ts.url, ts.key, {}, Buffer.alloc(0)));
    expect(body.details).toMatchObject({ field: 'image_file' });
  });
});

describe('400 validation_error', () => {
  // Each with a valid photo: without the bad option the request would succeed, so the option is never ignored.
  it.each([
    ['format', 'gif'],
    ['format', 'jpeg2000'],
    ['channels', 'rgb'],
    ['size', 'huge'],
    ['size', '4k'],
    ['crop', 'yes'],
    ['crop', '0:1'],
    ['crop', '16x9'],
    ['padding', '150%'],
    ['padding', '-5%'],
    ['padding', 'abc'],
    ['padding', '1.5'],
    ['bg_color', 'notacolour'],
    ['bg_color', '#12345'],
    ['bg_color', 'rgb(300, 0, 0)'],
  ])('%s=%s names the field', async (field, value) => {
    const { body } = await expectUncharged(ts, 400, 'validation_error', () => postImage(ts.url, ts.key, { [field]: value }, teddy));
    expect(body.details).toMatchObject({ field });
  });

  it('an unknown field', async () => {
    const { body } = await expectUncharged(ts, 400, 'validation_error', () => postImage(ts.url, ts.key, { colour: 'red' }, teddy));
    expect(body.details).toMatchObject({ field: 'colour' });
  });

  it('an option given twice', async () => {
    const form = new FormData();
    form.append('format', 'png');
    form.append('format', 'jpg');
    form.append('image_file', blob(teddy, 'image/jpeg'), 'photo.jpg');
    const { body } = await expectUncharged(ts, 400, 'validation_error', async () =>
      toResult(await fetch(`${ts.url}${REMOVE}`, { method: 'POST', headers: { authorization: `Bearer ${ts.key}` }, body: form })),
    );
    expect(body.details).toMatchObject({ field: 'format' });
  });

  it('two image_file parts', async () => {
    const form = new FormData();
    form.append('image_file', blob(teddy, 'image/jpeg'), 'a.jpg');
    form.append('image_file', blob(teddy, 'image/jpeg'), 'b.jpg');
    const { body } = await expectUncharged(ts, 400, 'validation_error', async () =>
      toResult(await fetch(`${ts.url}${REMOVE}`, { method: 'POST', headers: { authorization: `Bearer ${ts.key}` }, body: form })),
    );
    expect(body.details).toMatchObject({ field: 'image_file' });
  });

  it('image_file sent as a text field', async () => {
    const { body } = await expectUncharged(ts, 400, 'validation_error', () => postImage(ts.url, ts.key, { image_file: 'not a file' }, null));
    expect(body.details).toMatchObject({ field: 'image_file' });
  });

  it('a file part under another name', async () => {
    const form = new FormData();
    form.append('image', blob(teddy, 'image/jpeg'), 'photo.jpg');
    const { body } = await expectUncharged(ts, 400, 'validation_error', async () =>
      toResult(await fetch(`${ts.url}${REMOVE}`, { method: 'POST', headers: { authorization: `Bearer ${ts.key}` }, body: form })),
    );
    expect(body.details).toMatchObject({ field: 'image' });
  });

  const send = (contentType: string | null, body: Buffer | string) => async () => {
    const headers: Record<string, string> = { authorization: `Bearer ${ts.key}` };
    if (contentType !== null) headers['content-type'] = contentType;
    return toResult(await fetch(`${ts.url}${REMOVE}`, { method: 'POST', headers, body: typeof body === 'string' ? body : new Uint8Array(body) }));
  };

  it('a malformed multipart body: garbage under a multipart Content-Type', async () => {
    await expectUncharged(ts, 400, 'validation_error', send('multipart/form-data; boundary=XyZ', 'this is not a multipart body at all'));
  });

  // The 400 alone is not enough: afterEach also fails on an exception the parser leaves unhandled.
  it('a malformed multipart body: the image part never ends (no closing boundary)', async () => {
    const body = multipartBody('XyZ', [{ name: 'image_file', filename: 'photo.jpg', type: 'image/jpeg', data: teddy }], false);
    await expectUncharged(ts, 400, 'validation_error', send('multipart/form-data; boundary=XyZ', body.subarray(0, body.length - 2)));
  });

  it('a malformed multipart body: a part without Content-Disposition (not an image_file part)', async () => {
    const body = Buffer.concat([Buffer.from('--XyZ\r\nContent-Type: image/jpeg\r\n\r\n'), teddy, Buffer.from('\r\n--XyZ--\r\n')]);
    // Either answer names the problem (a malformed part, or no image_file part); never a 200.
    await expectUncharged(ts, 400, ['validation_error', 'missing_image'], send('multipart/form-data; boundary=XyZ', body));
  });

  it('multipart/form-data without a boundary', async () => {
    const { body } = await expectUncharged(ts, 400, 'validation_error', send('multipart/form-data', 'whatever'));
    expect(body.details).toMatchObject({ field: 'Content-Type' });
  });

  it('a JSON body carrying image_file, a file part (the base64 goes in image_file_b64)', async () => {
    const { body } = await expectUncharged(ts, 400, 'validation_error', send('application/json', JSON.stringify({ image_file: teddy.toString('base64') })));
    expect(body.details).toMatchObject({ field: 'image_file' });
  });

  it('the raw image as the body (image/jpeg Content-Type)', async () => {
    const { body } = await expectUncharged(ts, 400, 'validation_error', send('image/jpeg', teddy));
    expect(body.details).toMatchObject({ field: 'Content-Type' });
  });

  it('no Content-Type at all', async () => {
    const { body } = await expectUncharged(ts, 400, 'validation_error', send(null, teddy));
    expect(body.details).toMatchObject({ field: 'Content-Type' });
  });

  it('an Idempotency-Key over 255 characters', async () => {
    const { body } = await expectUncharged(ts, 400, 'validation_error', () => postImage(ts.url, ts.key, {}, teddy, { 'idempotency-key': 'k'.repeat(300) }));
    expect(body.details).toMatchObject({ field: 'Idempotency-Key' });
  });
});

describe('400 image_too_large', () => {
  it('a 50 MB upload with its Content-Length (over an image in base64 and a background): answered before the client has sent it all', async () => {
    const before = await credits(ts);
    // The client sends 1 MB of the 50 MB, then waits: the answer must come without the rest.
    const out = await streamUpload(ts.port, ts.key, 50 * MB, false, MB);
    const res = asHttpResult(out);
    const body = expectError(res, 400, 'image_too_large');
    expect(body.details).toMatchObject({ field: 'image_file' });
    expectConforms(doc, 'POST', REMOVE, res);
    expect(out.sentWhenAnswered, 'bytes sent when the answer came').not.toBeNull();
    expect(out.sentWhenAnswered!).toBeLessThan(out.total);
    expect(await credits(ts)).toEqual(before);
  });

  it('a 64 MB chunked upload (no Content-Length): the server stops reading at the limit and answers', async () => {
    const before = await credits(ts);
    // The client sends 21 MB of the 64 MB, then waits: the server must answer once it is past 20 MB.
    const out = await rawChunkedUpload(ts.port, ts.key, 64 * MB, 21 * MB);
    const res = asHttpResult(out);
    expectError(res, 400, 'image_too_large');
    expectConforms(doc, 'POST', REMOVE, res);
    expect(out.sentWhenAnswered).not.toBeNull();
    expect(out.sentWhenAnswered!).toBeLessThan(out.total);
    expect(await credits(ts)).toEqual(before);
  });

  it('an image part of 20 MB + 1 byte (the body itself within the multipart allowance)', async () => {
    const image = Buffer.alloc(20 * 1024 * 1024 + 1, 0x11);
    teddy.copy(image); // a real JPEG start, then filler
    const { body } = await expectUncharged(ts, 400, 'image_too_large', () => postImage(ts.url, ts.key, {}, image));
    expect(body.details).toMatchObject({ field: 'image_file' });
  });

  it.each([
    [7000, 100],
    [100, 7000],
  ])('a PNG whose header claims %ix%i (checked before decoding pixels)', async (width, height) => {
    await expectUncharged(ts, 400, 'image_too_large', () =>
      postImage(ts.url, ts.key, {}, { data: pngClaiming(width, height), filename: 'wide.png', type: 'image/png' }),
    );
  });
});

describe('415 unsupported_media_type (by the bytes, whatever the name or declared type)', () => {
  it('a GIF named photo.jpg declared image/jpeg', async () => {
    await expectUncharged(ts, 415, 'unsupported_media_type', () =>
      postImage(ts.url, ts.key, {}, { data: readFixture('image.gif'), filename: 'photo.jpg', type: 'image/jpeg' }),
    );
  });

  it('a text file named photo.jpg declared image/jpeg', async () => {
    await expectUncharged(ts, 415, 'unsupported_media_type', () =>
      postImage(ts.url, ts.key, {}, { data: readFixture('text.txt'), filename: 'photo.jpg', type: 'image/jpeg' }),
    );
  });
});

describe('422 invalid_image and foreground_not_found', () => {
  it('a truncated JPEG: invalid_image', async () => {
    await expectUncharged(ts, 422, 'invalid_image', () => postImage(ts.url, ts.key, {}, readFixture('truncated.jpg')));
  });

  it('a truncated PNG: invalid_image', async () => {
    await expectUncharged(ts, 422, 'invalid_image', () =>
      postImage(ts.url, ts.key, {}, { data: readFixture('truncated.png'), filename: 'photo.png', type: 'image/png' }),
    );
  });

  it('a uniform grey 512x512 JPEG: foreground_not_found', async () => {
    const script =
      "import sharp from 'sharp';" +
      "const b = await sharp({ create: { width: 512, height: 512, channels: 3, background: '#808080' } }).jpeg({ quality: 90 }).toBuffer();" +
      "process.stdout.write(b.toString('base64'));";
    const grey = Buffer.from(execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: REPO_ROOT }).toString(), 'base64');
    expect(grey.subarray(0, 3).equals(Buffer.from([0xff, 0xd8, 0xff]))).toBe(true);
    await expectUncharged(ts, 422, 'foreground_not_found', () => postImage(ts.url, ts.key, { size: 'preview' }, grey));
  });
});

describe('401 authentication_error: one uniform answer', () => {
  it('missing header, not Bearer, malformed, unknown and revoked keys all get the same body', async () => {
    const revoked = await ts.store.keys.create(ts.accountId);
    expect((await ts.store.keys.revoke(revoked.info.id))?.revoked).toBe(true);
    const unknown = `rb-sk_${'A'.repeat(43)}`;
    const cases: Array<[string, Record<string, string>]> = [
      ['missing header', {}],
      ['Basic scheme', { authorization: `Basic ${Buffer.from('user:pass').toString('base64')}` }],
      ['Bearer without a key', { authorization: 'Bearer' }],
      ['the key without Bearer', { authorization: ts.key }],
      ['malformed key', { authorization: 'Bearer not-a-key' }],
      ['wrong prefix', { authorization: `Bearer sk_${ts.key.slice(6)}` }],
      ['key cut short', { authorization: `Bearer ${ts.key.slice(0, 20)}` }],
      ['unknown well-formed key', { authorization: `Bearer ${unknown}` }],
      ['revoked key', { authorization: `Bearer ${revoked.key}` }],
    ];
    const bodies: Array<Record<string, unknown>> = [];
    for (const [name, headers] of cases) {
      const { body } = await expectUncharged(ts, 401, 'authentication_error', () => postImage(ts.url, null, {}, teddy, headers));
      const { request_id: _id, ...rest } = body;
      bodies.push({ case: name, ...rest });
    }
    const first = bodies[0]!;
    for (const b of bodies) expect(b).toEqual({ ...first, case: b.case });
    expect(first.details).toBeUndefined();
  });
});

describe('402 payment_required', () => {
  it('a balance of 0: a valid request is refused and nothing is charged', async () => {
    const poor = await serve({ credits: 0 });
    try {
      expect((await credits(poor)).remaining).toBe(0);
      const { body } = await expectUncharged(poor, 402, 'payment_required', () => postImage(poor.url, poor.key, { size: 'preview' }, teddy));
      expect(body.message).toMatch(/credit/i);
    } finally {
      await stop(poor);
    }
  });
});

describe('403 permission_denied', () => {
  it('a disabled account', async () => {
    const account = await ts.store.accounts.create({ email: 'disabled@example.com' });
    const { key } = await ts.store.keys.create(account.id);
    await ts.store.accounts.disable(account.id);
    const disabled = { ...ts, accountId: account.id, key };
    const { res } = await expectUncharged(disabled, 403, 'permission_denied', () => postImage(ts.url, key, {}, teddy));
    // An authenticated answer: it carries the plan's rate-limit headers.
    expect(res.headers.get('x-ratelimit-limit')).toMatch(/^\d+$/);
    expect(res.headers.get('x-ratelimit-remaining')).toMatch(/^\d+$/);
  });
});

describe('404 not_found and 405 method_not_allowed', () => {
  it.each([
    ['GET', '/nope'],
    ['POST', '/nope'],
    ['POST', '/api/v2/remove'],
    ['GET', '/api/v1'],
  ])('%s %s → 404 not_found', async (method, path) => {
    await expectUncharged(ts, 404, 'not_found', () => get(ts.url, path, { method }), { method, path });
  });

  it.each([
    ['GET', REMOVE],
    ['PUT', REMOVE],
    ['DELETE', REMOVE],
    ['POST', '/healthz'],
    ['DELETE', '/api/v1/openapi.json'],
  ])('%s %s → 405 method_not_allowed', async (method, path) => {
    await expectUncharged(ts, 405, 'method_not_allowed', () => get(ts.url, path, { method, headers: { authorization: `Bearer ${ts.key}` } }), { method, path });
  });
});

describe('429 rate_limit_exceeded', () => {
  it('a Free limit of 2 per minute: the third request is refused, with Retry-After and X-RateLimit-*', async () => {
    // A fixed instant 30 s into a minute: the window resets in exactly 30 s.
    const minute = Date.UTC(2030, 0, 1, 12, 0, 0);
    const limited = await serve({ rateLimits: { free: 2 }, clock: () => new Date(minute + 30_000) });
    try {
      // Cheap requests that fail validation: the rate limit is taken before validation, so they count.
      const first = await expectUncharged(limited, 400, 'validation_error', () => postImage(limited.url, limited.key, { format: 'bmp' }, teddy));
      const second = await expectUncharged(limited, 400, 'validation_error', () => postImage(limited.url, limited.key, { format: 'bmp' }, teddy));
      const third = await expectUncharged(limited, 429, 'rate_limit_exceeded', () => postImage(limited.url, limited.key, { format: 'bmp' }, teddy));
      const rate = (r: HttpResult) => ({
        limit: r.headers.get('x-ratelimit-limit'),
        remaining: r.headers.get('x-ratelimit-remaining'),
        reset: r.headers.get('x-ratelimit-reset'),
      });
      const reset = String((minute + 60_000) / 1000);
      expect(rate(first.res)).toEqual({ limit: '2', remaining: '1', reset });
      expect(rate(second.res)).toEqual({ limit: '2', remaining: '0', reset });
      expect(rate(third.res)).toEqual({ limit: '2', remaining: '0', reset });
      expect(third.res.headers.get('retry-after')).toBe('30');
      // Even a request that would succeed is refused now, uncharged.
      await expectUncharged(limited, 429, 'rate_limit_exceeded', () => postImage(limited.url, limited.key, { size: 'preview' }, teddy));
    } finally {
      await stop(limited);
    }
  });
});

describe('503 overloaded', () => {
  it('upload limit 1: while one upload is in flight a second is refused at once, with Retry-After; the first still succeeds', async () => {
    const busy = await serve({ queueLimit: 1, uploadLimit: 1, overloadRetryAfter: 7 });
    try {
      // The first request holds the only place: its body is only half sent.
      const body = multipartBody('HoldBoundary', [
        { name: 'size', data: 'preview' },
        { name: 'image_file', filename: 'photo.jpg', type: 'image/jpeg', data: teddy },
      ]);
      const first = rawConnection(busy.port, 60_000);
      await first.ready;
      first.write(requestHead(busy.key, 'multipart/form-data; boundary=HoldBoundary', body.length));
      first.write(body.subarray(0, body.length >> 1));
      await waitFor(() => busy.server.inFlight() === 1, 'the first request to be admitted');

      const { res } = await expectUncharged(busy, 503, 'overloaded', () => postImage(busy.url, busy.key, { size: 'preview' }, teddy));
      expect(res.headers.get('retry-after')).toBe('7');
      // The 503 came while the first request was still in flight: it did not wait for it.
      expect(busy.server.inFlight()).toBe(1);

      const before = await credits(busy);
      first.write(body.subarray(body.length >> 1));
      const done = await first.response;
      expect(done.status).toBe(200);
      expect(done.headers['content-type']).toBe('image/png');
      expect(done.headers['x-credits-charged']).toBe('1');
      expect((await credits(busy)).used).toBe(before.used + 1);
    } finally {
      await stop(busy);
    }
  });
});

describe('500 internal_server_error', () => {
  it('the database is gone (store closed under the running server): 500, never charged', async () => {
    const broken = await serve();
    try {
      const used = (await credits(broken)).used;
      await broken.store.close();
      const res = await postImage(broken.url, broken.key, { size: 'preview' }, teddy);
      const body = expectError(res, 500, 'internal_server_error');
      expect(body.message).not.toMatch(/sqlite|database|stack|\bat\b.*\.ts/i);
      expectConforms(doc, 'POST', REMOVE, res);
      // Nothing was charged: read the file again with a fresh store.
      const { openStore } = await import('../../src/store/index.js');
      const again = await openStore({ path: broken.dbPath });
      try {
        expect((await again.credits.balance(broken.accountId)).used).toBe(used);
      } finally {
        await again.close();
      }
    } finally {
      await stop(broken);
    }
  });
});
