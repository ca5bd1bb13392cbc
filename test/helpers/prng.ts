/** A tiny seeded generator (xorshift32), so that "random" fixtures are the same on every run. */
export function randomBytes(length: number, seed: number): Buffer {
  let state = seed >>> 0 || 0x9e3779b9;
  const out = Buffer.alloc(length);
  for (let i = 0; i < length; i++) {
    state ^= state << 13;
    state >>>= 0;
    state ^= state >>> 17;
    state ^= state << 5;
    state >>>= 0;
    out[i] = state & 0xff;
  }
  return out;
}
