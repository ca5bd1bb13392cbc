/**
 * The secrets the store issues, API keys and dashboard session ids, and the one form in which they
 * are stored: their SHA-256. Every implementation issues and hashes them the same way, so a database
 * moved from one implementation to another keeps working keys.
 *
 * API keys: `rb-sk_` followed by 43 base64url characters (32 random bytes, 256 bits). A plain,
 * unsalted, fast hash is the right tool here, unlike for passwords: a key is 256 random bits, so
 * even with the hash in hand finding a key by guessing is hopeless however fast the hash is; slow
 * password hashes (bcrypt/scrypt/argon2) and salts exist to protect low-entropy, reused human
 * secrets, and would add milliseconds to every request. A deterministic hash also lets
 * authentication find the key by an indexed equality lookup on the hash (a salted hash could not be
 * looked up), which compares hashes, not secrets, so its timing reveals nothing usable about a key.
 *
 * What is kept of a key for display: a prefix (`rb-sk_` + the first 6 secret characters, unique,
 * also accepted by revoke) and the last 4 characters; the 33 characters in between (198 bits) stay
 * secret.
 *
 * Session ids: 32 random bytes, base64url in an HttpOnly cookie; stored hashed for the same reasons,
 * so a copy of the database holds no usable session id.
 */
import { createHash, randomBytes } from 'node:crypto';

const SECRET_BYTES = 32;

export const API_KEY_PREFIX = 'rb-sk_';
/** Accepts the keys this store issues (43 secret characters) and leaves room for longer ones. */
export const API_KEY_PATTERN = /^rb-sk_[A-Za-z0-9_-]{32,128}$/;
/** The stored, displayed and revocable prefix: `rb-sk_` and 6 secret characters (36 bits). */
export const DISPLAY_PREFIX_LENGTH = API_KEY_PREFIX.length + 6;

/** A session id as issued: 43 base64url characters. Anything else is rejected without a query. */
const SESSION_TOKEN_PATTERN = /^[A-Za-z0-9_-]{43}$/;

function sha256(secret: string): Buffer {
  return createHash('sha256').update(secret, 'utf8').digest();
}

function randomSecret(): string {
  return randomBytes(SECRET_BYTES).toString('base64url');
}

export function generateApiKey(): string {
  return API_KEY_PREFIX + randomSecret();
}

/** The only form of an API key that is stored (32 bytes). */
export function hashApiKey(key: string): Buffer {
  return sha256(key);
}

/** Whether a value can be a key this store issued: checked before any lookup, so garbage costs no query. */
export function isWellFormedApiKey(value: unknown): value is string {
  return typeof value === 'string' && API_KEY_PATTERN.test(value);
}

/** A fresh session id (the cookie value) or CSRF synchronizer token. */
export function generateSessionToken(): string {
  return randomSecret();
}

/** The only form of a session id that is stored (32 bytes). */
export function hashSessionToken(token: string): Buffer {
  return sha256(token);
}

export function isWellFormedSessionToken(value: unknown): value is string {
  return typeof value === 'string' && SESSION_TOKEN_PATTERN.test(value);
}
