/**
 * Photoroom's /v2/edit through real HTTP on a fresh service: GET with the image by URL (a photo
 * server on loopback), POST multipart with imageFile, the layout of outputSize=WxH by numbers, the
 * background colour, the export formats, every refused parameter (generative, templates) and every
 * unknown one a 400 in Photoroom's v2 body with nothing charged, a parameter bgone's option table
 * lacks a 400 naming it, 402 and 403, Idempotency-Key, and the requests of the known v2 clients
 * (photoroom-cli, And1DS/photoroom-python) byte for byte.
 */
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { V2_PARAMS } from '../../src/api/dialects/photoroom-v2.js';
import { configure } from '../../src/lib/index.js';
import { exchange, field, head, hexBoundary, multipart, type WireAnswer } from '../helpers/client-wire.js';
import { PHOTOS } from '../helpers/constants.js';
import { trackUncaught } from '../helpers/http-assert.js';
import { alphaOf, bbox, decode, gtMask, pixel } from '../helpers/image.js';
import { exifBlock, jpegWith, pngChunks, pngIcc, pngXmp, xmpPacket } from '../helpers/metadata.js';
import { readPhoto } from '../helpers/paths.js';
import { blob, credits, type HttpResult, keyWithoutCredits, servePhoto, startTestServer, type TestServer, toResult } from '../helpers/server.js';

const teddy = readPhoto(PHOTOS.teddy); // 284x398, the subject well inside the frame

let ts: TestServer;
let photos: Awaited<ReturnType<typeof servePhoto>> | undefined;
const uncaught = trackUncaught();

beforeAll(async () => {
  configure({ fetchAllowPrivate: true });
  photos = await servePhoto('/teddy.jpg', teddy);
  ts = await startTestServer({ plan: 'pro' });
});

afterAll(async () => {
  await ts?.close();
  await photos?.close();
  configure({ fetchAllowPrivate: false });
});

/** What this server answers as it is: an exact canvas, no snapping of cropped sides. */
const EXACT = { outputSize: '600x600', ignorePaddingAndSnapOnCroppedSides: 'false' };

/** GET /v2/edit with these query parameters (imageUrl: the teddy on the photo server, unless given). */
async function getEdit(params: Record<string, string>, key: string | null = ts.key, headers: Record<string, string> = {}): Promise<HttpResult> {
  const query = new URLSearchParams({ imageUrl: `${photos!.base}/teddy.jpg`, ...params });
  return toResult(await fetch(`${ts.url}/v2/edit?${query}`, { headers: { ...(key === null ? {} : { 'x-api-key': key }), ...headers } }));
}

/** POST /v2/edit as multipart: the fields, then the files (imageFile: the teddy, unless null). */
async function postEdit(
  fields: Record<string, string>,
  files: Record<string, Buffer | null> = {},
  options: { key?: string | null; headers?: Record<string, string>; query?: string } = {},
): Promise<HttpResult> {
  const form = new FormData();
  for (const [name, value] of Object.entries(fields)) form.append(name, value);
  for (const [name, data] of Object.entries({ imageFile: teddy, ...files })) if (data) form.append(name, blob(data, 'image/jpeg'), `${name}.jpg`);
  const key = options.key === undefined ? ts.key : options.key;
  const headers = { ...(key === null ? {} : { 'x-api-key': key }), ...options.headers };
  return toResult(await fetch(`${ts.url}/v2/edit${options.query ?? ''}`, { method: 'POST', headers, body: form }));
}

function ok(res: HttpResult): HttpResult {
  expect(res.status, JSON.stringify(res.json ?? res.headers.get('content-type'))).toBe(200);
  expect(res.headers.get('x-credits-charged')).toBe('1');
  const score = Number(res.headers.get('x-uncertainty-score'));
  expect(score).toBeGreaterThanOrEqual(0);
  expect(score).toBeLessThanOrEqual(1);
  return res;
}

/** A v2 error: the status, `{"error": {"message"}}` (402: `{"error": {"detail"}}`), the message naming `name`. */
function expectV2Error(res: { status: number; json?: any }, status: number, name?: string): string {
  expect(res.status, JSON.stringify(res.json)).toBe(status);
  const text = status === 402 ? res.json?.error?.detail : res.json?.error?.message;
  expect(res.json).toEqual({ error: status === 402 ? { detail: expect.any(String) } : { message: expect.any(String) } });
  if (name) expect(text).toContain(name);
  return text as string;
}

/** The subject's box (alpha >= 128) of a PNG answer, and its size. */
async function subjectBox(png: Buffer) {
  const image = await decode(png);
  const box = bbox(alphaOf(image), image.width, image.height)!;
  return { image, box, w: box.x1 - box.x0 + 1, h: box.y1 - box.y0 + 1 };
}

describe('GET /v2/edit: the image by imageUrl', () => {
  it('downloads the photo and answers the PNG cut-out on the exact canvas, one credit', async () => {
    const before = await credits(ts);
    const res = ok(await getEdit(EXACT));
    expect(res.headers.get('content-type')).toBe('image/png');
    const image = await decode(res.body);
    expect({ width: image.width, height: image.height, channels: image.channels }).toEqual({ width: 600, height: 600, channels: 4 });
    expect((await credits(ts)).used).toBe(before.used + 1);
  });

  it('without imageUrl: 400 naming it, nothing charged', async () => {
    const before = await credits(ts);
    const res = toResult(await fetch(`${ts.url}/v2/edit?outputSize=600x600`, { headers: { 'x-api-key': ts.key } }));
    expectV2Error(await res, 400, 'imageUrl');
    expect(await credits(ts)).toEqual(before);
  });

  it("an image URL that answers 404: 400 naming imageUrl (Photoroom's name, not bgone's)", async () => {
    const before = await credits(ts);
    const res = await getEdit({ ...EXACT, imageUrl: `${photos!.base}/missing.jpg` });
    expect(expectV2Error(res, 400, 'imageUrl')).not.toContain('image_url');
    expect(await credits(ts)).toEqual(before);
  });
});

describe('POST /v2/edit: imageFile, the layout, the background, the export', () => {
  it("outputSize=WxH: the subject box fitted inside the canvas and centred (Photoroom's default layout)", async () => {
    const gt = await gtMask(PHOTOS.teddy);
    const truth = bbox(gt.mask, gt.width, gt.height)!;
    const aspect = (truth.x1 - truth.x0 + 1) / (truth.y1 - truth.y0 + 1);
    for (const [W, H] of [
      [1000, 500],
      [500, 1000],
    ] as const) {
      const res = ok(await postEdit({ outputSize: `${W}x${H}`, horizontalAlignment: 'center', verticalAlignment: 'center' }));
      const { image, box, w, h } = await subjectBox(res.body);
      expect({ width: image.width, height: image.height }).toEqual({ width: W, height: H });
      // Fitted: it touches the canvas on the axis that limits it (within 1 % of the canvas), the
      // other axis keeps the subject's aspect ratio (the ground truth's, within 4 %).
      const fillsHeight = aspect < W / H;
      if (fillsHeight) expect(Math.abs(h - H)).toBeLessThanOrEqual(H * 0.01);
      else expect(Math.abs(w - W)).toBeLessThanOrEqual(W * 0.01);
      expect(Math.abs(w / h / aspect - 1)).toBeLessThan(0.04);
      // Centred: the free space the same on both sides, within 1 % of the canvas.
      expect(Math.abs(box.x0 - (W - 1 - box.x1))).toBeLessThanOrEqual(W * 0.01);
      expect(Math.abs(box.y0 - (H - 1 - box.y1))).toBeLessThanOrEqual(H * 0.01);
    }
  });

  it('horizontalAlignment and verticalAlignment place it: left on a wide canvas, bottom on a tall one', async () => {
    const wide = await subjectBox(ok(await postEdit({ outputSize: '1000x500', horizontalAlignment: 'left', verticalAlignment: 'center' })).body);
    expect(wide.box.x0).toBeLessThanOrEqual(10);
    expect(1000 - 1 - wide.box.x1).toBeGreaterThan(300);
    const tall = await subjectBox(ok(await postEdit({ outputSize: '500x1000', horizontalAlignment: 'center', verticalAlignment: 'bottom' })).body);
    expect(1000 - 1 - tall.box.y1).toBeLessThanOrEqual(10);
    expect(tall.box.y0).toBeGreaterThan(200);
  });

  it('background.color: hex without #, a name; transparent leaves the background clear', async () => {
    for (const [colour, rgb] of [
      ['FF0000', [255, 0, 0]],
      ['00f', [0, 0, 255]],
      ['green', [0, 128, 0]],
    ] as const) {
      const image = await decode(ok(await postEdit({ ...EXACT, 'background.color': colour })).body);
      expect(pixel(image, 2, 2).slice(0, 3), colour).toEqual(rgb);
      expect(image.channels === 3 || pixel(image, 2, 2)[3] === 255).toBe(true); // opaque
    }
    const clear = await decode(ok(await postEdit({ ...EXACT, 'background.color': 'transparent' })).body);
    expect(pixel(clear, 2, 2)[3]).toBe(0);
  });

  it('background.imageFile (POST) and background.imageUrl: the image behind the subject', async () => {
    const blue = await sharp({ create: { width: 64, height: 64, channels: 3, background: { r: 0, g: 0, b: 255 } } })
      .jpeg({ quality: 100 })
      .toBuffer();
    const byFile = await decode(ok(await postEdit(EXACT, { 'background.imageFile': blue })).body);
    const corner = pixel(byFile, 2, 2);
    expect(corner[2]).toBeGreaterThan(240);
    expect(Math.max(corner[0]!, corner[1]!)).toBeLessThan(15);
    // By URL: the teddy itself as the background, so the corner is the photo's, not clear.
    const byUrl = await decode(ok(await postEdit({ ...EXACT, 'background.imageUrl': `${photos!.base}/teddy.jpg` })).body);
    expect(byUrl.channels === 3 || pixel(byUrl, 2, 2)[3] === 255).toBe(true);
    expectV2Error(await postEdit({ ...EXACT, 'background.color': 'red' }, { 'background.imageFile': blue }), 400, 'background.color');
  });

  it('export.format jpeg, jpg, webp and avif: their Content-Type and their bytes', async () => {
    for (const [format, type, sharpFormat] of [
      ['jpeg', 'image/jpeg', 'jpeg'],
      ['jpg', 'image/jpeg', 'jpeg'],
      ['webp', 'image/webp', 'webp'],
      ['avif', 'image/avif', 'heif'],
      ['png', 'image/png', 'png'],
    ] as const) {
      const res = ok(await postEdit({ ...EXACT, 'export.format': format }));
      expect(res.headers.get('content-type'), format).toBe(type);
      expect((await sharp(res.body).metadata()).format).toBe(sharpFormat);
    }
  });

  it('outline.color and background.blur: an outline round the subject, the photo blurred behind it', async () => {
    const plain = await decode(ok(await postEdit({ ...EXACT })).body);
    const outlined = await decode(ok(await postEdit({ ...EXACT, 'outline.color': 'FF0000', 'outline.width': '0.02' })).body);
    // Red, opaque pixels where the plain cut-out is transparent: the outline, outside the subject.
    let red = 0;
    for (let y = 0; y < 600; y += 2) {
      for (let x = 0; x < 600; x += 2) {
        const [r, g, b, a] = pixel(outlined, x, y);
        if (pixel(plain, x, y)[3] === 0 && a === 255 && r! > 200 && g! < 60 && b! < 60) red++;
      }
    }
    expect(red).toBeGreaterThan(100);
    const blurred = await decode(ok(await postEdit({ ...EXACT, 'background.blur.mode': 'gaussian', 'background.blur.radius': '0.02' })).body);
    // Opaque everywhere: the blurred photo is the background.
    for (const [x, y] of [
      [0, 0],
      [599, 0],
      [0, 599],
      [300, 5],
    ] as const)
      expect(blurred.channels === 3 || pixel(blurred, x, y)[3] === 255).toBe(true);
  });

  it('without imageFile: 400 naming it; a parameter in the query string: 400 naming it; nothing charged', async () => {
    const before = await credits(ts);
    expectV2Error(await postEdit(EXACT, { imageFile: null }), 400, 'imageFile');
    const text = expectV2Error(await postEdit({ ignorePaddingAndSnapOnCroppedSides: 'false' }, {}, { query: '?outputSize=600x600' }), 400, 'outputSize');
    expect(text).toContain('query string');
    expect(await credits(ts)).toEqual(before);
  });

  it('Idempotency-Key: the same request again is the same image, charged once', async () => {
    const before = await credits(ts);
    const headers = { 'Idempotency-Key': `v2-${Date.now()}` };
    const first = ok(await postEdit(EXACT, {}, { headers }));
    const again = await postEdit(EXACT, {}, { headers });
    expect(again.status).toBe(200);
    expect(again.headers.get('x-credits-charged')).toBe('0');
    expect(again.body.equals(first.body)).toBe(true);
    expect((await credits(ts)).used).toBe(before.used + 1);
  });
});

describe("the positioning guide's examples, rebuilt as /v2/edit requests", () => {
  /** The subject's box on a plain cut-out of the teddy at its own size: x0, y0, x1, y1 (exclusive). */
  let subject: [number, number, number, number];
  beforeAll(async () => {
    const { box } = await subjectBox(ok(await postEdit({ referenceBox: 'originalImage', ignorePaddingAndSnapOnCroppedSides: 'false' })).body);
    subject = [box.x0, box.y0, box.x1 + 1, box.y1 + 1];
  });

  /**
   * Where the guide puts the subject's box on a W x H canvas: margins of the canvas's sides, padding
   * of the margin box's, the box fitted and centred in what is left, or aligned by (ax, ay).
   */
  function guide(W: number, H: number, margin: number[], padding: number[], align: [number, number] = [0.5, 0.5]): number[] {
    const [mt, mr, mb, ml] = margin as [number, number, number, number];
    const M = [ml * W, mt * H, W - mr * W, H - mb * H] as const;
    const [mw, mh] = [M[2] - M[0], M[3] - M[1]];
    const [pt, pr, pb, pl] = padding as [number, number, number, number];
    const T = [M[0] + pl * mw, M[1] + pt * mh, M[2] - pr * mw, M[3] - pb * mh] as const;
    const [bw, bh] = [subject[2] - subject[0], subject[3] - subject[1]];
    const s = Math.min((T[2] - T[0]) / bw, (T[3] - T[1]) / bh);
    const x = T[0] + align[0] * (T[2] - T[0] - bw * s);
    const y = T[1] + align[1] * (T[3] - T[1] - bh * s);
    return [x, y, x + bw * s, y + bh * s];
  }

  it.each<[string, Record<string, string>, number, number, number[], number[], [number, number]?]>([
    ['padding 0.1', { outputSize: '1000x1000', padding: '0.1' }, 1000, 1000, [0, 0, 0, 0], [0.1, 0.1, 0.1, 0.1]],
    ['padding 10% on a wide canvas', { outputSize: '1000x500', padding: '10%' }, 1000, 500, [0, 0, 0, 0], [0.1, 0.1, 0.1, 0.1]],
    ['paddingTop overriding padding', { outputSize: '1000x1000', padding: '0.1', paddingTop: '0.2' }, 1000, 1000, [0, 0, 0, 0], [0.2, 0.1, 0.1, 0.1]],
    ['padding in pixels', { outputSize: '1000x1000', padding: '100px' }, 1000, 1000, [0, 0, 0, 0], [0.1, 0.1, 0.1, 0.1]],
    ['margin, then padding', { outputSize: '1000x1000', margin: '0.1', padding: '0.1' }, 1000, 1000, [0.1, 0.1, 0.1, 0.1], [0.1, 0.1, 0.1, 0.1]],
    [
      'aligned left and bottom',
      { outputSize: '1000x1000', padding: '0.1', horizontalAlignment: 'left', verticalAlignment: 'bottom' },
      1000,
      1000,
      [0, 0, 0, 0],
      [0.1, 0.1, 0.1, 0.1],
      [0, 1],
    ],
  ])('%s: the subject box where the guide puts it, within 1 %% of the canvas', async (_, params, W, H, margin, padding, align) => {
    const res = ok(await getEdit(params));
    const { image, box } = await subjectBox(res.body);
    expect([image.width, image.height]).toEqual([W, H]);
    const want = guide(W, H, margin, padding, align);
    const got = [box.x0, box.y0, box.x1 + 1, box.y1 + 1];
    for (let i = 0; i < 4; i++) expect(Math.abs(got[i]! - want[i]!), `${got} against ${want.map(Math.round)}`).toBeLessThanOrEqual(0.01 * Math.max(W, H));
  });
});

describe('refusals: 400 in the v2 body naming the parameter, nothing charged', () => {
  const refused = V2_PARAMS.filter((p) => p.refused === 'generative' || p.refused === 'template');
  const concrete = (name: string) =>
    name.replace('{key}', 'front').replace('{model,scene,additionalProductImages}.*', 'model.preset.name').replace('layers.*', 'layers.logo.image.imageUrl');

  it.each(['generative', 'template'])('every %s parameter, by GET and by POST (file parts as files)', async (kind) => {
    const before = await credits(ts);
    for (const p of refused.filter((row) => row.refused === kind)) {
      const name = concrete(p.name);
      if (p.methods !== 'POST') {
        const text = expectV2Error(await getEdit({ ...EXACT, [name]: 'ai.auto' }), 400, name);
        expect(text, name).toMatch(kind === 'generative' ? /generative/ : /templates/);
      }
      const isFile = p.name.endsWith('imageFile');
      const res = isFile ? await postEdit(EXACT, { [name]: teddy }) : await postEdit({ ...EXACT, [name]: 'x' });
      expect(expectV2Error(res, 400, name), name).toMatch(kind === 'generative' ? /generative/ : /templates/);
    }
    expect(await credits(ts)).toEqual(before);
  });

  it("an unknown parameter, and photoroom-cli's outputImageMimeType, sizeWidth, sizeHeight", async () => {
    const before = await credits(ts);
    expectV2Error(await getEdit({ ...EXACT, 'background.inner': 'x' }), 400, 'background.inner');
    expectV2Error(await postEdit({ ...EXACT, colour: 'red' }), 400, 'colour');
    for (const [name, value] of [
      ['outputImageMimeType', 'image/png'],
      ['sizeWidth', '500'],
      ['sizeHeight', '500'],
    ]) {
      expect(expectV2Error(await postEdit({ ...EXACT, [name!]: value! }), 400, name)).toMatch(/send (export\.format|outputSize=WxH)/);
    }
    expect(await credits(ts)).toEqual(before);
  });

  it("Photoroom's defaults: the photo's size, the subject fitted in it", async () => {
    const res = await getEdit({});
    expect(res.status).toBe(200);
    const image = await decode(res.body);
    expect([image.width, image.height]).toEqual([284, 398]);
  });

  it("a value outside a parameter's values, and a parameter bgone's option table lacks", async () => {
    const before = await credits(ts);
    expect(expectV2Error(await getEdit({ ...EXACT, removeBackground: 'maybe' }), 400, 'removeBackground')).toBe(
      'removeBackground must be boolean (true or false).',
    );
    expectV2Error(await getEdit({ ...EXACT, 'background.color': 'FF00' }), 400, 'background.color');
    expectV2Error(await postEdit({ ...EXACT, preserveMetadata: 'all' }), 400, 'preserveMetadata');
    expectV2Error(await postEdit({ colorSpace: 'original', 'export.dpi': '300' }), 400, 'export.dpi');
    expect(await credits(ts)).toEqual(before);
  });

  it("preserveMetadata and colorSpace=original: the input's XMP, EXIF subset and ICC profile read back from the PNG", async () => {
    const xmp = xmpPacket('v2-input');
    const p3 = await sharp(teddy).withIccProfile('p3').jpeg().toBuffer();
    const input = jpegWith(p3, { exif: exifBlock({ copyright: 'Studio', comment: 'hello' }), xmp });
    const kept = await postEdit({ colorSpace: 'original', preserveMetadata: 'xmp' }, { imageFile: input });
    expect(kept.status, JSON.stringify(kept.json)).toBe(200);
    expect(pngXmp(kept.body)).toBe(xmp);
    expect(pngIcc(kept.body)!.profile.equals((await sharp(p3).metadata()).icc!)).toBe(true);
    const subset = await postEdit({ preserveMetadata: 'exifSubsetWithXmpCompatibility' }, { imageFile: input });
    expect(subset.status, JSON.stringify(subset.json)).toBe(200);
    expect(pngXmp(subset.body)).toContain('<dc:rights><rdf:Alt><rdf:li xml:lang="x-default">Studio</rdf:li>');
    expect(pngChunks(subset.body).map((c) => c.type)).toContain('eXIf');
    const never = await postEdit({}, { imageFile: input });
    expect(pngChunks(never.body).map((c) => c.type)).toEqual(['IHDR', 'IDAT', 'IEND']);
  });

  it('402 with {"error": {"detail"}} for an account without credits; 403 for a missing or wrong key', async () => {
    const broke = await keyWithoutCredits(ts);
    expectV2Error(await getEdit(EXACT, broke.key), 402);
    expectV2Error(await postEdit(EXACT, {}, { key: broke.key }), 402);
    const before = await credits(ts);
    expectV2Error(await getEdit(EXACT, null), 403);
    expectV2Error(await postEdit(EXACT, {}, { key: 'rb-sk_wrong' }), 403);
    expect(await credits(ts)).toEqual(before);
  });

  it('another method: 405 with Allow, in the v2 body', async () => {
    const res = toResult(await fetch(`${ts.url}/v2/edit`, { method: 'PUT', headers: { 'x-api-key': ts.key } }));
    expectV2Error(await res, 405);
    expect((await res).headers.get('allow')).toMatch(/GET.*POST|POST.*GET/);
  });
});

describe('the known v2 clients, byte for byte', () => {
  const host = () => `Host: 127.0.0.1:${ts.port}`;
  const wireOk = (answer: WireAnswer) => {
    expect(answer.status, answer.body.subarray(0, 300).toString()).toBe(200);
    return answer;
  };

  it('photoroom-cli GET: URLSearchParams in its order, Accept: image/png, application/json; it reads x-uncertainty-score', async () => {
    const params = new URLSearchParams();
    params.append('imageUrl', `${photos!.base}/teddy.jpg`);
    params.append('removeBackground', 'true');
    params.append('background.color', 'FFFFFF');
    params.append('horizontalAlignment', 'center');
    params.append('verticalAlignment', 'center');
    params.append('ignorePaddingAndSnapOnCroppedSides', 'true');
    params.append('export.format', 'webp');
    params.append('outputSize', '400x400');
    const answer = wireOk(
      await exchange(
        ts.port,
        head('GET', `/v2/edit?${params.toString()}`, [
          host(),
          'Connection: keep-alive',
          'Accept: image/png, application/json',
          `x-api-key: ${ts.key}`,
          'Accept-Language: *',
          'Sec-Fetch-Mode: cors',
          'User-Agent: node',
          'Accept-Encoding: gzip, deflate',
        ]),
        Buffer.alloc(0),
      ),
    );
    expect(answer.headers['content-type']).toBe('image/webp');
    expect(Number.parseFloat(answer.headers['x-uncertainty-score']!)).toBeGreaterThanOrEqual(0);
    const image = await sharp(answer.body).metadata();
    expect({ width: image.width, height: image.height }).toEqual({ width: 400, height: 400 });
  });

  /** photoroom-cli's POST: form-data's boundary, imageFile first (a file stream), then its options in its order. */
  function cliForm(extra: Array<[string, string]>): { boundary: string; body: Buffer } {
    const boundary = '--------------------------515890814546601021194782';
    const body = multipart(boundary, [
      { headers: ['Content-Disposition: form-data; name="imageFile"; filename="teddy.jpg"', 'Content-Type: image/jpeg'], data: teddy },
      field('removeBackground', 'true'),
      field('background.color', 'red'),
      field('horizontalAlignment', 'center'),
      field('verticalAlignment', 'bottom'),
      field('ignorePaddingAndSnapOnCroppedSides', 'true'),
      field('export.format', 'png'),
      ...extra.map(([name, value]) => field(name, value)),
      field('outputSize', '300x300'),
    ]);
    return { boundary, body };
  }
  const cliPost = (form: { boundary: string; body: Buffer }) =>
    exchange(
      ts.port,
      head('POST', '/v2/edit', [
        'Accept: image/png, application/json',
        `x-api-key: ${ts.key}`,
        `content-type: multipart/form-data; boundary=${form.boundary}`,
        `Content-Length: ${form.body.length}`,
        host(),
        'Connection: close',
      ]),
      form.body,
    );

  it('photoroom-cli POST (form-data): the image; with sizeWidth filled in, 400 naming it (what it reads: error.message)', async () => {
    const answer = wireOk(await cliPost(cliForm([])));
    expect(answer.headers['content-type']).toBe('image/png');
    const image = await decode(answer.body);
    expect(pixel(image, 1, 1).slice(0, 3)).toEqual([255, 0, 0]);
    const before = await credits(ts);
    const refused = await cliPost(cliForm([['sizeWidth', '500']]));
    expect(refused.status).toBe(400);
    expect(refused.json.error.message).toContain('sizeWidth'); // photoroom-cli shows errorData.error.message
    expect(await credits(ts)).toEqual(before);
  });

  it('And1DS photoroom-python edit_image (httpx): POST with its data fields before imageFile, GET with its params', async () => {
    const boundary = hexBoundary(32, 11);
    const body = multipart(boundary, [
      field('removeBackground', 'true'),
      field('background.color', 'F5F5F5'),
      field('export.format', 'png'),
      field('horizontalAlignment', 'center'),
      field('verticalAlignment', 'center'),
      field('outputSize', '300x200'),
      { headers: ['Content-Disposition: form-data; name="imageFile"; filename="image.jpg"', 'Content-Type: image/jpeg'], data: teddy },
    ]);
    const headers = ['Accept: */*', 'Accept-Encoding: gzip, deflate', 'Connection: keep-alive', 'User-Agent: python-httpx/0.28.1', `X-Api-Key: ${ts.key}`];
    const posted = wireOk(
      await exchange(
        ts.port,
        head('POST', '/v2/edit', [host(), ...headers, `Content-Length: ${body.length}`, `Content-Type: multipart/form-data; boundary=${boundary}`]),
        body,
      ),
    );
    expect(posted.headers['content-type']).toBe('image/png');
    expect((await decode(posted.body)).width).toBe(300);
    // GET: httpx's query, in the client's parameter order, its booleans as true/false.
    const url = encodeURIComponent(`${photos!.base}/teddy.jpg`);
    const query = `imageUrl=${url}&removeBackground=true&export.format=jpeg&ignorePaddingAndSnapOnCroppedSides=false&outputSize=300x200`;
    const got = wireOk(await exchange(ts.port, head('GET', `/v2/edit?${query}`, [host(), ...headers]), Buffer.alloc(0)));
    expect(got.headers['content-type']).toBe('image/jpeg');
    // Its errors: error.message, or error.detail (402).
    const refused = await exchange(
      ts.port,
      head('GET', `/v2/edit?imageUrl=${url}&shadow.mode=ai.soft&outputSize=300x200`, [host(), ...headers]),
      Buffer.alloc(0),
    );
    expect(refused.status).toBe(400);
    expect(refused.json.error.message).toContain('shadow.mode');
  });

  it('no uncaught error in the process', () => uncaught.check());
});
