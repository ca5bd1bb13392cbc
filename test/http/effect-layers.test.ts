/**
 * The outline, the blurred background and bg_fit through POST /api/v1/remove, as form fields of a
 * real service on loopback: each one's picture by its numbers (one credit each), then every
 * refusal, a 400 validation_error naming the field, with nothing charged.
 */
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PHOTOS } from '../helpers/constants.js';
import { expectConforms, openApi, trackUncaught } from '../helpers/http-assert.js';
import type { OpenApiDocument } from '../helpers/http-openapi.js';
import { alphaOf, decode, pixel } from '../helpers/image.js';
import { readPhoto } from '../helpers/paths.js';
import { blob, credits, type HttpResult, startTestServer, type TestServer, toResult } from '../helpers/server.js';

const teddy = readPhoto(PHOTOS.teddy); // 284x398, the subject well inside the frame
const llama = readPhoto(PHOTOS.llama); // 513x371

let ts: TestServer;
let doc: OpenApiDocument;
const uncaught = trackUncaught();

beforeAll(async () => {
  ts = await startTestServer({ plan: 'pro' });
  doc = await openApi(ts.url);
});

afterAll(async () => {
  await ts?.close();
  await uncaught.check();
});

async function post(fields: Record<string, string>, files: Record<string, Buffer> = { image_file: teddy }): Promise<HttpResult> {
  const form = new FormData();
  for (const [name, value] of Object.entries(fields)) form.append(name, value);
  for (const [name, data] of Object.entries(files)) form.append(name, blob(data, 'image/jpeg'), `${name}.jpg`);
  return toResult(await fetch(`${ts.url}/api/v1/remove`, { method: 'POST', headers: { authorization: `Bearer ${ts.key}` }, body: form }));
}

function ok(res: HttpResult): HttpResult {
  expect(res.status, JSON.stringify(res.json ?? res.headers.get('content-type'))).toBe(200);
  expectConforms(doc, 'post', '/api/v1/remove', res);
  return res;
}

describe('the form fields', () => {
  it('outline_color and outline_width: an outline of that colour around the subject, as wide as asked; one credit', async () => {
    const plain = await decode(ok(await post({})).body);
    const before = await credits(ts);
    const res = ok(await post({ outline_color: '00ff00', outline_width: '0.05' }));
    expect((await credits(ts)).used - before.used).toBe(1);
    const image = await decode(res.body);
    const [a, b] = [alphaOf(plain), alphaOf(image)];
    // Along the subject's middle row: the outline starts where the subject ends and reaches 0.05 × 398 =
    // 19.9 px past it (a little more where the subject's edge nearby lies farther out).
    const y = 200;
    let right = 0;
    for (let x = 0; x < 284; x++) if (a[y * 284 + x]! >= 128) right = x;
    let outer = right;
    while (outer + 1 < 284 && b[y * 284 + outer + 1]! >= 128) outer++;
    expect(outer - right).toBeGreaterThanOrEqual(19.9 - 1.5);
    expect(outer - right).toBeLessThanOrEqual(19.9 + 4);
    expect(pixel(image, right + 10, y)).toEqual([0, 255, 0, 255]);
  });

  it('bg_blur with bg_blur_mode=bokeh: the blurred photo behind the subject, opaque', async () => {
    const res = ok(await post({ bg_blur: '0.02', bg_blur_mode: 'bokeh', format: 'auto' }));
    expect(res.headers.get('content-type')).toBe('image/jpeg');
    const image = await decode(res.body);
    expect(image).toMatchObject({ width: 284, height: 398, channels: 3 });
    const photo = await decode(await sharp(teddy).png().toBuffer());
    // A corner of the background: the photo's colours, its detail gone.
    const detail = (img: typeof image) => {
      let sum = 0;
      for (let y = 0; y < 40; y++) for (let x = 0; x < 40; x++) sum += Math.abs(pixel(img, x + 1, y)[1]! - pixel(img, x, y)[1]!);
      return sum / 1600;
    };
    expect(detail(image)).toBeLessThan(0.5 * detail(photo));
    expect(Math.abs(pixel(image, 20, 20)[1]! - pixel(photo, 20, 20)[1]!)).toBeLessThan(40);
  });

  it('bg_fit=contain: the background image inside the canvas, transparent beside it', async () => {
    const res = ok(await post({ bg_fit: 'contain', output_size: '600x300' }, { image_file: teddy, bg_image_file: llama }));
    const image = await decode(res.body);
    expect(image).toMatchObject({ width: 600, height: 300, channels: 4 });
    expect(pixel(image, 10, 5)[3]).toBe(0);
    expect(pixel(image, 300, 5)[3]).toBe(255);
  });
});

describe('refusals: 400 validation_error naming the field, nothing charged', () => {
  it.each([
    [{ outline_width: '0.05' }, {}, 'outline_width'],
    [{ outline_blur: '0.01' }, {}, 'outline_blur'],
    [{ outline_color: 'not-a-colour' }, {}, 'outline_color'],
    [{ outline_color: 'white', outline_width: '0.2' }, {}, 'outline_width'],
    [{ outline_color: 'white', outline_blur: '0.5' }, {}, 'outline_blur'],
    [{ outline_color: 'white', channels: 'alpha' }, {}, 'outline_color'],
    [{ bg_blur: '0' }, {}, 'bg_blur'],
    [{ bg_blur: '0.1' }, {}, 'bg_blur'],
    [{ bg_blur: '0.01', channels: 'alpha' }, {}, 'bg_blur'],
    [{ bg_blur: '0.01', bg_color: 'white' }, {}, 'bg_blur'],
    [{ bg_blur: '0.01' }, { bg_image_file: llama }, 'bg_blur'],
    [{ bg_blur_mode: 'bokeh' }, {}, 'bg_blur_mode'],
    [{ bg_blur: '0.01', bg_blur_mode: 'motion' }, {}, 'bg_blur_mode'],
    [{ bg_fit: 'contain' }, {}, 'bg_fit'],
    [{ bg_fit: 'stretch' }, { bg_image_file: llama }, 'bg_fit'],
  ])('%j %#: %s', async (fields, files, field) => {
    const before = await credits(ts);
    const res = await post(fields, { image_file: teddy, ...files });
    expect(res.status).toBe(400);
    expect(res.json).toMatchObject({ code: 'validation_error', details: { field } });
    expect(res.json.message).toContain(field);
    expect(await credits(ts)).toEqual(before);
  });

  it('bg_blur beside another background names both', async () => {
    const res = await post({ bg_blur: '0.01', bg_color: 'white' });
    expect(res.json.details.fields).toEqual(['bg_blur', 'bg_color']);
  });
});
