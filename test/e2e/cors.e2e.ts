/**
 * The API called from a page of another origin, in a real headless Chromium (Debian's
 * /usr/bin/chromium, driven by playwright-core): a page served by a small node:http server on
 * 127.0.0.1 calls a real bgone (startServer on another port of 127.0.0.1, a fresh SQLite file,
 * the real model) with the page's own fetch(), so that Chromium runs the whole CORS protocol,
 * preflights included. Nothing is intercepted: Playwright's routing would bypass CORS.
 *
 * remove.bg's dialect with X-Api-Key and a FormData upload, reading X-Credits-Charged and X-Width;
 * Photoroom's web sample as Photoroom publishes it, its blob shown in an <img>; bgone's own with
 * Authorization: Bearer; a bad key whose status and JSON body the script reads; and a server whose
 * BGONE_CORS_ORIGINS does not list the page, which Chromium refuses with "Failed to fetch" before
 * the upload is sent.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHROMIUM, CHROMIUM_ARGS } from '../helpers/chromium.js';
import { PHOTOS } from '../helpers/constants.js';
import { photoPath } from '../helpers/paths.js';
import { credits, metricsUrl, startTestServer, type TestServer } from '../helpers/server.js';

/**
 * The page: a file input, an <img>, and the calls, written as a page's script writes them.
 * Photoroom's is the JavaScript sample of its "Remove Background" documentation, with only its base
 * URL and key put in: the file from the input appended as image_file, X-Api-Key, the blob shown.
 */
const PAGE_HTML = `<!doctype html>
<html><head><meta charset="utf-8"><title>bgone from another origin</title></head>
<body>
<input type="file" id="file" accept="image/*">
<img id="result" alt="cut-out">
<script>
window.file = () => document.getElementById('file').files[0];

// Photoroom's web sample.
window.removeBackgroundPhotoroom = async (apiBase, apiKey) => {
  const file = window.file();
  const formData = new FormData();
  formData.append('image_file', file);
  const response = await fetch(apiBase + '/v1/segment', {
    method: 'POST',
    headers: { 'X-Api-Key': apiKey },
    body: formData,
  });
  const blob = await response.blob();
  const img = document.getElementById('result');
  await new Promise((resolve, reject) => {
    img.onload = resolve;
    img.onerror = reject;
    img.src = URL.createObjectURL(blob);
  });
  return { status: response.status, type: blob.type, naturalWidth: img.naturalWidth, naturalHeight: img.naturalHeight };
};

// remove.bg's dialect, as its JavaScript clients call it.
window.removeBackgroundRemoveBg = async (apiBase, apiKey) => {
  const formData = new FormData();
  formData.append('size', 'auto');
  formData.append('image_file', window.file());
  const response = await fetch(apiBase + '/v1.0/removebg', { method: 'POST', headers: { 'X-Api-Key': apiKey }, body: formData });
  const blob = await response.blob();
  const bitmap = await createImageBitmap(blob);
  return {
    status: response.status,
    creditsCharged: response.headers.get('X-Credits-Charged'),
    width: response.headers.get('X-Width'),
    height: response.headers.get('X-Height'),
    requestId: response.headers.get('X-Request-ID'),
    bytes: blob.size,
    bitmapWidth: bitmap.width,
  };
};

// bgone's own, with a Bearer key; the answer's JSON or, for an image, its headers.
window.removeBackgroundBgone = async (apiBase, apiKey) => {
  const formData = new FormData();
  formData.append('size', 'preview');
  formData.append('image_file', window.file());
  const response = await fetch(apiBase + '/api/v1/remove', { method: 'POST', headers: { Authorization: 'Bearer ' + apiKey }, body: formData });
  const isJson = (response.headers.get('Content-Type') || '').startsWith('application/json');
  return {
    status: response.status,
    body: isJson ? await response.json() : null,
    bytes: isJson ? 0 : (await response.blob()).size,
    imageWidth: response.headers.get('X-Image-Width'),
    creditsRemaining: response.headers.get('X-Credits-Remaining'),
    rateLimit: response.headers.get('X-RateLimit-Limit'),
    wwwAuthenticate: response.headers.get('WWW-Authenticate'),
  };
};

// Any call, reporting a network failure (what a CORS refusal looks like to a script) as its message.
window.attempt = async (call, ...args) => {
  try {
    return { ok: true, value: await window[call](...args) };
  } catch (err) {
    return { ok: false, name: err.name, message: err.message };
  }
};
</script>
</body></html>`;

let bgone: TestServer;
/** A server whose BGONE_CORS_ORIGINS lists another page only. */
let closed: TestServer;
let pages: Server;
let pageOrigin: string;
let browser: Browser;
let page: Page;

beforeAll(async () => {
  bgone = await startTestServer({ plan: 'pro' });
  closed = await startTestServer({ plan: 'pro', cors: ['https://app.example.com'] });
  pages = createServer((req, res) => {
    if (req.url === '/') {
      res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
      res.end(PAGE_HTML);
    } else {
      res.writeHead(404);
      res.end();
    }
  });
  await new Promise<void>((resolve) => pages.listen(0, '127.0.0.1', resolve));
  pageOrigin = `http://127.0.0.1:${(pages.address() as AddressInfo).port}`;
  expect(pageOrigin).not.toBe(bgone.url);
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [...CHROMIUM_ARGS],
  });
  page = await browser.newPage();
  await page.goto(`${pageOrigin}/`);
  await page.locator('#file').setInputFiles(photoPath(PHOTOS.teddy));
});

afterAll(async () => {
  await browser?.close();
  await Promise.all([bgone?.close(), closed?.close()]);
  pages?.closeAllConnections();
  await new Promise((resolve) => pages?.close(resolve));
});

type Attempt<T> = { ok: true; value: T } | { ok: false; name: string; message: string };

/** Runs one of the page's calls in the page, against `base` with `key`. */
function inPage<T>(call: string, base: string, key: string): Promise<Attempt<T>> {
  return page.evaluate(([c, b, k]) => (window as unknown as { attempt: (...a: string[]) => Promise<Attempt<T>> }).attempt(c!, b!, k!), [call, base, key]);
}

describe('bgone called by a page of another origin, in Chromium', () => {
  it("remove.bg's dialect: X-Api-Key and a FormData upload; the script reads X-Credits-Charged and X-Width, and the image", async () => {
    const got = await inPage<{ status: number; creditsCharged: string; width: string; height: string; requestId: string; bytes: number; bitmapWidth: number }>(
      'removeBackgroundRemoveBg',
      bgone.url,
      bgone.key,
    );
    expect(got).toMatchObject({ ok: true });
    if (!got.ok) return;
    expect(got.value).toMatchObject({ status: 200, creditsCharged: '1', width: '284', height: '398' });
    expect(got.value.requestId).toMatch(/^req_/);
    expect(got.value.bytes).toBeGreaterThan(1000);
    expect(got.value.bitmapWidth).toBe(284);
  });

  it("Photoroom's web sample as written: the cut-out shown in an <img>", async () => {
    const got = await inPage<{ status: number; type: string; naturalWidth: number; naturalHeight: number }>('removeBackgroundPhotoroom', bgone.url, bgone.key);
    expect(got).toEqual({ ok: true, value: { status: 200, type: 'image/png', naturalWidth: 284, naturalHeight: 398 } });
    expect(await page.locator('#result').evaluate((img: HTMLImageElement) => img.complete && img.naturalWidth)).toBe(284);
  });

  it("bgone's own with Authorization: Bearer: the image and its headers", async () => {
    const before = await credits(bgone);
    const got = await inPage<{ status: number; bytes: number; imageWidth: string; creditsRemaining: string; rateLimit: string }>(
      'removeBackgroundBgone',
      bgone.url,
      bgone.key,
    );
    expect(got).toMatchObject({ ok: true, value: { status: 200, imageWidth: '284', rateLimit: expect.stringMatching(/^\d+$/) } });
    if (!got.ok) return;
    expect(got.value.bytes).toBeGreaterThan(1000);
    expect(Number(got.value.creditsRemaining)).toBe(before.remaining - 1);
  });

  it('a bad key: the script reads the status, the JSON body and the challenge', async () => {
    const before = await credits(bgone);
    const got = await inPage<{ status: number; body: { code: string; message: string; request_id: string }; wwwAuthenticate: string }>(
      'removeBackgroundBgone',
      bgone.url,
      'rb-sk_not-a-key',
    );
    expect(got).toMatchObject({
      ok: true,
      value: { status: 401, body: { code: 'authentication_error', request_id: expect.stringMatching(/^req_/) }, wwwAuthenticate: 'Bearer realm="bgone"' },
    });
    expect(await credits(bgone)).toEqual(before);
  });

  it('a server whose BGONE_CORS_ORIGINS does not list the page: Chromium refuses at the preflight, and nothing is sent or charged', async () => {
    const before = await credits(closed);
    for (const call of ['removeBackgroundRemoveBg', 'removeBackgroundPhotoroom', 'removeBackgroundBgone']) {
      const got = await inPage(call, closed.url, closed.key);
      expect(got, call).toEqual({ ok: false, name: 'TypeError', message: 'Failed to fetch' });
    }
    expect(await credits(closed)).toEqual(before);
    // Only the preflights reached it: no call of any route.
    const metrics = await fetch(`${metricsUrl(closed.server)}/metrics`).then((r) => r.text());
    const requests = metrics.split('\n').filter((line) => line.startsWith('bgone_requests_total{'));
    expect(requests.map((line) => /route="([^"]*)"/.exec(line)?.[1])).toEqual(['preflight']);
    expect(requests[0]).toMatch(/status="204".* 3$/);
    // The same server answers the listed origin's page (a check of the setup, from outside the browser).
    const res = await fetch(`${closed.url}/v1.0/account`, { headers: { Origin: 'https://app.example.com', 'X-Api-Key': closed.key } });
    expect(res.headers.get('access-control-allow-origin')).toBe('https://app.example.com');
  });
});
