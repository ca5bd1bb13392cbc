/**
 * The calls a node makes to its peers' internal routes (internal-routes.ts), with the cluster
 * secret: copy the bytes of a queued image it claimed and then tell its holder to drop them, fetch a
 * result another node holds, and tell every peer to forget a deleted batch. Bytes travel only in
 * memory, from one process to another. A peer that takes the secret marks its answer with
 * PEER_HEADER; one that does not answers as for an unknown path (404, unmarked), and the call is
 * sent again with the previous secret, if any: during a rotation, a peer not yet restarted knows
 * only that one. An unmarked 404 is a refusal, never "the image is gone".
 */
import type { HeldResult } from '../batches/batch-runner.js';
import type { EncodedFormat, RemoveBackgroundOptions } from '../lib/index.js';
import type { PeerNode } from '../store/index.js';
import { CLUSTER_SECRET_HEADER, type ClusterSecrets } from './secret.js';

export const INTERNAL_PREFIX = '/internal/v1';
/**
 * A peer that does not answer within this is taken as unable to (a claimed image goes back to the
 * queue, a result is taken as gone).
 */
const PEER_TIMEOUT_MS = 30_000;
/**
 * A DELETE waits this long at most for each peer to drop its bytes: once the store has the batch
 * deleted (or the image claimed) nothing asks for them anyway, and the peer drops them later itself.
 */
const FORGET_TIMEOUT_MS = 2000;

/** Set on every answer of an internal route to a caller whose secret it took. */
export const PEER_HEADER = 'x-bgone-peer';

/** Whether the peer took the secret (a refusal looks like an unknown path, without this mark). */
function accepted(res: Response): boolean {
  return res.headers.get(PEER_HEADER) === '1';
}

/** The headers that carry what a result or an input is, beside its bytes. */
export const META_HEADER = 'x-bgone-meta';

export function inputPath(imageId: string): string {
  return `${INTERNAL_PREFIX}/images/${encodeURIComponent(imageId)}/input`;
}
export function resultPath(imageId: string): string {
  return `${INTERNAL_PREFIX}/images/${encodeURIComponent(imageId)}/result`;
}
export function batchPath(batchId: string): string {
  return `${INTERNAL_PREFIX}/batches/${encodeURIComponent(batchId)}`;
}

/** JSON, base64url-encoded: a header value that survives any option value. */
export function encodeMeta(meta: unknown): string {
  return Buffer.from(JSON.stringify(meta)).toString('base64url');
}
function decodeMeta<T>(value: string | null): T {
  if (!value) throw new Error('peer answer without its metadata');
  return JSON.parse(Buffer.from(value, 'base64url').toString('utf8')) as T;
}

/** A queued image's options, and where its bytes end in the body (the batch's background image follows them). */
export type InputMeta = { options: RemoveBackgroundOptions; imageBytes: number };
export type ResultMeta = Pick<HeldResult, 'format' | 'width' | 'height' | 'requestId' | 'expiresAt'> & { format: EncodedFormat };

/** What this node moved to and from its peers, for the metrics and the bench. */
export interface PeerTraffic {
  bytesIn: number;
  bytesOut: number;
}

export class PeerClient {
  readonly traffic: PeerTraffic = { bytesIn: 0, bytesOut: 0 };

  constructor(private readonly secrets: ClusterSecrets) {}

  async #call(peer: PeerNode, method: string, path: string, timeoutMs = PEER_TIMEOUT_MS): Promise<Response> {
    const signal = AbortSignal.timeout(timeoutMs);
    const send = (secret: string) => fetch(`${peer.url}${path}`, { method, headers: { [CLUSTER_SECRET_HEADER]: secret }, signal });
    const res = await send(this.secrets.current);
    if (accepted(res) || this.secrets.previous === undefined) return res;
    await res.body?.cancel();
    return send(this.secrets.previous);
  }

  /**
   * A copy of the bytes and options of a queued image this node claimed: the holder keeps them
   * until dropInput(), so a hand-off that fails midway loses nothing. undefined when the holder no
   * longer has them (404); throws on any other failure (refused, 5xx, timeout, unreachable).
   */
  async copyInput(peer: PeerNode, imageId: string): Promise<{ data: Buffer; options: RemoveBackgroundOptions } | undefined> {
    const res = await this.#call(peer, 'GET', inputPath(imageId));
    if (!res.ok) await res.body?.cancel();
    if (!accepted(res)) throw new Error(`peer refused the cluster secret (${res.status}) when copying an input`);
    if (res.status === 404) return undefined;
    if (!res.ok) throw new Error(`peer answered ${res.status} to copying an input`);
    const body = Buffer.from(await res.arrayBuffer());
    this.traffic.bytesIn += body.length;
    const { options, imageBytes } = decodeMeta<InputMeta>(res.headers.get(META_HEADER));
    if (!(imageBytes >= 0 && imageBytes <= body.length)) throw new Error('peer answer whose metadata does not fit its body');
    if (imageBytes === body.length) return { data: body, options };
    return { data: body.subarray(0, imageBytes), options: { ...options, bgImageFile: body.subarray(imageBytes) } };
  }

  /**
   * Tells the holder of a claimed image that this node has its bytes: it drops its copy. A holder
   * that cannot be told drops it by itself once it sees the image is no longer queued.
   */
  async dropInput(peer: PeerNode, imageId: string): Promise<void> {
    try {
      const res = await this.#call(peer, 'DELETE', inputPath(imageId), FORGET_TIMEOUT_MS);
      await res.body?.cancel();
    } catch {
      // Unreachable: see above.
    }
  }

  /** A result another node holds; undefined when it does not (expired, dropped, or the node is gone). */
  async fetchResult(peer: PeerNode, imageId: string): Promise<(ResultMeta & { data: Buffer }) | undefined> {
    let res: Response;
    try {
      res = await this.#call(peer, 'GET', resultPath(imageId));
    } catch {
      return undefined; // unreachable: its holder died, so its result is gone
    }
    if (!res.ok) {
      await res.body?.cancel();
      return undefined;
    }
    const data = Buffer.from(await res.arrayBuffer());
    this.traffic.bytesIn += data.length;
    return { ...decodeMeta<ResultMeta>(res.headers.get(META_HEADER)), data };
  }

  /** Tells a peer to drop what it holds of a deleted batch; a peer that cannot be reached holds nothing anyone can fetch. */
  async forget(peer: PeerNode, batchId: string): Promise<void> {
    try {
      const res = await this.#call(peer, 'DELETE', batchPath(batchId), FORGET_TIMEOUT_MS);
      await res.body?.cancel();
    } catch {
      // Gone or unreachable: its results die with it, and its expiry sweep drops them otherwise.
    }
  }

  /** Counts bytes this node served to a peer. */
  served(bytes: number): void {
    this.traffic.bytesOut += bytes;
  }
}
