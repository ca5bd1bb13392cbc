/** The cluster secret check of the internal routes (src/cluster/secret.ts). */
import { describe, expect, it } from 'vitest';
import { isClusterSecret } from '../../src/cluster/secret.js';

const SECRET = 'c'.repeat(40);

describe('isClusterSecret', () => {
  it('accepts the secret only: not an absent header, a prefix, a longer value, or another value of the same length', () => {
    expect(isClusterSecret(SECRET, SECRET)).toBe(true);
    expect(isClusterSecret('', SECRET)).toBe(false);
    expect(isClusterSecret(SECRET.slice(0, -1), SECRET)).toBe(false);
    expect(isClusterSecret(`${SECRET}c`, SECRET)).toBe(false);
    expect(isClusterSecret(`${'c'.repeat(39)}d`, SECRET)).toBe(false);
    expect(isClusterSecret('Bearer rb-sk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', SECRET)).toBe(false);
  });
});
