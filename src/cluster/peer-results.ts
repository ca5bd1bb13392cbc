/**
 * What the public batch routes ask of the other nodes (batch-routes.ts): a result this node does
 * not hold, fetched from the node that does; and a deleted batch forgotten on every node.
 */
import type { HeldResult } from '../batches/batch-runner.js';
import type { ClusterStore } from '../store/index.js';
import type { PeerClient } from './peer-client.js';

export class PeerResults {
  constructor(
    private readonly cluster: ClusterStore,
    private readonly peers: PeerClient,
  ) {}

  /** The result from the live node holding it; undefined when none does (its node died, or it expired there). */
  async fetch(imageId: string): Promise<Omit<HeldResult, 'accountId' | 'batchId'> | undefined> {
    const holder = await this.cluster.holderOf(imageId);
    if (!holder || holder.nodeId === this.cluster.nodeId) return undefined;
    return this.peers.fetchResult(holder, imageId);
  }

  /** After DELETE: every other live node drops what it holds of the batch (queued bytes, results). */
  async forget(batchId: string): Promise<void> {
    const others = await this.cluster.peers();
    await Promise.all(others.map((peer) => this.peers.forget(peer, batchId)));
  }
}
