/**
 * remove.bg's dialect through real HTTP on a fresh service: POST /v1.0/removebg with remove.bg's
 * names, defaults and answer (multipart, JSON and urlencoded bodies; the image by file, base64 and
 * URL from a photo server on loopback), GET /v1.0/account from the real balance, and the refusals
 * in remove.bg's shape (403 for a key, 402, 429, 400 with remove.bg's codes), none of them charged.
 */
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configure } from '../../src/lib/index.js';
import { PHOTOS } from '../helpers/constants.js';
import { trackUncaught } from '../helpers/http-assert.js';
import { rawExchange } from '../helpers/http-raw.js';
import { decode } from '../helpers/image.js';
import { readPhoto } from '../helpers/paths.js';
import { blob, credits, type HttpResult, servePhoto, startTestServer, type TestServer, toResult } from '../helpers/server.js';
import { unzipStored } from '../helpers/zip.js';

const teddy = readPhoto(PHOTOS.teddy); // 284x398
const swan = readPhoto(PHOTOS.swan); // 854x480: 0.41 MP, over preview's 0.25 MP
const TEDDY = { width: 284, height: 398 };

let ts: TestServer;
let photos: Awaited<ReturnType<typeof servePhoto>> | undefined;
let photosUrl: string;
const uncaught = trackUncaught();

beforeAll(async () => {
  configure({ fetchAllowPrivate: true });
  photos = await servePhoto('/teddy.jpg', teddy);
  photosUrl = photos.base;
  ts = await startTestServer({ plan: 'pro' });
});

afterAll(async () => {
  await ts?.close();
  await photos?.close();
  configure({ fetchAllowPrivate: false });
});

type Key = string | null;

/** POST /v1.0/removebg as multipart, with `X-Api-Key` (none when key is null). */
async function post(
  fields: Record<string, string>,
  files: Record<string, Buffer> = {},
  headers: Record<string, string> = {},
  server = ts,
): Promise<HttpResult> {
  const form = new FormData();
  for (const [name, value] of Object.entries(fields)) form.append(name, value);
  for (const [name, data] of Object.entries(files)) form.append(name, blob(data, 'image/jpeg'), `${name}.jpg`);
  return toResult(await fetch(`${server.url}/v1.0/removebg`, { method: 'POST', headers: { 'X-Api-Key': server.key, ...headers }, body: form }));
}

/** POST /v1.0/removebg with a text body of the given content type. */
async function postText(contentType: string, body: string, key: Key = ts.key): Promise<HttpResult> {
  const headers: Record<string, string> = { 'content-type': contentType };
  if (key !== null) headers['X-API-Key'] = key;
  return toResult(await fetch(`${ts.url}/v1.0/removebg`, { method: 'POST', headers, body }));
}

async function account(key: Key = ts.key, server = ts): Promise<HttpResult> {
  return toResult(await fetch(`${server.url}/v1.0/account`, { headers: key === null ? {} : { 'x-api-key': key } }));
}

function ok(res: HttpResult): HttpResult {
  expect(res.status, JSON.stringify(res.json ?? res.headers.get('content-type'))).toBe(200);
  return res;
}

/** A remove.bg error answer: its status, its one error's code, a title and a detail. */
function expectError(res: HttpResult, status: number, code: string): void {
  expect(res.status, JSON.stringify(res.json)).toBe(status);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  expect(res.json).toEqual({ errors: [{ title: expect.any(String), code, detail: expect.any(String) }] });
}

describe('POST /v1.0/removebg', () => {
  it("remove.bg's defaults: size preview (at most 0.25 MP) and format auto (PNG for a cut-out), with its headers", async () => {
    const res = ok(await post({}, { image_file: swan }));
    expect(res.headers.get('content-type')).toBe('image/png');
    const meta = await sharp(res.body).metadata();
    expect(meta.format).toBe('png');
    expect(meta.width! * meta.height!).toBeLessThanOrEqual(250_000);
    expect(meta.width! * meta.height!).toBeGreaterThan(200_000);
    expect(res.headers.get('x-width')).toBe(String(meta.width));
    expect(res.headers.get('x-height')).toBe(String(meta.height));
    expect(res.headers.get('x-type')).toBe('other');
    expect(res.headers.get('x-credits-charged')).toBe('1');
    expect(res.headers.get('x-request-id')).toMatch(/\S/);
    expect(res.headers.get('x-ratelimit-limit')).toMatch(/^\d+$/);
    for (const side of ['top', 'left', 'width', 'height']) expect(res.headers.get(`x-foreground-${side}`)).toMatch(/^\d+$/);
    expect(Number(res.headers.get('x-foreground-width'))).toBeGreaterThan(0);
  });

  it('bg_color gives a JPEG (format auto, nothing transparent); the 4-digit #RGBA form is taken', async () => {
    const res = ok(await post({ bg_color: '#0f0' }, { image_file: teddy }));
    expect(res.headers.get('content-type')).toBe('image/jpeg');
    const withAlpha = ok(await post({ bg_color: '0f08', format: 'png' }, { image_file: teddy }));
    const image = await decode(withAlpha.body);
    expect(image.channels).toBe(4);
    expect(image.data[3]).toBeGreaterThan(100); // a corner: the background at alpha 0x88
    expect(image.data[3]).toBeLessThan(160);
  });

  it("format=zip: application/zip holding remove.bg's color.jpg (RGB) and alpha.png (the mask channels=alpha gives)", async () => {
    const res = ok(await post({ format: 'zip', size: 'full' }, { image_file: teddy }));
    expect(res.headers.get('content-type')).toBe('application/zip');
    expect(res.headers.get('x-width')).toBe(String(TEDDY.width));
    expect(res.headers.get('x-height')).toBe(String(TEDDY.height));
    const entries = unzipStored(res.body);
    expect(entries.map((e) => e.name)).toEqual(['color.jpg', 'alpha.png']);
    const colorMeta = await sharp(entries[0]!.data).metadata();
    expect(colorMeta).toMatchObject({ format: 'jpeg', channels: 3, ...TEDDY });
    const alpha = await decode(entries[1]!.data);
    expect(alpha).toMatchObject({ channels: 1, ...TEDDY });
    const mask = ok(await post({ channels: 'alpha', format: 'png', size: 'full' }, { image_file: teddy }));
    expect(entries[1]!.data.equals(mask.body)).toBe(true);
    // The mask in a zip (remove.bg's CLIs and Ruby gem for a mask): grey colours, an opaque alpha.
    const inZip = unzipStored(ok(await post({ format: 'zip', channels: 'alpha', size: 'full' }, { image_file: teddy })).body);
    expect(inZip.map((e) => e.name)).toEqual(['color.jpg', 'alpha.png']);
    const opaque = await decode(inZip[1]!.data);
    expect(Math.min(...opaque.data)).toBe(255);
    const grey = await decode(await sharp(inZip[0]!.data).extractChannel(0).toBuffer());
    const maskPixels = (await decode(mask.body)).data;
    let diff = 0;
    for (let i = 0; i < maskPixels.length; i++) diff += Math.abs(grey.data[i]! - maskPixels[i]!);
    expect(diff / maskPixels.length).toBeLessThan(1);
  });

  it('channels=alpha gives the mask alone', async () => {
    const res = ok(await post({ channels: 'alpha', format: 'png' }, { image_file: teddy }));
    expect((await decode(res.body)).channels).toBe(1);
  });

  it('image_file_b64 in a JSON body and in a urlencoded body, and image_url, give the bytes of the upload', async () => {
    const plain = ok(await post({}, { image_file: teddy }));
    const json = ok(await postText('application/json', JSON.stringify({ image_file_b64: teddy.toString('base64') })));
    expect(json.body.equals(plain.body)).toBe(true);
    const urlencoded = ok(await postText('application/x-www-form-urlencoded', new URLSearchParams({ image_file_b64: teddy.toString('base64') }).toString()));
    expect(urlencoded.body.equals(plain.body)).toBe(true);
    const byUrl = ok(await post({ image_url: `${photosUrl}/teddy.jpg` }));
    expect(byUrl.body.equals(plain.body)).toBe(true);
  });

  it('bg_image_file puts an image behind the subject: no transparency left, so a JPEG', async () => {
    const res = ok(await post({}, { image_file: teddy, bg_image_file: swan }));
    expect(res.headers.get('content-type')).toBe('image/jpeg');
    expect((await sharp(res.body).metadata()).width).toBe(TEDDY.width);
  });

  it('every optional field with a valid value is taken', async () => {
    const res = ok(
      await post(
        {
          size: 'full',
          type: 'product',
          type_level: '2',
          format: 'webp',
          roi: '0% 0% 100% 100%',
          crop: 'true',
          crop_margin: '10px 5%',
          scale: '80%',
          position: 'center',
          channels: 'rgba',
          bg_color: '',
          add_shadow: 'true',
          shadow_type: '3D',
          shadow_opacity: '50',
          semitransparency: 'false',
        },
        { image_file: teddy },
      ),
    );
    expect(res.headers.get('content-type')).toBe('image/webp');
    expect(res.headers.get('x-type')).toBe('other');
  });

  it("type_level=none leaves X-Type out, as remove.bg's document says", async () => {
    const res = ok(await post({ type_level: 'none' }, { image_file: teddy }));
    expect(res.headers.get('x-type')).toBeNull();
  });

  it('add_shadow=true draws a shadow from the matte (drop by default, contact for 3D); semitransparency=false changes the matte', async () => {
    const plain = await decode(ok(await post({ size: 'full', format: 'png' }, { image_file: teddy })).body);
    const shadowed = await decode(ok(await post({ size: 'full', format: 'png', add_shadow: 'true' }, { image_file: teddy })).body);
    const alphaSum = (image: { data: Buffer }) => image.data.reduce((sum, v, i) => (i % 4 === 3 ? sum + v : sum), 0);
    expect(alphaSum(shadowed)).toBeGreaterThan(alphaSum(plain) * 1.02);
    const faint = await decode(ok(await post({ size: 'full', format: 'png', add_shadow: 'true', shadow_opacity: '20' }, { image_file: teddy })).body);
    expect(alphaSum(faint)).toBeLessThan(alphaSum(shadowed));
    expect(alphaSum(faint)).toBeGreaterThan(alphaSum(plain));
    const contact = ok(await post({ size: 'full', format: 'png', add_shadow: 'true', shadow_type: '3D' }, { image_file: teddy }));
    expect(contact.body.equals(ok(await post({ size: 'full', format: 'png', add_shadow: 'true' }, { image_file: teddy })).body)).toBe(false);
    const unshadowed = ok(await post({ size: 'full', format: 'png', add_shadow: 'false', shadow_type: 'drop', shadow_opacity: '90' }, { image_file: teddy }));
    expect((await decode(unshadowed.body)).data.equals(plain.data)).toBe(true);
  });

  it('Authorization: Bearer authenticates like X-Api-Key', async () => {
    const res = ok(await post({}, { image_file: teddy }, { 'X-Api-Key': '', authorization: `Bearer ${ts.key}` }));
    expect(res.headers.get('x-credits-charged')).toBe('1');
  });

  it("POST /v1.0/improve: 501 not_supported in remove.bg's body, after the upload is read; nothing charged", async () => {
    const before = await credits(ts);
    const form = new FormData();
    form.append('image_file', blob(swan, 'image/jpeg'), 'car.jpg');
    form.append('tag', 'batch_1');
    const res = await toResult(await fetch(`${ts.url}/v1.0/improve`, { method: 'POST', headers: { 'X-Api-Key': ts.key }, body: form }));
    expectError(res, 501, 'not_supported');
    expect(res.json.errors[0].title).toMatch(/stores no image/);
    const wrong = await toResult(await fetch(`${ts.url}/v1.0/improve`, { method: 'POST', headers: { 'X-Api-Key': 'rb-sk_wrong' }, body: form }));
    expectError(wrong, 403, 'auth_failed');
    expect(await credits(ts)).toEqual(before);
  });

  it("unknown paths and wrong methods under /v1.0/: remove.bg's error body", async () => {
    const get = await toResult(await fetch(`${ts.url}/v1.0/removebg`));
    expectError(get, 405, 'method_not_allowed');
    expect(get.headers.get('allow')).toBe('POST');
    expectError(await toResult(await fetch(`${ts.url}/v1.0/nothing-here`)), 404, 'not_found');
    expectError(await toResult(await fetch(`${ts.url}/v1.0/account`, { method: 'DELETE' })), 405, 'method_not_allowed');
  });

  it("the HTTP layer's own refusals under /v1.0/ are in remove.bg's body too: a head over 16 KiB (431), an ambiguous framing (400)", async () => {
    const big = await rawExchange(
      ts.port,
      `POST /v1.0/removebg HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${ts.key}\r\nX-Pad: ${'a'.repeat(20_000)}\r\nContent-Length: 0\r\n\r\n`,
    );
    expect(big.status).toBe(431);
    expect(big.json).toEqual({ errors: [{ title: 'Request header fields too large', code: 'request_header_fields_too_large', detail: expect.any(String) }] });
    const framing = await rawExchange(ts.port, `POST /v1.0/removebg HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n`);
    expect(framing.status).toBe(400);
    expect(framing.json.errors[0]).toMatchObject({ code: 'invalid_parameters' });
    // bgone's own paths keep the contract's body.
    const own = await rawExchange(ts.port, `POST /api/v1/remove HTTP/1.1\r\nHost: x\r\nX-Pad: ${'a'.repeat(20_000)}\r\nContent-Length: 0\r\n\r\n`);
    expect(own.status).toBe(431);
    expect(own.json).toEqual({ code: 'validation_error', message: expect.any(String) });
  });

  it("titles are remove.bg's messages: no key, a wrong key, a bad size, a header with no size", async () => {
    const title = (res: HttpResult) => res.json.errors[0].title;
    expect(title(await post({}, { image_file: teddy }, { 'X-Api-Key': '' }))).toBe('Missing API Key');
    expect(title(await post({}, { image_file: teddy }, { 'X-Api-Key': 'rb-sk_wrong' }))).toBe('API Key invalid');
    expect(title(await post({ size: 'huge' }, { image_file: teddy }))).toBe("Invalid value for parameter 'size'");
    // A PNG whose IHDR says 0 x 0.
    const png = Buffer.from(
      await sharp({ create: { width: 4, height: 4, channels: 3, background: '#888' } })
        .png()
        .toBuffer(),
    );
    png.writeUInt32BE(0, 16);
    png.writeUInt32BE(0, 20);
    const res = await post({}, { image_file: png });
    expectError(res, 400, 'invalid_dimensions');
    expect(title(res)).toBe('Failed to read image dimensions');
  });

  it('crop=true without crop_margin crops to the subject with no margin', async () => {
    const res = ok(await post({ crop: 'true', size: 'full' }, { image_file: teddy }));
    expect(res.headers.get('x-foreground-left')).toBe('0');
    expect(res.headers.get('x-foreground-top')).toBe('0');
    expect(res.headers.get('x-foreground-width')).toBe(res.headers.get('x-width'));
  });

  it('crop=true with crop_margin=500px, its largest, on a small photo: the subject with 500 px on every side', async () => {
    const res = ok(await post({ crop: 'true', crop_margin: '500px', size: 'full' }, { image_file: teddy }));
    const width = Number(res.headers.get('x-width'));
    const height = Number(res.headers.get('x-height'));
    expect(width - Number(res.headers.get('x-foreground-width'))).toBe(1000);
    expect(height - Number(res.headers.get('x-foreground-height'))).toBe(1000);
    expect(Number(res.headers.get('x-foreground-left'))).toBe(500);
    expect(Number(res.headers.get('x-foreground-top'))).toBe(500);
  });

  it("Accept: application/json answers remove.bg's JSON: the image in base64 and the subject's box", async () => {
    const res = ok(await post({ size: 'full' }, { image_file: teddy }, { accept: 'application/json' }));
    expect(Object.keys(res.json)).toEqual(['data']);
    expect(Object.keys(res.json.data).sort()).toEqual(['foreground_height', 'foreground_left', 'foreground_top', 'foreground_width', 'result_b64']);
    const meta = await sharp(Buffer.from(res.json.data.result_b64, 'base64')).metadata();
    expect({ width: meta.width, height: meta.height }).toEqual(TEDDY);
    expect(res.json.data.foreground_width).toBe(Number(res.headers.get('x-foreground-width')));
  });

  it('one image costs exactly one credit of the balance GET /v1.0/account shows', async () => {
    const before = ok(await account());
    const { remaining } = await credits(ts);
    expect(before.json).toEqual({
      data: { attributes: { credits: { total: remaining, subscription: remaining, payg: 0, enterprise: 0 }, api: { free_calls: 0, sizes: 'all' } } },
    });
    ok(await post({}, { image_file: teddy }));
    const after = ok(await account());
    expect(after.json.data.attributes.credits.total).toBe(remaining - 1);
  });

  it.each([
    ['type', 'dog', 'invalid_type'],
    ['format', 'gif', 'invalid_format'],
    ['crop_margin', '60%', 'invalid_crop_margin'],
    ['crop_margin', '501px', 'invalid_crop_margin'],
    ['size', 'huge', 'invalid_size'],
    ['channels', 'rgb', 'invalid_channels'],
    ['bg_color', 'not-a-colour', 'invalid_bg_color'],
    ['scale', '5%', 'invalid_scale'],
    ['position', 'left', 'invalid_position'],
    ['roi', '0 0 10', 'invalid_roi'],
    ['roi', '0px 0px 9999px 10px', 'roi_exceeds_bounds'],
    ['type_level', '3', 'invalid_type_level'],
    ['shadow_opacity', '101', 'invalid_shadow_opacity'],
    ['semitransparency', 'maybe', 'invalid_semitransparency'],
  ])('%s=%s → 400 %s, nothing charged', async (field, value, code) => {
    const before = await credits(ts);
    expectError(await post({ [field]: value }, { image_file: teddy }), 400, code);
    expect(await credits(ts)).toEqual(before);
  });

  it('sources and fields: none, two images, two backgrounds, a file that is no image, a failed download, an unknown field', async () => {
    const before = await credits(ts);
    expectError(await post({}), 400, 'missing_source');
    expectError(await post({ image_url: `${photosUrl}/teddy.jpg` }, { image_file: teddy }), 400, 'multiple_sources');
    expectError(await post({ bg_color: 'red' }, { image_file: teddy, bg_image_file: teddy }), 400, 'multiple_bg_sources');
    expectError(await post({}, { image_file: Buffer.from('not an image at all') }), 400, 'invalid_file_type');
    expectError(await post({ image_url: `${photosUrl}/missing.jpg` }), 400, 'failed_image_download');
    expectError(await post({ colour: 'red' }, { image_file: teddy }), 400, 'invalid_parameters');
    expectError(await postText('application/json', JSON.stringify({ image_file_b64: 'not base64 at all!' })), 400, 'failed_to_read_image');
    // A URL one character over the longest: the URL's own error, not a field too long.
    const longUrl = `https://example.com/${'a'.repeat(2049 - 'https://example.com/'.length)}`;
    expectError(await post({ image_url: longUrl }), 400, 'invalid_image_url');
    expectError(
      await postText('application/json', JSON.stringify({ bg_image_url: longUrl, image_url: `${photosUrl}/teddy.jpg` })),
      400,
      'invalid_bg_image_url',
    );
    expect(await credits(ts)).toEqual(before);
  });
});

describe("refusals of the shared path, in remove.bg's shape", () => {
  it('a wrong key and no key: 403, for the image and the account alike', async () => {
    const before = await credits(ts);
    expectError(await post({}, { image_file: teddy }, { 'X-Api-Key': 'rb-sk_wrong' }), 403, 'auth_failed');
    const none = await postText('application/json', JSON.stringify({ image_file_b64: teddy.toString('base64') }), null);
    expectError(none, 403, 'auth_failed');
    expect(none.headers.get('www-authenticate')).toBeNull();
    expectError(await account('rb-sk_wrong'), 403, 'auth_failed');
    expectError(await account(null), 403, 'auth_failed');
    expect(await credits(ts)).toEqual(before);
  });

  it('no credits left: 402, while the account still answers', async () => {
    const broke = await startTestServer({ credits: 0 });
    try {
      expectError(await post({}, { image_file: teddy }, {}, broke), 402, 'insufficient_credits');
      expect(ok(await account(broke.key, broke)).json.data.attributes.credits.total).toBe(0);
    } finally {
      await broke.close();
    }
  });

  it('over the rate limit: 429 with Retry-After and X-RateLimit-*', async () => {
    const limited = await startTestServer({ rateLimits: { free: 1, pro: 1, ultra: 1, mega: 1 } });
    try {
      expectError(await post({ size: 'huge' }, { image_file: teddy }, {}, limited), 400, 'invalid_size');
      const res = await post({}, { image_file: teddy }, {}, limited);
      expectError(res, 429, 'rate_limit_exceeded');
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(res.headers.get('x-ratelimit-remaining')).toBe('0');
      expect(await credits(limited)).toMatchObject({ used: 0, reserved: 0 });
    } finally {
      await limited.close();
    }
  });

  it('an idempotent replay is charged 0', async () => {
    const key = { 'Idempotency-Key': 'removebg-replay-1' };
    const first = ok(await post({}, { image_file: teddy }, key));
    const replay = ok(await post({}, { image_file: teddy }, key));
    expect(first.headers.get('x-credits-charged')).toBe('1');
    expect(replay.headers.get('x-credits-charged')).toBe('0');
    expect(replay.body.equals(first.body)).toBe(true);
  });

  it('no uncaught error in the process', () => uncaught.check());
});
