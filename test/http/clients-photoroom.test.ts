/**
 * Photoroom's public clients against a real bgone: the npm `photoroom-sdk` 1.0.1 runs for real (its
 * `baseUrl` reassigned on the instance, the only change), and the others' calls are sent byte for
 * byte as each puts them on the wire (read from their public sources): Photoroom's own Node, Python
 * and iOS samples, the Python `photoroom` client (And1DS/photoroom-python) and the npm
 * `photoroom-cli`, each answer read as that client reads it.
 */
import { createRequire } from 'node:module';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chunked, exchange, field, head, hexBoundary, multipart, type WireAnswer } from '../helpers/client-wire.js';
import { PHOTOS } from '../helpers/constants.js';
import { trackUncaught } from '../helpers/http-assert.js';
import { decode } from '../helpers/image.js';
import { readPhoto } from '../helpers/paths.js';
import { credits, startTestServer, type TestServer } from '../helpers/server.js';

const teddy = readPhoto(PHOTOS.teddy); // 284x398
const TEDDY = { width: 284, height: 398 };

interface PhotoroomSdk {
  baseUrl: string;
  removeBgFromImage(options: Record<string, unknown>): Promise<{ result_b64: string }>;
}
const Photoroom = createRequire(import.meta.url)('photoroom-sdk') as new (apiKey: string, resultOption?: { base64?: boolean }) => PhotoroomSdk;

let ts: TestServer;
const uncaught = trackUncaught();

beforeAll(async () => {
  ts = await startTestServer({ plan: 'pro' });
});

afterAll(async () => {
  await ts?.close();
});

/** The SDK pointed at bgone: its base URL is an own property of the instance, ending in /v1. */
function sdk(key: string, base64?: boolean, server = ts): PhotoroomSdk {
  const client = base64 === undefined ? new Photoroom(key) : new Photoroom(key, { base64 });
  expect(client.baseUrl).toBe('https://sdk.photoroom.com/v1');
  client.baseUrl = `${server.url}/v1`;
  return client;
}

/** The image of a `data:image/...;base64,` URL the SDK returns. */
function dataUrlImage(result: { result_b64: string }): Buffer {
  const m = /^data:image\/(png|jpeg);base64,(.+)$/.exec(result.result_b64);
  expect(m, result.result_b64.slice(0, 60)).not.toBeNull();
  return Buffer.from(m![2]!, 'base64');
}

describe('npm photoroom-sdk 1.0.1 (JSON {"image_file_b64"} to /v1/segment)', () => {
  it('removeBgFromImage with its README options: the cut-out, one credit', async () => {
    const before = await credits(ts);
    const result = await sdk(ts.key).removeBgFromImage({ image_file_b64: teddy.toString('base64') });
    const image = await decode(dataUrlImage(result));
    expect({ width: image.width, height: image.height, channels: image.channels }).toEqual({ ...TEDDY, channels: 4 });
    expect(before.remaining - (await credits(ts)).remaining).toBe(1);
  });

  it('every option it types: format jpg, channels, bg_color, size, crop as a JSON boolean', async () => {
    const jpg = await decode(dataUrlImage(await sdk(ts.key).removeBgFromImage({ image_file_b64: teddy.toString('base64'), format: 'jpg', bg_color: 'blue' })));
    expect(jpg.channels).toBe(3);
    expect([...jpg.data.subarray(0, 3)].map((v, c) => Math.abs(v - [0, 0, 255][c]!) <= 3)).toEqual([true, true, true]); // through JPEG
    const mask = await decode(
      dataUrlImage(await sdk(ts.key).removeBgFromImage({ image_file_b64: teddy.toString('base64'), channels: 'alpha', size: 'preview' })),
    );
    expect(mask.channels).toBe(1);
    const cropped = await decode(dataUrlImage(await sdk(ts.key).removeBgFromImage({ image_file_b64: teddy.toString('base64'), crop: true })));
    expect(cropped.width).toBeLessThan(TEDDY.width);
  });

  it('{base64: true}: Accept: application/json, and it reads result_b64 (raw base64, no prefix)', async () => {
    const plain = dataUrlImage(await sdk(ts.key).removeBgFromImage({ image_file_b64: teddy.toString('base64') }));
    const json = dataUrlImage(await sdk(ts.key, true).removeBgFromImage({ image_file_b64: teddy.toString('base64') }));
    expect(json.equals(plain)).toBe(true);
  });

  it('errors reject with the status text: a wrong key, no credits', async () => {
    await expect(sdk('rb-sk_wrong').removeBgFromImage({ image_file_b64: teddy.toString('base64') })).rejects.toThrow('Forbidden');
    const broke = await startTestServer({ credits: 0 });
    try {
      await expect(sdk(broke.key, undefined, broke).removeBgFromImage({ image_file_b64: teddy.toString('base64') })).rejects.toThrow('Payment Required');
    } finally {
      await broke.close();
    }
  });
});

const host = () => `Host: 127.0.0.1:${ts.port}`;
const post = (path: string, headers: string[], body: Buffer) => exchange(ts.port, head('POST', path, headers), body);

function ok(answer: WireAnswer): WireAnswer {
  expect(answer.status, answer.body.subarray(0, 300).toString()).toBe(200);
  return answer;
}

describe("Photoroom's own samples (api-code-samples), their URL replaced", () => {
  it('Node: a chunked multipart body (no Content-Length), X-API-Key; it takes the answer only if Content-Type is exactly image/png', async () => {
    const boundary = `--------------------------${(1764633600000).toString(16)}`;
    const body = multipart(boundary, [
      { headers: ['Content-Disposition: form-data; name="image_file"; filename="test.jpg"', 'Content-Type: image/jpeg'], data: teddy },
    ]);
    const answer = ok(
      await post(
        '/v1/segment',
        [`Content-Type: multipart/form-data; boundary=${boundary}`, `X-API-Key: ${ts.key}`, host(), 'Connection: close', 'Transfer-Encoding: chunked'],
        chunked(body, 4096),
      ),
    );
    expect(['image/jpeg', 'image/png', 'image/gif']).toContain(answer.headers['content-type']);
    expect(answer.headers['content-type']).toBe('image/png');
  });

  it('Python (http.client): x-api-key, the part typed by mimetypes, Accept-Encoding: identity', async () => {
    const boundary = `----------${hexBoundary(32, 9)}`;
    const body = multipart(boundary, [
      { headers: ['Content-Disposition: form-data; name="image_file"; filename="test.jpg"', 'Content-Type: image/jpeg'], data: teddy },
    ]);
    const answer = ok(
      await post(
        '/v1/segment',
        [
          host(),
          'Accept-Encoding: identity',
          `Content-Length: ${body.length}`,
          `Content-Type: multipart/form-data; boundary=${boundary}`,
          `x-api-key: ${ts.key}`,
        ],
        body,
      ),
    );
    expect((await decode(answer.body)).channels).toBe(4);
  });

  it('iOS (URLSession): X-Api-Key, a JPEG part labelled image/jpg', async () => {
    const boundary = 'Boundary-2F1D3E4C-5B6A-4789-9ABC-DEF012345678';
    const small = await sharp(teddy).jpeg({ quality: 70 }).toBuffer();
    const body = multipart(boundary, [
      { headers: ['Content-Disposition: form-data; name="image_file"; filename="3141592653.jpeg"', 'Content-Type: image/jpg'], data: small },
    ]);
    ok(
      await post(
        '/v1/segment',
        [host(), `Content-Type: multipart/form-data; boundary=${boundary}`, `X-Api-Key: ${ts.key}`, `Content-Length: ${body.length}`],
        body,
      ),
    );
  });
});

describe('Python photoroom client (And1DS/photoroom-python, httpx; SDK_BASE_URL and IMAGE_API_BASE_URL reassigned)', () => {
  it('remove_background: its defaults always sent (format=png, channels=rgba, size=full, crop=false, despill=false)', async () => {
    const boundary = hexBoundary(32, 10);
    const body = multipart(boundary, [
      field('format', 'png'),
      field('channels', 'rgba'),
      field('size', 'full'),
      field('crop', 'false'),
      field('despill', 'false'),
      { headers: ['Content-Disposition: form-data; name="image_file"; filename="teddy.jpg"', 'Content-Type: image/jpeg'], data: teddy },
    ]);
    const answer = ok(
      await post(
        '/v1/segment',
        [
          host(),
          'Accept: */*',
          'Accept-Encoding: gzip, deflate',
          'Connection: keep-alive',
          'User-Agent: python-httpx/0.28.1',
          `X-Api-Key: ${ts.key}`,
          `Content-Length: ${body.length}`,
          `Content-Type: multipart/form-data; boundary=${boundary}`,
        ],
        body,
      ),
    );
    expect(answer.headers['content-type']).toBe('image/png');
  });

  it('get_account: GET /v2/account, images.available and images.subscription whole numbers, and the plan', async () => {
    const answer = await exchange(ts.port, head('GET', '/v2/account', [host(), 'Accept: */*', `X-Api-Key: ${ts.key}`]), Buffer.alloc(0));
    expect(answer.status).toBe(200);
    const balance = await ts.store.credits.balance(ts.accountId);
    expect(answer.json).toEqual({ images: { available: balance.remaining, subscription: balance.allowance }, plan: 'pro' });
    expect(Number.isInteger(answer.json.images.available)).toBe(true);
  });

  it("errors read from error.message, or detail (v1): the key's 403, the account's 403", async () => {
    const boundary = hexBoundary(32, 11);
    const body = multipart(boundary, [
      { headers: ['Content-Disposition: form-data; name="image_file"; filename="t.jpg"', 'Content-Type: image/jpeg'], data: teddy },
    ]);
    const segment = await post(
      '/v1/segment',
      [host(), 'X-Api-Key: rb-sk_wrong', `Content-Length: ${body.length}`, `Content-Type: multipart/form-data; boundary=${boundary}`],
      body,
    );
    expect(segment.status).toBe(403);
    expect(segment.json).toEqual({ detail: expect.any(String), status_code: 403, type: 'authentication_error' });
    const account = await exchange(ts.port, head('GET', '/v2/account', [host(), 'X-Api-Key: rb-sk_wrong']), Buffer.alloc(0));
    expect(account.status).toBe(403);
    expect(account.json).toEqual({ error: { message: expect.any(String) } });
  });
});

describe('npm photoroom-cli (letanure/photoroom-cli)', () => {
  it('account: GET /v1/account with Accept: application/json reads credits.available and credits.subscription', async () => {
    const answer = await exchange(ts.port, head('GET', '/v1/account', [host(), 'Accept: application/json', `x-api-key: ${ts.key}`]), Buffer.alloc(0));
    expect(answer.status).toBe(200);
    const balance = await ts.store.credits.balance(ts.accountId);
    expect(answer.json).toEqual({ credits: { available: balance.remaining, subscription: balance.allowance } });
  });

  it('segment with Accept: image/png, application/json: the image itself, not JSON', async () => {
    const boundary = '--------------------------123456789012345678901234';
    const body = multipart(boundary, [
      { headers: ['Content-Disposition: form-data; name="image_file"; filename="teddy.jpg"', 'Content-Type: image/jpeg'], data: teddy },
      field('format', 'webp'),
      field('crop', 'true'),
    ]);
    const answer = ok(
      await post(
        '/v1/segment',
        [
          host(),
          'Accept: image/png, application/json',
          `x-api-key: ${ts.key}`,
          `Content-Type: multipart/form-data; boundary=${boundary}`,
          `Content-Length: ${body.length}`,
        ],
        body,
      ),
    );
    expect(answer.headers['content-type']).toBe('image/webp');
    const score = Number.parseFloat(answer.headers['x-uncertainty-score']!); // as it reads it
    expect(score).toBeGreaterThanOrEqual(0);
    expect(score).toBeLessThanOrEqual(1);
  });

  it('no uncaught error in the process', () => uncaught.check());
});
