/**
 * The part of the store that several nodes sharing batch work need (PostgreSQL only; see
 * src/cluster/): which live node holds which image's bytes or result, and claims of queued images.
 */

export interface PeerNode {
  readonly nodeId: string;
  /** The base URL of its internal routes (BGONE_INTERNAL_URL, or its listen address). */
  readonly url: string;
}

/** A live node that shares batch work with a cluster secret none of which this node accepts. */
export class ClusterSecretMismatch extends Error {
  constructor(readonly peers: readonly PeerNode[]) {
    super(
      `another live node on this database (${peers.map((p) => `${p.nodeId} at ${p.url}`).join(', ')}) shares batch work with another BGONE_CLUSTER_SECRET: ` +
        'set the same secret on this node (to rotate it, give the new one as BGONE_CLUSTER_SECRET and the old one as BGONE_CLUSTER_SECRET_PREVIOUS)',
    );
    this.name = 'ClusterSecretMismatch';
  }
}

/** A queued image of another node, claimed by this one: 'processing' here from the claim on. */
export interface ClaimedImage {
  readonly imageId: string;
  readonly batchId: string;
  readonly accountId: number;
  readonly filename: string;
  readonly requestId: string;
  /** The node holding its bytes, to pull them from. */
  readonly holder: PeerNode;
}

/**
 * Which node holds what, on a store shared by several nodes. Image bytes and results never enter
 * the store: it records only which live node holds them, so that any node can fetch them from it.
 */
export interface ClusterStore {
  readonly nodeId: string;
  /**
   * Publishes where peers reach this node and the digests of the cluster secrets it accepts (in its
   * heartbeat row); until then it shares no batch work. Throws ClusterSecretMismatch, publishing
   * nothing, when a live node published digests none of which is among `secretDigests`: checked
   * and published under one lock, so two nodes starting at once with different secrets cannot both
   * pass.
   */
  announce(internalUrl: string, secretDigests: readonly string[]): Promise<void>;
  /** The live nodes sharing batch work whose published secret digests include none of `secretDigests`. */
  secretMismatches(secretDigests: readonly string[]): Promise<PeerNode[]>;
  /** The live node holding an image's bytes or result; null when none does (its node died, or no such image). */
  holderOf(imageId: string): Promise<PeerNode | null>;
  /** The other live nodes that published an address. */
  peers(): Promise<PeerNode[]>;
  /** Claims one queued image held by another live node (FOR UPDATE SKIP LOCKED); null when there is none. */
  claimQueued(): Promise<ClaimedImage | null>;
  /** Undoes this node's claim of an image whose bytes it could not get: 'queued' again. False when it was not claimed by this node. */
  unclaim(imageId: string): Promise<boolean>;
  /**
   * Where an image of this node's stands, for its holder while a peer's claim is handed off:
   * 'queued' (again), 'claimed' (processing elsewhere), or 'ended' (ended, its batch deleted, or no such image).
   */
  imageState(imageId: string): Promise<'queued' | 'claimed' | 'ended'>;
}
