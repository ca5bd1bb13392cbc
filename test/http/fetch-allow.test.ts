/**
 * Image URLs through the operator's allow list (BGONE_FETCH_ALLOW, applied as `bgone serve` applies
 * it: the library's fetchAllow setting), over real HTTP on a fresh service, from a photo server on
 * 127.0.0.1: a host listed by name (`localhost`) and an address in a listed network download and
 * are charged once; a host outside the list, a redirect to one, and a metadata address inside a
 * listed network are refused with `failed_image_download` / `blocked_address`, uncharged, on
 * bgone's own route, remove.bg's dialect and a batch's background.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { configure } from '../../src/lib/index.js';
import { PHOTOS } from '../helpers/constants.js';
import { trackUncaught } from '../helpers/http-assert.js';
import { readPhoto } from '../helpers/paths.js';
import { blob, credits, get, type HttpResult, startTestServer, type TestServer, toResult, waitFor } from '../helpers/server.js';

const teddy = readPhoto(PHOTOS.teddy); // 284x398

let ts: TestServer;
let photos: Server;
let port: number;
/** Paths the photo server was asked for. */
const asked: string[] = [];
const uncaught = trackUncaught();

beforeAll(async () => {
  photos = createServer((req, res) => {
    asked.push(req.url!);
    if (req.url === '/teddy.jpg') {
      res.writeHead(200, { 'Content-Type': 'image/jpeg', 'Content-Length': teddy.length });
      res.end(teddy);
    } else if (req.url!.startsWith('/to?')) {
      res.writeHead(302, { Location: decodeURIComponent(req.url!.slice(4)) });
      res.end();
    } else {
      res.writeHead(404);
      res.end('no');
    }
  });
  await new Promise<void>((resolve) => photos.listen(0, '127.0.0.1', resolve));
  port = (photos.address() as AddressInfo).port;
  ts = await startTestServer({ plan: 'pro' });
});

afterEach(() => {
  configure({ fetchAllowPrivate: false, fetchAllow: [] });
  asked.length = 0;
});

afterAll(async () => {
  await ts?.close();
  photos?.closeAllConnections();
  await new Promise((resolve) => photos?.close(resolve));
});

const byName = (path = '/teddy.jpg') => `http://localhost:${port}${path}`;
const byAddress = (path = '/teddy.jpg') => `http://127.0.0.1:${port}${path}`;

/** POST /api/v1/remove with a JSON body. */
async function remove(body: Record<string, string>): Promise<HttpResult> {
  return toResult(
    await fetch(`${ts.url}/api/v1/remove`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ts.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ size: 'preview', ...body }),
    }),
  );
}

/** The refusal of a download that the list does not open: 422, blocked_address, nothing charged, the photo server never asked for the image. */
async function expectBlocked(send: () => Promise<HttpResult>, field = 'image_url'): Promise<void> {
  const before = await credits(ts);
  const res = await send();
  expect(res.status, JSON.stringify(res.json)).toBe(422);
  expect(res.json).toMatchObject({ code: 'failed_image_download', details: { field, reason: 'blocked_address' } });
  expect(await credits(ts)).toEqual(before);
  expect(asked.filter((path) => path === '/teddy.jpg')).toEqual([]);
}

describe('image URLs and the allow list', () => {
  it('a host listed by name downloads and is charged once; the same photo by its address is refused', async () => {
    configure({ fetchAllow: ['localhost'] });
    const before = await credits(ts);
    const res = await remove({ image_url: byName() });
    expect(res.status, JSON.stringify(res.json)).toBe(200);
    expect(res.headers.get('x-credits-charged')).toBe('1');
    expect((await credits(ts)).used).toBe(before.used + 1);
    asked.length = 0;
    await expectBlocked(() => remove({ image_url: byAddress() }));
  });

  it("an address inside a listed network downloads; the host's name is refused then (localhost is listed by name only)", async () => {
    configure({ fetchAllow: ['10.0.0.0/8', '127.0.0.0/8'] });
    const res = await remove({ image_url: byAddress() });
    expect(res.status, JSON.stringify(res.json)).toBe(200);
    asked.length = 0;
    await expectBlocked(() => remove({ image_url: byName() }));
  });

  it('without a list, both are refused', async () => {
    await expectBlocked(() => remove({ image_url: byName() }));
    await expectBlocked(() => remove({ image_url: byAddress() }));
  });

  it('a redirect is judged by its own host: from the listed name to the unlisted address, refused', async () => {
    configure({ fetchAllow: ['localhost'] });
    await expectBlocked(() => remove({ image_url: byName(`/to?${encodeURIComponent(byAddress())}`) }));
    expect(asked).toEqual([`/to?${encodeURIComponent(byAddress())}`]);
  });

  it('a metadata address inside a listed network is refused, for image_url and bg_image_url, without connecting', async () => {
    configure({ fetchAllow: ['169.254.0.0/16', 'fd00::/8', '127.0.0.0/8'] });
    await expectBlocked(() => remove({ image_url: 'http://169.254.169.254/latest/meta-data/iam/security-credentials/' }));
    await expectBlocked(() => remove({ image_url: 'http://[fd00:ec2::254]/latest/meta-data/' }));
    await expectBlocked(() => remove({ image_url: 'http://[::ffff:169.254.169.254]/latest/meta-data/' }));
    await expectBlocked(() => remove({ image_file_b64: teddy.toString('base64'), bg_image_url: 'http://169.254.170.2/v2/credentials' }), 'bg_image_url');
    // A redirect from an allowed address to the metadata address, too.
    await expectBlocked(() => remove({ image_url: byAddress(`/to?${encodeURIComponent('http://169.254.169.254/latest/meta-data/')}`) }));
  });

  it("remove.bg's dialect downloads through the same list, and refuses in its own shape", async () => {
    configure({ fetchAllow: ['localhost'] });
    const post = async (imageUrl: string) => {
      const form = new FormData();
      form.append('image_url', imageUrl);
      return toResult(await fetch(`${ts.url}/v1.0/removebg`, { method: 'POST', headers: { 'X-Api-Key': ts.key }, body: form }));
    };
    const ok = await post(byName());
    expect(ok.status, ok.body.toString()).toBe(200);
    expect(ok.headers.get('x-credits-charged')).toBe('1');
    const before = await credits(ts);
    const refused = await post(byAddress());
    expect(refused.status).toBe(400);
    expect(refused.json.errors[0]).toMatchObject({ code: 'failed_image_download' });
    expect(await credits(ts)).toEqual(before);
  });

  it("a batch's bg_image_url: downloaded from a listed host (the batch completes), refused from another before any image is taken", async () => {
    const submit = (bgImageUrl: string) => {
      const form = new FormData();
      form.append('size', 'preview');
      form.append('bg_image_url', bgImageUrl);
      form.append('image_file', blob(teddy, 'image/jpeg'), 'teddy.jpg');
      return fetch(`${ts.url}/api/v1/batches`, { method: 'POST', headers: { authorization: `Bearer ${ts.key}` }, body: form }).then(toResult);
    };
    configure({ fetchAllow: ['localhost'] });
    await expectBlocked(() => submit(byAddress()), 'bg_image_url');
    const accepted = await submit(byName());
    expect(accepted.status, JSON.stringify(accepted.json)).toBe(202);
    let batch: any;
    await waitFor(
      async () => {
        batch = (await get(ts.url, `/api/v1/batches/${accepted.json.id}`, { headers: { authorization: `Bearer ${ts.key}` } })).json;
        return batch.status === 'completed';
      },
      'the batch to complete',
      90_000,
    );
    expect(batch.images.map((image: { status: string }) => image.status)).toEqual(['succeeded']);
  });

  it('let nothing go unhandled', async () => {
    await uncaught.check();
  });
});
