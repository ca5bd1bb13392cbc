/**
 * The cluster secret (BGONE_CLUSTER_SECRET) that nodes present to each other's internal routes. It
 * is no API key and opens nothing else; an API key opens no internal route. Compared in constant
 * time, on digests so that a length difference says nothing either.
 *
 * During a rotation a node also accepts its previous secret (BGONE_CLUSTER_SECRET_PREVIOUS), and
 * presents it to a peer that refused the current one. Each node publishes, in its heartbeat row, a
 * slow digest of every secret it accepts (never a secret): a node whose accepted secrets share
 * none with a live node's refuses to start, rather than fail its claims of that node's images.
 */
import { createHash, scryptSync, timingSafeEqual } from 'node:crypto';

/** The request header a node sends its secret in. */
export const CLUSTER_SECRET_HEADER = 'x-bgone-cluster-secret';

/** The secrets a node presents and accepts: its current one, and during a rotation its previous one. */
export interface ClusterSecrets {
  readonly current: string;
  readonly previous?: string | undefined;
}

const digest = (value: string) => createHash('sha256').update(value).digest();

/** Whether `presented` (a header value, '' when absent) is one of the secrets this node accepts. */
export function isClusterSecret(presented: string, secrets: ClusterSecrets): boolean {
  if (presented.length === 0) return false;
  const seen = digest(presented);
  // Both compared, whatever the first gives: the time says nothing about which one matched.
  const current = timingSafeEqual(seen, digest(secrets.current));
  const previous = secrets.previous !== undefined && timingSafeEqual(seen, digest(secrets.previous));
  return current || previous;
}

/**
 * What a node publishes of a secret in its heartbeat row: equal on every node for one secret, and
 * costly to guess from (scrypt, ~16 MiB and tens of ms per try), so that a reader of the database
 * learns nothing usable of it.
 */
export function publishedDigest(secret: string): string {
  return scryptSync(secret, 'bgone cluster secret', 32, { N: 2 ** 14, r: 8, p: 1 }).toString('hex');
}

/** The published digests of every secret a node accepts. */
export function publishedDigests(secrets: ClusterSecrets): string[] {
  return [secrets.current, ...(secrets.previous !== undefined ? [secrets.previous] : [])].map(publishedDigest);
}
