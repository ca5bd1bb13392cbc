/**
 * remove.bg's public clients, each call as that client puts it on the wire by default (read from
 * its public sources: header names and order, body framing, field order, default values, how it
 * spells booleans, empty fields and file parts), sent byte for byte to a real bgone over TCP, and
 * each answer read as that client reads it: the headers it parses, the ZIP it composes, the JSON
 * path of its error message. Clients from the npm registry run for real in client-removebg.test.ts;
 * these have no registry package, or none that runs here (Ruby, Go, Python, PHP, C#, plugins).
 */
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configure } from '../../src/lib/index.js';
import {
  chunked,
  exchange,
  FARADAY_SAFE,
  field,
  head,
  hexBoundary,
  multipart,
  PHP_SAFE,
  PYTHON_SAFE,
  urlencoded,
  type WireAnswer,
} from '../helpers/client-wire.js';
import { PHOTOS } from '../helpers/constants.js';
import { trackUncaught } from '../helpers/http-assert.js';
import { decode } from '../helpers/image.js';
import { readPhoto } from '../helpers/paths.js';
import { credits, servePhoto, startTestServer, type TestServer } from '../helpers/server.js';
import { unzipStored } from '../helpers/zip.js';

const teddy = readPhoto(PHOTOS.teddy); // 284x398
const TEDDY = { width: 284, height: 398 };
let teddyPng: Buffer;
/** A JPEG over 1 MB: curl and Guzzle send `Expect: 100-continue` for such a body. */
let bigJpeg: Buffer;

let ts: TestServer;
let photos: Awaited<ReturnType<typeof servePhoto>> | undefined;
let photosUrl: string;
const uncaught = trackUncaught();

beforeAll(async () => {
  configure({ fetchAllowPrivate: true });
  teddyPng = await sharp(teddy).png().toBuffer();
  bigJpeg = await sharp(readPhoto(PHOTOS.swan)).resize(2400, 1350).jpeg({ quality: 100, chromaSubsampling: '4:4:4' }).toBuffer();
  expect(bigJpeg.length).toBeGreaterThan(1024 * 1024);
  photos = await servePhoto('/teddy.jpg', teddy);
  photosUrl = photos.base;
  ts = await startTestServer({ plan: 'pro' });
});

afterAll(async () => {
  await ts?.close();
  await photos?.close();
  configure({ fetchAllowPrivate: false });
});

const host = () => `Host: 127.0.0.1:${ts.port}`;

/** POST /v1.0/removebg with these header lines (Content-Length added last unless given) and body. */
function post(headers: string[], body: Buffer | string, options: { expectContinue?: boolean; path?: string } = {}): Promise<WireAnswer> {
  const data = Buffer.isBuffer(body) ? body : Buffer.from(body, 'latin1');
  const lines = headers.some((h) => /^content-length:/i.test(h) || /^transfer-encoding:/i.test(h)) ? headers : [...headers, `Content-Length: ${data.length}`];
  return exchange(ts.port, head('POST', options.path ?? '/v1.0/removebg', lines), data, options);
}

/** A success as remove.bg's clients take it: status 200 (nothing else counts), an integer X-Credits-Charged. */
function ok(answer: WireAnswer): WireAnswer {
  expect(answer.status, answer.body.subarray(0, 300).toString()).toBe(200);
  expect(answer.headers['x-credits-charged']).toBe('1'); // OPHoperHPO does int() on it
  return answer;
}

/** An error as remove.bg's clients read it: JSON, errors[0] with a string title (Ruby: errors.first["title"]). */
function refused(answer: WireAnswer, status: number, code: string, title: string | RegExp): void {
  expect(answer.status).toBe(status);
  expect(answer.headers['content-type']).toMatch(/^application\/json/);
  expect(answer.json.errors).toHaveLength(1);
  expect(answer.json.errors[0]).toEqual({ title: expect.any(String), code, detail: expect.any(String) });
  if (typeof title === 'string') expect(answer.json.errors[0].title).toBe(title);
  else expect(answer.json.errors[0].title).toMatch(title);
}

/** PNG chunk types in order, and the IHDR's bit depth and colour type. */
function pngLayout(png: Buffer): { depth: number; colourType: number; chunks: string[] } {
  const chunks: string[] = [];
  for (let at = 8; at < png.length; ) {
    const length = png.readUInt32BE(at);
    chunks.push(png.toString('latin1', at + 4, at + 8));
    at += 12 + length;
  }
  return { depth: png[24]!, colourType: png[25]!, chunks };
}

/**
 * remove.bg's ZIP as its clients compose it: exactly color.jpg then alpha.png, alpha.png 8-bit grey
 * without tRNS (Go asserts image.Gray, libvips bandjoins one band, the CLI reads its red channel),
 * both the answer's size; the result is color.jpg's RGB with alpha.png's grey as its alpha.
 */
async function composeZip(answer: WireAnswer): Promise<{ rgba: Buffer; width: number; height: number }> {
  expect(answer.headers['content-type']).toContain('application/zip'); // Ruby and Go branch on it
  const entries = unzipStored(answer.body);
  expect(entries.map((e) => e.name)).toEqual(['color.jpg', 'alpha.png']);
  const layout = pngLayout(entries[1]!.data);
  expect({ depth: layout.depth, colourType: layout.colourType }).toEqual({ depth: 8, colourType: 0 });
  expect(layout.chunks).not.toContain('tRNS');
  const color = await decode(entries[0]!.data);
  const alpha = await decode(entries[1]!.data);
  expect(color.channels).toBe(3);
  expect({ width: alpha.width, height: alpha.height }).toEqual({ width: color.width, height: color.height });
  expect({ width: String(color.width), height: String(color.height) }).toEqual({ width: answer.headers['x-width'], height: answer.headers['x-height'] });
  const rgba = Buffer.alloc(color.width * color.height * 4);
  for (let i = 0; i < color.width * color.height; i++) {
    rgba[i * 4] = color.data[i * 3]!;
    rgba[i * 4 + 1] = color.data[i * 3 + 1]!;
    rgba[i * 4 + 2] = color.data[i * 3 + 2]!;
    rgba[i * 4 + 3] = alpha.data[i]!;
  }
  return { rgba, width: color.width, height: color.height };
}

/** The mask bgone gives for the image with channels=alpha at full size, through its own API. */
async function maskOf(image: Buffer): Promise<Buffer> {
  const form = new FormData();
  form.append('image_file', new Blob([new Uint8Array(image)]), 'x.jpg');
  form.append('channels', 'alpha');
  const res = await fetch(`${ts.url}/api/v1/remove`, { method: 'POST', headers: { authorization: `Bearer ${ts.key}` }, body: form });
  expect(res.status).toBe(200);
  return (await decode(Buffer.from(await res.arrayBuffer()))).data;
}

/** Mean absolute difference of two planes, in levels. */
function meanDifference(a: Uint8Array, b: Uint8Array): number {
  expect(a.length).toBe(b.length);
  let sum = 0;
  for (let i = 0; i < a.length; i++) sum += Math.abs(a[i]! - b[i]!);
  return sum / a.length;
}

describe('remove.bg Ruby gem (remove_bg 2.2, Faraday + multipart-post; RemoveBg::Api::URL reassigned)', () => {
  const boundary = `-----------RubyMultipartPost-${hexBoundary(32, 1)}`;
  const headers = () => [
    'User-Agent: remove-bg-ruby-2.2.1',
    `X-Api-Key: ${ts.key}`,
    `Content-Type: multipart/form-data; boundary=${boundary}`,
    'Accept-Encoding: gzip;q=1.0,deflate;q=0.6,identity;q=0.3',
    'Accept: */*',
    host(),
  ];
  /** A file part as multipart-post writes it: its own Content-Length and Content-Transfer-Encoding. */
  const file = (data: Buffer) => ({
    headers: [
      'Content-Disposition: form-data; name="image_file"; filename="teddy.jpg"',
      `Content-Length: ${data.length}`,
      'Content-Type: image/jpeg',
      'Content-Transfer-Encoding: binary',
    ],
    data,
  });

  it('from_file with format png on a machine with an image processor: a zip transfer (format=zip, size=auto), composed into the PNG', async () => {
    const answer = ok(await post(headers(), multipart(boundary, [field('format', 'zip'), field('size', 'auto'), file(teddy)])));
    const composed = await composeZip(answer);
    expect(composed).toMatchObject(TEDDY);
    expect(answer.headers['x-type']).toBe('other');
    expect(Number(answer.headers['x-ratelimit-reset'])).toBeGreaterThan(Date.now() / 1000 - 1); // epoch seconds, to_i
  });

  it("channels: 'alpha' (png upgraded to zip): the composed PNG is the mask", async () => {
    const answer = ok(await post(headers(), multipart(boundary, [field('channels', 'alpha'), field('format', 'zip'), field('size', 'auto'), file(teddy)])));
    const composed = await composeZip(answer);
    const mask = await maskOf(teddy);
    const grey = new Uint8Array(mask.length);
    for (let i = 0; i < mask.length; i++) {
      grey[i] = composed.rgba[i * 4]!;
      expect(composed.rgba[i * 4 + 3]).toBe(255);
    }
    expect(meanDifference(grey, mask)).toBeLessThan(1);
  });

  it('from_url: urlencoded, keys sorted (format, image_url, size)', async () => {
    const body = urlencoded(
      [
        ['format', 'png'],
        ['image_url', `${photosUrl}/teddy.jpg`],
        ['size', 'auto'],
      ],
      FARADAY_SAFE,
    );
    const answer = ok(await post([...headers().filter((h) => !h.startsWith('Content-Type')), 'Content-Type: application/x-www-form-urlencoded'], body));
    expect(answer.headers['content-type']).toBe('image/png');
    expect((await decode(answer.body)).channels).toBe(4);
  });

  it("account: exactly remove.bg's keys in credits and api (its keyword structs refuse any other)", async () => {
    const answer = await exchange(
      ts.port,
      head('GET', '/v1.0/account', ['User-Agent: remove-bg-ruby-2.2.1', `X-Api-Key: ${ts.key}`, 'Accept: */*', host()]),
      Buffer.alloc(0),
    );
    expect(answer.status).toBe(200);
    const { attributes } = answer.json.data;
    expect(Object.keys(attributes.credits).sort()).toEqual(['enterprise', 'payg', 'subscription', 'total']);
    expect(Object.keys(attributes.api).sort()).toEqual(['free_calls', 'sizes']);
  });

  it("errors: the title is remove.bg's message (a wrong key, a URL answering 404)", async () => {
    const wrong = headers().map((h) => (h.startsWith('X-Api-Key') ? 'X-Api-Key: rb-sk_not-a-key' : h));
    refused(await post(wrong, multipart(boundary, [field('size', 'auto'), file(teddy)])), 403, 'auth_failed', 'API Key invalid');
    const body = urlencoded(
      [
        ['image_url', `${photosUrl}/missing.jpg`],
        ['size', 'auto'],
      ],
      FARADAY_SAFE,
    );
    refused(
      await post([...headers().filter((h) => !h.startsWith('Content-Type')), 'Content-Type: application/x-www-form-urlencoded'], body),
      400,
      'failed_image_download',
      'Failed to download image from given image_url: HTTP Status 404',
    );
  });
});

describe('remove.bg Go CLI (removebg 1.3, const APIEndpoint rebuilt)', () => {
  const boundary = hexBoundary(60, 2);
  const headers = () => [
    host(),
    'User-Agent: remove-bg-go-1.3.1',
    `Content-Type: multipart/form-data; boundary=${boundary}`,
    `X-Api-Key: ${ts.key}`,
    'Accept-Encoding: gzip',
  ];
  const file = (data: Buffer) => ({
    headers: ['Content-Disposition: form-data; name="image_file"; filename="teddy.jpg"', 'Content-Type: application/octet-stream'],
    data,
  });

  it('its default PNG output: image_file first (application/octet-stream), size=auto, format=zip; alpha.png decodes as image.Gray', async () => {
    const answer = ok(await post(headers(), multipart(boundary, [file(teddy), field('format', 'zip'), field('size', 'auto')])));
    expect(await composeZip(answer)).toMatchObject(TEDDY);
  });

  it('--channels alpha: channels=alpha with format=zip gives the mask', async () => {
    const answer = ok(await post(headers(), multipart(boundary, [file(teddy), field('size', 'auto'), field('channels', 'alpha'), field('format', 'zip')])));
    const composed = await composeZip(answer);
    const mask = await maskOf(teddy);
    const grey = Uint8Array.from({ length: mask.length }, (_, i) => composed.rgba[i * 4]!);
    expect(meanDifference(grey, mask)).toBeLessThan(1);
  });

  it('402 reads as "402: Insufficient credits" (its titles joined)', async () => {
    const broke = await startTestServer({ credits: 0 });
    try {
      const lines = [
        `Host: 127.0.0.1:${broke.port}`,
        'User-Agent: remove-bg-go-1.3.1',
        `Content-Type: multipart/form-data; boundary=${boundary}`,
        `X-Api-Key: ${broke.key}`,
      ];
      const body = multipart(boundary, [file(teddy), field('size', 'auto')]);
      const answer = await exchange(broke.port, head('POST', '/v1.0/removebg', [...lines, `Content-Length: ${body.length}`]), body);
      refused(answer, 402, 'insufficient_credits', 'Insufficient credits');
    } finally {
      await broke.close();
    }
  });
});

describe('remove.bg official CLI (remove-bg-cli 2.0, superagent + form-data)', () => {
  const boundary = '--------------------------535212656850722805429045';
  const headers = () => [
    host(),
    'Accept-Encoding: gzip, deflate',
    `X-Api-Key: ${ts.key}`,
    'User-Agent: remove-bg-cli-2.0.3',
    `content-type: multipart/form-data; boundary=${boundary}`,
  ];
  /** Every field, always: those left out as empty strings. */
  const parts = (channels: string) => [
    { headers: ['Content-Disposition: form-data; name="image_file"; filename="teddy.jpg"', 'Content-Type: image/jpeg'], data: teddy },
    field('size', 'auto'),
    field('type', 'auto'),
    field('type_level', ''),
    field('format', 'zip'),
    field('roi', ''),
    field('crop', ''),
    field('crop_margin', ''),
    field('scale', ''),
    field('position', ''),
    field('channels', channels),
    field('add_shadow', ''),
    field('semitransparency', ''),
    field('bg_color', ''),
  ];

  it('its default call: nine empty fields are absent; a zip (it unzips by what it asked for)', async () => {
    const body = multipart(boundary, parts('rgba'));
    const answer = ok(await post([...headers(), `Content-Length: ${body.length}`, 'Connection: close'], body));
    expect(await composeZip(answer)).toMatchObject(TEDDY);
  });

  it('--channels alpha: the mask', async () => {
    const body = multipart(boundary, parts('alpha'));
    const answer = ok(await post([...headers(), `Content-Length: ${body.length}`, 'Connection: close'], body));
    const composed = await composeZip(answer);
    expect(composed.rgba[3]).toBe(255); // the alpha of the mask image is opaque
  });
});

describe('Python removebg (brilam/remove-bg: PyPI 0.04 and its GitHub head; requests)', () => {
  const boundary = hexBoundary(32, 3);
  const headers = (contentType: string) => [
    host(),
    'User-Agent: python-requests/2.34.2',
    'Accept-Encoding: gzip, deflate',
    'Accept: */*',
    'Connection: keep-alive',
    `X-Api-Key: ${ts.key}`,
    `Content-Type: ${contentType}`,
  ];
  const file = { headers: ['Content-Disposition: form-data; name="image_file"; filename="teddy.jpg"'], data: teddy };

  it('0.04 remove_background_from_img_file: size=regular, a file part without Content-Type', async () => {
    const answer = ok(await post(headers(`multipart/form-data; boundary=${boundary}`), multipart(boundary, [field('size', 'regular'), file])));
    expect(answer.headers['content-type']).toBe('image/png');
  });

  it('0.04 from a URL and from base64 (urlencoded, with bg_color)', async () => {
    const byUrl = urlencoded(
      [
        ['image_url', `${photosUrl}/teddy.jpg`],
        ['size', 'regular'],
      ],
      PYTHON_SAFE,
    );
    ok(await post(headers('application/x-www-form-urlencoded'), byUrl));
    const b64 = urlencoded(
      [
        ['image_file_b64', teddy.toString('base64')],
        ['size', 'regular'],
        ['bg_color', 'green'],
      ],
      PYTHON_SAFE,
    );
    const answer = ok(await post(headers('application/x-www-form-urlencoded'), b64));
    expect(answer.headers['content-type']).toBe('image/jpeg'); // format auto on a colour: no transparency
  });

  it("the GitHub head: every default sent, roi '0 0 100% 100%' with bare zeros, type_level=none (no X-Type)", async () => {
    const defaults: Array<[string, string]> = [
      ['size', 'regular'],
      ['type', 'auto'],
      ['type_level', 'none'],
      ['format', 'auto'],
      ['roi', '0 0 100% 100%'],
      ['crop', 'false'],
      ['scale', 'original'],
      ['position', 'original'],
      ['channels', 'rgba'],
      ['add_shadow', 'false'],
      ['semitransparency', 'true'],
    ];
    const byUrl = ok(await post(headers('application/x-www-form-urlencoded'), urlencoded([['image_url', `${photosUrl}/teddy.jpg`], ...defaults], PYTHON_SAFE)));
    expect(byUrl.headers['x-type']).toBeUndefined();
    const byFile = ok(await post(headers(`multipart/form-data; boundary=${boundary}`), multipart(boundary, [...defaults.map(([n, v]) => field(n, v)), file])));
    expect(byFile.body.equals(byUrl.body)).toBe(true);
    // crop='10px' in that client sends crop=true and crop_margin=10px.
    const cropped = ok(
      await post(
        headers('application/x-www-form-urlencoded'),
        urlencoded(
          [
            ['image_url', `${photosUrl}/teddy.jpg`],
            ['crop', 'true'],
            ['crop_margin', '10px'],
          ],
          PYTHON_SAFE,
        ),
      ),
    );
    expect(Number(cropped.headers['x-foreground-left'])).toBe(10);
  });

  it("roi in bare pixels, '0 0 284 398', is the whole image", async () => {
    const whole = ok(await post(headers('application/x-www-form-urlencoded'), urlencoded([['image_file_b64', teddy.toString('base64')]], PYTHON_SAFE)));
    const roi = ok(
      await post(
        headers('application/x-www-form-urlencoded'),
        urlencoded(
          [
            ['image_file_b64', teddy.toString('base64')],
            ['roi', '0 0 284 398'],
          ],
          PYTHON_SAFE,
        ),
      ),
    );
    expect(roi.body.equals(whole.body)).toBe(true);
  });
});

describe('Python remove-bg-api (OPHoperHPO, PyPI 0.2.1; remove_bg_api.API_URL reassigned)', () => {
  const boundary = hexBoundary(32, 4);
  const headers = (contentType?: string) => [
    host(),
    'User-Agent: python-requests/2.23.0',
    'Accept-Encoding: gzip, deflate',
    'Accept: */*',
    'Connection: keep-alive',
    `X-Api-Key: ${ts.key}`,
    ...(contentType ? [`Content-Type: ${contentType}`] : []),
  ];
  /** Raw bytes as the file: requests names the part after its field, with no type. */
  const file = { headers: ['Content-Disposition: form-data; name="image_file"; filename="image_file"'], data: teddy };

  it('RemoveBg(key) reads the balance at construction: data.attributes.credits.total', async () => {
    const answer = await exchange(ts.port, head('GET', '/v1.0/account', headers()), Buffer.alloc(0));
    expect(answer.status).toBe(200);
    expect(answer.json.data.attributes.credits.total).toBe((await credits(ts)).remaining);
  });

  it('remove_bg_file: format=auto, type=auto, size=preview, then image_file; X-Credits-Charged is an integer', async () => {
    const answer = ok(
      await post(
        headers(`multipart/form-data; boundary=${boundary}`),
        multipart(boundary, [field('format', 'auto'), field('type', 'auto'), field('size', 'preview'), file]),
      ),
    );
    expect(Number.parseInt(answer.headers['x-credits-charged']!, 10)).toBe(1);
  });

  it('remove_bg_link: urlencoded image_url with its defaults', async () => {
    const body = urlencoded(
      [
        ['image_url', `${photosUrl}/teddy.jpg`],
        ['format', 'auto'],
        ['type', 'auto'],
        ['size', 'preview'],
      ],
      PYTHON_SAFE,
    );
    ok(await post(headers('application/x-www-form-urlencoded'), body));
  });

  it('a caller data dict with a Python boolean: crop=True', async () => {
    const answer = ok(await post(headers(`multipart/form-data; boundary=${boundary}`), multipart(boundary, [field('crop', 'True'), file])));
    expect(answer.headers['x-foreground-left']).toBe('0');
  });
});

describe('PHP mtownsend/remove-bg (Guzzle 7; $rb->endpoint reassigned)', () => {
  const boundary = hexBoundary(40, 5);
  const headers = (contentType: string) => [
    host(),
    'User-Agent: Mtownsend/RemoveBg (github.com/mtownsend5512/remove-bg)',
    `X-API-Key: ${ts.key}`,
    `Content-Type: ${contentType}`,
  ];

  it('url() with the README body: size=4k, bg_color=#CBD5E0 (with its #), add_shadow=1, channels=rgba', async () => {
    const body = urlencoded(
      [
        ['image_url', `${photosUrl}/teddy.jpg`],
        ['size', '4k'],
        ['bg_color', '#CBD5E0'],
        ['add_shadow', '1'],
        ['channels', 'rgba'],
      ],
      PHP_SAFE,
    );
    const answer = ok(await post(headers('application/x-www-form-urlencoded'), body));
    expect(answer.headers['content-type']).toBe('image/jpeg');
    const image = await decode(answer.body);
    // A corner: the background, through JPEG.
    for (const [c, want] of [0xcb, 0xd5, 0xe0].entries()) expect(Math.abs(image.data[c]! - want)).toBeLessThanOrEqual(3);
  });

  it('file(): a JPEG sent as photo.png with Content-Type image/png, part Content-Lengths, false as an empty field; Expect: 100-Continue over 1 MB', async () => {
    const part = (name: string, value: string) => ({
      headers: [`Content-Disposition: form-data; name="${name}"`, `Content-Length: ${value.length}`],
      data: value,
    });
    const body = multipart(boundary, [
      {
        headers: ['Content-Disposition: form-data; name="image_file"; filename="photo.png"', `Content-Length: ${bigJpeg.length}`, 'Content-Type: image/png'],
        data: bigJpeg,
      },
      part('size', 'preview'),
      part('crop', ''),
    ]);
    const answer = ok(
      await post([...headers(`multipart/form-data; boundary=${boundary}`), 'Expect: 100-Continue', `Content-Length: ${body.length}`], body, {
        expectContinue: true,
      }),
    );
    // node:http answers 100 Continue to any case of the value, uWS to its lower case only: curl then sends the body after a second.
    expect(answer.interim.length).toBeLessThanOrEqual(1);
    expect(answer.headers['content-encoding']).toBeUndefined(); // it decodes nothing
  });

  it('getBase64(): Accept: application/json reads data.result_b64; an error shows title - code - detail', async () => {
    const body = urlencoded([['image_url', `${photosUrl}/teddy.jpg`]], PHP_SAFE);
    const answer = ok(await post([...headers('application/x-www-form-urlencoded'), 'Accept: application/json'], body));
    expect((await sharp(Buffer.from(answer.json.data.result_b64, 'base64')).metadata()).format).toBe('png');
    const wrong = await post(
      headers('application/x-www-form-urlencoded').map((h) => (h.startsWith('X-API-Key') ? 'X-API-Key: rb-sk_wrong' : h)),
      body,
    );
    refused(wrong, 403, 'auth_failed', 'API Key invalid');
    expect(Object.keys(wrong.json.errors[0])).toEqual(['title', 'code', 'detail']); // joined in this order
  });
});

describe('plugins and samples that build the request by hand', () => {
  it('GIMP RemoveBG plugin (urllib): its own boundary, only the PNG, X-api-key / Content-type capitalised; it needs a PNG with alpha', async () => {
    const boundary = 'jsdjfhsaasdfadflfhahfhj';
    const body = multipart(boundary, [
      { headers: ['Content-Disposition: form-data; name="image_file"; filename="a.png"', 'Content-Type: image/png'], data: teddyPng },
    ]);
    const answer = ok(
      await post(
        [
          'Accept-Encoding: identity',
          `Content-length: ${body.length}`,
          host(),
          'User-Agent: Python-urllib/3.11',
          `X-api-key: ${ts.key}`,
          `Content-type: multipart/form-data; boundary=${boundary}`,
          'Connection: close',
        ],
        body,
      ),
    );
    expect(answer.headers['content-type']).toBe('image/png');
    expect((await decode(answer.body)).channels).toBe(4);
  });

  it("Paint.NET RemoveBG (.NET HttpClient): a quoted boundary, unquoted names with filename*, the text part's Content-Type first", async () => {
    const guid = '6c1b5a8e-3f2d-4b7a-9e0c-1d2f3a4b5c6d';
    const body = multipart(guid, [
      { headers: [`Content-Disposition: form-data; name=image_file; filename=file.jpg; filename*=utf-8''file.jpg`], data: teddyPng },
      { headers: ['Content-Type: text/plain; charset=utf-8', 'Content-Disposition: form-data; name=size'], data: 'auto' },
    ]);
    const answer = ok(
      await post([host(), `X-Api-Key: ${ts.key}`, `Content-Type: multipart/form-data; boundary="${guid}"`, `Content-Length: ${body.length}`], body),
    );
    expect((await decode(answer.body)).channels).toBe(4);
  });

  it("remove.bg's bulk_process sample (curl --form, Expect: 100-continue on a large file)", async () => {
    const boundary = '------------------------4ebf00fbcf09';
    const body = multipart(boundary, [
      { headers: ['Content-Disposition: form-data; name="image_file"; filename="big.jpg"', 'Content-Type: image/jpeg'], data: bigJpeg },
    ]);
    const answer = ok(
      await post(
        [
          host(),
          'User-Agent: curl/7.88.1',
          'Accept: */*',
          `X-API-Key: ${ts.key}`,
          `Content-Length: ${body.length}`,
          `Content-Type: multipart/form-data; boundary=${boundary}`,
          'Expect: 100-continue',
        ],
        body,
        { expectContinue: true },
      ),
    );
    expect(answer.interim).toEqual([100]);
  });

  it("remove.bg's browser sample (axios, new FormData(form)): its api_key field, an empty image_url beside the file; or an empty file part beside the URL", async () => {
    const boundary = '----WebKitFormBoundary7MA4YWxkTrZu0gW';
    const headers = (length: number) => [
      host(),
      'Accept: application/json',
      `X-API-Key: ${ts.key}`,
      `Content-Type: multipart/form-data; boundary=${boundary}`,
      `Content-Length: ${length}`,
    ];
    const withFile = multipart(boundary, [
      field('api_key', ts.key),
      field('image_url', ''),
      { headers: ['Content-Disposition: form-data; name="image_file"; filename="teddy.jpg"', 'Content-Type: image/jpeg'], data: teddy },
      field('size', 'regular'),
    ]);
    const a = ok(await post(headers(withFile.length), withFile));
    expect(typeof a.json.data.result_b64).toBe('string');
    const withUrl = multipart(boundary, [
      field('api_key', ts.key),
      field('image_url', `${photosUrl}/teddy.jpg`),
      { headers: ['Content-Disposition: form-data; name="image_file"; filename=""', 'Content-Type: application/octet-stream'], data: Buffer.alloc(0) },
      field('size', 'regular'),
    ]);
    const b = ok(await post(headers(withUrl.length), withUrl));
    expect(b.json.data.result_b64).toBe(a.json.data.result_b64);
  });

  it('Figma remove-bg plugin: size=auto, then the PNG as a Blob named "blob" and typed image/jpeg', async () => {
    const boundary = '----WebKitFormBoundaryFigma0123456789';
    const body = multipart(boundary, [
      field('size', 'auto'),
      { headers: ['Content-Disposition: form-data; name="image_file"; filename="blob"', 'Content-Type: image/jpeg'], data: teddyPng },
    ]);
    ok(await post([host(), `X-Api-Key: ${ts.key}`, `Content-Type: multipart/form-data; boundary=${boundary}`, `Content-Length: ${body.length}`], body));
  });

  it('RemoveBg.Net (C#): multipart even for a URL, Accept: image/*, .NET part headers', async () => {
    const boundary = '0f4a5d6e-7b8c-4d9e-8f0a-1b2c3d4e5f60';
    const body = multipart(boundary, [
      { headers: ['Content-Type: text/plain; charset=utf-8', 'Content-Disposition: form-data; name=image_url'], data: `${photosUrl}/teddy.jpg` },
      { headers: ['Content-Type: text/plain; charset=utf-8', 'Content-Disposition: form-data; name=size'], data: 'auto' },
      { headers: ['Content-Type: text/plain; charset=utf-8', 'Content-Disposition: form-data; name=crop'], data: 'false' },
    ]);
    const answer = ok(
      await post(
        [host(), 'Accept: image/*', `X-Api-Key: ${ts.key}`, `Content-Type: multipart/form-data; boundary=${boundary}`, `Content-Length: ${body.length}`],
        body,
      ),
    );
    expect(answer.headers['content-type']).toBe('image/png');
  });
});

describe('remove.bg OAuth: Authorization: Bearer in place of X-Api-Key', () => {
  it('the key as a Bearer token authenticates the image and the account', async () => {
    const boundary = hexBoundary(32, 6);
    ok(
      await post(
        [host(), `Authorization: Bearer ${ts.key}`, `Content-Type: multipart/form-data; boundary=${boundary}`],
        multipart(boundary, [field('size', 'auto'), { headers: ['Content-Disposition: form-data; name="image_file"; filename="t.jpg"'], data: teddy }]),
      ),
    );
    const account = await exchange(ts.port, head('GET', '/v1.0/account', [host(), `Authorization: Bearer ${ts.key}`]), Buffer.alloc(0));
    expect(account.status).toBe(200);
    refused(await exchange(ts.port, head('GET', '/v1.0/account', [host()]), Buffer.alloc(0)), 403, 'auth_failed', 'Missing API Key');
  });

  it('a chunked upload (no Content-Length) is read like any other', async () => {
    const boundary = hexBoundary(32, 8);
    const body = multipart(boundary, [{ headers: ['Content-Disposition: form-data; name="image_file"; filename="t.jpg"'], data: teddy }]);
    ok(await post([host(), `X-Api-Key: ${ts.key}`, `Content-Type: multipart/form-data; boundary=${boundary}`, 'Transfer-Encoding: chunked'], chunked(body)));
  });

  it('no uncaught error in the process', () => uncaught.check());
});
