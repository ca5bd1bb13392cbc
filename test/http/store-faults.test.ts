/**
 * A failing database never ends the process: with faults injected into the real SQLite store
 * (test/helpers/failing-store.ts), each failure is answered with the contract's 500 (or 503 when the
 * database is unreachable), nothing is charged, no exception goes unhandled, and the next request
 * works once the fault is gone. Through HTTP, on a real server.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type RunningServer, startServer } from '../../src/server.js';
import { openStore, type Store, StoreError } from '../../src/store/index.js';
import { PHOTOS } from '../helpers/constants.js';
import { type FaultyStore, withFaults } from '../helpers/failing-store.js';
import { expectError, trackUncaught } from '../helpers/http-assert.js';
import { readPhoto } from '../helpers/paths.js';
import { blob, credits, get, postImage, setBalance, testServerOptions, toResult, waitFor } from '../helpers/server.js';

const teddy = readPhoto(PHOTOS.teddy);
const uncaught = trackUncaught();

let dir: string;
let real: Store;
let faulty: FaultyStore;
let server: RunningServer;
let url: string;
let key: string;
let accountId: number;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'bgone-faults-'));
  real = await openStore({ path: join(dir, 'db.sqlite'), rateLimits: { free: 100_000, pro: 100_000, ultra: 100_000, mega: 100_000 } });
  const account = await real.accounts.create({ email: 'faults@example.com' });
  accountId = account.id;
  key = (await real.keys.create(account.id)).key;
  await setBalance(real, accountId, 20);
  faulty = withFaults(real);
  server = await startServer({
    ...testServerOptions(faulty.store),
    batches: { resultTtlSeconds: 3600, memoryMb: 256, webhookAllowPrivate: true, webhookPollMs: 50 },
  });
  url = `http://127.0.0.1:${server.port}`;
});

afterAll(async () => {
  await server.close();
  await real.close();
  rmSync(dir, { recursive: true, force: true });
});

afterEach(async () => {
  faulty.clear();
  await uncaught.check();
});

const balance = () => credits({ store: real, accountId });

/** After a fault: the process answers and the next request succeeds and is charged exactly once. */
async function stillServes(): Promise<void> {
  const before = await balance();
  const ok = await postImage(url, key, { size: 'preview' }, teddy);
  expect(ok.status).toBe(200);
  expect(await balance()).toEqual({ used: before.used + 1, reserved: before.reserved, remaining: before.remaining - 1 });
}

describe('a failing store during /remove', () => {
  it('the charge fails: 500, not charged, the reservation released, the next request works', async () => {
    const before = await balance();
    faulty.fail('credits.commit');
    expectError(await postImage(url, key, { size: 'preview' }, teddy), 500, 'internal_server_error');
    await waitFor(async () => (await balance()).reserved === 0, 'the reservation released');
    expect(await balance()).toEqual(before);
    faulty.clear();
    await stillServes();
  });

  it('the release fails inside a failure path (an undecodable image): the answer is still the image error, nothing unhandled; the release is retried until it succeeds', async () => {
    const before = await balance();
    faulty.fail('credits.release');
    const truncated = teddy.subarray(0, 2000);
    const res = await postImage(url, key, {}, truncated);
    expectError(res, 422, 'invalid_image');
    expect((await balance()).used).toBe(before.used);
    // Still held while the store keeps failing, retried meanwhile...
    await waitFor(() => (faulty.calls.get('credits.release') ?? 0) >= 3, 'the release to be retried');
    expect(await balance()).toEqual({ ...before, reserved: before.reserved + 1, remaining: before.remaining - 1 });
    // ...and given back once it answers: the account is not left paying for a failed request.
    faulty.clear();
    await waitFor(async () => (await balance()).reserved === before.reserved, 'the retried release', 15_000);
    expect(await balance()).toEqual(before);
    await stillServes();
  });

  it('the reservation fails: 500 for a bug, 503 with Retry-After when the database is unreachable; nothing charged', async () => {
    const before = await balance();
    faulty.fail('credits.reserve');
    expectError(await postImage(url, key, {}, teddy), 500, 'internal_server_error');
    faulty.fail('credits.reserve', new StoreError('unavailable', 'database unreachable'));
    const unavailable = await postImage(url, key, {}, teddy);
    expectError(unavailable, 503, 'overloaded');
    expect(unavailable.headers.get('retry-after')).toBe('5');
    expect(await balance()).toEqual(before);
    faulty.clear();
    await stillServes();
  });

  it('authentication or the rate limit fails: 500 before the body is read; then it works again', async () => {
    faulty.fail('keys.authenticate');
    expectError(await postImage(url, key, {}, teddy), 500, 'internal_server_error');
    faulty.clear();
    faulty.fail('rateLimits.take');
    expectError(await postImage(url, key, {}, teddy), 500, 'internal_server_error');
    faulty.clear();
    await stillServes();
  });

  it('/readyz says the database does not answer while ping fails', async () => {
    faulty.fail('ping', new StoreError('unavailable', 'down'));
    const ready = await get(url, '/readyz');
    expect(ready.status).toBe(503);
    expect(ready.json.status).toBe('database_unreachable');
  });
});

describe('a failing store during batches and webhooks', () => {
  const submit = (images: Buffer[]) => {
    const form = new FormData();
    for (const [i, data] of images.entries()) form.append('image_file', blob(data, 'image/jpeg'), `${i}.jpg`);
    return fetch(`${url}/api/v1/batches`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: form }).then(toResult);
  };

  it('writing the batch fails: 500, nothing reserved', async () => {
    const before = await balance();
    faulty.fail('batches.create');
    expectError(await submit([teddy]), 500, 'internal_server_error');
    expect(await balance()).toEqual(before);
  });

  it('recording an image that ended fails: the process keeps serving; the image is left to the orphan sweep', async () => {
    const start = await balance();
    faulty.fail('batches.finish');
    const res = await submit([teddy]);
    expect(res.status).toBe(202);
    await waitFor(() => (faulty.calls.get('batches.finish') ?? 0) > 0, 'the runner to try recording the image', 60_000);
    faulty.clear();
    const batch = await get(url, `/api/v1/batches/${res.json.id}`, { headers: { authorization: `Bearer ${key}` } });
    expect(batch.status).toBe(200);
    expect(['queued', 'processing']).toContain(batch.json.images[0].status);
    // What the next start does: the image fails, its credit comes back, nothing is charged for it.
    const before = await balance();
    expect(before.reserved).toBe(start.reserved + 1);
    await stillServes();
  });

  it('claiming deliveries fails: the worker keeps polling and delivers once the database answers', async () => {
    faulty.fail('webhooks.claimDue', new StoreError('unavailable', 'down'));
    await waitFor(() => (faulty.calls.get('webhooks.claimDue') ?? 0) >= 3, 'a few failed polls');
    faulty.clear();
    const polls = faulty.calls.get('webhooks.claimDue');
    expect(polls).toBeGreaterThanOrEqual(3);
    await stillServes();
  });
});
