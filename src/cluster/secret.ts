/**
 * The cluster secret (BGONE_CLUSTER_SECRET) that nodes present to each other's internal routes. It
 * is no API key and opens nothing else; an API key opens no internal route. Compared in constant
 * time, on digests so that a length difference says nothing either.
 */
import { createHash, timingSafeEqual } from 'node:crypto';

/** The request header a node sends its secret in. */
export const CLUSTER_SECRET_HEADER = 'x-bgone-cluster-secret';
/** Shorter secrets are refused by the configuration: a guessable one would open every node's images. */
export const MIN_CLUSTER_SECRET_LENGTH = 32;

const digest = (value: string) => createHash('sha256').update(value).digest();

/** Whether `presented` (a header value, '' when absent) is the cluster's secret. */
export function isClusterSecret(presented: string, secret: string): boolean {
  if (presented.length === 0) return false;
  return timingSafeEqual(digest(presented), digest(secret));
}
