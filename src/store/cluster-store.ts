/**
 * The part of the store that several nodes sharing batch work need (PostgreSQL only; see
 * src/cluster/): which live node holds which image's bytes or result, and claims of queued images.
 */

export interface PeerNode {
  readonly nodeId: string;
  /** The base URL of its internal routes (BGONE_INTERNAL_URL, or its listen address). */
  readonly url: string;
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
  /** Publishes where peers reach this node (in its heartbeat row); until then it shares no batch work. */
  announce(internalUrl: string): Promise<void>;
  /** The live node holding an image's bytes or result; null when none does (its node died, or no such image). */
  holderOf(imageId: string): Promise<PeerNode | null>;
  /** The other live nodes that published an address. */
  peers(): Promise<PeerNode[]>;
  /** Claims one queued image held by another live node (FOR UPDATE SKIP LOCKED); null when there is none. */
  claimQueued(): Promise<ClaimedImage | null>;
}
