/** The cluster secret check of the internal routes (src/cluster/secret.ts). */
import { describe, expect, it } from 'vitest';
import { isClusterSecret, publishedDigest, publishedDigests } from '../../src/cluster/secret.js';

const SECRET = 'c'.repeat(40);
const PREVIOUS = 'p'.repeat(40);

describe('isClusterSecret', () => {
  it('accepts the secret only: not an absent header, a prefix, a longer value, or another value of the same length', () => {
    expect(isClusterSecret(SECRET, { current: SECRET })).toBe(true);
    expect(isClusterSecret('', { current: SECRET })).toBe(false);
    expect(isClusterSecret(SECRET.slice(0, -1), { current: SECRET })).toBe(false);
    expect(isClusterSecret(`${SECRET}c`, { current: SECRET })).toBe(false);
    expect(isClusterSecret(`${'c'.repeat(39)}d`, { current: SECRET })).toBe(false);
    expect(isClusterSecret('Bearer rb-sk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', { current: SECRET })).toBe(false);
  });
});

describe('a rotation: the previous secret beside the current one', () => {
  it('accepts either, and nothing else', () => {
    const secrets = { current: SECRET, previous: PREVIOUS };
    expect(isClusterSecret(SECRET, secrets)).toBe(true);
    expect(isClusterSecret(PREVIOUS, secrets)).toBe(true);
    expect(isClusterSecret('', secrets)).toBe(false);
    expect(isClusterSecret(`${PREVIOUS}p`, secrets)).toBe(false);
    expect(isClusterSecret(PREVIOUS, { current: SECRET })).toBe(false);
  });

  it('publishes one digest per accepted secret, the same on every node, never the secret', () => {
    const digests = publishedDigests({ current: SECRET, previous: PREVIOUS });
    expect(digests).toEqual([publishedDigest(SECRET), publishedDigest(PREVIOUS)]);
    expect(publishedDigests({ current: SECRET })).toEqual([digests[0]]);
    expect(digests[0]).toMatch(/^[0-9a-f]{64}$/);
    expect(digests[0]).not.toBe(digests[1]);
    expect(digests.join()).not.toContain(SECRET);
  });
});
