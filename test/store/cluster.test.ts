/**
 * Which node holds what, on PostgreSQL with several store instances (nodes) on one
 * database: idle nodes claim queued images of their peers, each image exactly once, the node that
 * accepted the batch can no longer start a claimed image, a success moves the result's holder to
 * the node that ran it, and the orphan sweep fails what died with its node (the images queued on a
 * dead holder, the image a dead runner was processing) and nothing else. SQLite has no cluster.
 */
import { describe, expect, it } from 'vitest';
import { type Batch, ClusterSecretMismatch, type ImageOutcome, ORPHAN_ERROR, type Store } from '../../src/store/index.js';
import { useTempStores } from '../helpers/store.js';

const HOUR = 60 * 60 * 1000;
/** What every node here publishes of its cluster secret (any strings: the store only compares them). */
const DIGESTS = ['digest-of-the-secret'];

async function batchOf(store: Store, accountId: number, count: number): Promise<Batch> {
  const images = Array.from({ length: count }, (_, i) => ({ filename: `p${i}.jpg`, requestId: `req_img${i}` }));
  const r = await store.batches.create(accountId, { requestId: 'req_b', options: {}, images, expiresAt: new Date(store.clock().getTime() + HOUR) });
  if (!r.ok) throw new Error(JSON.stringify(r));
  return r.batch;
}

/** Two announced nodes on one database; the owner accepts a 3-image batch and node b claims one of its images. */
async function claimedBatch(t: ReturnType<typeof useTempStores>) {
  const owner = await t.open();
  const b = await t.open();
  await owner.cluster!.announce('http://owner.test', DIGESTS);
  await b.cluster!.announce('http://b.test', DIGESTS);
  const a = await owner.accounts.create({ email: 'a@example.com' });
  const batch = await batchOf(owner, a.id, 3);
  const claim = (await b.cluster!.claimQueued())!;
  return { owner, b, a, batch, claim };
}

function success(imageId: string, batchId: string): ImageOutcome {
  return { status: 'succeeded', width: 4, height: 3, format: 'png', eventData: { batch_id: batchId, image_id: imageId } };
}

describe('sqlite store', () => {
  const t = useTempStores('sqlite');
  it('has no cluster: one node does all the batch work', async () => {
    expect((await t.open()).cluster).toBeUndefined();
  });
});

describe('postgres store: batch work shared by several nodes', () => {
  const t = useTempStores('postgres');

  it('parallel claims from two idle nodes take each queued image of a live peer once; the owner can no longer start them; a success moves the holder', async () => {
    const owner = await t.open();
    const b = await t.open();
    const c = await t.open();
    await owner.cluster!.announce('http://owner.test', DIGESTS);
    await b.cluster!.announce('http://b.test', DIGESTS);
    await c.cluster!.announce('http://c.test', DIGESTS);
    const a = await owner.accounts.create({ email: 'a@example.com' });
    const batch = await batchOf(owner, a.id, 6);

    const claims = await Promise.all([b, c, b, c, b, c, b, c].map((node) => node.cluster!.claimQueued()));
    const got = claims.filter((claim) => claim !== null);
    expect(got).toHaveLength(6);
    expect(new Set(got.map((claim) => claim.imageId)).size).toBe(6);
    for (const claim of got) {
      expect(claim).toMatchObject({ batchId: batch.id, accountId: a.id, holder: { nodeId: owner.cluster!.nodeId, url: 'http://owner.test' } });
      expect(await owner.batches.start(claim.imageId)).toBe(false);
    }
    expect(await owner.cluster!.claimQueued()).toBeNull();
    expect((await owner.batches.get(a.id, batch.id))!.images.map((i) => i.status)).toEqual(Array(6).fill('processing'));

    // The node that ran it holds the result, charged once.
    const first = got[0]!;
    const runner = claims.indexOf(first) % 2 === 0 ? b : c;
    expect(await runner.batches.finish(first.imageId, success(first.imageId, batch.id))).not.toBeNull();
    expect(await owner.cluster!.holderOf(first.imageId)).toEqual({ nodeId: runner.cluster!.nodeId, url: runner === b ? 'http://b.test' : 'http://c.test' });
    expect(await owner.credits.balance(a.id)).toMatchObject({ used: 1, reserved: 5 });
    expect((await b.cluster!.peers()).map((p) => p.url).sort()).toEqual(['http://c.test', 'http://owner.test']);
  });

  it('a node that published no address shares nothing: its images are not claimed and no holder is named', async () => {
    const owner = await t.open();
    const b = await t.open();
    await b.cluster!.announce('http://b.test', DIGESTS);
    const a = await owner.accounts.create({ email: 'a@example.com' });
    const batch = await batchOf(owner, a.id, 2);
    expect(await b.cluster!.claimQueued()).toBeNull();
    expect(await b.cluster!.holderOf(batch.images[0]!.id)).toBeNull();
    expect(await b.cluster!.peers()).toEqual([]);
  });

  it('a dead owner: its queued images fail uncharged, the image a live peer runs completes and is charged once', async () => {
    const { owner, b, a, batch, claim } = await claimedBatch(t);
    await owner.close(); // its row goes: dead at once, its bytes with it

    expect(await b.batches.failOrphans(ORPHAN_ERROR)).toBe(2);
    expect(await b.credits.recoverAfterCrash()).toBe(0); // the running image keeps its credit
    expect(await b.batches.finish(claim.imageId, success(claim.imageId, batch.id))).not.toBeNull();
    const after = (await b.batches.get(a.id, batch.id))!;
    expect(after.status).toBe('completed');
    for (const image of after.images) {
      if (image.id === claim.imageId) expect(image).toMatchObject({ status: 'succeeded', creditsCharged: 1 });
      else expect(image).toMatchObject({ status: 'failed', creditsCharged: 0, error: { code: 'internal_server_error' } });
    }
    expect(await b.credits.balance(a.id)).toMatchObject({ used: 1, reserved: 0 });
    expect(await b.cluster!.holderOf(claim.imageId)).toMatchObject({ nodeId: b.cluster!.nodeId });
  });

  it('a dead runner: the image it was processing for another node’s batch fails uncharged; the owner’s queued ones are left to it', async () => {
    const { owner, b, a, batch, claim } = await claimedBatch(t);
    await b.close();

    expect(await owner.batches.failOrphans(ORPHAN_ERROR)).toBe(1);
    const after = (await owner.batches.get(a.id, batch.id))!;
    expect(after.images.find((i) => i.id === claim.imageId)).toMatchObject({ status: 'failed', creditsCharged: 0 });
    expect(after.images.filter((i) => i.status === 'queued')).toHaveLength(2);
    expect(await owner.credits.balance(a.id)).toMatchObject({ used: 0, reserved: 2 });
    // Its late finish (a node back from the dead) changes nothing and charges nothing.
    expect(await owner.batches.finish(claim.imageId, success(claim.imageId, batch.id))).toBeNull();
    expect(await owner.credits.balance(a.id)).toMatchObject({ used: 0, reserved: 2 });
  });

  it('a claim undone is queued again: its holder may start it, and only the claimer can undo it', async () => {
    const { owner, b, a, batch, claim } = await claimedBatch(t);
    expect(await owner.cluster!.imageState(claim.imageId)).toBe('claimed');
    expect(await owner.cluster!.unclaim(claim.imageId)).toBe(false); // not the owner's claim
    expect(await b.cluster!.unclaim(claim.imageId)).toBe(true);
    expect(await b.cluster!.unclaim(claim.imageId)).toBe(false);
    expect(await owner.cluster!.imageState(claim.imageId)).toBe('queued');
    expect(await owner.batches.start(claim.imageId)).toBe(true);
    expect(await owner.batches.finish(claim.imageId, success(claim.imageId, batch.id))).not.toBeNull();
    expect(await owner.cluster!.imageState(claim.imageId)).toBe('ended');
    expect(await b.cluster!.unclaim(claim.imageId)).toBe(false);
    expect(await owner.credits.balance(a.id)).toMatchObject({ used: 1, reserved: 2 });
  });

  it('a node accepting none of the secrets a live node published is refused and publishes nothing; one sharing a secret is announced', async () => {
    const owner = await t.open();
    await owner.cluster!.announce('http://owner.test', ['old', 'new']);
    const other = await t.open();
    const refused = await other.cluster!.announce('http://other.test', ['another']).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(ClusterSecretMismatch);
    expect((refused as Error).message).toContain('http://owner.test');
    expect(await other.cluster!.secretMismatches(['another'])).toEqual([{ nodeId: owner.cluster!.nodeId, url: 'http://owner.test' }]);
    expect((await owner.cluster!.peers()).map((p) => p.url)).toEqual([]);
    const rotated = await t.open();
    await rotated.cluster!.announce('http://rotated.test', ['new']);
    expect((await owner.cluster!.peers()).map((p) => p.url)).toEqual(['http://rotated.test']);
    expect(await rotated.cluster!.secretMismatches(['new'])).toEqual([]);
  });
});
