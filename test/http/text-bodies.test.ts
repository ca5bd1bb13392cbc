/**
 * JSON and urlencoded removals on a real server: the image in base64 as encoders write it (a full
 * 20 MB image in lines of 76 with CRLF), one byte more refused, a key given twice refused in every
 * dialect, and what a text body costs: it is read as it streams, so a 20 MB image in base64 goes
 * through the service's reader at the cost of its decoded bytes, never of its text.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_FILE_BYTES } from '../../src/lib/option-table.js';
import { PHOTOS } from '../helpers/constants.js';
import { trackUncaught } from '../helpers/http-assert.js';
import { padPng } from '../helpers/http-images.js';
import { REPO_ROOT, readPhoto } from '../helpers/paths.js';
import { credits, startTestServer, type TestServer } from '../helpers/server.js';

let ts: TestServer;
let png: Buffer;
const uncaught = trackUncaught();

beforeAll(async () => {
  ts = await startTestServer();
  png = await sharp(readPhoto(PHOTOS.teddy)).png().toBuffer();
});
afterAll(async () => {
  await ts?.close();
  uncaught.check();
});

/** base64 in lines of 76 characters ended by CRLF, as MIME encoders write it. */
function mime(bytes: Buffer): string {
  return (bytes.toString('base64').match(/.{1,76}/g) ?? []).join('\r\n');
}

async function post(path: string, type: string, body: string): Promise<{ status: number; json: any; type: string }> {
  const res = await fetch(`${ts.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ts.key}`, 'x-api-key': ts.key, 'content-type': type },
    body,
  });
  const bytes = Buffer.from(await res.arrayBuffer());
  const contentType = res.headers.get('content-type') ?? '';
  return { status: res.status, type: contentType, json: contentType.startsWith('application/json') ? JSON.parse(bytes.toString('utf8')) : undefined };
}

describe('the image in base64 as encoders write it', () => {
  it('a 20 MB image in CRLF-ended lines of 76, in JSON: served and charged once', async () => {
    const before = await credits(ts);
    const res = await post('/api/v1/remove', 'application/json', JSON.stringify({ image_file_b64: mime(padPng(png, MAX_FILE_BYTES)), size: 'preview' }));
    expect(res.status, JSON.stringify(res.json)).toBe(200);
    expect(res.type).toBe('image/png');
    expect((await credits(ts)).used).toBe(before.used + 1);
  });

  it('the same, urlencoded (%0D%0A line breaks, + / = percent-encoded)', async () => {
    const before = await credits(ts);
    const res = await post(
      '/v1.0/removebg',
      'application/x-www-form-urlencoded',
      `image_file_b64=${encodeURIComponent(mime(padPng(png, MAX_FILE_BYTES)))}&size=preview`,
    );
    expect(res.status, JSON.stringify(res.json)).toBe(200);
    expect((await credits(ts)).used).toBe(before.used + 1);
  });

  it('the same as a multipart text field', async () => {
    const before = await credits(ts);
    const form = new FormData();
    form.append('image_file_b64', mime(padPng(png, MAX_FILE_BYTES)));
    form.append('size', 'preview');
    const res = await fetch(`${ts.url}/api/v1/remove`, { method: 'POST', headers: { authorization: `Bearer ${ts.key}` }, body: form });
    expect(res.status, await res.clone().text()).toBe(200);
    await res.arrayBuffer();
    expect((await credits(ts)).used).toBe(before.used + 1);
  });

  it('one byte over 20 MB: 400 image_too_large, nothing charged', async () => {
    const before = await credits(ts);
    const res = await post('/api/v1/remove', 'application/json', JSON.stringify({ image_file_b64: mime(padPng(png, MAX_FILE_BYTES + 1)) }));
    expect(res.status).toBe(400);
    expect(res.json).toMatchObject({ code: 'image_too_large', details: { field: 'image_file_b64', limit_bytes: MAX_FILE_BYTES } });
    expect(await credits(ts)).toEqual(before);
  });
});

describe('a JSON key given twice', () => {
  const twice = (b64: string) => `{"image_file_b64":"${b64}","format":"png","format":"webp"}`;

  it("bgone's API: 400 validation_error naming it, nothing charged", async () => {
    const before = await credits(ts);
    const res = await post('/api/v1/remove', 'application/json', twice(png.toString('base64')));
    expect(res.status).toBe(400);
    expect(res.json).toMatchObject({ code: 'validation_error', details: { field: 'format' } });
    expect(await credits(ts)).toEqual(before);
  });

  it("remove.bg's dialect: 400 in its error body", async () => {
    const res = await post('/v1.0/removebg', 'application/json', twice(png.toString('base64')));
    expect(res.status).toBe(400);
    expect(res.json.errors?.[0]?.title).toMatch(/format/);
  });

  it('the image given twice', async () => {
    const b64 = png.toString('base64');
    const res = await post('/api/v1/remove', 'application/json', `{"image_file_b64":"${b64}","image_file_b64":"${b64}"}`);
    expect(res.status).toBe(400);
    expect(res.json).toMatchObject({ code: 'validation_error', details: { field: 'image_file_b64' } });
  });
});

describe('what a text body costs', () => {
  it('a 20 MB image in base64 costs the reader its decoded bytes and little more (the peak RSS of the read)', () => {
    const url = (file: string) => pathToFileURL(join(REPO_ROOT, 'dist', 'src', file)).href;
    // The child measures its own peak: /proc/self/clear_refs resets VmHWM to the present RSS.
    const script = `
      import { readFileSync, writeFileSync } from 'node:fs';
      import { Exchange } from ${JSON.stringify(url('http/exchange.js'))};
      import { BGONE_DIALECT } from ${JSON.stringify(url('api/dialects/bgone.js'))};
      import { MAX_BODY_BYTES } from ${JSON.stringify(url('api/metered-removal.js'))};
      import { normaliseOptions } from ${JSON.stringify(url('lib/options.js'))};
      const kb = (field) => Number(new RegExp(field + ':\\\\s+(\\\\d+)').exec(readFileSync('/proc/self/status', 'utf8'))[1]) * 1024;
      const image = Buffer.alloc(${MAX_FILE_BYTES}, 0xa5);
      // The body as a client's buffers: base64 made 3 MiB at a time, never one long string here.
      const pieces = [Buffer.from('{"size":"preview","image_file_b64":"')];
      for (let at = 0; at < image.length; at += 3 * 1024 * 1024) pieces.push(Buffer.from(image.subarray(at, at + 3 * 1024 * 1024).toString('base64')));
      pieces.push(Buffer.from('"}'));
      const body = Buffer.concat(pieces);
      pieces.length = 0;
      const chunks = [];
      for (let at = 0; at < body.length; at += 64 * 1024) chunks.push(body.subarray(at, at + 64 * 1024));
      const req = { method: 'POST', path: '/api/v1/remove', query: '', remoteAddress: '127.0.0.1',
        header: (name) => ({ 'content-type': 'application/json', 'content-length': String(body.length) })[name] ?? '',
        onData(handler) { chunks.forEach((chunk, i) => handler(chunk, i === chunks.length - 1)); } };
      const res = { aborted: false, onAborted() {}, send() {} };
      globalThis.gc();
      writeFileSync('/proc/self/clear_refs', '5');
      const before = kb('VmRSS');
      const ex = new Exchange(req, res, '/api/v1/remove', () => {});
      const form = await ex.readForm({ form: BGONE_DIALECT.form, maxBodyBytes: MAX_BODY_BYTES, tooLarge: () => new Error('too large'), textBodies: true });
      const decoded = normaliseOptions(BGONE_DIALECT.read(form, undefined).options).sources.imageFileB64;
      const peak = kb('VmHWM') - before;
      process.stdout.write(JSON.stringify({ bytes: decoded.length, same: decoded.equals(image), peak }));
    `;
    // A small young generation, so that the garbage the read leaves is collected as it goes.
    const child = spawnSync(process.execPath, ['--expose-gc', '--max-semi-space-size=1', '--input-type=module', '-e', script], {
      encoding: 'utf8',
      timeout: 120_000,
    });
    expect(child.status, child.stderr).toBe(0);
    const { bytes, same, peak } = JSON.parse(child.stdout);
    expect({ bytes, same }).toEqual({ bytes: MAX_FILE_BYTES, same: true });
    // The body's text is 28 MB: holding it once more than the image (a string, the chunks) would pass this.
    expect(peak, `the read's peak, above the RSS before it: ${(peak / 2 ** 20).toFixed(1)} MiB`).toBeLessThan(1.5 * MAX_FILE_BYTES);
  });
});
