/**
 * Photoroom's dialect through real HTTP on a fresh service: POST /v1/segment with Photoroom's names,
 * defaults and answer (its published OpenAPI document: image/png or `{base64img}`, errors as
 * `{detail, status_code, type}` with 400, 402 and 403), one credit per image, none on an error.
 */
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { greenExcess, greenScreen } from '../../bench/helpers/green-screen.js';
import { PHOTOS } from '../helpers/constants.js';
import { trackUncaught } from '../helpers/http-assert.js';
import { rawExchange } from '../helpers/http-raw.js';
import { alphaOf, decode, gtMask, iou, pixel } from '../helpers/image.js';
import { gtPath, readPhoto } from '../helpers/paths.js';
import { blob, credits, type HttpResult, startTestServer, type TestServer, toResult } from '../helpers/server.js';

const teddy = readPhoto(PHOTOS.teddy); // 284x398
const swan = readPhoto(PHOTOS.swan); // 854x480: 0.41 MP, over preview's 0.25 MP
const TEDDY = { width: 284, height: 398 };

let ts: TestServer;
const uncaught = trackUncaught();

beforeAll(async () => {
  ts = await startTestServer({ plan: 'pro' });
});

afterAll(async () => {
  await ts?.close();
});

/** POST /v1/segment as multipart with `x-api-key`, the image (if any) last. */
async function post(fields: Record<string, string>, image: Buffer | null = teddy, headers: Record<string, string> = {}, server = ts): Promise<HttpResult> {
  const form = new FormData();
  for (const [name, value] of Object.entries(fields)) form.append(name, value);
  if (image) form.append('image_file', blob(image, 'image/jpeg'), 'photo.jpg');
  return toResult(await fetch(`${server.url}/v1/segment`, { method: 'POST', headers: { 'x-api-key': server.key, ...headers }, body: form }));
}

function ok(res: HttpResult): HttpResult {
  expect(res.status, JSON.stringify(res.json ?? res.headers.get('content-type'))).toBe(200);
  return res;
}

/** A Photoroom error answer: the status, and the document's three required properties, status_code the same. */
function expectError(res: HttpResult, status: number, type?: string): void {
  expect(res.status, JSON.stringify(res.json)).toBe(status);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  expect(res.json).toEqual({ detail: expect.any(String), status_code: status, type: type ?? expect.any(String) });
}

describe('POST /v1/segment', () => {
  it("Photoroom's defaults: a PNG cut-out at full size, format png, channels rgba, no crop", async () => {
    const res = ok(await post({}));
    expect(res.headers.get('content-type')).toBe('image/png');
    expect(res.headers.get('x-credits-charged')).toBe('1');
    const uncertainty = Number(res.headers.get('x-uncertainty-score'));
    expect(uncertainty).toBeGreaterThanOrEqual(0);
    expect(uncertainty).toBeLessThanOrEqual(1);
    const image = await decode(res.body);
    expect({ width: image.width, height: image.height, channels: image.channels }).toEqual({ ...TEDDY, channels: 4 });
    expect(pixel(image, 0, 0)[3]).toBe(0);
    const gt = await gtMask(PHOTOS.teddy);
    expect(iou(alphaOf(image), gt.mask)).toBeGreaterThan(0.9);
  });

  it('format jpg and webp', async () => {
    const jpg = ok(await post({ format: 'jpg' }));
    expect(jpg.headers.get('content-type')).toBe('image/jpeg');
    expect((await sharp(jpg.body).metadata()).format).toBe('jpeg');
    const webp = ok(await post({ format: 'WEBP' }));
    expect(webp.headers.get('content-type')).toBe('image/webp');
    expect((await sharp(webp.body).metadata()).format).toBe('webp');
  });

  it('channels=alpha gives the mask alone', async () => {
    const res = ok(await post({ channels: 'alpha' }));
    expect((await decode(res.body)).channels).toBe(1);
  });

  it('bg_color, as hex or an HTML name, fills the background', async () => {
    for (const colour of ['#FF00FF', 'magenta']) {
      const image = await decode(ok(await post({ bg_color: colour })).body);
      expect(pixel(image, 0, 0).slice(0, 3)).toEqual([255, 0, 255]);
      expect(pixel(image, 0, 0)[3] ?? 255).toBe(255);
    }
  });

  it('size=preview: at most 0.25 MP', async () => {
    const meta = await sharp(ok(await post({ size: 'preview' }, swan)).body).metadata();
    expect(meta.width! * meta.height!).toBeLessThanOrEqual(250_000);
    expect(meta.width! * meta.height!).toBeGreaterThan(200_000);
  });

  it('crop=true crops to the cut-out border, with no margin', async () => {
    const image = await decode(ok(await post({ crop: 'true' })).body);
    expect(image.width * image.height).toBeLessThan(TEDDY.width * TEDDY.height);
    const alpha = alphaOf(image);
    const row = (y: number) => Math.max(...alpha.subarray(y * image.width, (y + 1) * image.width));
    expect(row(0)).toBeGreaterThan(0);
    expect(row(image.height - 1)).toBeGreaterThan(0);
  });

  it('despill=true takes a green screen off the edges; on a photo without one it changes nothing', async () => {
    // The teddy on chroma green through its ground-truth matte, its border tinted by the screen's light.
    const screen = await greenScreen(teddy, gtPath(PHOTOS.teddy));
    const plain = ok(await post({ despill: 'false' }, screen.png));
    const despilled = ok(await post({ despill: 'true' }, screen.png));
    const excess = async (png: Buffer) => greenExcess((await decode(png)).data, screen.band);
    expect(await excess(despilled.body)).toBeLessThan((await excess(plain.body)) * 0.2);
    expect(ok(await post({ despill: 'true' })).body.equals(ok(await post({ despill: 'false' })).body)).toBe(true);
  });

  it('Accept: application/json answers {base64img}', async () => {
    const res = ok(await post({}, teddy, { accept: 'application/json' }));
    expect(Object.keys(res.json)).toEqual(['base64img']);
    const meta = await sharp(Buffer.from(res.json.base64img, 'base64')).metadata();
    expect({ width: meta.width, height: meta.height, format: meta.format }).toEqual({ ...TEDDY, format: 'png' });
  });

  it('one image costs one credit; an Idempotency-Key replay is charged 0 and gives the same bytes', async () => {
    const before = await credits(ts);
    const key = { 'Idempotency-Key': 'photoroom-replay-1' };
    const first = ok(await post({}, teddy, key));
    const replay = ok(await post({}, teddy, key));
    expect(first.headers.get('x-credits-charged')).toBe('1');
    expect(replay.headers.get('x-credits-charged')).toBe('0');
    expect(replay.body.equals(first.body)).toBe(true);
    expect((await credits(ts)).remaining).toBe(before.remaining - 1);
  });

  it.each([
    ['format', 'gif'],
    ['format', 'auto'],
    ['channels', 'rgb'],
    ['size', 'huge'],
    ['size', 'auto'],
    ['crop', 'maybe'],
    ['despill', 'maybe'],
    ['bg_color', 'not-a-colour'],
  ])("%s=%s → 400 in Photoroom's shape, nothing charged", async (field, value) => {
    const before = await credits(ts);
    expectError(await post({ [field]: value }), 400, 'validation_error');
    expect(await credits(ts)).toEqual(before);
  });

  it('no image, an unknown field, a file that is no image: 400, nothing charged', async () => {
    const before = await credits(ts);
    expectError(await post({}, null), 400, 'missing_image');
    expectError(await post({ crop_margin: '10px' }), 400, 'validation_error');
    expectError(await post({}, Buffer.from('not an image at all')), 400);
    expectError(await post({}, teddy, { 'Idempotency-Key': 'k'.repeat(256) }), 400, 'validation_error');
    expect(await credits(ts)).toEqual(before);
  });
});

describe('GET /v1/account and GET /v2/account', () => {
  it("Photoroom's shapes from the real balance: credits.available and .subscription; images and the plan", async () => {
    const balance = await ts.store.credits.balance(ts.accountId);
    const v1 = await toResult(await fetch(`${ts.url}/v1/account`, { headers: { 'x-api-key': ts.key } }));
    expect(v1.status).toBe(200);
    expect(v1.json).toEqual({ credits: { available: balance.remaining, subscription: balance.allowance } });
    const v2 = await toResult(await fetch(`${ts.url}/v2/account`, { headers: { 'X-Api-Key': ts.key } }));
    expect(v2.json).toEqual({ images: { available: balance.remaining, subscription: balance.allowance }, plan: 'pro' });
    ok(await post({}));
    const after = await toResult(await fetch(`${ts.url}/v2/account`, { headers: { 'X-Api-Key': ts.key } }));
    expect(after.json.images.available).toBe(balance.remaining - 1);
  });

  it('a wrong key: 403 {"error": {"message"}}; not metered', async () => {
    const before = await credits(ts);
    for (const path of ['/v1/account', '/v2/account']) {
      const res = await toResult(await fetch(`${ts.url}${path}`, { headers: { 'x-api-key': 'rb-sk_wrong' } }));
      expect(res.status).toBe(403);
      expect(res.json).toEqual({ error: { message: expect.any(String) } });
    }
    expect(await credits(ts)).toEqual(before);
  });

  it("unknown paths and wrong methods under /v1/ and /v2/: Photoroom's bodies", async () => {
    const get = await toResult(await fetch(`${ts.url}/v1/segment`));
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');
    expect(get.json).toEqual({ detail: expect.any(String), status_code: 405, type: 'method_not_allowed' });
    const v1 = await toResult(await fetch(`${ts.url}/v1/render`, { method: 'POST' }));
    expect(v1.json).toEqual({ detail: expect.any(String), status_code: 404, type: 'not_found' });
    const v2 = await toResult(await fetch(`${ts.url}/v2/unknown`));
    expect(v2.status).toBe(404);
    expect(v2.json).toEqual({ error: { message: expect.any(String) } });
  });
});

describe("the HTTP layer's own refusals under /v1/", () => {
  it("a head over 16 KiB: 431 in Photoroom's body", async () => {
    const big = await rawExchange(
      ts.port,
      `POST /v1/segment HTTP/1.1\r\nHost: x\r\nx-api-key: ${ts.key}\r\nX-Pad: ${'a'.repeat(20_000)}\r\nContent-Length: 0\r\n\r\n`,
    );
    expect(big.status).toBe(431);
    expect(big.json).toEqual({ detail: expect.any(String), status_code: 431, type: 'validation_error' });
  });
});

describe("refusals of the shared path, in Photoroom's shape", () => {
  it('a wrong key and no key: 403, without a challenge', async () => {
    const before = await credits(ts);
    const wrong = await post({}, teddy, { 'x-api-key': 'rb-sk_wrong' });
    expectError(wrong, 403, 'authentication_error');
    expect(wrong.headers.get('www-authenticate')).toBeNull();
    const form = new FormData();
    form.append('image_file', blob(teddy, 'image/jpeg'), 'photo.jpg');
    expectError(await toResult(await fetch(`${ts.url}/v1/segment`, { method: 'POST', body: form })), 403, 'authentication_error');
    expect(await credits(ts)).toEqual(before);
  });

  it('no credits left: 402', async () => {
    const broke = await startTestServer({ credits: 0 });
    try {
      const before = await credits(broke);
      expectError(await post({}, teddy, {}, broke), 402, 'payment_required');
      expect(await credits(broke)).toEqual(before);
    } finally {
      await broke.close();
    }
  });

  it('no uncaught error in the process', () => uncaught.check());
});
