/**
 * A remove.bg client that nobody on the team wrote, from the npm registry (`remove.bg` 1.3.0, a
 * devDependency), pointed at a real bgone. It hard-codes remove.bg's address, so its own file is
 * loaded as it is with only that constant replaced: the copy lives in memory, nothing is written to
 * the repository. Every call goes through the client's own request code (unirest): files, base64,
 * URLs, its default options and every optional field it sends, a background colour, the mask, and
 * its failures (a bad key, no credits).
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { createRequire, Module } from 'node:module';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configure } from '../../src/lib/index.js';
import { PHOTOS } from '../helpers/constants.js';
import { trackUncaught } from '../helpers/http-assert.js';
import { checkResponse } from '../helpers/http-openapi.js';
import { photoPath, readPhoto } from '../helpers/paths.js';
import { REMOVE_BG_DOCUMENT } from '../helpers/removebg-document.js';
import { credits, type HttpResult, keyWithoutCredits, startTestServer, type TestServer, toResult, waitFor } from '../helpers/server.js';

const REMOVE_BG_ENDPOINT = 'https://api.remove.bg/v1.0/removebg';

interface ClientResult {
  base64img: string;
  creditsCharged: string;
  detectedType: string;
  resultWidth: string;
  resultHeight: string;
  rateLimit: string;
}
interface Client {
  removeBackgroundFromImageFile(options: Record<string, unknown>): Promise<ClientResult>;
  removeBackgroundFromImageBase64(options: Record<string, unknown>): Promise<ClientResult>;
  removeBackgroundFromImageUrl(options: Record<string, unknown>): Promise<ClientResult>;
}

/** A client package's own module, its endpoint literal pointed at `endpoint`; its dependencies resolve from its folder. */
function loadPackage<T>(name: string, endpoint: string): T {
  const require = createRequire(import.meta.url);
  const file = require.resolve(name);
  const source = readFileSync(file, 'utf8');
  expect(source, "the client's endpoint").toContain(REMOVE_BG_ENDPOINT);
  const copy = new Module(file) as Module & { _compile(code: string, filename: string): void; paths: string[] };
  copy.filename = file;
  copy.paths = (Module as unknown as { _nodeModulePaths(dir: string): string[] })._nodeModulePaths(dirname(file));
  copy._compile(source.replaceAll(REMOVE_BG_ENDPOINT, endpoint), file);
  return copy.exports as T;
}

const loadClient = (endpoint: string) => loadPackage<Client>('remove.bg', endpoint);

const teddyPath = photoPath(PHOTOS.teddy); // 284x398
const teddy = readPhoto(PHOTOS.teddy);

let ts: TestServer;
let client: Client;
let photos: Server;
let photosUrl: string;
const uncaught = trackUncaught();

beforeAll(async () => {
  configure({ fetchAllowPrivate: true });
  photos = createServer((_, res) => {
    res.writeHead(200, { 'Content-Type': 'image/jpeg' });
    res.end(teddy);
  });
  await new Promise<void>((resolve) => photos.listen(0, '127.0.0.1', resolve));
  photosUrl = `http://127.0.0.1:${(photos.address() as AddressInfo).port}/teddy.jpg`;
  ts = await startTestServer({ plan: 'pro' });
  client = loadClient(`${ts.url}/v1.0/removebg`);
});

afterAll(async () => {
  await ts?.close();
  photos?.closeAllConnections();
  await new Promise((resolve) => photos?.close(resolve));
  configure({ fetchAllowPrivate: false });
});

async function decoded(result: ClientResult): Promise<{ format: string | undefined; width: number; height: number; channels: number }> {
  const meta = await sharp(Buffer.from(result.base64img, 'base64')).metadata();
  return { format: meta.format, width: meta.width!, height: meta.height!, channels: meta.channels! };
}

describe('the npm remove.bg client, pointed at bgone', () => {
  it('a file with its defaults (size preview, type auto, format auto) and every optional field it sends', async () => {
    const before = await credits(ts);
    const result = await client.removeBackgroundFromImageFile({
      path: teddyPath,
      apiKey: ts.key,
      size: 'regular',
      type: 'product',
      crop: true,
      crop_margin: '10px',
      scale: '90%',
      position: 'center',
      roi: '0% 0% 100% 100%',
      channels: 'rgba',
      add_shadow: false,
    });
    const image = await decoded(result);
    expect(image.format).toBe('png');
    expect(image.channels).toBe(4);
    expect({ width: String(image.width), height: String(image.height) }).toEqual({ width: result.resultWidth, height: result.resultHeight });
    expect(result.detectedType).toBe('other');
    expect(Number.parseInt(result.creditsCharged, 10)).toBe(1);
    const after = await credits(ts);
    expect(before.remaining - after.remaining).toBe(Number.parseInt(result.creditsCharged, 10));
  });

  it('a background colour: format auto answers JPEG', async () => {
    const result = await client.removeBackgroundFromImageFile({ path: teddyPath, apiKey: ts.key, bg_color: '81d4fa' });
    const image = await decoded(result);
    expect(image.format).toBe('jpeg');
    expect(image.channels).toBe(3);
  });

  it('channels=alpha: the mask', async () => {
    const result = await client.removeBackgroundFromImageFile({ path: teddyPath, apiKey: ts.key, channels: 'alpha' });
    const image = await decoded(result);
    expect(image.format).toBe('png');
    expect(image.channels).toBe(1);
  });

  it('base64 and a URL give the bytes of the file', async () => {
    const file = await client.removeBackgroundFromImageFile({ path: teddyPath, apiKey: ts.key, size: 'medium' });
    const b64 = await client.removeBackgroundFromImageBase64({ base64img: teddy.toString('base64'), apiKey: ts.key, size: 'medium' });
    const url = await client.removeBackgroundFromImageUrl({ url: photosUrl, apiKey: ts.key, size: 'medium' });
    expect(b64.base64img).toBe(file.base64img);
    expect(url.base64img).toBe(file.base64img);
  });

  it('a background image by URL', async () => {
    const result = await client.removeBackgroundFromImageFile({ path: teddyPath, apiKey: ts.key, bg_image_url: photosUrl });
    expect((await decoded(result)).format).toBe('jpeg');
  });

  it("a bad key: the client rejects with remove.bg's errors, nothing charged", async () => {
    const before = await credits(ts);
    const errors = await client.removeBackgroundFromImageFile({ path: teddyPath, apiKey: 'rb-sk_not-a-key' }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(Array.isArray(errors)).toBe(true);
    expect((errors as Array<{ title: string; code: string }>)[0]).toMatchObject({ code: expect.any(String), title: expect.any(String) });
    expect(await credits(ts)).toEqual(before);
  });

  it('no credits left: the client rejects, nothing charged', async () => {
    const broke = await keyWithoutCredits(ts);
    const errors = await client.removeBackgroundFromImageFile({ path: teddyPath, apiKey: broke.key }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(Array.isArray(errors), JSON.stringify(errors) ?? String(errors)).toBe(true);
    expect((errors as Array<{ code: string }>)[0]?.code).toBe('insufficient_credits');
    expect(await credits({ store: ts.store, accountId: broke.accountId })).toMatchObject({ remaining: 0, reserved: 0 });
  });

  it("every answer conforms to remove.bg's published document: images, JSON, its errors, the account", async () => {
    const post = (headers: Record<string, string>, fields: Record<string, string> = {}, file = true) => {
      const form = new FormData();
      for (const [name, value] of Object.entries(fields)) form.append(name, value);
      if (file) form.append('image_file', new Blob([new Uint8Array(teddy)], { type: 'image/jpeg' }), 'teddy.jpg');
      return fetch(`${ts.url}/v1.0/removebg`, { method: 'POST', headers, body: form }).then(toResult);
    };
    const key = { 'X-Api-Key': ts.key };
    const answers: Array<[string, string, HttpResult, number]> = [
      ['post', '/removebg', await post(key), 200],
      ['post', '/removebg', await post({ ...key, Accept: 'application/json' }), 200],
      ['post', '/removebg', await post(key, { size: 'huge' }), 400],
      ['post', '/removebg', await post(key, {}, false), 400],
      ['post', '/removebg', await post({ 'X-Api-Key': 'rb-sk_wrong' }), 403],
      ['get', '/account', await fetch(`${ts.url}/v1.0/account`, { headers: key }).then(toResult), 200],
      ['get', '/account', await fetch(`${ts.url}/v1.0/account`).then(toResult), 403],
    ];
    answers.push(['post', '/removebg', await post({ 'X-Api-Key': (await keyWithoutCredits(ts)).key }), 402]);
    for (const [method, path, res, status] of answers) {
      expect(res.status, `${method} ${path}`).toBe(status);
      expect(checkResponse(REMOVE_BG_DOCUMENT, method, path, res), `${method} ${path} ${status}`).toEqual([]);
    }
  });
});

describe('the npm removebg-wrapper client (1.0.3, request), pointed at bgone', () => {
  interface Wrapper {
    rbFromImageFile(path: string, apiKey: string): Promise<void>;
    rbFromImageUrl(url: string, apiKey: string): Promise<void>;
  }
  // It writes what it gets to output.png (a file) and output-2.png (a URL) in the working folder,
  // without telling its caller when: the test waits for the file.
  const cwd = process.cwd();
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'bgone-wrapper-'));
    process.chdir(dir);
  });
  afterAll(() => {
    process.chdir(cwd);
    rmSync(dir, { recursive: true, force: true });
  });

  it('rbFromImageFile and rbFromImageUrl (size=auto): the cut-out it saves', async () => {
    const wrapper = loadPackage<Wrapper>('removebg-wrapper', `${ts.url}/v1.0/removebg`);
    await wrapper.rbFromImageFile(teddyPath, ts.key);
    await waitFor(() => existsSync(join(dir, 'output.png')), 'output.png');
    await waitFor(
      async () =>
        (await sharp(readFileSync(join(dir, 'output.png')))
          .metadata()
          .catch(() => undefined)) !== undefined,
      'a whole PNG',
    );
    const meta = await sharp(readFileSync(join(dir, 'output.png'))).metadata();
    expect({ format: meta.format, width: meta.width, height: meta.height, channels: meta.channels }).toEqual({
      format: 'png',
      width: 284,
      height: 398,
      channels: 4,
    });
    await wrapper.rbFromImageUrl(photosUrl, ts.key);
    await waitFor(() => existsSync(join(dir, 'output-2.png')), 'output-2.png');
    await waitFor(
      async () =>
        (await sharp(readFileSync(join(dir, 'output-2.png')))
          .metadata()
          .catch(() => undefined)) !== undefined,
      'a whole PNG',
    );
    expect(readFileSync(join(dir, 'output-2.png')).equals(readFileSync(join(dir, 'output.png')))).toBe(true);
  });

  it('let nothing go unhandled', async () => {
    await uncaught.check();
  });
});
