/**
 * Async batches and signed webhooks through HTTP (docs/contract.md, "Async batches and webhooks"),
 * against a real server on 127.0.0.1 with the real model, a real SQLite file, and a real webhook
 * receiver whose signature checks are done by the `standardwebhooks` package. The store's clock is
 * a fake one (result expiry, retry times); webhook timestamps stay on the real clock.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type BatchServiceOptions, type RunningServer, type ServerOptions, startServer } from '../../src/server.js';
import { openStore, type Store } from '../../src/store/index.js';
import { PHOTOS } from '../helpers/constants.js';
import { expectConforms, expectError, openApi } from '../helpers/http-assert.js';
import { imageInfo } from '../helpers/http-images.js';
import type { OpenApiDocument } from '../helpers/http-openapi.js';
import { readFixture, readPhoto } from '../helpers/paths.js';
import { blob, get, type HttpResult, postImage, setBalance, testServerOptions, toResult, waitFor } from '../helpers/server.js';
import { type FakeClock, fakeClock } from '../helpers/store.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';

const teddy = readPhoto(PHOTOS.teddy); // 284x398
const llama = readPhoto(PHOTOS.llama); // 513x371
const book = readPhoto(PHOTOS.book); // 640x480
/** 2989x1680: a /remove at size=full keeps the native core busy for a few seconds. */
const bigSwan = readFixture('swan-big.jpg');
const BATCHES = '/api/v1/batches';
const HOUR = 3600_000;

interface Service {
  url: string;
  store: Store;
  server: RunningServer;
  clock: FakeClock;
  key: string;
  accountId: number;
  dbPath: string;
  /** Stops the server and closes the store (the folder stays, for a restart). */
  stop(): Promise<void>;
}

const dirs: string[] = [];
const running: Array<{ stop(): Promise<void> }> = [];

afterEach(async () => {
  for (const r of running.splice(0)) await r.stop();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

async function startService(
  options: {
    credits?: number;
    batches?: Partial<BatchServiceOptions>;
    dbPath?: string;
    clock?: FakeClock;
    key?: string;
    accountId?: number;
    server?: Partial<ServerOptions>;
  } = {},
): Promise<Service> {
  let dbPath = options.dbPath;
  if (!dbPath) {
    const dir = mkdtempSync(join(tmpdir(), 'bgone-batches-'));
    dirs.push(dir);
    dbPath = join(dir, 'db.sqlite');
  }
  const clock = options.clock ?? fakeClock('2026-01-10T08:00:00.000Z');
  const store = await openStore({ path: dbPath, clock, rateLimits: { free: 100_000, pro: 100_000, ultra: 100_000, mega: 100_000 } });
  let key = options.key;
  let accountId = options.accountId;
  if (!key || accountId === undefined) {
    const account = await store.accounts.create({ email: 'batch@example.com' });
    accountId = account.id;
    key = (await store.keys.create(account.id)).key;
    if (options.credits !== undefined) await setBalance(store, accountId, options.credits);
  } else {
    // What `bgone serve` does at start: images a previous process left unended are failed.
    await store.batches.failOrphans({ code: 'internal_server_error', message: 'The service restarted before this image was processed; it was not charged.' });
    await store.credits.recoverAfterCrash();
  }
  const server = await startServer({
    ...testServerOptions(store),
    batches: { resultTtlSeconds: 3600, memoryMb: 1024, webhookAllowPrivate: true, webhookPollMs: 50, ...options.batches },
    ...options.server,
  });
  let stopped = false;
  const service: Service = {
    url: `http://127.0.0.1:${server.port}`,
    store,
    server,
    clock,
    key,
    accountId,
    dbPath,
    stop: async () => {
      if (stopped) return;
      stopped = true;
      await server.close();
      await store.close();
    },
  };
  running.push(service);
  return service;
}

function auth(s: Service): Record<string, string> {
  return { authorization: `Bearer ${s.key}` };
}

async function submit(s: Service, images: Array<{ data: Buffer; name: string; type?: string }>, fields: Record<string, string> = {}): Promise<HttpResult> {
  const form = new FormData();
  for (const [k, v] of Object.entries(fields)) form.append(k, v);
  for (const image of images) form.append('image_file', blob(image.data, image.type ?? 'image/jpeg'), image.name);
  return toResult(await fetch(`${s.url}${BATCHES}`, { method: 'POST', headers: auth(s), body: form }));
}

async function createEndpoint(s: Service, receiver: WebhookReceiver): Promise<string> {
  const res = await toResult(
    await fetch(`${s.url}/api/v1/webhooks`, {
      method: 'POST',
      headers: { ...auth(s), 'content-type': 'application/json' },
      body: JSON.stringify({ url: receiver.url, description: 'test receiver' }),
    }),
  );
  expect(res.status).toBe(201);
  expect(res.json.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
  receiver.secret = res.json.secret;
  return res.json.id;
}

async function batchOf(s: Service, id: string): Promise<HttpResult> {
  return get(s.url, `${BATCHES}/${id}`, { headers: auth(s) });
}

async function waitCompleted(s: Service, id: string): Promise<any> {
  let last: any;
  await waitFor(
    async () => {
      last = (await batchOf(s, id)).json;
      return last.status === 'completed';
    },
    `batch ${id} to complete`,
    90_000,
  );
  return last;
}

let doc: OpenApiDocument;
const receivers: WebhookReceiver[] = [];
afterEach(async () => {
  for (const r of receivers.splice(0)) await r.stop().catch(() => {});
});
async function receiver(): Promise<WebhookReceiver> {
  const r = await startWebhookReceiver();
  receivers.push(r);
  return r;
}

beforeAll(async () => {
  const s = await startService();
  doc = await openApi(s.url);
  await s.stop();
});

describe('a batch through to its webhooks', () => {
  it('3 images and 1 non-image: 3 image.processed, 1 batch.completed, all signed, results then 410 after the TTL, 3 credits', async () => {
    const s = await startService({ credits: 10 });
    const before = await s.store.credits.balance(s.accountId);
    const r = await receiver();
    await createEndpoint(s, r);
    const res = await submit(
      s,
      [
        { data: teddy, name: 'teddy.jpg' },
        { data: Buffer.from('this is not an image at all'), name: 'notes.txt', type: 'text/plain' },
        { data: llama, name: 'llama.jpg' },
        { data: book, name: 'book.jpg' },
      ],
      { format: 'png' },
    );
    expect(res.status).toBe(202);
    expectConforms(doc, 'POST', BATCHES, res);
    expect(res.json.id).toMatch(/^bat_/);
    expect(res.json.status).toBe('processing');
    expect(res.json.images.map((i: any) => [i.filename, i.status])).toEqual([
      ['teddy.jpg', 'queued'],
      ['notes.txt', 'failed'],
      ['llama.jpg', 'queued'],
      ['book.jpg', 'queued'],
    ]);
    expect(res.json.images[1].error.code).toBe('unsupported_media_type');
    // Reserved at submission: 3 credits held, none charged yet.
    const held = await s.store.credits.balance(s.accountId);
    expect({ reserved: held.reserved, used: held.used - before.used }).toEqual({ reserved: 3, used: 0 });

    const batch = await waitCompleted(s, res.json.id);
    expectConforms(doc, 'GET', `${BATCHES}/{batch_id}`, await batchOf(s, res.json.id));
    expect(batch.images.map((i: any) => i.status)).toEqual(['succeeded', 'failed', 'succeeded', 'succeeded']);
    await waitFor(() => r.delivered('batch.completed').length === 1, 'batch.completed delivered', 30_000);

    const processed = r.delivered('image.processed');
    expect(processed).toHaveLength(3);
    expect(r.received.every((e) => e.verified)).toBe(true);
    expect(new Set(r.received.map((e) => e.id)).size).toBe(r.received.length);
    for (const e of processed) {
      expect(e.event.data).toMatchObject({ batch_id: res.json.id, status: 'succeeded', credits_charged: 1, format: 'png' });
      expect(e.event.data.result_url).toBe(`${s.url}${BATCHES}/${res.json.id}/images/${e.event.data.image_id}`);
      expect(JSON.stringify(e.event)).not.toContain('base64');
    }
    expect(r.delivered('batch.completed')[0]!.event.data).toEqual({ batch_id: res.json.id, succeeded: 3, failed: 1, credits_charged: 3 });
    const balance = await s.store.credits.balance(s.accountId);
    expect({ charged: balance.used - before.used, reserved: balance.reserved, remaining: balance.remaining }).toEqual({
      charged: 3,
      reserved: 0,
      remaining: 7,
    });

    // Results: the bytes with the headers of a /remove success, then 410 once the TTL has passed.
    const first = batch.images[0];
    const result = await get(s.url, `${BATCHES}/${res.json.id}/images/${first.id}`, { headers: auth(s) });
    expect(result.status).toBe(200);
    expectConforms(doc, 'GET', `${BATCHES}/{batch_id}/images/{image_id}`, result);
    const info = await imageInfo(result.body);
    expect(info).toMatchObject({ format: 'png', width: 284, height: 398, channels: 4 });
    expect(result.headers.get('x-image-width')).toBe('284');
    const failedOne = await get(s.url, `${BATCHES}/${res.json.id}/images/${batch.images[1].id}`, { headers: auth(s) });
    expectError(failedOne, 404, 'not_found');
    s.clock.advance(HOUR + 1000);
    const expired = await get(s.url, `${BATCHES}/${res.json.id}/images/${first.id}`, { headers: auth(s) });
    expectError(expired, 410, 'result_expired');
    expect((await batchOf(s, res.json.id)).json.images[0].status).toBe('expired');
  });

  it('a receiver that answers 500 twice then 200 gets the same webhook-id three times', async () => {
    const s = await startService();
    const r = await receiver();
    const endpoint = await createEndpoint(s, r);
    r.script = [500, 500, 200];
    const test = await toResult(await fetch(`${s.url}/api/v1/webhooks/${endpoint}/test`, { method: 'POST', headers: auth(s) }));
    expect(test.status).toBe(202);
    // Each retry comes due on the store's clock once the attempt before it is recorded.
    const recorded = async (attempts: number) =>
      waitFor(async () => (await s.store.webhooks.deliveries(s.accountId, endpoint, 10))[0]?.attempts === attempts, `attempt ${attempts} recorded`);
    await recorded(1);
    s.clock.advance(5_000); // the first retry is due 5 s later
    await recorded(2);
    s.clock.advance(5 * 60_000); // then 5 min
    await waitFor(() => r.received.length === 3, 'the third attempt');
    expect(r.received.map((e) => e.status)).toEqual([500, 500, 200]);
    expect(new Set(r.received.map((e) => e.id)).size).toBe(1);
    expect(r.received.every((e) => e.verified && e.event.type === 'webhook.test')).toBe(true);
    await waitFor(async () => (await s.store.webhooks.deliveries(s.accountId, endpoint, 10))[0]?.status === 'delivered', 'delivered recorded');
    const [delivery] = await s.store.webhooks.deliveries(s.accountId, endpoint, 10);
    expect(delivery).toMatchObject({ attempts: 3, status: 'delivered', lastStatusCode: 200 });
  });

  it('410 Gone disables the endpoint', async () => {
    const s = await startService();
    const r = await receiver();
    const endpoint = await createEndpoint(s, r);
    r.script = [410];
    await fetch(`${s.url}/api/v1/webhooks/${endpoint}/test`, { method: 'POST', headers: auth(s) });
    await waitFor(async () => (await s.store.webhooks.get(s.accountId, endpoint))?.disabledAt != null, 'the endpoint disabled');
    const list = await get(s.url, '/api/v1/webhooks', { headers: auth(s) });
    expectConforms(doc, 'GET', '/api/v1/webhooks', list);
    expect(list.json.data[0]).toMatchObject({ id: endpoint, status: 'disabled' });
    expect(JSON.stringify(list.json)).not.toContain('whsec_');
  });

  it('a restart fails the queued images (not charged), and a receiver that was down gets every event after it', async () => {
    const s = await startService({ credits: 10 });
    const before = await s.store.credits.balance(s.accountId);
    const r = await receiver();
    await createEndpoint(s, r);
    await r.stop(); // down from now until after the restart
    const res = await submit(s, [
      { data: teddy, name: 'a.jpg' },
      { data: llama, name: 'b.jpg' },
      { data: book, name: 'c.jpg' },
    ]);
    expect(res.status).toBe(202);
    await s.stop(); // the image in progress ends; the queued ones fail
    const again = await startService({ dbPath: s.dbPath, clock: s.clock, key: s.key, accountId: s.accountId });
    await r.restart();
    // Time passes (a minute per poll), so whatever retry the outage scheduled comes due.
    await waitFor(
      () => {
        again.clock.advance(60_000);
        return r.delivered('batch.completed').length === 1 && r.delivered('image.processed').length === 3;
      },
      'every event after the restart',
      30_000,
    );
    const processed = r.delivered('image.processed');
    expect(processed).toHaveLength(3);
    expect(r.received.every((e) => e.verified)).toBe(true);
    const failed = processed.filter((e) => e.event.data.status === 'failed');
    expect(failed.length).toBeGreaterThanOrEqual(1);
    for (const e of failed) expect(e.event.data.error.code).toBe('internal_server_error');
    const succeeded = processed.length - failed.length;
    const batch = (await batchOf(again, res.json.id)).json;
    expect(batch.status).toBe('completed');
    const balance = await again.store.credits.balance(again.accountId);
    expect({ charged: balance.used - before.used, reserved: balance.reserved }).toEqual({ charged: succeeded, reserved: 0 });
    expect(r.delivered('batch.completed')[0]!.event.data).toMatchObject({ succeeded, failed: 3 - succeeded, credits_charged: succeeded });
  });
});

describe('batch refusals and cancellation', () => {
  it('a balance that cannot cover every image: 402 for the whole batch, nothing reserved', async () => {
    const s = await startService({ credits: 2 });
    const res = await submit(s, [
      { data: teddy, name: 'a.jpg' },
      { data: teddy, name: 'b.jpg' },
      { data: teddy, name: 'c.jpg' },
    ]);
    expectError(res, 402, 'payment_required');
    expectConforms(doc, 'POST', BATCHES, res);
    const balance = await s.store.credits.balance(s.accountId);
    expect({ reserved: balance.reserved, remaining: balance.remaining }).toEqual({ reserved: 0, remaining: 2 });
  });

  it('options are validated for the whole request; no image is 400 missing_image; more than 50 images is 400', async () => {
    const s = await startService({ credits: 5 });
    expectError(await submit(s, [{ data: teddy, name: 'a.jpg' }], { format: 'gif' }), 400, 'validation_error');
    expectError(await submit(s, [], { format: 'png' }), 400, 'missing_image');
    const tiny = Buffer.from([0xff, 0xd8, 0xff]);
    const many = Array.from({ length: 51 }, (_, i) => ({ data: tiny, name: `${i}.jpg` }));
    const body = expectError(await submit(s, many), 400, 'validation_error');
    expect(body.details).toMatchObject({ field: 'image_file', limit: 50 });
    expect((await s.store.credits.balance(s.accountId)).remaining).toBe(5);
    expect((await get(s.url, BATCHES, { headers: auth(s) })).json.data).toEqual([]);
  });

  it('a cancelled batch charges nothing for its queued images; its results and its id are gone', async () => {
    const s = await startService({ credits: 10 });
    const before = await s.store.credits.balance(s.accountId);
    const res = await submit(s, [
      { data: teddy, name: 'a.jpg' },
      { data: llama, name: 'b.jpg' },
      { data: book, name: 'c.jpg' },
    ]);
    expect(res.status).toBe(202);
    const notReady = await get(s.url, `${BATCHES}/${res.json.id}/images/${res.json.images[2].id}`, { headers: auth(s) });
    expectError(notReady, 409, 'result_not_ready');
    const del = await toResult(await fetch(`${s.url}${BATCHES}/${res.json.id}`, { method: 'DELETE', headers: auth(s) }));
    expect(del.status).toBe(204);
    expectConforms(doc, 'DELETE', `${BATCHES}/{batch_id}`, del);
    expectError(await batchOf(s, res.json.id), 404, 'not_found');
    await waitFor(async () => (await s.store.credits.balance(s.accountId)).reserved === 0, 'every reservation released');
    await waitFor(
      async () => {
        const ready = (await get(s.url, '/readyz')).json;
        return ready.queue === 0 && ready.batch_queue === 0;
      },
      'the image in progress to end',
      60_000,
    );
    const balance = await s.store.credits.balance(s.accountId);
    expect({ charged: balance.used - before.used, remaining: balance.remaining }).toEqual({ charged: 0, remaining: 10 });
  });

  it("another account's batch is 404", async () => {
    const s = await startService({ credits: 5 });
    const res = await submit(s, [{ data: Buffer.from('nope'), name: 'x.txt', type: 'text/plain' }]);
    expect(res.status).toBe(202);
    expect(res.json.status).toBe('completed'); // every image failed at submission
    const other = await s.store.accounts.create({ email: 'other@example.com' });
    const otherKey = (await s.store.keys.create(other.id)).key;
    expectError(await get(s.url, `${BATCHES}/${res.json.id}`, { headers: { authorization: `Bearer ${otherKey}` } }), 404, 'not_found');
    const del = await toResult(await fetch(`${s.url}${BATCHES}/${res.json.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${otherKey}` } }));
    expectError(del, 404, 'not_found');
    expectError(await get(s.url, BATCHES), 401, 'authentication_error');
  });

  it('a batch whose declared size passes the memory budget is refused with 503 before its body is read', async () => {
    const s = await startService({ credits: 5, batches: { memoryMb: 16 } });
    const res = await new Promise<{ status: number; body: string; retryAfter: string | undefined }>((resolve, reject) => {
      const req = request(`${s.url}${BATCHES}`, {
        method: 'POST',
        headers: { ...auth(s), 'content-type': 'multipart/form-data; boundary=x', 'content-length': String(17 * 1024 * 1024) },
      });
      req.on('response', (r) => {
        let body = '';
        r.on('data', (c) => {
          body += c;
        });
        r.on('end', () => resolve({ status: r.statusCode ?? 0, body, retryAfter: r.headers['retry-after'] as string | undefined }));
      });
      req.on('error', reject);
      req.flushHeaders(); // headers only: the answer must come without a byte of the body
    });
    expect(res.status).toBe(503);
    expect(JSON.parse(res.body).code).toBe('overloaded');
    expect(res.retryAfter).toBe('5');
    expect((await s.store.credits.balance(s.accountId)).remaining).toBe(5);
  });
});

/** Another account of the service, with its own key and balance. */
async function otherAccount(s: Service, email: string, balance = 10): Promise<{ accountId: number; key: string }> {
  const account = await s.store.accounts.create({ email });
  await setBalance(s.store, account.id, balance);
  return { accountId: account.id, key: (await s.store.keys.create(account.id)).key };
}

/**
 * A batch upload that declares `length` bytes and sends its headers only (an idle client), and
 * its answer when one comes (null: the connection ended without one).
 */
function idleBatchUpload(s: Service, key: string, length: number): Promise<{ status: number; json: any } | null> {
  return new Promise((resolve) => {
    const req = request(`${s.url}${BATCHES}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'multipart/form-data; boundary=idle', 'content-length': String(length) },
    });
    req.on('response', (r) => {
      let body = '';
      r.on('data', (c) => {
        body += c;
      });
      r.on('end', () => resolve({ status: r.statusCode ?? 0, json: JSON.parse(body || 'null') }));
    });
    req.on('error', () => resolve(null));
    req.flushHeaders();
  });
}

describe('fair to every account', () => {
  it("idle uploads hold at most their account's share of the batch memory, and only until the minimum upload rate ends them; another account's batch is accepted meanwhile", async () => {
    // The default budget (1 GiB) and share (25 %): 256 MiB an account.
    // A window longer than uWS holds a closing early answer while it waits for the body (5 s, docs/api.md).
    const s = await startService({ credits: 10, server: { bodyMinRate: { bytesPerSecond: 1024, windowMs: 8000 } } });
    const idleAccounts = [{ accountId: s.accountId, key: s.key }, await otherAccount(s, 'idle2@example.com'), await otherAccount(s, 'idle3@example.com')];
    const third = await otherAccount(s, 'third@example.com');
    const declared = 200 * 1024 * 1024;
    // Each idle account's first upload is admitted (it holds 200 MiB); its second does not fit its share: 429.
    const idle = idleAccounts.map((a) => idleBatchUpload(s, a.key, declared));
    await waitFor(() => s.server.inFlight() === idleAccounts.length, 'the idle uploads to be admitted');
    const seconds = await Promise.all(idleAccounts.map((a) => idleBatchUpload(s, a.key, declared)));
    for (const second of seconds) {
      expect(second?.status).toBe(429);
      expect(second?.json).toMatchObject({ code: 'rate_limit_exceeded', details: { batch_memory_limit_bytes: 256 * 1024 * 1024 } });
    }
    // Three accounts hold 600 MiB of 1 GiB: another account's 1-image batch still fits.
    const res = await submit({ ...s, key: third.key }, [{ data: teddy, name: 'teddy.jpg' }], { size: 'preview' });
    expect(res.status).toBe(202);
    // The idle uploads end at the first window that brought nothing: 408, nothing created or charged.
    for (const answer of await Promise.all(idle)) expect(answer).toMatchObject({ status: 408, json: { code: 'request_timeout' } });
    for (const a of idleAccounts) {
      expect(await s.store.batches.list(a.accountId, 10)).toEqual([]);
      expect((await s.store.credits.balance(a.accountId)).remaining).toBe(10);
    }
    // Their memory is given back: the same account's next upload of that size is admitted again.
    await waitFor(() => s.server.inFlight() === 0, 'the places to be free');
    const again = idleBatchUpload(s, s.key, declared);
    expect(await again).toMatchObject({ status: 408 });
    await waitCompleted({ ...s, key: third.key }, res.json.id);
  });

  it("kept results count in their account's share: past it its next batch is 429 until it deletes a batch, while another account's is accepted", async () => {
    // 16 MiB at 2 %: 335 544 bytes an account.
    const s = await startService({ credits: 10, batches: { memoryMb: 16, accountSharePercent: 2 } });
    const other = await otherAccount(s, 'other@example.com');
    const first = await submit(s, [{ data: book, name: 'book.png' }], { format: 'png' });
    expect(first.status).toBe(202);
    const done = await waitCompleted(s, first.json.id);
    const result = await get(s.url, `${BATCHES}/${first.json.id}/images/${done.images[0].id}`, { headers: auth(s) });
    expect(result.status).toBe(200);
    // The kept result and this upload together pass the share (checked, so the test cannot pass by accident).
    expect(result.body.length + book.length).toBeGreaterThan(335_544);
    expect(book.length).toBeLessThan(335_544 - 64 * 1024);
    const refused = await submit(s, [{ data: book, name: 'book.jpg' }]);
    expectError(refused, 429, 'rate_limit_exceeded');
    expect(refused.json.details).toEqual({ batch_memory_limit_bytes: 335_544 });
    expect(refused.headers.get('retry-after')).toBe('5');
    expect((await s.store.credits.balance(s.accountId)).reserved).toBe(0);
    expect((await submit({ ...s, key: other.key }, [{ data: book, name: 'book.jpg' }])).status).toBe(202);
    // DELETE gives the result's memory back.
    expect((await toResult(await fetch(`${s.url}${BATCHES}/${first.json.id}`, { method: 'DELETE', headers: auth(s) }))).status).toBe(204);
    expect((await submit(s, [{ data: book, name: 'book.jpg' }])).status).toBe(202);
  });
});

describe('a result is kept for the TTL from the moment its image ends', () => {
  it('images that queued past the submission time plus the TTL are charged with a fetchable result and an expires_at in the future', async () => {
    const s = await startService({ credits: 20, batches: { resultTtlSeconds: 3 } });
    const r = await receiver();
    await createEndpoint(s, r);
    // Synchronous work keeps the native core busy: the batch's images wait in the background lane.
    const busy = [postImage(s.url, s.key, { size: 'full' }, bigSwan), postImage(s.url, s.key, { size: 'full' }, bigSwan)];
    await waitFor(() => s.server.inFlight() === 2, 'the synchronous jobs to be admitted');
    const res = await submit(s, [
      { data: teddy, name: 'teddy.jpg' },
      { data: llama, name: 'llama.jpg' },
    ]);
    expect(res.status).toBe(202);
    const submittedExpiry = Date.parse(res.json.expires_at);
    // Nothing has ended yet; then more than the TTL passes before any image runs.
    expect((await batchOf(s, res.json.id)).json.images.every((i: any) => i.status === 'queued' || i.status === 'processing')).toBe(true);
    s.clock.advance(10_000);
    expect(s.clock().getTime()).toBeGreaterThan(submittedExpiry);
    for (const b of await Promise.all(busy)) expect(b.status).toBe(200);
    const batch = await waitCompleted(s, res.json.id);
    const now = s.clock().getTime();
    expect(batch.images.map((i: any) => i.status)).toEqual(['succeeded', 'succeeded']);
    for (const image of batch.images) {
      expect(Date.parse(image.expires_at)).toBeGreaterThan(now);
      const result = await get(s.url, `${BATCHES}/${res.json.id}/images/${image.id}`, { headers: auth(s) });
      expect(result.status).toBe(200);
    }
    expect(Date.parse(batch.expires_at)).toBeGreaterThan(now);
    expectConforms(doc, 'GET', `${BATCHES}/{batch_id}`, await batchOf(s, res.json.id));
    await waitFor(() => r.delivered('image.processed').length === 2, 'the image events', 30_000);
    for (const e of r.delivered('image.processed')) {
      expect(e.event.data).toMatchObject({ status: 'succeeded', credits_charged: 1 });
      expect(Date.parse(e.event.data.expires_at)).toBeGreaterThan(now);
    }
    // Then each result is kept the TTL from its own end, and no longer.
    s.clock.advance(3_000 + 1000);
    const after = (await batchOf(s, res.json.id)).json;
    expect(after.images.map((i: any) => i.status)).toEqual(['expired', 'expired']);
    expectError(await get(s.url, `${BATCHES}/${res.json.id}/images/${after.images[0].id}`, { headers: auth(s) }), 410, 'result_expired');
  });
});

describe('batch images have a minimum share of the native core', () => {
  it('under continuous /remove traffic (always one running), a batch image still ends while the traffic goes on', { timeout: 240_000 }, async () => {
    const s = await startService({ credits: 200 });
    // Its share is one place after every 4 /remove jobs: it ends after about a dozen requests sent.
    const cap = 30;
    let sent = 0;
    let stop = false;
    const statuses: number[] = [];
    // Three clients, each sending its next request as soon as it has its answer: with two places in
    // the core, a /remove job always runs, so a batch image waiting for a quiet moment would wait until the end.
    const client = async () => {
      while (!stop && sent < cap) {
        sent++;
        statuses.push((await postImage(s.url, s.key, { size: 'preview' }, teddy)).status);
      }
    };
    const clients = [client(), client(), client()];
    await waitFor(() => statuses.length >= 3, 'the synchronous traffic to flow');
    const res = await submit(s, [{ data: llama, name: 'llama.jpg' }], { size: 'preview' });
    expect(res.status).toBe(202);
    let status = '';
    await waitFor(
      async () => {
        status = (await batchOf(s, res.json.id)).json.status;
        return status === 'completed' || sent >= cap;
      },
      'the batch to complete or the traffic to end',
      200_000,
    );
    const sentWhenDone = sent;
    stop = true;
    await Promise.all(clients);
    expect(status).toBe('completed');
    expect(sentWhenDone, 'requests sent when the batch completed').toBeLessThan(cap);
    expect(statuses.every((st) => st === 200)).toBe(true);
    expect((await batchOf(s, res.json.id)).json.images[0].status).toBe('succeeded');
  });
});

describe('webhook endpoints', () => {
  it('URLs on loopback, private or plain http are refused without the opt-in; at most 5 endpoints', async () => {
    const s = await startService({ batches: { webhookAllowPrivate: false } });
    const post = (url: string) =>
      fetch(`${s.url}/api/v1/webhooks`, { method: 'POST', headers: { ...auth(s), 'content-type': 'application/json' }, body: JSON.stringify({ url }) }).then(
        toResult,
      );
    for (const url of [
      'https://127.0.0.1/hook',
      'http://hooks.example.com/x',
      'https://localhost/x',
      'https://169.254.169.254/latest',
      'https://[::1]/x',
      'https://10.1.2.3/x',
      'ftp://x.example.com/',
      'https://localhost./x',
      'https://[fec0::1]/x',
      'https://hooks.example.com/x\r\nX-Injected: 1',
      'https://hooks.example.com/x\u0000',
    ])
      expectError(await post(url), 400, 'validation_error');
    for (let i = 0; i < 5; i++) expect((await post(`https://hooks${i}.example.com/bgone`)).status).toBe(201);
    const sixth = await post('https://hooks6.example.com/bgone');
    expectError(sixth, 400, 'validation_error');
    expectConforms(doc, 'POST', '/api/v1/webhooks', sixth);
    expect((await get(s.url, '/api/v1/webhooks', { headers: auth(s) })).json.data).toHaveLength(5);
    expectError(
      await fetch(`${s.url}/api/v1/webhooks`, { method: 'POST', headers: { ...auth(s), 'content-type': 'application/json' }, body: '{"url": ' }).then(toResult),
      400,
      'validation_error',
    );
    const [first] = (await get(s.url, '/api/v1/webhooks', { headers: auth(s) })).json.data;
    expect((await fetch(`${s.url}/api/v1/webhooks/${first.id}`, { method: 'DELETE', headers: auth(s) })).status).toBe(204);
    expectError(await fetch(`${s.url}/api/v1/webhooks/${first.id}`, { method: 'DELETE', headers: auth(s) }).then(toResult), 404, 'not_found');
    expectError(await fetch(`${s.url}/api/v1/webhooks/wh_nope/test`, { method: 'POST', headers: auth(s) }).then(toResult), 404, 'not_found');
  });
});
