/**
 * Batches in the store, through its interface only, on both implementations: credits reserved at
 * submission all or none, exactly one charged per succeeded image and none per failed, cancelled
 * or lost one; the events written with each change (one outbox row per enabled endpoint); the
 * batch completed exactly once; and the images a lost process left behind failed by the next one
 * (SQLite: the store opened after it; PostgreSQL: any other node, once the owner's heartbeat is gone).
 *
 * The killed node is a child process loading the compiled store from dist/, which
 * test/global-setup.ts rebuilds from src/ before every run.
 */
import { spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  type Batch,
  type BatchImage,
  type CreateBatchInput,
  type ImageOutcome,
  type NewBatchImage,
  ORPHAN_ERROR,
  type Store,
  type WebhookDelivery,
} from '../../src/store/index.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { expectStoreError, STORE_KINDS, spend, useTempStores } from '../helpers/store.js';

const DIST_POSTGRES_STORE_URL = pathToFileURL(join(REPO_ROOT, 'dist', 'src', 'store', 'postgres', 'postgres-store.js')).href;
const HOUR = 60 * 60 * 1000;
const ID = /^[A-Za-z0-9_-]{24}$/;

function newImages(accepted: number, refused = 0): NewBatchImage[] {
  const images: NewBatchImage[] = Array.from({ length: accepted }, (_, i) => ({ filename: `photo-${i}.jpg`, requestId: `req_img${i}` }));
  for (let i = 0; i < refused; i++) {
    images.push({ filename: `bad-${i}.gif`, requestId: `req_bad${i}`, error: { code: 'unsupported_media_type', message: 'Not a JPG, PNG or WebP.' } });
  }
  return images;
}

function batchInput(store: Store, images: NewBatchImage[], keyId?: number): CreateBatchInput {
  return { keyId, requestId: 'req_batch', options: { size: 'preview', format: 'png' }, images, expiresAt: new Date(store.clock().getTime() + HOUR) };
}

async function createBatch(store: Store, accountId: number, images: NewBatchImage[]): Promise<Batch> {
  const r = await store.batches.create(accountId, batchInput(store, images));
  if (!r.ok) throw new Error(`create: ${JSON.stringify(r)}`);
  return r.batch;
}

/** The event data the API would build for an image (the store adds status, credits_charged and error). */
function apiData(image: BatchImage): Record<string, unknown> {
  return { batch_id: image.batchId, image_id: image.id, filename: image.filename, request_id: image.requestId };
}

function succeeded(image: BatchImage): ImageOutcome {
  return { status: 'succeeded', width: 40, height: 30, format: 'png', eventData: { ...apiData(image), width: 40, height: 30, format: 'png' } };
}

function failed(image: BatchImage): ImageOutcome {
  return { status: 'failed', error: { code: 'invalid_image', message: 'The image could not be decoded.' }, eventData: apiData(image) };
}

function bodyOf(delivery: WebhookDelivery): { type: string; timestamp: string; data: Record<string, unknown> } {
  return JSON.parse(delivery.body);
}

/** The account's outbox, oldest first. */
async function outbox(store: Store, accountId: number): Promise<WebhookDelivery[]> {
  return (await store.webhooks.recentDeliveries(accountId, 1000)).reverse();
}

async function endpoint(store: Store, accountId: number, n: number): Promise<string> {
  const created = await store.webhooks.create(accountId, { url: `https://hooks.example.com/${n}`, description: `hook ${n}`, maxEndpoints: 5 });
  return created!.endpoint.id;
}

describe.each(STORE_KINDS)('%s store: batches', (kind) => {
  const t = useTempStores(kind);

  describe('create', () => {
    it('stores the batch and its images, reserving one credit per accepted image', async () => {
      const store = await t.open();
      const a = await store.accounts.create({ email: 'a@example.com' });
      const { info } = await store.keys.create(a.id);
      const r = await store.batches.create(a.id, batchInput(store, newImages(2, 1), info.id));
      expect(r.ok).toBe(true);
      const batch = (r as { batch: Batch }).batch;
      expect(batch.id.startsWith('bat_') && ID.test(batch.id.slice(4))).toBe(true);
      expect(batch).toMatchObject({
        accountId: a.id,
        status: 'processing',
        createdAt: t.clock(),
        expiresAt: new Date(t.clock().getTime() + HOUR),
        options: { size: 'preview', format: 'png' },
      });
      expect(batch.images.map((i) => [i.position, i.filename, i.status, i.requestId, i.creditsCharged])).toEqual([
        [0, 'photo-0.jpg', 'queued', 'req_img0', 0],
        [1, 'photo-1.jpg', 'queued', 'req_img1', 0],
        [2, 'bad-0.gif', 'failed', 'req_bad0', 0],
      ]);
      for (const image of batch.images) {
        expect(image.id.startsWith('img_') && ID.test(image.id.slice(4))).toBe(true);
        expect(image.batchId).toBe(batch.id);
      }
      expect(batch.images[0]).toMatchObject({ width: null, height: null, format: null, error: null, finishedAt: null });
      expect(batch.images[2]).toMatchObject({ error: { code: 'unsupported_media_type', message: 'Not a JPG, PNG or WebP.' }, finishedAt: t.clock() });
      expect(await store.credits.balance(a.id)).toMatchObject({ used: 0, reserved: 2, remaining: 98 });
      expect(await store.batches.get(a.id, batch.id)).toEqual(batch);
      // The submission itself writes no event (refused images have none; only the 202 lists them).
      expect(await outbox(store, a.id)).toEqual([]);
    });

    it('reserves all or nothing: balance 2 refuses 3 accepted images, and takes 2 accepted + 1 refused', async () => {
      const store = await t.open();
      const a = await store.accounts.create({ email: 'a@example.com' });
      await spend(store, a.id, 98);
      const balance = await store.credits.balance(a.id);
      expect(balance).toMatchObject({ used: 98, reserved: 0, remaining: 2 });

      expect(await store.batches.create(a.id, batchInput(store, newImages(3)))).toEqual({
        ok: false,
        reason: 'payment_required',
        resetsAt: balance.cycleEnd,
      });
      expect(await store.credits.balance(a.id)).toEqual(balance);
      expect(await store.batches.list(a.id, 10)).toEqual([]);

      const ok = await store.batches.create(a.id, batchInput(store, newImages(2, 1)));
      expect(ok.ok).toBe(true);
      expect(await store.credits.balance(a.id)).toMatchObject({ used: 98, reserved: 2, remaining: 0 });
      // Nothing left: even one more image is refused, and a /remove request too.
      expect(await store.batches.create(a.id, batchInput(store, newImages(1)))).toMatchObject({ ok: false, reason: 'payment_required' });
      expect(await store.credits.reserve(a.id, { requestId: 'req_x' })).toMatchObject({ ok: false, reason: 'payment_required' });
    });

    it('refuses a disabled account and writes nothing; an unknown account is not_found', async () => {
      const store = await t.open();
      const a = await store.accounts.create({ email: 'a@example.com' });
      await store.accounts.disable(a.id);
      expect(await store.batches.create(a.id, batchInput(store, newImages(1)))).toEqual({ ok: false, reason: 'account_disabled' });
      expect(await store.credits.balance(a.id)).toMatchObject({ reserved: 0 });
      expect(await store.batches.list(a.id, 10)).toEqual([]);
      await expectStoreError(store.batches.create(a.id + 1000, batchInput(store, newImages(1))), 'not_found');
      await expectStoreError(store.batches.create(a.id, batchInput(store, [])), 'invalid_argument');
    });

    it('a batch whose every image was refused is completed at once, with its batch.completed event only', async () => {
      const store = await t.open();
      const a = await store.accounts.create({ email: 'a@example.com' });
      const hook = await endpoint(store, a.id, 1);
      const batch = await createBatch(store, a.id, newImages(0, 2));
      expect(batch.status).toBe('completed');
      expect(batch.images.map((i) => i.status)).toEqual(['failed', 'failed']);
      expect(await store.credits.balance(a.id)).toMatchObject({ used: 0, reserved: 0 });
      const events = await outbox(store, a.id);
      expect(events.map((e) => [e.type, e.endpointId])).toEqual([['batch.completed', hook]]);
      expect(bodyOf(events[0]!)).toEqual({
        type: 'batch.completed',
        timestamp: t.clock().toISOString(),
        data: { batch_id: batch.id, succeeded: 0, failed: 2, credits_charged: 0 },
      });
    });
  });

  describe('start and finish', () => {
    it('charges exactly one credit per succeeded image and none per failed one', async () => {
      const store = await t.open();
      const a = await store.accounts.create({ email: 'a@example.com' });
      const batch = await createBatch(store, a.id, newImages(3));
      const [i0, i1, i2] = batch.images as [BatchImage, BatchImage, BatchImage];

      expect(await store.batches.start(i0.id)).toBe(true);
      expect(await store.batches.start(i0.id)).toBe(false); // no longer queued
      expect((await store.batches.get(a.id, batch.id))!.images[0]!.status).toBe('processing');

      t.clock.advance(1000);
      const after0 = await store.batches.finish(i0.id, succeeded(i0));
      expect(after0!.status).toBe('processing');
      expect(after0!.images[0]).toMatchObject({
        status: 'succeeded',
        width: 40,
        height: 30,
        format: 'png',
        creditsCharged: 1,
        error: null,
        finishedAt: t.clock(),
      });
      expect(await store.credits.balance(a.id)).toMatchObject({ used: 1, reserved: 2, remaining: 97 });

      // A queued image can end without having started (e.g. it failed to decode in the queue).
      const after1 = await store.batches.finish(i1.id, failed(i1));
      expect(after1!.images[1]).toMatchObject({
        status: 'failed',
        creditsCharged: 0,
        error: { code: 'invalid_image', message: 'The image could not be decoded.' },
      });
      expect(await store.credits.balance(a.id)).toMatchObject({ used: 1, reserved: 1, remaining: 98 });

      // Ended images: a second finish changes nothing and charges nothing.
      expect(await store.batches.finish(i0.id, succeeded(i0))).toBeNull();
      expect(await store.batches.finish(i1.id, succeeded(i1))).toBeNull();
      expect(await store.batches.start(i1.id)).toBe(false);
      expect(await store.credits.balance(a.id)).toMatchObject({ used: 1, reserved: 1 });

      await store.batches.start(i2.id);
      const done = await store.batches.finish(i2.id, succeeded(i2));
      expect(done!.status).toBe('completed');
      expect(done!.images.map((i) => i.creditsCharged)).toEqual([1, 0, 1]);
      expect(await store.credits.balance(a.id)).toMatchObject({ used: 2, reserved: 0, remaining: 98 });
      expect((await store.usage.summary()).charged.total).toBe(2);
      expect(await store.batches.get(a.id, batch.id)).toEqual(done);
      expect(await store.batches.finish('img_unknown', succeeded(i2))).toBeNull();
    });

    it('writes image.processed per enabled endpoint and batch.completed once, with the right bodies', async () => {
      const store = await t.open();
      const a = await store.accounts.create({ email: 'a@example.com' });
      const b = await store.accounts.create({ email: 'b@example.com' });
      const [h1, h2, gone] = [await endpoint(store, a.id, 1), await endpoint(store, a.id, 2), await endpoint(store, a.id, 3)];
      await endpoint(store, b.id, 4); // another account's: gets nothing
      // The third endpoint answered 410 Gone: disabled, it gets no event any more.
      await store.webhooks.sendTest(a.id, gone);
      const [test] = await store.webhooks.claimDue(10, 60_000);
      await store.webhooks.recordAttempt(test!.id, { delivered: false, statusCode: 410, error: 'HTTP 410', nextAttemptAt: null, disableEndpoint: true });

      const batch = await createBatch(store, a.id, newImages(2));
      const [i0, i1] = batch.images as [BatchImage, BatchImage];
      t.clock.advance(5000);
      await store.batches.finish(i0.id, succeeded(i0));
      const firstAt = t.clock().toISOString();
      t.clock.advance(5000);
      await store.batches.finish(i1.id, failed(i1));
      const secondAt = t.clock().toISOString();

      const events = (await outbox(store, a.id)).filter((e) => e.type !== 'webhook.test');
      expect(events.map((e) => [e.type, e.endpointId])).toEqual([
        ['image.processed', h1],
        ['image.processed', h2],
        ['image.processed', h1],
        ['image.processed', h2],
        ['batch.completed', h1],
        ['batch.completed', h2],
      ]);
      for (const e of events) {
        expect(e.id.startsWith('msg_') && ID.test(e.id.slice(4))).toBe(true);
        expect(e).toMatchObject({ accountId: a.id, status: 'pending', attempts: 0, lastStatusCode: null, lastError: null, deliveredAt: null });
        expect(e.nextAttemptAt).toEqual(e.createdAt); // due at once
      }
      expect(new Set(events.map((e) => e.id)).size).toBe(events.length);
      // Each event: the same body for every endpoint.
      expect(events[0]!.body).toBe(events[1]!.body);
      expect(bodyOf(events[0]!)).toEqual({
        type: 'image.processed',
        timestamp: firstAt,
        data: { ...apiData(i0), width: 40, height: 30, format: 'png', status: 'succeeded', credits_charged: 1 },
      });
      expect(bodyOf(events[2]!)).toEqual({
        type: 'image.processed',
        timestamp: secondAt,
        data: { ...apiData(i1), status: 'failed', credits_charged: 0, error: { code: 'invalid_image', message: 'The image could not be decoded.' } },
      });
      expect(bodyOf(events[4]!)).toEqual({
        type: 'batch.completed',
        timestamp: secondAt,
        data: { batch_id: batch.id, succeeded: 1, failed: 1, credits_charged: 1 },
      });
      expect(await outbox(store, b.id)).toEqual([]);
    });

    it('images of one batch ending at once complete it exactly once, with the right counts', async () => {
      const store = await t.open();
      const other = kind === 'postgres' ? await t.open() : store; // a second node ending some of them
      const a = await store.accounts.create({ email: 'a@example.com' });
      await endpoint(store, a.id, 1);
      const batch = await createBatch(store, a.id, newImages(10, 2));
      const ends = batch.images
        .filter((i) => i.status === 'queued')
        .map((image, n) => (n % 2 === 0 ? store : other).batches.finish(image.id, n % 3 === 0 ? failed(image) : succeeded(image)));
      const results = await Promise.all(ends);
      expect(results.every((r) => r !== null)).toBe(true);
      expect(results.filter((r) => r!.status === 'completed').length).toBeGreaterThanOrEqual(1);
      const completed = (await outbox(store, a.id)).filter((e) => e.type === 'batch.completed');
      expect(completed).toHaveLength(1);
      // Succeeded: n = 1, 2, 4, 5, 7, 8; failed: n = 0, 3, 6, 9 and the 2 refused.
      expect(bodyOf(completed[0]!).data).toEqual({ batch_id: batch.id, succeeded: 6, failed: 6, credits_charged: 6 });
      expect(await store.credits.balance(a.id)).toMatchObject({ used: 6, reserved: 0 });
    });
  });

  describe('get, list and delete', () => {
    it('lists an account’s batches newest first; another account sees none of them', async () => {
      const store = await t.open();
      const a = await store.accounts.create({ email: 'a@example.com' });
      const b = await store.accounts.create({ email: 'b@example.com' });
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) ids.push((await createBatch(store, a.id, newImages(1))).id);
      expect((await store.batches.list(a.id, 10)).map((x) => x.id)).toEqual([...ids].reverse());
      expect((await store.batches.list(a.id, 2)).map((x) => x.id)).toEqual([ids[2], ids[1]]);
      expect((await store.batches.list(a.id, 10))[0]!.images).toHaveLength(1);
      expect(await store.batches.list(b.id, 10)).toEqual([]);
      expect(await store.batches.get(b.id, ids[0]!)).toBeNull();
      expect(await store.batches.get(a.id, 'bat_unknown')).toBeNull();
    });

    it('delete cancels the unended images, releases their credits and writes no event; a later finish returns null', async () => {
      const store = await t.open();
      const a = await store.accounts.create({ email: 'a@example.com' });
      const b = await store.accounts.create({ email: 'b@example.com' });
      await endpoint(store, a.id, 1);
      const batch = await createBatch(store, a.id, newImages(3));
      const [i0, i1, i2] = batch.images as [BatchImage, BatchImage, BatchImage];
      await store.batches.finish(i0.id, succeeded(i0));
      await store.batches.start(i1.id);
      const eventsBefore = await outbox(store, a.id);
      expect(await store.credits.balance(a.id)).toMatchObject({ used: 1, reserved: 2 });

      expect(await store.batches.delete(b.id, batch.id)).toBe(false); // not b's
      expect(await store.batches.delete(a.id, batch.id)).toBe(true);
      expect(await store.batches.get(a.id, batch.id)).toBeNull();
      expect(await store.batches.list(a.id, 10)).toEqual([]);
      expect(await store.credits.balance(a.id)).toMatchObject({ used: 1, reserved: 0, remaining: 99 });
      expect(await outbox(store, a.id)).toEqual(eventsBefore);

      // The processing image's work ends after the delete: nothing is charged, nothing is written.
      expect(await store.batches.finish(i1.id, succeeded(i1))).toBeNull();
      expect(await store.batches.start(i2.id)).toBe(false);
      expect(await store.batches.finish(i2.id, failed(i2))).toBeNull();
      expect(await store.credits.balance(a.id)).toMatchObject({ used: 1, reserved: 0, remaining: 99 });
      expect(await outbox(store, a.id)).toEqual(eventsBefore);
      expect(await store.batches.delete(a.id, batch.id)).toBe(false); // already deleted
    });
  });

  describe('images a lost process left behind (failOrphans)', () => {
    it('the next store fails them, releases their credits, and writes their events; its own are spared', async () => {
      const first = await t.open();
      const a = await first.accounts.create({ email: 'a@example.com' });
      const hook = await endpoint(first, a.id, 1);
      const batch = await createBatch(first, a.id, newImages(3));
      const [i0, i1, i2] = batch.images as [BatchImage, BatchImage, BatchImage];
      await first.batches.finish(i0.id, succeeded(i0));
      await first.batches.start(i1.id);
      await first.close(); // stops with i1 processing and i2 queued (SQLite: a restart; PostgreSQL: a node gone)

      const next = await t.open();
      const own = await createBatch(next, a.id, newImages(1));
      expect(await next.credits.balance(a.id)).toMatchObject({ used: 1, reserved: 3 });
      t.clock.advance(2000);
      expect(await next.batches.failOrphans(ORPHAN_ERROR)).toBe(2);
      expect(await next.batches.failOrphans(ORPHAN_ERROR)).toBe(0);

      const after = (await next.batches.get(a.id, batch.id))!;
      expect(after.status).toBe('completed');
      expect(after.images.map((i) => [i.status, i.creditsCharged, i.error])).toEqual([
        ['succeeded', 1, null],
        ['failed', 0, ORPHAN_ERROR],
        ['failed', 0, ORPHAN_ERROR],
      ]);
      expect(ORPHAN_ERROR).toEqual({ code: 'internal_server_error', message: 'The service restarted before this image was processed; it was not charged.' });
      // Their credits are back; the new store's own reservation is not touched.
      expect(await next.credits.balance(a.id)).toMatchObject({ used: 1, reserved: 1, remaining: 98 });
      expect((await next.batches.get(a.id, own.id))!.images[0]!.status).toBe('queued');
      // Lost images are not charged afterwards either.
      expect(await next.batches.finish(i2.id, succeeded(i2))).toBeNull();

      const events = (await outbox(next, a.id)).slice(1); // after i0's image.processed
      expect(events.map((e) => [e.type, e.endpointId])).toEqual([
        ['image.processed', hook],
        ['image.processed', hook],
        ['batch.completed', hook],
      ]);
      expect(bodyOf(events[0]!)).toEqual({
        type: 'image.processed',
        timestamp: t.clock().toISOString(),
        data: {
          batch_id: batch.id,
          image_id: i1.id,
          filename: i1.filename,
          status: 'failed',
          credits_charged: 0,
          error: ORPHAN_ERROR,
          request_id: i1.requestId,
        },
      });
      expect(bodyOf(events[2]!).data).toEqual({ batch_id: batch.id, succeeded: 1, failed: 2, credits_charged: 1 });
      // recoverAfterCrash afterwards finds nothing more of the batch's to release.
      await next.credits.recoverAfterCrash();
      expect(await next.credits.balance(a.id)).toMatchObject({ used: 1, reserved: 1 });
    });

    it.runIf(kind === 'postgres')('a live node’s images are never failed by another node, however long they take', async () => {
      const live = await t.open({ heartbeatLapseMs: 600 });
      const other = await t.open({ heartbeatLapseMs: 600, autoRecover: true });
      const a = await live.accounts.create({ email: 'a@example.com' });
      const batch = await createBatch(live, a.id, newImages(2));
      await sleep(1500); // 2.5 lapses, with the other node's automatic sweep running meanwhile
      expect(await other.batches.failOrphans(ORPHAN_ERROR)).toBe(0);
      expect((await live.batches.get(a.id, batch.id))!.images.map((i) => i.status)).toEqual(['queued', 'queued']);
      expect((await live.batches.finish(batch.images[0]!.id, succeeded(batch.images[0]!)))!.images[0]!.creditsCharged).toBe(1);
    });

    it.runIf(kind === 'postgres')('a killed node’s images are failed by another node once its heartbeat lapses', async () => {
      const lapseMs = 2000;
      const judge = await t.open({ heartbeatLapseMs: lapseMs });
      const a = await judge.accounts.create({ email: 'a@example.com' });
      await endpoint(judge, a.id, 1);
      const code = `
        const { openPostgresStore } = await import(${JSON.stringify(DIST_POSTGRES_STORE_URL)});
        const store = await openPostgresStore({ url: ${JSON.stringify(t.dbUrl)}, heartbeatLapseMs: ${lapseMs}, clock: () => new Date(${t.clock().getTime()}) });
        const images = [0, 1, 2].map((i) => ({ filename: 'p' + i + '.jpg', requestId: 'req_child' + i }));
        const r = await store.batches.create(${a.id}, { requestId: 'req_b', options: {}, images, expiresAt: new Date(${t.clock().getTime() + HOUR}) });
        await store.batches.start(r.batch.images[0].id);
        process.kill(process.pid, 'SIGKILL');
      `;
      const child = spawnSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8' });
      const killedAt = Date.now();
      expect(child.signal, child.stderr).toBe('SIGKILL');
      const [batch] = await judge.batches.list(a.id, 10);
      expect(batch!.images.map((i) => i.status)).toEqual(['processing', 'queued', 'queued']);
      expect(await judge.credits.balance(a.id)).toMatchObject({ reserved: 3 });
      // Its heartbeat is still fresh: nothing is failed yet.
      expect(await judge.batches.failOrphans(ORPHAN_ERROR)).toBe(0);

      let failedCount = 0;
      const deadline = Date.now() + lapseMs + 3000;
      while (failedCount < 3 && Date.now() < deadline) {
        failedCount += await judge.batches.failOrphans(ORPHAN_ERROR);
        if (failedCount < 3) await sleep(50);
      }
      expect(failedCount).toBe(3);
      expect(Date.now() - killedAt).toBeGreaterThan(lapseMs / 2); // the lapse was waited for
      expect(await judge.credits.balance(a.id)).toMatchObject({ used: 0, reserved: 0, remaining: 100 });
      expect((await judge.batches.get(a.id, batch!.id))!.status).toBe('completed');
      const types = (await outbox(judge, a.id)).map((e) => e.type);
      expect(types).toEqual(['image.processed', 'image.processed', 'image.processed', 'batch.completed']);
    });

    it.runIf(kind === 'postgres')(
      'a node paused past its lapse between another node’s sweep and recovery keeps its images’ credits and charges them',
      async () => {
        // The node is a child process, paused with SIGSTOP (a long GC pause, a frozen VM): its
        // heartbeat really stops, then it carries on with the queued images it holds in memory.
        const lapseMs = 1000;
        const judge = await t.open({ heartbeatLapseMs: lapseMs });
        const a = await judge.accounts.create({ email: 'a@example.com' });
        const code = `
        const { createInterface } = await import('node:readline');
        const { openPostgresStore } = await import(${JSON.stringify(DIST_POSTGRES_STORE_URL)});
        const store = await openPostgresStore({ url: ${JSON.stringify(t.dbUrl)}, heartbeatLapseMs: ${lapseMs}, autoRecover: false, clock: () => new Date(${t.clock().getTime()}) });
        const images = [0, 1].map((i) => ({ filename: 'p' + i + '.jpg', requestId: 'req_paused' + i }));
        const r = await store.batches.create(${a.id}, { requestId: 'req_b', options: {}, images, expiresAt: new Date(${t.clock().getTime() + HOUR}) });
        console.log(JSON.stringify(r.batch.images.map((i) => i.id)));
        const lines = createInterface({ input: process.stdin });
        for await (const line of lines) {
          let last;
          for (const id of r.batch.images.map((i) => i.id)) {
            await store.batches.start(id);
            last = await store.batches.finish(id, { status: 'succeeded', width: 4, height: 3, format: 'png', eventData: {} });
          }
          console.log(JSON.stringify(last.images.map((i) => [i.status, i.creditsCharged])));
          break;
        }
        await store.close();
      `;
        const child = spawn(process.execPath, ['--input-type=module', '-e', code], { stdio: ['pipe', 'pipe', 'inherit'] });
        t.closeAfter({ close: () => child.exitCode === null && child.signalCode === null && child.kill('SIGKILL') });
        const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
        const nextLine = async () => JSON.parse(((await lines.next()).value as string | undefined) ?? 'null');
        expect(await nextLine()).toHaveLength(2);
        expect(await judge.credits.balance(a.id)).toMatchObject({ used: 0, reserved: 2 });

        // The other node's tick: its orphan sweep finds the node alive...
        expect(await judge.batches.failOrphans(ORPHAN_ERROR)).toBe(0);
        // ...then the node's heartbeat lapses before the same tick's recovery runs.
        child.kill('SIGSTOP');
        await sleep(lapseMs * 2.5);
        expect(await judge.credits.recoverAfterCrash()).toBe(0);
        expect(await judge.credits.balance(a.id)).toMatchObject({ used: 0, reserved: 2 });

        // The node resumes and processes its queued images: each is charged its credit.
        child.kill('SIGCONT');
        child.stdin!.write('go\n');
        expect(await nextLine()).toEqual([
          ['succeeded', 1],
          ['succeeded', 1],
        ]);
        expect(await judge.credits.balance(a.id)).toMatchObject({ used: 2, reserved: 0, remaining: 98 });
      },
    );

    it.runIf(kind === 'postgres')('a running node fails a dead node’s images by itself (heartbeat tick)', async () => {
      const dead = await t.open({ heartbeatLapseMs: 600 });
      const a = await dead.accounts.create({ email: 'a@example.com' });
      const batch = await createBatch(dead, a.id, newImages(2));
      await dead.close(); // a stopped node: its row is gone, its images left unended
      const survivor = await t.open({ heartbeatLapseMs: 600, autoRecover: true });
      const deadline = Date.now() + 3000;
      while ((await survivor.batches.get(a.id, batch.id))!.status !== 'completed' && Date.now() < deadline) await sleep(50);
      const after = (await survivor.batches.get(a.id, batch.id))!;
      expect(after.images.map((i) => [i.status, i.error?.code])).toEqual([
        ['failed', 'internal_server_error'],
        ['failed', 'internal_server_error'],
      ]);
      expect(await survivor.credits.balance(a.id)).toMatchObject({ used: 0, reserved: 0 });
    });
  });
});
