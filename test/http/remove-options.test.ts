/**
 * The options a client of a hosted background-removal API reaches for first, through real HTTP on a
 * fresh service: the image by URL (from a photo server on loopback, with private addresses allowed
 * as BGONE_FETCH_ALLOW_PRIVATE=true allows them) and in base64, a background image, format=auto,
 * placement (scale, position), an exact canvas, a region of interest, margins per side, the JSON
 * answer and the subject's box in the headers. Then each one's refusals: a clear 4xx with its code,
 * nothing charged, and the process still up.
 */
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configure } from '../../src/lib/index.js';
import { nativeMemoryStats } from '../../src/lib/native.js';
import { PHOTOS } from '../helpers/constants.js';
import { expectConforms, openApi, trackUncaught } from '../helpers/http-assert.js';
import { jpegCutInScan, pngClaiming } from '../helpers/http-images.js';
import type { OpenApiDocument } from '../helpers/http-openapi.js';
import { alphaOf, decode, type Raw } from '../helpers/image.js';
import { exifBlock, jpegExif, jpegSegments, jpegWith, pngChunks, pngIcc, readTiff, xmpPacket } from '../helpers/metadata.js';
import { readFixture, readPhoto } from '../helpers/paths.js';
import { blob, credits, get, type HttpResult, startTestServer, type TestServer, toResult, waitFor } from '../helpers/server.js';

const teddy = readPhoto(PHOTOS.teddy); // 284x398, the subject well inside the frame
const TEDDY = { width: 284, height: 398 };

let ts: TestServer;
let doc: OpenApiDocument;
let photos: Server;
let photosUrl: string;
const uncaught = trackUncaught();

/** The photo cut inside its scan data and closed with EOI: its header reads, its pixels do not. */
const cutTeddy = jpegCutInScan(teddy, 0.5);
/** The answers to /held.jpg: the photo's headers and first bytes sent, the rest when a test sends it. */
const held: ServerResponse[] = [];

/**
 * Where the photo server answers: the photo, a 404, a body that never ends, an HTML page, the photo
 * as a 206 partial answer, the photo cut short, the photo held after its first bytes.
 */
function servePhotos(): Promise<Server> {
  const server = createServer((req, res) => {
    if (req.url === '/teddy.jpg') {
      res.writeHead(200, { 'Content-Type': 'image/jpeg', 'Content-Length': teddy.length });
      res.end(teddy);
    } else if (req.url === '/partial.jpg') {
      res.writeHead(206, { 'Content-Type': 'image/jpeg', 'Content-Length': teddy.length, 'Content-Range': `bytes 0-${teddy.length - 1}/${teddy.length * 2}` });
      res.end(teddy);
    } else if (req.url === '/cut.jpg') {
      res.writeHead(200, { 'Content-Type': 'image/jpeg', 'Content-Length': cutTeddy.length });
      res.end(cutTeddy);
    } else if (req.url === '/held.jpg') {
      res.on('error', () => {});
      res.writeHead(200, { 'Content-Type': 'image/jpeg', 'Content-Length': teddy.length });
      res.write(teddy.subarray(0, 1024));
      held.push(res);
    } else if (req.url === '/endless') {
      res.writeHead(200, { 'Content-Type': 'image/jpeg' });
      const chunk = Buffer.concat([teddy.subarray(0, 3), Buffer.alloc(64 * 1024 - 3, 0x55)]);
      const pump = () => {
        while (!res.destroyed && res.write(chunk));
        if (!res.destroyed) res.once('drain', pump);
      };
      pump();
    } else if (req.url === '/page.html') {
      res.writeHead(200, { 'Content-Type': 'image/jpeg' });
      res.end('<html><body>not an image</body></html>');
    } else {
      res.writeHead(404);
      res.end('no');
    }
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

beforeAll(async () => {
  configure({ fetchAllowPrivate: true });
  photos = await servePhotos();
  photosUrl = `http://127.0.0.1:${(photos.address() as AddressInfo).port}`;
  ts = await startTestServer({ plan: 'pro' });
  doc = await openApi(ts.url);
});

afterAll(async () => {
  await ts?.close();
  photos?.closeAllConnections();
  await new Promise((resolve) => photos?.close(resolve));
  configure({ fetchAllowPrivate: false });
});

/** POST /api/v1/remove with a form of these fields and file parts. */
async function post(fields: Record<string, string>, files: Record<string, Buffer> = {}, headers: Record<string, string> = {}): Promise<HttpResult> {
  const form = new FormData();
  for (const [name, value] of Object.entries(fields)) form.append(name, value);
  for (const [name, data] of Object.entries(files)) form.append(name, blob(data, 'image/jpeg'), `${name}.jpg`);
  return toResult(await fetch(`${ts.url}/api/v1/remove`, { method: 'POST', headers: { authorization: `Bearer ${ts.key}`, ...headers }, body: form }));
}

/** POST /api/v1/remove with a JSON body. */
async function postJson(body: Record<string, unknown>, headers: Record<string, string> = {}): Promise<HttpResult> {
  return toResult(
    await fetch(`${ts.url}/api/v1/remove`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ts.key}`, 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    }),
  );
}

/** A URL of the photo server of exactly `length` characters. */
function longUrl(length: number): string {
  const base = `${photosUrl}/teddy.jpg?`;
  return base + 'a'.repeat(length - base.length);
}

function ok(res: HttpResult): HttpResult {
  expect(res.status, JSON.stringify(res.json ?? res.headers.get('content-type'))).toBe(200);
  expectConforms(doc, 'post', '/api/v1/remove', res);
  return res;
}

/** The box of alpha >= 128 (inclusive bounds), or null when there is none. */
function alphaBox(image: Raw): { left: number; top: number; right: number; bottom: number } | null {
  const alpha = alphaOf(image);
  let left = image.width;
  let top = image.height;
  let right = -1;
  let bottom = -1;
  for (let y = 0; y < image.height; y++) {
    for (let x = 0; x < image.width; x++) {
      if (alpha[y * image.width + x]! < 128) continue;
      left = Math.min(left, x);
      right = Math.max(right, x);
      top = Math.min(top, y);
      bottom = Math.max(bottom, y);
    }
  }
  return right < 0 ? null : { left, top, right, bottom };
}

let plain: HttpResult;

describe('sources', () => {
  it('image_url, image_file_b64 (with and without a data: prefix) and a JSON body give the bytes of the upload', async () => {
    plain = ok(await post({}, { image_file: teddy }));
    const byUrl = ok(await post({ image_url: `${photosUrl}/teddy.jpg` }));
    expect(byUrl.body.equals(plain.body)).toBe(true);
    const b64 = ok(await post({ image_file_b64: teddy.toString('base64') }));
    expect(b64.body.equals(plain.body)).toBe(true);
    const dataUrl = ok(await post({ image_file_b64: `data:image/jpeg;base64,${teddy.toString('base64')}` }));
    expect(dataUrl.body.equals(plain.body)).toBe(true);
    const json = ok(await postJson({ image_url: `${photosUrl}/teddy.jpg` }));
    expect(json.body.equals(plain.body)).toBe(true);
  });

  it('two sources: 400 validation_error naming both, nothing charged', async () => {
    const before = await credits(ts);
    const res = await post({ image_url: `${photosUrl}/teddy.jpg` }, { image_file: teddy });
    expect(res.status).toBe(400);
    expect(res.json.code).toBe('validation_error');
    expect(res.json.details.fields).toEqual(['image_file', 'image_url']);
    expect(res.json.message).toMatch(/image_file and image_url/);
    expect(await credits(ts)).toEqual(before);
  });

  it('no source: 400 missing_image', async () => {
    const res = await post({ format: 'png' });
    expect(res.status).toBe(400);
    expect(res.json.code).toBe('missing_image');
  });
});

describe('the answer', () => {
  it('X-Foreground-* give the subject box on every success', () => {
    for (const name of ['top', 'left', 'width', 'height']) expect(plain.headers.get(`x-foreground-${name}`), name).toMatch(/^\d+$/);
    expect(Number(plain.headers.get('x-foreground-width'))).toBeGreaterThan(50);
  });

  it('Accept: application/json returns the same image in result_b64, with its size and the subject box', async () => {
    const res = ok(await post({}, { image_file: teddy }, { accept: 'application/json' }));
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(Buffer.from(res.json.data.result_b64, 'base64').equals(plain.body)).toBe(true);
    expect(res.json.data.width).toBe(TEDDY.width);
    expect(res.json.data.height).toBe(TEDDY.height);
    expect(res.json.data.foreground).toEqual({
      top: Number(plain.headers.get('x-foreground-top')),
      left: Number(plain.headers.get('x-foreground-left')),
      width: Number(plain.headers.get('x-foreground-width')),
      height: Number(plain.headers.get('x-foreground-height')),
    });
    expect(res.json.request_id).toBe(res.headers.get('x-request-id'));
  });

  it('format=auto: PNG without a background, JPEG on an opaque bg_color', async () => {
    const transparent = ok(await post({ format: 'auto' }, { image_file: teddy }));
    expect(transparent.headers.get('content-type')).toBe('image/png');
    const opaque = ok(await post({ format: 'auto', bg_color: '#00ff00' }, { image_file: teddy }));
    expect(opaque.headers.get('content-type')).toBe('image/jpeg');
  });
});

describe('background image', () => {
  it('bg_image_file puts the subject on that image: the result is opaque, the background shows far from the subject', async () => {
    const background = await sharp({ create: { width: 100, height: 50, channels: 3, background: { r: 0, g: 0, b: 255 } } })
      .png()
      .toBuffer();
    const res = ok(await post({}, { image_file: teddy, bg_image_file: background }));
    const image = await decode(res.body);
    if (image.channels === 4) expect(alphaOf(image).every((a) => a === 255)).toBe(true);
    const corner = [...image.data.subarray(0, 3)];
    expect(corner[2]).toBeGreaterThan(200);
    expect(corner[0]! + corner[1]!).toBeLessThan(40);
  });

  it('bg_image_url downloads the background; format=auto then answers JPEG', async () => {
    const res = ok(await post({ bg_image_url: `${photosUrl}/teddy.jpg`, format: 'auto' }, { image_file: teddy }));
    expect(res.headers.get('content-type')).toBe('image/jpeg');
  });
});

describe('geometry', () => {
  it('scale=50% position=center: the larger of the subject box ratios is 50 %, centred (±3 %)', async () => {
    const res = ok(await post({ scale: '50%', position: 'center' }, { image_file: teddy }));
    const image = await decode(res.body);
    expect({ width: image.width, height: image.height }).toEqual(TEDDY);
    const box = alphaBox(image)!;
    const w = box.right - box.left + 1;
    const h = box.bottom - box.top + 1;
    expect(Math.max(w / image.width, h / image.height)).toBeCloseTo(0.5, 1);
    expect(Math.abs(Math.max(w / image.width, h / image.height) - 0.5)).toBeLessThanOrEqual(0.03);
    expect(Math.abs((box.left + box.right + 1) / 2 / image.width - 0.5)).toBeLessThanOrEqual(0.03);
    expect(Math.abs((box.top + box.bottom + 1) / 2 / image.height - 0.5)).toBeLessThanOrEqual(0.03);
  });

  it('output_size=1000x1000 gives 1000x1000', async () => {
    const res = ok(await post({ output_size: '1000x1000' }, { image_file: teddy }));
    const image = await decode(res.body);
    expect({ width: image.width, height: image.height }).toEqual({ width: 1000, height: 1000 });
    expect(res.headers.get('x-image-width')).toBe('1000');
  });

  it('roi=0% 0% 50% 100% leaves alpha 0 right of the region', async () => {
    const res = ok(await post({ roi: '0% 0% 50% 100%' }, { image_file: teddy }));
    const image = await decode(res.body);
    const alpha = alphaOf(image);
    const half = TEDDY.width / 2;
    let outside = 0;
    for (let y = 0; y < image.height; y++) for (let x = half; x < image.width; x++) outside = Math.max(outside, alpha[y * image.width + x]!);
    expect(outside).toBe(0);
    expect(alphaBox(image)).not.toBeNull();
  });

  it('crop=true with padding 10px 20px 30px 40px is 60 px wider and 40 px taller than with 0px', async () => {
    const zero = await decode(ok(await post({ crop: 'true', padding: '0px' }, { image_file: teddy })).body);
    const sides = await decode(ok(await post({ crop: 'true', padding: '10px 20px 30px 40px' }, { image_file: teddy })).body);
    expect(sides.width - zero.width).toBe(60);
    expect(sides.height - zero.height).toBe(40);
  });
});

describe('effort', () => {
  it('effort=best: one credit, the same frame, another matte, its time in X-Processing-Time-Ms', async () => {
    const standard = ok(await post({ channels: 'alpha' }, { image_file: teddy }));
    const before = await credits(ts);
    const best = ok(await postJson({ image_file_b64: teddy.toString('base64'), channels: 'alpha', effort: 'best' }));
    const after = await credits(ts);
    expect(after.used - before.used).toBe(1);
    expect(after.reserved).toBe(before.reserved);
    const [a, b] = [await decode(standard.body), await decode(best.body)];
    expect({ width: b.width, height: b.height }).toEqual(TEDDY);
    expect(best.body.equals(standard.body)).toBe(false);
    // Both mattes are the same subject: their masks at 128 overlap almost entirely.
    let both = 0;
    let either = 0;
    for (let i = 0; i < a.data.length; i += a.channels) {
      const [inA, inB] = [a.data[i]! >= 128, b.data[i]! >= 128];
      if (inA && inB) both++;
      if (inA || inB) either++;
    }
    expect(both / either).toBeGreaterThan(0.95);
    expect(Number(best.headers.get('x-processing-time-ms'))).toBeGreaterThan(0);
  });
});

describe('effects', () => {
  it('shadow=drop with shadow_opacity (form), semitransparency and despill as booleans (JSON): one credit each, the frame kept', async () => {
    const shadowed = ok(await post({ shadow: 'drop', shadow_opacity: '60%' }, { image_file: teddy }));
    const [cutout, shadow] = [alphaOf(await decode(plain.body)), alphaOf(await decode(shadowed.body))];
    expect(shadow.length).toBe(cutout.length);
    // The shadow adds alpha where the subject is not, never takes any away.
    let added = 0;
    for (let i = 0; i < cutout.length; i++) {
      expect(shadow[i]!).toBeGreaterThanOrEqual(cutout[i]!);
      if (cutout[i] === 0 && shadow[i]! > 0) added++;
    }
    expect(added).toBeGreaterThan(500);
    const before = await credits(ts);
    const flags = ok(await postJson({ image_file_b64: teddy.toString('base64'), semitransparency: false, despill: true, shadow: 'contact' }));
    expect(flags.headers.get('x-image-width')).toBe(String(TEDDY.width));
    expect((await credits(ts)).used - before.used).toBe(1);
  });
});

describe('batches take the options per batch', () => {
  it('a background file, scale and output_size apply to every image of the batch', async () => {
    const background = await sharp({ create: { width: 64, height: 64, channels: 3, background: { r: 255, g: 0, b: 0 } } })
      .jpeg()
      .toBuffer();
    const form = new FormData();
    form.append('output_size', '300x200');
    form.append('scale', '80%');
    form.append('bg_image_file', blob(background, 'image/jpeg'), 'red.jpg');
    for (const name of ['a.jpg', 'b.jpg']) form.append('image_file', blob(teddy, 'image/jpeg'), name);
    const submitted = await toResult(await fetch(`${ts.url}/api/v1/batches`, { method: 'POST', headers: { authorization: `Bearer ${ts.key}` }, body: form }));
    expect(submitted.status, JSON.stringify(submitted.json)).toBe(202);
    expect(submitted.json.options).toMatchObject({ output_size: '300x200', scale: '80%', bg_image_file: 'red.jpg' });
    let batch: { status: string; images: Array<{ status: string; result_url: string }> } = submitted.json;
    const deadline = Date.now() + 60_000;
    while (batch.status !== 'completed' && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      batch = (await get(ts.url, `/api/v1/batches/${submitted.json.id}`, { headers: { authorization: `Bearer ${ts.key}` } })).json;
    }
    expect(batch.images.map((image) => image.status)).toEqual(['succeeded', 'succeeded']);
    for (const image of batch.images) {
      const result = await get(ts.url, new URL(image.result_url).pathname, { headers: { authorization: `Bearer ${ts.key}` } });
      const decoded = await decode(result.body);
      expect({ width: decoded.width, height: decoded.height }).toEqual({ width: 300, height: 200 });
      expect(decoded.data[0]).toBeGreaterThan(200); // the red background in the corner
    }
  });

  it('a batch whose background is no image is refused whole, nothing reserved', async () => {
    const before = await credits(ts);
    const form = new FormData();
    form.append('bg_image_file', blob(Buffer.from('not an image'), 'image/jpeg'), 'bad.jpg');
    form.append('image_file', blob(teddy, 'image/jpeg'), 'a.jpg');
    const res = await toResult(await fetch(`${ts.url}/api/v1/batches`, { method: 'POST', headers: { authorization: `Bearer ${ts.key}` }, body: form }));
    expect(res.status).toBe(415);
    expect(res.json.details.field).toBe('bg_image_file');
    expect(await credits(ts)).toEqual(before);
  });
});

describe('a background whose header reads but whose pixels do not: 422 before the model runs, nothing charged', () => {
  /** Jobs that reached the native core's inference stage so far. */
  const inferenceStages = () => nativeMemoryStats().inferenceStages;

  const cases: Array<[string, () => Promise<HttpResult>]> = [
    ['a JPEG file cut inside its scan data', () => post({}, { image_file: teddy, bg_image_file: cutTeddy })],
    ['a PNG file cut at half', () => post({}, { image_file: teddy, bg_image_file: readFixture('truncated.png') })],
    ['a downloaded JPEG cut inside its scan data', () => post({ bg_image_url: `${photosUrl}/cut.jpg` }, { image_file: teddy })],
  ];

  it.each(cases)('%s', async (_, send) => {
    const stages = inferenceStages();
    const before = await credits(ts);
    const res = await send();
    expect(res.status, JSON.stringify(res.json)).toBe(422);
    expect(res.json).toMatchObject({ code: 'invalid_image', details: { field: 'bg_image_file' } });
    expect(inferenceStages()).toBe(stages);
    expect(await credits(ts)).toEqual(before);
  });

  it("a batch with such a background: each image fails with the background's error, uncharged, no model run", async () => {
    const stages = inferenceStages();
    const before = await credits(ts);
    const form = new FormData();
    form.append('bg_image_url', `${photosUrl}/cut.jpg`);
    for (const name of ['a.jpg', 'b.jpg']) form.append('image_file', blob(teddy, 'image/jpeg'), name);
    const submitted = await toResult(await fetch(`${ts.url}/api/v1/batches`, { method: 'POST', headers: { authorization: `Bearer ${ts.key}` }, body: form }));
    expect(submitted.status, JSON.stringify(submitted.json)).toBe(202);
    let batch: { status: string; images: Array<{ status: string; error?: { code: string } }> } = submitted.json;
    await waitFor(async () => {
      batch = (await get(ts.url, `/api/v1/batches/${submitted.json.id}`, { headers: { authorization: `Bearer ${ts.key}` } })).json;
      return batch.status === 'completed';
    }, 'the batch completed');
    expect(batch.images.map((image) => [image.status, image.error?.code])).toEqual([
      ['failed', 'invalid_image'],
      ['failed', 'invalid_image'],
    ]);
    expect(inferenceStages()).toBe(stages);
    expect(await credits(ts)).toEqual(before);
  });
});

describe("a batch's background download", () => {
  /** The client_aborted answers of POST /api/v1/batches counted so far. */
  async function batchesAborted(): Promise<number> {
    const m = /^bgone_requests_total\{route="\/api\/v1\/batches",status="499",code="client_aborted"\} (\d+)$/m.exec(await ts.server.metrics.render());
    return m ? Number(m[1]) : 0;
  }

  it('ends when its client goes away: the rest of the photo sent then makes no batch, and nothing is reserved', async () => {
    const before = await credits(ts);
    const batches = (await ts.store.batches.list(ts.accountId, 100)).length;
    const aborted = await batchesAborted();
    const client = new AbortController();
    const form = new FormData();
    form.append('bg_image_url', `${photosUrl}/held.jpg`);
    form.append('image_file', blob(teddy, 'image/jpeg'), 'a.jpg');
    const sent = fetch(`${ts.url}/api/v1/batches`, { method: 'POST', headers: { authorization: `Bearer ${ts.key}` }, body: form, signal: client.signal });
    const gone = sent.catch((err: unknown) => err);
    await waitFor(() => held.length === 1, 'the download of the background to start');
    client.abort();
    expect(await gone).toBeInstanceOf(Error);
    await waitFor(async () => (await batchesAborted()) > aborted, 'the server to see its client go');
    // A download still going on would now complete, and the submission go on to make the batch.
    held[0]!.end(teddy.subarray(1024));
    await waitFor(() => ts.server.inFlight() === 0, 'the submission to end');
    expect(await ts.store.batches.list(ts.accountId, 100)).toHaveLength(batches);
    expect(await credits(ts)).toEqual(before);
  });
});

describe('refusals: a clear 4xx with its code, nothing charged, the process up', () => {
  const cases: Array<[string, () => Promise<HttpResult>, number, string]> = [
    ['a URL that is not http or https', () => post({ image_url: 'ftp://example.com/a.jpg' }), 400, 'invalid_image_url'],
    ['a URL with credentials', () => post({ image_url: 'http://user:pass@127.0.0.1/a.jpg' }), 400, 'invalid_image_url'],
    ['a URL answering 404', () => post({ image_url: `${photosUrl}/missing.jpg` }), 422, 'failed_image_download'],
    ['a URL that never ends its body', () => post({ image_url: `${photosUrl}/endless` }), 422, 'failed_image_download'],
    ['a URL serving a page, not an image', () => post({ image_url: `${photosUrl}/page.html` }), 422, 'failed_image_download'],
    ['a background URL answering 404', () => post({ bg_image_url: `${photosUrl}/missing.jpg` }, { image_file: teddy }), 422, 'failed_image_download'],
    ['a URL answering 206 Partial Content, the whole photo in it', () => post({ image_url: `${photosUrl}/partial.jpg` }), 422, 'failed_image_download'],
    ['an image_url of 2049 characters', () => post({ image_url: longUrl(2049) }), 400, 'invalid_image_url'],
    ['an image_url of 2049 characters in JSON', () => postJson({ image_url: longUrl(2049) }), 400, 'invalid_image_url'],
    ['a bg_image_url of 2049 characters', () => post({ bg_image_url: longUrl(2049) }, { image_file: teddy }), 400, 'invalid_image_url'],
    ['base64 that is not base64', () => post({ image_file_b64: '%%%not base64%%%' }), 400, 'validation_error'],
    ['base64 of 30 MB', () => postJson({ image_file_b64: 'A'.repeat(30 * 1024 * 1024) }), 400, 'image_too_large'],
    ['a decompression bomb as background', () => post({}, { image_file: teddy, bg_image_file: pngClaiming(60000, 60000) }), 400, 'image_too_large'],
    [
      'bytes that are no image as background',
      () => post({}, { image_file: teddy, bg_image_file: Buffer.from('not an image at all') }),
      415,
      'unsupported_media_type',
    ],
    ['bg_color with bg_image_file', () => post({ bg_color: 'red' }, { image_file: teddy, bg_image_file: teddy }), 400, 'validation_error'],
    ['output_size=0x0', () => post({ output_size: '0x0' }, { image_file: teddy }), 400, 'validation_error'],
    ['output_size over 16 MP', () => post({ output_size: '6000x6000' }, { image_file: teddy }), 400, 'validation_error'],
    ['a reversed roi', () => post({ roi: '50% 0% 10% 100%' }, { image_file: teddy }), 400, 'invalid_roi'],
    ['a roi outside the image', () => post({ roi: '0px 0px 300px 100px' }, { image_file: teddy }), 400, 'invalid_roi'],
    ['a malformed roi', () => post({ roi: '0 0 50' }, { image_file: teddy }), 400, 'invalid_roi'],
    ['scale=5%', () => post({ scale: '5%' }, { image_file: teddy }), 400, 'validation_error'],
    ['three padding values', () => post({ crop: 'true', padding: '1px 2px 3px' }, { image_file: teddy }), 400, 'validation_error'],
    ['position=left', () => post({ position: 'left' }, { image_file: teddy }), 400, 'validation_error'],
    ['effort=max', () => post({ effort: 'max' }, { image_file: teddy }), 400, 'validation_error'],
    ['effort as a number in JSON', () => postJson({ image_url: `${photosUrl}/teddy.jpg`, effort: 2 }), 400, 'validation_error'],
    ['shadow=3d', () => post({ shadow: '3d' }, { image_file: teddy }), 400, 'validation_error'],
    ['shadow_opacity without a shadow', () => post({ shadow_opacity: '50%' }, { image_file: teddy }), 400, 'validation_error'],
    ['shadow_opacity=150%', () => post({ shadow: 'drop', shadow_opacity: '150%' }, { image_file: teddy }), 400, 'validation_error'],
    ['semitransparency=maybe', () => post({ semitransparency: 'maybe' }, { image_file: teddy }), 400, 'validation_error'],
    ['despill as a number in JSON', () => postJson({ image_url: `${photosUrl}/teddy.jpg`, despill: 1 }), 400, 'validation_error'],
    [
      'a JSON body that is not JSON',
      async () =>
        toResult(
          await fetch(`${ts.url}/api/v1/remove`, {
            method: 'POST',
            headers: { authorization: `Bearer ${ts.key}`, 'content-type': 'application/json' },
            body: '{',
          }),
        ),
      400,
      'validation_error',
    ],
    ['an unknown JSON field', () => postJson({ image_url: `${photosUrl}/teddy.jpg`, sharpness: 'high' }), 400, 'validation_error'],
  ];

  it.each(cases)('%s', async (_, send, status, code) => {
    const before = await credits(ts);
    const res = await send();
    expect(res.status, JSON.stringify(res.json)).toBe(status);
    expect(res.json.code).toBe(code);
    expect(res.json.message.length).toBeGreaterThan(10);
    expect(await credits(ts)).toEqual(before);
    expect((await get(ts.url, '/healthz')).status).toBe(200);
  });

  it('a private address is refused without BGONE_FETCH_ALLOW_PRIVATE', async () => {
    configure({ fetchAllowPrivate: false });
    try {
      const before = await credits(ts);
      const res = await post({ image_url: `${photosUrl}/teddy.jpg` });
      expect(res.status).toBeGreaterThanOrEqual(400);
      expect(['invalid_image_url', 'failed_image_download']).toContain(res.json.code);
      expect(await credits(ts)).toEqual(before);
    } finally {
      configure({ fetchAllowPrivate: true });
    }
  });

  it('let nothing go unhandled', async () => {
    await uncaught.check();
  });
});

describe('export and cutout through the form: format=avif, quality, dpi, remove_background, keep_alpha', () => {
  it("metadata and color_space: the input's EXIF subset in the JPEG, its ICC profile in the PNG; none by default", async () => {
    const p3 = await sharp(teddy).withIccProfile('p3').jpeg().toBuffer();
    const input = jpegWith(p3, { exif: exifBlock({ copyright: 'Studio' }), xmp: xmpPacket('form') });
    const jpg = ok(await post({ metadata: 'exif_subset', format: 'jpg', remove_background: 'false' }, { image_file: input }));
    const read = readTiff(jpegExif(jpg.body)!);
    expect(read.ifd0.map((e) => e.tag)).toEqual([0x0112, 0x8298]);
    expect(jpegSegments(jpg.body).filter((s) => s.marker === 0xe2)).toEqual([]);
    const png = ok(await post({ color_space: 'original' }, { image_file: input }));
    expect(pngIcc(png.body)!.profile.equals((await sharp(p3).metadata()).icc!)).toBe(true);
    const plain = ok(await post({ remove_background: 'false' }, { image_file: input }));
    expect(pngChunks(plain.body).map((c) => c.type)).toEqual(['IHDR', 'IDAT', 'IEND']);
  });

  /** Jobs that reached the native core's inference stage so far. */
  const inferenceStages = () => nativeMemoryStats().inferenceStages;

  it('remove_background=false with format=avif, quality and dpi: image/avif of the whole photo, opaque, with its EXIF density; no model run, one credit', async () => {
    const stages = inferenceStages();
    const res = ok(await post({ remove_background: 'false', format: 'avif', quality: '60', dpi: '300' }, { image_file: teddy }));
    expect(res.headers.get('content-type')).toBe('image/avif');
    expect(res.headers.get('x-credits-charged')).toBe('1');
    expect(res.headers.get('x-uncertainty')).toBe('0.000');
    expect([res.headers.get('x-foreground-width'), res.headers.get('x-foreground-height')]).toEqual([String(TEDDY.width), String(TEDDY.height)]);
    expect(inferenceStages()).toBe(stages);
    const meta = await sharp(res.body).metadata();
    expect(meta).toMatchObject({ format: 'heif', compression: 'av1', width: TEDDY.width, height: TEDDY.height });
    expect(meta.exif).toBeInstanceOf(Buffer);
    const image = await decode(res.body);
    expect(alphaOf(image).every((a) => a >= 250)).toBe(true);
  });

  it('keep_alpha=auto on a PNG with transparency: its alpha kept, no model run; jpg with quality and dpi: the JFIF density', async () => {
    const rgba = await sharp(teddy).ensureAlpha().raw().toBuffer({ resolveWithObject: true });
    for (let i = 0; i < rgba.info.width * 40; i++) rgba.data[i * 4 + 3] = 0;
    const png = await sharp(rgba.data, { raw: { width: rgba.info.width, height: rgba.info.height, channels: 4 } })
      .png()
      .toBuffer();
    const stages = inferenceStages();
    const kept = ok(await post({ keep_alpha: 'auto' }, { image_file: png }));
    expect(inferenceStages()).toBe(stages);
    const alpha = alphaOf(await decode(kept.body));
    expect(alpha.every((a, i) => a === (i < TEDDY.width * 40 ? 0 : 255))).toBe(true);
    const jpg = ok(await post({ format: 'jpg', quality: '50', dpi: '200', keep_alpha: 'auto' }, { image_file: teddy }));
    expect(inferenceStages()).toBe(stages + 1);
    expect(jpg.headers.get('content-type')).toBe('image/jpeg');
    expect((await sharp(jpg.body).metadata()).density).toBe(200);
  });

  it.each([
    [{ format: 'png', quality: '80' }, 'quality'],
    [{ format: 'jpg', quality: '0' }, 'quality'],
    [{ dpi: '50' }, 'dpi'],
    [{ format: 'heic' }, 'format'],
    [{ remove_background: 'no' }, 'remove_background'],
    [{ remove_background: 'false', shadow: 'drop' }, 'shadow'],
    [{ remove_background: 'false', despill: 'true' }, 'despill'],
    [{ remove_background: 'false', effort: 'best' }, 'effort'],
    [{ keep_alpha: 'yes' }, 'keep_alpha'],
    [{ keep_alpha: 'auto', semitransparency: 'false' }, 'semitransparency'],
    [{ metadata: 'everything' }, 'metadata'],
    [{ color_space: 'adobe' }, 'color_space'],
    [{ color_space: 'original', format: 'webp' }, 'format'],
    [{ color_space: 'original', bg_color: 'red' }, 'bg_color'],
  ])('%j: 400 validation_error naming %s, nothing charged, no model run', async (fields, field) => {
    const stages = inferenceStages();
    const before = await credits(ts);
    const res = await post(fields, { image_file: teddy });
    expect(res.status, JSON.stringify(res.json)).toBe(400);
    expect(res.json).toMatchObject({ code: 'validation_error', details: { field } });
    expect(await credits(ts)).toEqual(before);
    expect(inferenceStages()).toBe(stages);
  });
});
