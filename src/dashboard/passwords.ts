/**
 * Password hashing with scrypt from node:crypto (memory-hard). The stored string carries everything
 * needed to verify it later, so the parameters can be raised without invalidating old hashes:
 *
 *   scrypt$<N>$<r>$<p>$<salt, base64url>$<hash, base64url>
 *
 * Defaults: N = 2^15, r = 8, p = 1 (32 MiB and ~50-100 ms per hash), a 16-byte random salt and a
 * 32-byte key. scrypt runs on libuv's thread pool, off the event loop.
 *
 * That pool (4 threads by default) also runs the image jobs, so the dashboard hashes through a
 * PasswordHasher: at most `concurrency` scrypt computations at once (default 1), a few more waiting
 * in order, and beyond that a refusal (PasswordWorkOverloaded, a 503 page), so that a burst of
 * sign-ups or logins neither starves image jobs of threads nor piles up 32 MiB buffers.
 */
import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';
import { Limiter } from '../lib/limiter.js';

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

/** A key derivation: node:crypto's scrypt with the given parameters. */
export type Derive = (password: string, salt: Buffer, params: ScryptParams, keyLength: number) => Promise<Buffer>;

/** node:crypto's scrypt, with the memory the parameters need. */
export function scryptDerive(password: string, salt: Buffer, params: ScryptParams, keyLength: number): Promise<Buffer> {
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

async function hashWith(derivation: Derive, password: string, params: ScryptParams): Promise<string> {
  if (!validParams(params)) throw new RangeError('invalid scrypt parameters');
  const salt = randomBytes(SALT_BYTES);
  const key = await derivation(password, salt, params, KEY_BYTES);
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

/** A hash of nobody's password per cost, computed once: what a missing hash is checked against. */
const dummies = new Map<string, Decoded>();

async function verifyWith(derivation: Derive, password: string, encoded: string | null, params: ScryptParams): Promise<boolean> {
  if (password.length > PASSWORD_MAX_LENGTH) return false;
  const decoded = encoded === null ? null : decode(encoded);
  if (!decoded) {
    const cost = `${params.N}$${params.r}$${params.p}`;
    let dummy = dummies.get(cost);
    if (!dummy) {
      dummy = decode(await hashWith(derivation, 'not a password of anyone', params))!;
      dummies.set(cost, dummy);
    }
    await derivation(password, dummy.salt, dummy.params, dummy.key.length);
    return false;
  }
  const key = await derivation(password, decoded.salt, decoded.params, decoded.key.length);
  return timingSafeEqual(key, decoded.key);
}

/** Hashes with no bound on concurrent work: for tools and tests; the dashboard uses a PasswordHasher. */
export function hashPassword(password: string, params: ScryptParams = DEFAULT_SCRYPT): Promise<string> {
  return hashWith(scryptDerive, password, params);
}

/**
 * Whether the password matches the stored hash. With no hash (unknown account, or one without a
 * password) a hash of the same cost is still computed, so the answer takes the same time. No bound
 * on concurrent work: the dashboard uses a PasswordHasher.
 */
export function verifyPassword(password: string, encoded: string | null, params: ScryptParams = DEFAULT_SCRYPT): Promise<boolean> {
  return verifyWith(scryptDerive, password, encoded, params);
}

export interface PasswordWorkLimits {
  /** scrypt computations at once; each holds one libuv thread and 128 * N * r bytes. */
  concurrency: number;
  /** Hashes waiting for a place (in arrival order); one more is refused. */
  queue: number;
  /** Seconds in the Retry-After of the refusal. */
  retryAfterSeconds: number;
}

/** One thread of libuv's four for passwords; a hash takes ~50-100 ms, so 8 waiting wait under a second. */
export const DEFAULT_PASSWORD_WORK: PasswordWorkLimits = { concurrency: 1, queue: 8, retryAfterSeconds: 2 };

/** Refused before any work: `concurrency` hashes run and `queue` more wait. */
export class PasswordWorkOverloaded extends Error {
  constructor(readonly retryAfterSeconds: number) {
    super('too many password hashes are under way');
    this.name = 'PasswordWorkOverloaded';
  }
}

function checkLimits(limits: PasswordWorkLimits): PasswordWorkLimits {
  const { concurrency, queue, retryAfterSeconds } = limits;
  if (!Number.isSafeInteger(concurrency) || concurrency < 1) throw new RangeError('concurrency must be a positive integer');
  if (!Number.isSafeInteger(queue) || queue < 0) throw new RangeError('queue must be a non-negative integer');
  if (!Number.isSafeInteger(retryAfterSeconds) || retryAfterSeconds < 1) throw new RangeError('retryAfterSeconds must be a positive integer');
  return { concurrency, queue, retryAfterSeconds };
}

/**
 * The dashboard's password hashing with bounded work. A hash or a verification (the dummy hash of
 * a missing password included) holds one place from start to end; a call that finds every place
 * taken and the queue full is refused at once with PasswordWorkOverloaded, before any work.
 */
export class PasswordHasher {
  readonly params: ScryptParams;
  readonly limits: PasswordWorkLimits;
  readonly #limiter: Limiter;
  readonly #derivation: Derive;
  #hashing = 0;
  #peakHashing = 0;

  /**
   * `derivation`: what each place runs (default: scryptDerive); a caller may wrap it, e.g. to keep
   * every place taken for as long as it chooses.
   */
  constructor(params: ScryptParams = DEFAULT_SCRYPT, limits: Partial<PasswordWorkLimits> = {}, derivation: Derive = scryptDerive) {
    if (!validParams(params)) throw new RangeError('invalid scrypt parameters');
    this.params = params;
    this.#derivation = derivation;
    this.limits = checkLimits({ ...DEFAULT_PASSWORD_WORK, ...limits });
    this.#limiter = new Limiter(this.limits.concurrency);
  }

  /** scrypt computations running now, counted around node:crypto's scrypt itself. */
  get hashing(): number {
    return this.#hashing;
  }

  /** The most scrypt computations that ever ran at once. */
  get peakHashing(): number {
    return this.#peakHashing;
  }

  /** Calls waiting for a place. */
  get waiting(): number {
    return this.#limiter.pending;
  }

  hash(password: string): Promise<string> {
    return this.#run(() => hashWith(this.#derive, password, this.params));
  }

  verify(password: string, encoded: string | null): Promise<boolean> {
    return this.#run(() => verifyWith(this.#derive, password, encoded, this.params));
  }

  async #run<T>(job: () => Promise<T>): Promise<T> {
    if (this.#limiter.size >= this.limits.concurrency + this.limits.queue) throw new PasswordWorkOverloaded(this.limits.retryAfterSeconds);
    return this.#limiter.run(job);
  }

  readonly #derive: Derive = async (password, salt, params, keyLength) => {
    this.#hashing++;
    this.#peakHashing = Math.max(this.#peakHashing, this.#hashing);
    try {
      return await this.#derivation(password, salt, params, keyLength);
    } finally {
      this.#hashing--;
    }
  };
}
