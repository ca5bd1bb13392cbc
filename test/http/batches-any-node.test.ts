/**
 * Batches on any node: three `bgone serve` processes on one PostgreSQL database with a cluster
 * secret, reached with no sticky routing. A batch submitted to one node is read, fetched and
 * deleted through the other two; its images are spread over the nodes. A node with another secret
 * refuses to start. Node 0's peers reach it through a TCP proxy: while it is cut, their claims of
 * node 0's images cannot be handed off, and those images go back to the queue and complete, each
 * charged once. When the node holding the queued images is killed (SIGKILL) mid-batch, the rest
 * complete, the lost ones end failed and uncharged, results it held answer 410, and the webhook
 * events say exactly that. Last, the two nodes left rotate their secret one restart at a time.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServeProcess } from '../helpers/cli-process.js';
import { PHOTOS } from '../helpers/constants.js';
import { NodesOnOneDatabase } from '../helpers/nodes-on-one-database.js';
import { readPhoto } from '../helpers/paths.js';
import { blob, get, type HttpResult, toResult, waitFor } from '../helpers/server.js';
import { TcpProxy } from '../helpers/tcp-proxy.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';

const BATCHES = '/api/v1/batches';
const SECRET = 'test-cluster-secret-0123456789abcdef0123456789';
/** The secret of the rotation, and another cluster's. */
const NEW_SECRET = 'test-cluster-secret-rotated-9876543210fedcba98';
const OTHER_SECRET = 'test-cluster-secret-another-cluster-0123456789';
const photos = [PHOTOS.teddy, PHOTOS.llama, PHOTOS.book, PHOTOS.swan].map((name) => ({ name, data: readPhoto(name) }));

let cluster: NodesOnOneDatabase;
let receiver: WebhookReceiver;
/** Between node 0's peers and node 0 (its BGONE_INTERNAL_URL). */
let proxy: TcpProxy;
const internalUrl = (node: number) => (node === 0 ? `http://127.0.0.1:${proxy.port}` : cluster.urls[node]!);
/** What every node here is started with, beside what nodes-on-one-database.ts sets. */
let settings: Record<string, string>;

const auth = (key: string) => ({ authorization: `Bearer ${key}` });

async function submit(url: string, key: string, count: number): Promise<HttpResult> {
  const form = new FormData();
  for (let i = 0; i < count; i++) {
    const photo = photos[i % photos.length]!;
    form.append('image_file', blob(photo.data, 'image/jpeg'), `${i}-${photo.name}`);
  }
  return toResult(await fetch(`${url}${BATCHES}`, { method: 'POST', headers: auth(key), body: form }));
}

async function createEndpoint(url: string, key: string): Promise<void> {
  const res = await toResult(
    await fetch(`${url}/api/v1/webhooks`, {
      method: 'POST',
      headers: { ...auth(key), 'content-type': 'application/json' },
      body: JSON.stringify({ url: receiver.url, description: 'several nodes' }),
    }),
  );
  expect(res.status).toBe(201);
  receiver.secret = res.json.secret;
}

async function waitCompleted(url: string, key: string, id: string): Promise<any> {
  let last: any;
  await waitFor(
    async () => {
      last = (await get(url, `${BATCHES}/${id}`, { headers: auth(key) })).json;
      return last.status === 'completed';
    },
    `batch ${id} to complete`,
    180_000,
  );
  return last;
}

/** Which node (index in `nodes`) holds each image of a batch now, read from the database as an operator would. */
async function holders(batchId: string): Promise<Map<string, number | undefined>> {
  const client = new pg.Client({ connectionString: cluster.database.url });
  await client.connect();
  try {
    const { rows } = await client.query<{ id: string; url: string | null }>(
      `SELECT i.id, n.internal_url AS url FROM batch_images i JOIN batches b ON b.id = i.batch_id
       LEFT JOIN nodes n ON n.id = coalesce(i.holder, b.owner) WHERE i.batch_id = $1`,
      [batchId],
    );
    const urls = cluster.urls.map((_, node) => internalUrl(node));
    return new Map(rows.map((r) => [r.id, r.url === null ? undefined : urls.indexOf(r.url)]));
  } finally {
    await client.end();
  }
}

beforeAll(async () => {
  cluster = await NodesOnOneDatabase.open('any-node');
  receiver = await startWebhookReceiver();
  settings = {
    BGONE_CLUSTER_SECRET: SECRET,
    BGONE_WEBHOOK_ALLOW_PRIVATE: 'true',
    BGONE_INFERENCE_THREADS: '1',
    BGONE_LOG_LEVEL: 'info',
    // The status is polled often: the per-minute limit is not what this file tests.
    BGONE_RATE_LIMIT_PRO: '100000',
    BGONE_ACCOUNT_IN_FLIGHT: '1000',
  };
  // Node 0's port is known once it listens: the proxy forwards there from then on.
  proxy = await TcpProxy.start('127.0.0.1', 1);
  await cluster.start([{ ...settings, BGONE_INTERNAL_URL: `http://127.0.0.1:${proxy.port}` }, settings, settings]);
  proxy.forwardTo(Number(new URL(cluster.urls[0]!).port));
}, 300_000);

afterAll(async () => {
  await cluster?.close();
  await receiver?.stop();
  await proxy?.close();
});

/** Starts a node with `env` that is expected to refuse to start: its exit, or 'listening' if it did not refuse. */
async function refusedStart(env: Record<string, string>): Promise<{ outcome: 'exited' | 'listening'; code: number | null; stderr: string }> {
  const node = new ServeProcess(cluster.dir, cluster.nodeEnv(env));
  const outcome = await node.port().then(
    () => 'listening' as const,
    () => 'exited' as const,
  );
  if (outcome === 'listening') node.child.kill('SIGKILL');
  const exit = await node.exited;
  return { outcome, code: exit.code, stderr: node.stderr };
}

/** The batch ended with every image succeeded, each charged once, and its events say so. */
async function expectAllSucceeded(url: string, key: string, accountId: number, batchId: string, count: number, usedBefore = 0): Promise<any> {
  const done = await waitCompleted(url, key, batchId);
  expect(
    done.images.map((i: any) => [i.status, i.credits_charged, i.error?.code]),
    JSON.stringify(done.images),
  ).toEqual(Array(count).fill(['succeeded', 1, undefined]));
  await waitFor(async () => (await cluster.store.credits.balance(accountId)).reserved === 0, 'reservations settled', 30_000);
  expect((await cluster.store.credits.balance(accountId)).used).toBe(usedBefore + count);
  await waitFor(() => receiver.delivered('batch.completed').some((e) => e.event.data.batch_id === batchId), 'batch.completed', 30_000);
  const processed = receiver.delivered('image.processed').filter((e) => e.event.data.batch_id === batchId);
  expect(new Set(processed.map((e) => e.event.data.image_id)).size).toBe(count);
  expect(processed.every((e) => e.event.data.status === 'succeeded' && e.event.data.credits_charged === 1)).toBe(true);
  return done;
}

describe('a batch on three nodes without sticky routing', () => {
  it('submitted to one node: its status, every result and its deletion through the other two, credits exact, work spread', async () => {
    const { id: accountId, key } = await cluster.account('spread@example.com', 'pro');
    await createEndpoint(cluster.urls[0]!, key);
    const submitted = await submit(cluster.urls[0]!, key, 6);
    expect(submitted.status).toBe(202);
    const batchId: string = submitted.json.id;
    const done = await waitCompleted(cluster.urls[1]!, key, batchId);
    expect(done.images.map((i: any) => i.status)).toEqual(Array(6).fill('succeeded'));

    // Every result through node 1 and node 2: the same bytes from both, wherever they are held.
    const held = await holders(batchId);
    for (const image of done.images) {
      const [viaB, viaC] = await Promise.all(
        [cluster.urls[1]!, cluster.urls[2]!].map(async (url) => {
          const res = await fetch(`${url}${BATCHES}/${batchId}/images/${image.id}`, { headers: auth(key) });
          return {
            status: res.status,
            type: res.headers.get('content-type'),
            width: res.headers.get('x-image-width'),
            body: Buffer.from(await res.arrayBuffer()),
          };
        }),
      );
      expect(viaB.status, `image ${image.id} through node 1`).toBe(200);
      expect(viaC.status, `image ${image.id} through node 2`).toBe(200);
      expect(viaB.type).toBe('image/png');
      expect(viaB.width).toBe(String(image.width));
      expect(viaB.body.subarray(1, 4).toString()).toBe('PNG');
      expect(viaC.body.equals(viaB.body)).toBe(true);
      expect(held.get(image.id)).toBeGreaterThanOrEqual(0);
    }
    // Idle nodes took queued images: not every result is on the node that accepted the batch.
    expect(new Set(held.values()).size, `holders: ${JSON.stringify([...held])}`).toBeGreaterThan(1);

    // Credits: one per image, from whichever node ran it.
    const balance = await cluster.store.credits.balance(accountId);
    expect(balance.used).toBe(6);
    expect(balance.reserved).toBe(0);

    // The internal route: an unknown path with the account's API key, or a wrong secret.
    const someImage = done.images[0].id;
    const withKey = await get(cluster.urls[1]!, `/internal/v1/images/${someImage}/result`, { headers: auth(key) });
    expect(withKey.status).toBe(404);
    const wrong = await get(cluster.urls[1]!, `/internal/v1/images/${someImage}/result`, { headers: { 'x-bgone-cluster-secret': `${SECRET}x` } });
    expect(wrong.status).toBe(404);

    // Deleted through node 2: gone on every node, results included.
    const deleted = await fetch(`${cluster.urls[2]}${BATCHES}/${batchId}`, { method: 'DELETE', headers: auth(key) });
    expect(deleted.status).toBe(204);
    for (const url of cluster.urls) expect((await get(url, `${BATCHES}/${batchId}`, { headers: auth(key) })).status).toBe(404);
    for (const [imageId, node] of held) {
      const direct = await get(cluster.urls[node!]!, `/internal/v1/images/${imageId}/result`, { headers: { 'x-bgone-cluster-secret': SECRET } });
      expect(direct.status, `the result of ${imageId} is dropped on node ${node}`).toBe(404);
    }

    // Events: six image.processed, each charged once, and one batch.completed.
    await waitFor(() => receiver.delivered('batch.completed').some((e) => e.event.data.batch_id === batchId), 'batch.completed', 30_000);
    const processed = receiver.delivered('image.processed').filter((e) => e.event.data.batch_id === batchId);
    expect(processed.every((e) => e.verified)).toBe(true);
    expect(new Set(processed.map((e) => e.event.data.image_id)).size).toBe(6);
    expect(processed.map((e) => e.event.data.credits_charged)).toEqual(Array(processed.length).fill(1));
    const completed = receiver.delivered('batch.completed').filter((e) => e.event.data.batch_id === batchId);
    expect(new Set(completed.map((e) => e.id)).size).toBe(1);
    expect(completed[0]!.event.data).toMatchObject({ succeeded: 6, failed: 0, credits_charged: 6 });
  }, 300_000);

  it('a node started without the cluster secret beside nodes that have it refuses to start, with a message', async () => {
    const { BGONE_CLUSTER_SECRET: _, ...withoutSecret } = settings;
    const lone = new ServeProcess(cluster.dir, cluster.nodeEnv(withoutSecret));
    const exit = await lone.exited;
    expect(exit.code).toBe(1);
    expect(lone.stderr).toMatch(/share batch work with BGONE_CLUSTER_SECRET/);
    expect(lone.stderr).not.toContain(SECRET);
  }, 300_000);

  it('a node with another cluster secret refuses to start, with a message, and the batch running meanwhile loses no image', async () => {
    const { id: accountId, key } = await cluster.account('other-secret@example.com', 'pro');
    await createEndpoint(cluster.urls[1]!, key);
    const submitted = await submit(cluster.urls[1]!, key, 4);
    expect(submitted.status).toBe(202);
    const odd = await refusedStart({ ...settings, BGONE_CLUSTER_SECRET: OTHER_SECRET });
    expect(odd.outcome, odd.stderr).toBe('exited');
    expect(odd.code).toBe(1);
    expect(odd.stderr).toMatch(/shares batch work with another BGONE_CLUSTER_SECRET/);
    expect(odd.stderr).not.toContain(SECRET);
    expect(odd.stderr).not.toContain(OTHER_SECRET);
    await expectAllSucceeded(cluster.urls[1]!, key, accountId, submitted.json.id, 4);
  }, 300_000);

  it('hand-offs that fail (the holder cannot be reached) put the images back in the queue: all complete, each charged once', async () => {
    const { id: accountId, key } = await cluster.account('handoff@example.com', 'pro');
    await createEndpoint(cluster.urls[0]!, key);
    const failedHandOffs = () =>
      [1, 2].reduce(
        (n, node) => n + cluster.nodes[node]!.logs().filter((l) => String(l.msg).startsWith('batch: handing off a claimed image failed')).length,
        0,
      );
    const before = failedHandOffs();
    proxy.cut();
    try {
      const submitted = await submit(cluster.urls[0]!, key, 4);
      expect(submitted.status).toBe(202);
      // Node 0 runs its own images meanwhile; the idle nodes claim the others and cannot take them.
      let view: any;
      await waitFor(
        async () => {
          view = (await get(cluster.urls[1]!, `${BATCHES}/${submitted.json.id}`, { headers: auth(key) })).json;
          return view.images.filter((i: any) => i.status !== 'queued' && i.status !== 'processing').length >= 2;
        },
        'two images to end',
        120_000,
      );
      expect(view.images.filter((i: any) => i.status === 'failed')).toEqual([]);
      expect(failedHandOffs()).toBeGreaterThan(before);
      proxy.restore();
      await expectAllSucceeded(cluster.urls[2]!, key, accountId, submitted.json.id, 4);
    } finally {
      proxy.restore();
    }
  }, 300_000);

  it('kill -9 of the node holding the queued images mid-batch: the rest complete, the lost ones fail uncharged, events match', async () => {
    const { id: accountId, key } = await cluster.account('killed@example.com', 'pro');
    await createEndpoint(cluster.urls[1]!, key);
    const count = 16;
    const submitted = await submit(cluster.urls[0]!, key, count);
    expect(submitted.status).toBe(202);
    const batchId: string = submitted.json.id;
    // Mid-batch: some images ended, most still queued on node 0.
    await waitFor(
      async () => {
        const view = (await get(cluster.urls[1]!, `${BATCHES}/${batchId}`, { headers: auth(key) })).json;
        return view.images.filter((i: any) => i.status === 'succeeded').length >= 2;
      },
      'two images to succeed',
      180_000,
    );
    const heldBefore = await holders(batchId);
    cluster.nodes[0]!.child.kill('SIGKILL');
    await cluster.nodes[0]!.exited;

    const done = await waitCompleted(cluster.urls[1]!, key, batchId);
    const succeeded = done.images.filter((i: any) => i.status === 'succeeded');
    const failed = done.images.filter((i: any) => i.status === 'failed');
    expect(succeeded.length + failed.length).toBe(count);
    expect(failed.length, 'images queued on the killed node').toBeGreaterThan(0);
    for (const image of failed) {
      expect(image.error.code).toBe('internal_server_error');
      expect(image.credits_charged).toBe(0);
    }
    for (const image of succeeded) expect(image.credits_charged).toBe(1);

    // Results: those the killed node held answer 410, the others are fetched from their node.
    const heldAfter = await holders(batchId);
    for (const image of succeeded) {
      const res = await fetch(`${cluster.urls[2]}${BATCHES}/${batchId}/images/${image.id}`, { headers: auth(key) });
      await res.arrayBuffer();
      const holder = heldAfter.get(image.id) ?? heldBefore.get(image.id);
      if (holder === 0 || holder === undefined) {
        expect(res.status, `${image.id} was held by the killed node`).toBe(410);
      } else expect(res.status, `${image.id} is held by node ${holder}`).toBe(200);
    }

    // Credits: exactly the successes, nothing left reserved once the dead node's heartbeat lapsed.
    await waitFor(async () => (await cluster.store.credits.balance(accountId)).reserved === 0, 'reservations released', 30_000);
    expect((await cluster.store.credits.balance(accountId)).used).toBe(succeeded.length);

    // Events: one image.processed per image, saying how it ended, and one batch.completed.
    await waitFor(() => receiver.delivered('batch.completed').some((e) => e.event.data.batch_id === batchId), 'batch.completed', 30_000);
    const processed = receiver.delivered('image.processed').filter((e) => e.event.data.batch_id === batchId);
    const byImage = new Map(processed.map((e) => [e.event.data.image_id as string, e.event.data]));
    expect(byImage.size).toBe(count);
    for (const image of done.images) {
      const data = byImage.get(image.id)!;
      expect(data.status).toBe(image.status);
      expect(data.credits_charged).toBe(image.credits_charged);
      if (image.status === 'failed') expect(data.error.code).toBe('internal_server_error');
    }
    const completed = receiver.delivered('batch.completed').filter((e) => e.event.data.batch_id === batchId);
    expect(new Set(completed.map((e) => e.id)).size).toBe(1);
    expect(completed[0]!.event.data).toMatchObject({ succeeded: succeeded.length, failed: failed.length, credits_charged: succeeded.length });
  }, 300_000);

  it('the secret rotated one restart at a time: every step starts, shares the work and charges once; the old secret is then refused', async () => {
    const { id: accountId, key } = await cluster.account('rotation@example.com', 'pro');
    await createEndpoint(cluster.urls[1]!, key);
    // Nodes 1 and 2 are left (node 0 was killed above), both on SECRET. Node 2 first takes the new
    // secret and keeps the old one beside it.
    await cluster.restart(2, { ...settings, BGONE_CLUSTER_SECRET: NEW_SECRET, BGONE_CLUSTER_SECRET_PREVIOUS: SECRET });
    const first = await submit(cluster.urls[1]!, key, 4);
    expect(first.status).toBe(202);
    await expectAllSucceeded(cluster.urls[2]!, key, accountId, first.json.id, 4);
    const held = await holders(first.json.id);
    expect(new Set(held.values()), `holders: ${JSON.stringify([...held])}`).toEqual(new Set([1, 2]));
    for (const imageId of held.keys()) {
      const res = await fetch(`${cluster.urls[2]}${BATCHES}/${first.json.id}/images/${imageId}`, { headers: auth(key) });
      await res.arrayBuffer();
      expect(res.status, `${imageId} through node 2`).toBe(200);
    }
    // Then node 1 takes the new secret alone (node 2 still accepts it), and node 2 drops the old one.
    await cluster.restart(1, { ...settings, BGONE_CLUSTER_SECRET: NEW_SECRET });
    await cluster.restart(2, { ...settings, BGONE_CLUSTER_SECRET: NEW_SECRET });
    const second = await submit(cluster.urls[2]!, key, 4);
    expect(second.status).toBe(202);
    await expectAllSucceeded(cluster.urls[1]!, key, accountId, second.json.id, 4, 4);
    expect(new Set((await holders(second.json.id)).values())).toEqual(new Set([1, 2]));
    // The old secret is retired: a node still on it refuses to start.
    const stale = await refusedStart(settings);
    expect(stale.outcome, stale.stderr).toBe('exited');
    expect(stale.stderr).toMatch(/another BGONE_CLUSTER_SECRET/);
  }, 300_000);
});
