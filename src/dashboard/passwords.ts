/**
 * Password hashing with scrypt from node:crypto (memory-hard). The stored string carries everything
 * needed to verify it later, so the parameters can be raised without invalidating old hashes:
 *
 *   scrypt$<N>$<r>$<p>$<salt, base64url>$<hash, base64url>
 *
 * Defaults: N = 2^15, r = 8, p = 1 (32 MiB and ~50-100 ms per hash), a 16-byte random salt and a
 * 32-byte key. scrypt runs on libuv's thread pool, off the event loop.
 */
import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';

export interface ScryptParams {
  /** CPU/memory cost, a power of two. */
  N: number;
  r: number;
  p: number;
}

export const DEFAULT_SCRYPT: ScryptParams = { N: 1 << 15, r: 8, p: 1 };
const SALT_BYTES = 16;
const KEY_BYTES = 32;

export const PASSWORD_MIN_LENGTH = 10;
/** Bounds the work an attacker can make a single hash cost. */
export const PASSWORD_MAX_LENGTH = 256;

function derive(password: string, salt: Buffer, params: ScryptParams, keyLength: number): Promise<Buffer> {
  // scrypt needs 128 * N * r bytes; Node refuses above maxmem (32 MiB by default).
  const maxmem = 128 * params.N * params.r * 2 + 1024 * 1024;
  return new Promise((resolve, reject) => {
    scrypt(password.normalize('NFC'), salt, keyLength, { N: params.N, r: params.r, p: params.p, maxmem }, (err, key) => (err ? reject(err) : resolve(key)));
  });
}

function validParams(params: ScryptParams): boolean {
  const { N, r, p } = params;
  return (
    Number.isSafeInteger(N) &&
    N >= 1024 &&
    N <= 1 << 20 &&
    (N & (N - 1)) === 0 &&
    Number.isSafeInteger(r) &&
    r >= 1 &&
    r <= 32 &&
    Number.isSafeInteger(p) &&
    p >= 1 &&
    p <= 16
  );
}

/** A password policy problem, or null when acceptable. Does not depend on any account. */
export function passwordProblem(password: string): string | null {
  if (password.length < PASSWORD_MIN_LENGTH) return `The password needs at least ${PASSWORD_MIN_LENGTH} characters.`;
  if (password.length > PASSWORD_MAX_LENGTH) return `The password can have at most ${PASSWORD_MAX_LENGTH} characters.`;
  return null;
}

export async function hashPassword(password: string, params: ScryptParams = DEFAULT_SCRYPT): Promise<string> {
  if (!validParams(params)) throw new RangeError('invalid scrypt parameters');
  const salt = randomBytes(SALT_BYTES);
  const key = await derive(password, salt, params, KEY_BYTES);
  return `scrypt$${params.N}$${params.r}$${params.p}$${salt.toString('base64url')}$${key.toString('base64url')}`;
}

interface Decoded {
  params: ScryptParams;
  salt: Buffer;
  key: Buffer;
}

function decode(encoded: string): Decoded | null {
  const parts = encoded.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return null;
  const params = { N: Number(parts[1]), r: Number(parts[2]), p: Number(parts[3]) };
  if (!validParams(params)) return null;
  const salt = Buffer.from(parts[4]!, 'base64url');
  const key = Buffer.from(parts[5]!, 'base64url');
  if (salt.length < 8 || key.length < 16 || key.length > 64) return null;
  return { params, salt, key };
}

let dummy: Promise<string> | undefined;

/**
 * Whether the password matches the stored hash. With no hash (unknown account, or one without a
 * password) a hash of the same cost is still computed, so the answer takes the same time.
 */
export async function verifyPassword(password: string, encoded: string | null, params: ScryptParams = DEFAULT_SCRYPT): Promise<boolean> {
  if (password.length > PASSWORD_MAX_LENGTH) return false;
  const decoded = encoded === null ? null : decode(encoded);
  if (!decoded) {
    dummy ??= hashPassword('not a password of anyone', params);
    const d = decode(await dummy)!;
    await derive(password, d.salt, d.params, d.key.length);
    return false;
  }
  const key = await derive(password, decoded.salt, decoded.params, decoded.key.length);
  return timingSafeEqual(key, decoded.key);
}
