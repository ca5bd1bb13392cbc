/**
 * API keys: `rb-sk_` followed by 43 base64url characters (32 random bytes, 256 bits).
 *
 * Only the SHA-256 of the whole key is stored, never the key. A plain, unsalted, fast hash is the
 * right tool here, unlike for passwords: a key is 256 random bits, so even with the hash in hand
 * finding a key by guessing is hopeless however fast the hash is; slow password hashes
 * (bcrypt/scrypt/argon2) and salts exist to protect low-entropy, reused human secrets, and would
 * add milliseconds to every request. A deterministic hash also lets authentication find the key by
 * an indexed equality lookup on the hash (a salted hash could not be looked up), which compares
 * hashes, not secrets, so its timing reveals nothing usable about a key.
 *
 * What is kept for display: a prefix (`rb-sk_` + the first 6 secret characters, unique, also
 * accepted by revoke) and the last 4 characters; the 33 characters in between (198 bits) stay
 * secret.
 */
import { createHash, randomBytes } from 'node:crypto';
import { type Account, type Accounts, effectivePlanAt, toAccount } from './accounts.js';
import type { Clock } from './clock.js';
import type { Db } from './database.js';
import { isUniqueViolation, StoreError } from './errors.js';
import type { Plan, PlanTable } from './plans.js';

export const API_KEY_PREFIX = 'rb-sk_';
const SECRET_BYTES = 32;
/** Accepts the keys this store issues (43 secret characters) and leaves room for longer ones. */
export const API_KEY_PATTERN = /^rb-sk_[A-Za-z0-9_-]{32,128}$/;
export const DISPLAY_PREFIX_LENGTH = API_KEY_PREFIX.length + 6;
const PREFIX_ATTEMPTS = 8;

export interface ApiKeyInfo {
  readonly id: number;
  readonly accountId: number;
  /** e.g. `rb-sk_Ab3dE9`; show as `${prefix}…${last4}`. */
  readonly prefix: string;
  readonly last4: string;
  readonly createdAt: Date;
  /** Updated at most once per `lastUsedResolutionMs` (default 1 min) to keep writes off the hot path. */
  readonly lastUsedAt: Date | null;
  readonly revokedAt: Date | null;
  readonly revoked: boolean;
}

export interface CreatedApiKey {
  /** The full key: returned here once, never stored, cannot be shown again. */
  readonly key: string;
  readonly info: ApiKeyInfo;
}

export interface Authenticated {
  readonly keyId: number;
  readonly account: Account;
  /** The plan in effect now, with the configured rate limit. */
  readonly plan: Plan;
}

interface KeyRow {
  id: number;
  account_id: number;
  prefix: string;
  last4: string;
  created_at: number;
  last_used_at: number | null;
  revoked_at: number | null;
}

const COLUMNS = 'id, account_id, prefix, last4, created_at, last_used_at, revoked_at';

export function hashApiKey(key: string): Buffer {
  return createHash('sha256').update(key, 'utf8').digest();
}

export function generateApiKey(): string {
  return API_KEY_PREFIX + randomBytes(SECRET_BYTES).toString('base64url');
}

function toInfo(row: KeyRow): ApiKeyInfo {
  return {
    id: row.id,
    accountId: row.account_id,
    prefix: row.prefix,
    last4: row.last4,
    createdAt: new Date(row.created_at),
    lastUsedAt: row.last_used_at === null ? null : new Date(row.last_used_at),
    revokedAt: row.revoked_at === null ? null : new Date(row.revoked_at),
    revoked: row.revoked_at !== null,
  };
}

export class ApiKeys {
  private readonly insertStmt;
  private readonly byIdStmt;
  private readonly byHashStmt;
  private readonly byPrefixStmt;
  private readonly listStmt;
  private readonly touchStmt;
  private readonly revokeStmt;
  private readonly createTx;

  constructor(
    db: Db,
    private readonly clock: Clock,
    private readonly plans: PlanTable,
    private readonly accounts: Accounts,
    private readonly lastUsedResolutionMs: number,
  ) {
    this.insertStmt = db.prepare<[number, Buffer, string, string, number], KeyRow>(
      `INSERT INTO api_keys (account_id, key_hash, prefix, last4, created_at) VALUES (?, ?, ?, ?, ?) RETURNING ${COLUMNS}`,
    );
    this.byIdStmt = db.prepare<[number], KeyRow>(`SELECT ${COLUMNS} FROM api_keys WHERE id = ?`);
    this.byHashStmt = db.prepare<[Buffer], KeyRow>(`SELECT ${COLUMNS} FROM api_keys WHERE key_hash = ?`);
    this.byPrefixStmt = db.prepare<[string], KeyRow>(`SELECT ${COLUMNS} FROM api_keys WHERE prefix = ?`);
    this.listStmt = db.prepare<[number], KeyRow>(`SELECT ${COLUMNS} FROM api_keys WHERE account_id = ? ORDER BY id`);
    this.touchStmt = db.prepare<[number, number]>('UPDATE api_keys SET last_used_at = ? WHERE id = ?');
    this.revokeStmt = db.prepare<[number, number]>('UPDATE api_keys SET revoked_at = coalesce(revoked_at, ?) WHERE id = ?');

    this.createTx = db.transaction((accountId: number): CreatedApiKey => {
      this.accounts.requireRow(accountId);
      const now = this.clock().getTime();
      for (let attempt = 1; ; attempt++) {
        const key = generateApiKey();
        try {
          const row = this.insertStmt.get(accountId, hashApiKey(key), key.slice(0, DISPLAY_PREFIX_LENGTH), key.slice(-4), now)!;
          return { key, info: toInfo(row) };
        } catch (err) {
          // The 36-bit display prefix can collide (rarely); the key itself cannot.
          if (!isUniqueViolation(err) || attempt >= PREFIX_ATTEMPTS) throw err;
        }
      }
    });
  }

  /** Issues a new key for the account. The full key is in the result and nowhere else. */
  create(accountId: number): CreatedApiKey {
    return this.createTx.immediate(accountId);
  }

  /** The account's keys, revoked ones included, oldest first. */
  list(accountId: number): ApiKeyInfo[] {
    return this.listStmt.all(accountId).map(toInfo);
  }

  get(keyId: number): ApiKeyInfo | null {
    const row = this.byIdStmt.get(keyId);
    return row ? toInfo(row) : null;
  }

  /**
   * Revokes a key given by id, display prefix or the full key. With `accountId`, only a key of
   * that account is revoked. Returns the key (revoking twice keeps the first revocation time), or
   * null when there is no such key.
   */
  revoke(ref: number | string, options: { accountId?: number } = {}): ApiKeyInfo | null {
    let row: KeyRow | undefined;
    if (typeof ref === 'number') row = this.byIdStmt.get(ref);
    else if (API_KEY_PATTERN.test(ref)) row = this.byHashStmt.get(hashApiKey(ref));
    else row = this.byPrefixStmt.get(ref);
    if (!row || (options.accountId !== undefined && row.account_id !== options.accountId)) return null;
    if (row.revoked_at === null) {
      this.revokeStmt.run(this.clock().getTime(), row.id);
      row = this.byIdStmt.get(row.id)!;
    }
    return toInfo(row);
  }

  /**
   * The key's account, or null for a missing, malformed, unknown or revoked key (one answer for
   * all, the service's uniform 401). A malformed key is rejected without touching the database; an
   * unknown or revoked key costs one indexed read and no write. A valid key updates last_used_at
   * when it is older than `lastUsedResolutionMs`. Disabled accounts are returned (with
   * `account.disabled`): telling them apart is the service's job (403).
   */
  authenticate(rawKey: unknown): Authenticated | null {
    if (typeof rawKey !== 'string' || !API_KEY_PATTERN.test(rawKey)) return null;
    const key = this.byHashStmt.get(hashApiKey(rawKey));
    if (!key || key.revoked_at !== null) return null;
    const account = this.accounts.row(key.account_id);
    if (!account) return null;
    const now = this.clock().getTime();
    if (key.last_used_at === null || now - key.last_used_at >= this.lastUsedResolutionMs) this.touchStmt.run(now, key.id);
    return { keyId: key.id, account: toAccount(account, now), plan: this.plans[effectivePlanAt(account, now)] };
  }
}
