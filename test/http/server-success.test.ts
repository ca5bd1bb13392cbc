/**
 * Successful requests through real HTTP: every success header of docs/contract.md is present and
 * true (the image size headers match the body's own header, the credit headers match the store),
 * every option round-trips, Idempotency-Key retries are not charged twice, every response conforms
 * to the service's OpenAPI document, and /healthz, /readyz and /metrics report what happened.
 *
 * Real parts only: startServer on 127.0.0.1:0, a SQLite file in a temp folder, the real model and
 * photos. Output images are checked from their own headers (PNG IHDR, JPEG SOF, WebP VP8X); a
 * format=zip answer by the two images inside it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PHOTOS } from '../helpers/constants.js';
import { expectConforms, expectError, openApi, REQUEST_ID, trackUncaught } from '../helpers/http-assert.js';
import { type ImageInfo, imageInfo } from '../helpers/http-images.js';
import type { OpenApiDocument } from '../helpers/http-openapi.js';
import { readPhoto } from '../helpers/paths.js';
import { credits, get, type HttpResult, metricsUrl, postImage, startTestServer, type TestServer } from '../helpers/server.js';
import { unzipStored } from '../helpers/zip.js';

const REMOVE = '/api/v1/remove';
const teddy = readPhoto(PHOTOS.teddy); // 284x398
const book = readPhoto(PHOTOS.book); // 640x480
const TEDDY = { width: 284, height: 398 };
const BOOK = { width: 640, height: 480 };
const MEDIA = { png: 'image/png', jpg: 'image/jpeg', webp: 'image/webp', zip: 'application/zip' } as const;

type ResultInfo = Omit<ImageInfo, 'format'> & { format: ImageInfo['format'] | 'zip' };

/** A format=zip body: color.jpg (RGB) and alpha.png (one channel) of one size, as one 4-channel result. */
function zipInfo(body: Buffer): ResultInfo {
  const entries = unzipStored(body);
  expect(entries.map((e) => e.name)).toEqual(['color.jpg', 'alpha.png']);
  const color = imageInfo(entries[0]!.data);
  const alpha = imageInfo(entries[1]!.data);
  expect(color).toMatchObject({ format: 'jpg', channels: 3 });
  expect(alpha).toEqual({ format: 'png', width: color.width, height: color.height, channels: 1 });
  return { ...color, format: 'zip', channels: 4 };
}

let ts: TestServer;
let doc: OpenApiDocument;
const uncaught = trackUncaught();
/** Every POST /api/v1/remove answered in this file, by "status code" (for /metrics). */
const answered = new Map<string, number>();
const requestIds = new Set<string>();
/** The previous response of succeed(). */
let last: HttpResult | undefined;

function note(res: HttpResult): void {
  const key = `${res.status} ${res.status === 200 ? 'ok' : res.json?.code}`;
  answered.set(key, (answered.get(key) ?? 0) + 1);
  const id = res.headers.get('x-request-id');
  if (id) {
    expect(requestIds.has(id), `request id ${id} reused`).toBe(false);
    requestIds.add(id);
  }
}

beforeAll(async () => {
  ts = await startTestServer({ plan: 'free' });
  doc = await openApi(ts.url);
});

afterAll(async () => {
  await ts?.close();
});

interface Success {
  res: HttpResult;
  info: ResultInfo;
  charged: number;
}

/**
 * A request that must succeed: 200, the body is an image of the requested format whose size is in
 * X-Image-Width/Height, every success header is present and true, the response conforms to the
 * OpenAPI document, and the credits moved by X-Credits-Charged (1, or 0 for an idempotent retry),
 * with X-Credits-Remaining equal to the store's balance.
 */
async function succeed(fields: Record<string, string>, image: Buffer, headers: Record<string, string> = {}, expectCharged = 1): Promise<Success> {
  const before = await credits(ts);
  const sentAt = Math.floor(Date.now() / 1000);
  const res = await postImage(ts.url, ts.key, fields, image, headers);
  note(res);
  last = res;
  expect(res.status, `status (body: ${res.json ? JSON.stringify(res.json) : `${res.body.length} bytes`})`).toBe(200);
  const format = (fields.format ?? 'png') as keyof typeof MEDIA;
  expect(res.headers.get('content-type')).toBe(MEDIA[format]);
  const info = format === 'zip' ? zipInfo(res.body) : imageInfo(res.body);
  expect(info.format).toBe(format);
  expect(res.headers.get('content-length')).toBe(String(res.body.length));
  expect({ width: res.headers.get('x-image-width'), height: res.headers.get('x-image-height') }).toEqual({
    width: String(info.width),
    height: String(info.height),
  });
  expect(res.headers.get('x-request-id')).toMatch(REQUEST_ID);
  expect(res.headers.get('x-processing-time-ms')).toMatch(/^\d+$/);
  expect(res.headers.get('x-uncertainty')).toMatch(/^(0\.\d{3}|1\.000)$/);
  expect(res.headers.get('cache-control')).toBe('no-store');
  // Credits: charged as announced, and the remaining count is the store's.
  const after = await credits(ts);
  expect(res.headers.get('x-credits-charged')).toBe(String(expectCharged));
  expect(after.used).toBe(before.used + expectCharged);
  expect(after.reserved).toBe(0);
  expect(res.headers.get('x-credits-remaining')).toBe(String(before.remaining - expectCharged));
  expect(res.headers.get('x-credits-remaining')).toBe(String(after.remaining));
  // Rate limit headers: the configured limit, a count, and a reset within the next minute.
  expect(res.headers.get('x-ratelimit-limit')).toBe(String((await ts.store.credits.balance(ts.accountId)).rateLimitPerMinute));
  expect(res.headers.get('x-ratelimit-remaining')).toMatch(/^\d+$/);
  const reset = Number(res.headers.get('x-ratelimit-reset'));
  expect(reset).toBeGreaterThanOrEqual(sentAt);
  expect(reset).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000) + 60);
  expectConforms(doc, 'POST', REMOVE, res);
  return { res, info, charged: expectCharged };
}

describe('success headers', () => {
  it('a default request: PNG, RGBA, the photo size, and every header of the contract', async () => {
    const { res, info } = await succeed({}, teddy);
    expect(info).toEqual({ format: 'png', ...TEDDY, channels: 4 });
    expect(res.headers.get('x-ratelimit-limit')).toBe('100000');
  });

  it('X-Credits-Remaining counts down by one per request, X-RateLimit-Remaining too', async () => {
    const a = last!;
    const b = (await succeed({ size: 'preview' }, teddy)).res;
    expect(Number(b.headers.get('x-credits-remaining'))).toBe(Number(a.headers.get('x-credits-remaining')) - 1);
    expect(Number(b.headers.get('x-ratelimit-remaining'))).toBe(Number(a.headers.get('x-ratelimit-remaining')) - 1);
    expect(a.headers.get('x-request-id')).not.toBe(b.headers.get('x-request-id'));
  });
});

describe('options round-trip', () => {
  it.each([
    ['png', 4],
    ['jpg', 3],
    ['webp', 4],
    ['zip', 4],
  ] as const)('format=%s: its media type and encoding, %i channels', async (format, channels) => {
    const { info } = await succeed({ format, size: 'preview' }, teddy);
    expect(info).toEqual({ format, ...TEDDY, channels });
  });

  it('channels=alpha: a one-channel greyscale PNG mask of the same size; bg_color ignored', async () => {
    const { info } = await succeed({ channels: 'alpha', bg_color: 'red' }, teddy);
    expect(info).toEqual({ format: 'png', ...TEDDY, channels: 1 });
  });

  it('channels=alpha with format=jpg: a one-channel JPEG', async () => {
    const { info } = await succeed({ channels: 'alpha', format: 'jpg' }, teddy);
    expect(info).toEqual({ format: 'jpg', ...TEDDY, channels: 1 });
  });

  it.each([
    ['#RGB', '#369', 3],
    ['RRGGBB without #', '336699', 3],
    ['rgb(r, g, b)', 'rgb(51, 102, 153)', 3],
    ['a CSS name', 'steelblue', 3],
    ['#RRGGBBAA, translucent', '#33669980', 4],
  ] as const)('bg_color as %s (%s): accepted; %i channels (an opaque colour leaves no alpha)', async (_form, value, channels) => {
    const { info } = await succeed({ bg_color: value, size: 'preview' }, teddy);
    expect(info).toEqual({ format: 'png', ...TEDDY, channels });
  });

  it('size=preview scales a 640x480 photo into 0.25 MP keeping its aspect ratio', async () => {
    const { info } = await succeed({ size: 'preview' }, book);
    expect(info.width * info.height).toBeLessThanOrEqual(250_000);
    expect(info.width * info.height).toBeGreaterThan(240_000);
    expect(info.width).toBeLessThan(BOOK.width);
    expect(Math.abs(info.width / info.height - BOOK.width / BOOK.height)).toBeLessThan(0.01);
  });

  it('size=medium never scales up: the 640x480 photo stays 640x480', async () => {
    const { info } = await succeed({ size: 'medium', format: 'jpg' }, book);
    expect(info).toMatchObject(BOOK);
  });

  it('crop=true crops to the subject: smaller than the photo; more padding gives a larger box', async () => {
    const tight = await succeed({ crop: 'true', padding: '0%' }, teddy);
    const padded = await succeed({ crop: 'true', padding: '0.3' }, teddy);
    const byDefault = await succeed({ crop: 'true' }, teddy);
    for (const { info } of [tight, byDefault]) {
      expect(info.width).toBeLessThan(TEDDY.width);
      expect(info.height).toBeLessThan(TEDDY.height);
    }
    // Padding 30 % of the subject's width on every side, vs none (the canvas may extend past the photo).
    expect(padded.info.width).toBeGreaterThan(tight.info.width * 1.5);
    expect(padded.info.height).toBeGreaterThan(tight.info.height);
    // The default padding is 10 %: between none and 30 %.
    expect(byDefault.info.width).toBeGreaterThan(tight.info.width);
    expect(byDefault.info.width).toBeLessThan(padded.info.width);
  });

  it('crop=1:1: a square box', async () => {
    const { info } = await succeed({ crop: '1:1', format: 'webp' }, teddy);
    expect(info.width).toBe(info.height);
  });

  it('crop=16:9 with size=preview: the ratio holds', async () => {
    const { info } = await succeed({ crop: '16:9', size: 'preview', format: 'jpg' }, book);
    expect(Math.abs(info.width / info.height - 16 / 9)).toBeLessThan(0.02);
    expect(info.width * info.height).toBeLessThanOrEqual(250_000);
  });

  it('padding without crop has no effect: the full photo', async () => {
    const { info } = await succeed({ padding: '50%', size: 'preview' }, teddy);
    expect(info).toMatchObject(TEDDY);
  });
});

describe('Idempotency-Key', () => {
  it('the same key and image twice: the retry is answered but not charged', async () => {
    const start = await credits(ts);
    const key = `retry-${Date.now()}`;
    const first = await succeed({ size: 'preview' }, teddy, { 'idempotency-key': key }, 1);
    const second = await succeed({ size: 'preview' }, teddy, { 'idempotency-key': key }, 0);
    expect(second.info).toEqual(first.info);
    expect((await credits(ts)).used).toBe(start.used + 1);
    expect((await credits(ts)).remaining).toBe(start.remaining - 1);
    expect(second.res.headers.get('x-credits-remaining')).toBe(String(start.remaining - 1));
  });

  it('the same key with a different image: 400 validation_error naming Idempotency-Key, uncharged', async () => {
    const key = `other-${Date.now()}`;
    await succeed({ size: 'preview' }, teddy, { 'idempotency-key': key }, 1);
    const before = await credits(ts);
    const res = await postImage(ts.url, ts.key, { size: 'preview' }, book, { 'idempotency-key': key });
    note(res);
    const body = expectError(res, 400, 'validation_error');
    expect(body.details).toMatchObject({ field: 'Idempotency-Key' });
    expectConforms(doc, 'POST', REMOVE, res);
    expect(await credits(ts)).toEqual(before);
  });

  it('a new key with an image already sent under another key is charged again', async () => {
    const first = `first-${Date.now()}`;
    const start = await credits(ts);
    await succeed({ size: 'preview' }, teddy, { 'idempotency-key': first }, 1);
    // The same image and options under a second key: a new request, charged.
    await succeed({ size: 'preview' }, teddy, { 'idempotency-key': `second-${Date.now()}` }, 1);
    // The first key still answers its retry free: each key keeps its own request.
    await succeed({ size: 'preview' }, teddy, { 'idempotency-key': first }, 0);
    expect((await credits(ts)).used).toBe(start.used + 2);
  });
});

describe('health, readiness, metrics and the OpenAPI document', () => {
  it('GET /healthz, /readyz and /api/v1/openapi.json conform to the document', async () => {
    const health = await get(ts.url, '/healthz');
    expect(health.status).toBe(200);
    expect(health.json).toEqual({ status: 'ok' });
    expectConforms(doc, 'GET', '/healthz', health);

    const ready = await get(ts.url, '/readyz');
    expect(ready.status).toBe(200);
    expect(ready.json).toMatchObject({ status: 'ready', queue: 0, in_flight: 0 });
    expectConforms(doc, 'GET', '/readyz', ready);

    const api = await get(ts.url, '/api/v1/openapi.json');
    expect(api.status).toBe(200);
    expect(api.json.openapi).toMatch(/^3\./);
    expect(Object.keys(api.json.paths)).toEqual(
      expect.arrayContaining([REMOVE, '/healthz', '/readyz', '/metrics', '/api/v1/batches', '/api/v1/batches/{batch_id}', '/api/v1/webhooks']),
    );
    // Every error code of the contract is in the Error schema.
    expect([...api.json.components.schemas.Error.properties.code.enum].sort()).toEqual(
      [
        'missing_image',
        'model_unavailable',
        'validation_error',
        'image_too_large',
        'unsupported_media_type',
        'invalid_image',
        'foreground_not_found',
        'invalid_roi',
        'invalid_image_url',
        'failed_image_download',
        'authentication_error',
        'payment_required',
        'permission_denied',
        'not_found',
        'method_not_allowed',
        'rate_limit_exceeded',
        'request_timeout',
        'result_not_ready',
        'idempotency_in_progress',
        'result_expired',
        'overloaded',
        'internal_server_error',
      ].sort(),
    );
    expectConforms(doc, 'GET', '/api/v1/openapi.json', api);
  });

  it('GET /metrics: Prometheus text counting exactly the requests of this file by status and code', async () => {
    const res = await get(metricsUrl(ts.server), '/metrics');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    expectConforms(doc, 'GET', '/metrics', res);
    const text = res.body.toString('utf8');
    const counted = new Map<string, number>();
    for (const m of text.matchAll(/^bgone_requests_total\{route="\/api\/v1\/remove",status="(\d+)",code="([a-z_]+)"\} (\d+)$/gm)) {
      counted.set(`${m[1]} ${m[2]}`, Number(m[3]));
    }
    expect(answered.get('200 ok')).toBeGreaterThan(10);
    expect(Object.fromEntries(counted)).toEqual(Object.fromEntries(answered));
    const successes = answered.get('200 ok')!;
    const total = [...answered.values()].reduce((a, b) => a + b, 0);
    expect(text).toMatch(/^# TYPE bgone_requests_total counter$/m);
    expect(text).toMatch(/^bgone_queue_length 0$/m);
    const inference = Number(/^bgone_inference_seconds_count (\d+)$/m.exec(text)?.[1]);
    expect(inference).toBe(successes);
    const inferenceSum = Number(/^bgone_inference_seconds_sum ([0-9.e+-]+)$/m.exec(text)?.[1]);
    expect(inferenceSum).toBeGreaterThan(0);
    expect(Number(/^bgone_request_duration_seconds_count (\d+)$/m.exec(text)?.[1])).toBe(total);
    // Every request id seen was distinct and well-formed.
    expect(requestIds.size).toBe(total);
    await uncaught.check();
  });
});
