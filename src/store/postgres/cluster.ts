/**
 * Which node holds what: each node publishes the address its peers reach it on in its
 * heartbeat row; each batch image names the node holding its bytes (queued) or its result
 * (succeeded), and the node processing it. A node with nothing to do claims a queued image held by
 * another live node here; the claim and the holder's own start (batches.ts) both require the
 * image still 'queued', so exactly one of them runs it.
 */
import { ClusterSecretMismatch } from '../cluster-store.js';
import type { ClaimedImage, ClusterStore, PeerNode } from '../store.js';
import { DB_NOW_MS, type PostgresContext } from './context.js';
import type { NodeHeartbeat } from './node.js';

/** The live nodes that published an address. */
const LIVE_PEERS = `SELECT id, internal_url FROM nodes WHERE heartbeat_at > ${DB_NOW_MS} - lapse_ms AND internal_url IS NOT NULL`;

export class PostgresCluster implements ClusterStore {
  constructor(
    private readonly ctx: PostgresContext,
    private readonly heartbeat: NodeHeartbeat,
  ) {}

  get nodeId(): string {
    return this.ctx.nodeId;
  }

  async announce(internalUrl: string, secretDigests: readonly string[]): Promise<void> {
    const refused = await this.heartbeat.announce(internalUrl, secretDigests);
    if (refused.length > 0) throw new ClusterSecretMismatch(refused);
  }

  secretMismatches(secretDigests: readonly string[]): Promise<PeerNode[]> {
    return this.heartbeat.secretMismatches(this.ctx.pool, secretDigests);
  }

  async holderOf(imageId: string): Promise<PeerNode | null> {
    const { rows } = await this.ctx.pool.query<{ id: string; internal_url: string }>(
      `SELECT n.id, n.internal_url FROM batch_images i JOIN batches b ON b.id = i.batch_id
       JOIN (${LIVE_PEERS}) n ON n.id = coalesce(i.holder, b.owner) WHERE i.id = $1`,
      [imageId],
    );
    return rows[0] ? { nodeId: rows[0].id, url: rows[0].internal_url } : null;
  }

  async peers(): Promise<PeerNode[]> {
    const { rows } = await this.ctx.pool.query<{ id: string; internal_url: string }>(`${LIVE_PEERS} AND id <> $1 ORDER BY id`, [this.ctx.nodeId]);
    return rows.map((r) => ({ nodeId: r.id, url: r.internal_url }));
  }

  async unclaim(imageId: string): Promise<boolean> {
    const { rowCount } = await this.ctx.pool.query(
      `UPDATE batch_images SET status = 'queued', runner = NULL WHERE id = $1 AND status = 'processing' AND runner = $2`,
      [imageId, this.ctx.nodeId],
    );
    return (rowCount ?? 0) > 0;
  }

  async imageState(imageId: string): Promise<'queued' | 'claimed' | 'ended'> {
    const { rows } = await this.ctx.pool.query<{ status: string }>(
      `SELECT i.status FROM batch_images i JOIN batches b ON b.id = i.batch_id WHERE i.id = $1 AND b.deleted_at IS NULL`,
      [imageId],
    );
    const status = rows[0]?.status;
    return status === 'queued' ? 'queued' : status === 'processing' ? 'claimed' : 'ended';
  }

  /**
   * The oldest batch first, and its last queued image: the holder runs its queue from the front,
   * so taking from the back seldom meets the image it is about to start.
   */
  claimQueued(): Promise<ClaimedImage | null> {
    return this.ctx.transaction(async (c) => {
      const { rows } = await c.query<{
        id: string;
        batch_id: string;
        account_id: number;
        filename: string;
        request_id: string;
        holder_id: string;
        holder_url: string;
      }>(
        `SELECT i.id, i.batch_id, b.account_id, i.filename, i.request_id, n.id AS holder_id, n.internal_url AS holder_url
         FROM batch_images i JOIN batches b ON b.id = i.batch_id JOIN (${LIVE_PEERS}) n ON n.id = coalesce(i.holder, b.owner)
         WHERE i.status = 'queued' AND b.deleted_at IS NULL AND b.completed_at IS NULL AND n.id <> $1
         ORDER BY b.seq, i.position DESC LIMIT 1 FOR UPDATE OF i SKIP LOCKED`,
        [this.ctx.nodeId],
      );
      const row = rows[0];
      if (!row) return null;
      const { rowCount } = await c.query(`UPDATE batch_images SET status = 'processing', runner = $2 WHERE id = $1 AND status = 'queued'`, [
        row.id,
        this.ctx.nodeId,
      ]);
      if ((rowCount ?? 0) === 0) return null;
      return {
        imageId: row.id,
        batchId: row.batch_id,
        accountId: row.account_id,
        filename: row.filename,
        requestId: row.request_id,
        holder: { nodeId: row.holder_id, url: row.holder_url },
      };
    });
  }
}
