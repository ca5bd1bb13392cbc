/**
 * API keys on SQLite. Only the SHA-256 of a whole key is stored, with its display prefix and last
 * 4 characters (secrets.ts says why and what stays secret).
 */

import type { Clock } from '../clock.js';
import type { PlanTable } from '../plans.js';
import { KEY_COLUMNS, type KeyAccountRow, type KeyRow, toAuthenticated, toKeyInfo } from '../rows.js';
import { keyLimitError } from '../rules.js';
import { DISPLAY_PREFIX_LENGTH, generateApiKey, hashApiKey, isWellFormedApiKey } from '../secrets.js';
import type { ApiKeyInfo, Authenticated, CreatedApiKey } from '../store.js';
import type { Accounts } from './accounts.js';
import { type Db, isUniqueViolation } from './database.js';

/** A new key whose 36-bit display prefix collides with an existing one (rare) is drawn again, this many times at most. */
const PREFIX_ATTEMPTS = 8;

const COLUMNS = KEY_COLUMNS;

export class ApiKeys {
  private readonly insertStmt;
  private readonly byIdStmt;
  private readonly byHashStmt;
  private readonly byPrefixStmt;
  private readonly listStmt;
  private readonly activeCountStmt;
  private readonly authStmt;
  private readonly touchStmt;
  private readonly revokeStmt;
  private readonly createTx;
  private readonly revokeTx;

  constructor(
    db: Db,
    private readonly clock: Clock,
    private readonly plans: PlanTable,
    private readonly accounts: Accounts,
    private readonly lastUsedResolutionMs: number,
    private readonly maxKeysPerAccount: number,
  ) {
    this.insertStmt = db.prepare<[number, Buffer, string, string, number], KeyRow>(
      `INSERT INTO api_keys (account_id, key_hash, prefix, last4, created_at) VALUES (?, ?, ?, ?, ?) RETURNING ${COLUMNS}`,
    );
    this.byIdStmt = db.prepare<[number], KeyRow>(`SELECT ${COLUMNS} FROM api_keys WHERE id = ?`);
    this.byHashStmt = db.prepare<[Buffer], KeyRow>(`SELECT ${COLUMNS} FROM api_keys WHERE key_hash = ?`);
    this.byPrefixStmt = db.prepare<[string], KeyRow>(`SELECT ${COLUMNS} FROM api_keys WHERE prefix = ?`);
    this.listStmt = db.prepare<[number], KeyRow>(`SELECT ${COLUMNS} FROM api_keys WHERE account_id = ? ORDER BY id`);
    this.activeCountStmt = db.prepare<[number], { n: number }>('SELECT count(*) AS n FROM api_keys WHERE account_id = ? AND revoked_at IS NULL');
    this.authStmt = db.prepare<[Buffer], KeyAccountRow>(
      `SELECT k.id, k.account_id, k.last_used_at, k.revoked_at, a.plan, a.cancel_at, a.disabled_at
       FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.key_hash = ?`,
    );
    this.touchStmt = db.prepare<[number, number]>('UPDATE api_keys SET last_used_at = ? WHERE id = ?');
    this.revokeStmt = db.prepare<[number, number]>('UPDATE api_keys SET revoked_at = coalesce(revoked_at, ?) WHERE id = ?');

    this.createTx = db.transaction((accountId: number): CreatedApiKey => {
      this.accounts.requireRow(accountId);
      // Counted in the (immediate) transaction that inserts: two creations cannot both pass the cap.
      if (this.activeCountStmt.get(accountId)!.n >= this.maxKeysPerAccount) throw keyLimitError(accountId, this.maxKeysPerAccount);
      const now = this.clock().getTime();
      for (let attempt = 1; ; attempt++) {
        const key = generateApiKey();
        try {
          const row = this.insertStmt.get(accountId, hashApiKey(key), key.slice(0, DISPLAY_PREFIX_LENGTH), key.slice(-4), now)!;
          return { key, info: toKeyInfo(row) };
        } catch (err) {
          // The display prefix can collide (rarely); the key itself cannot.
          if (!isUniqueViolation(err) || attempt >= PREFIX_ATTEMPTS) throw err;
        }
      }
    });

    this.revokeTx = db.transaction((ref: number | string, accountId: number | undefined): ApiKeyInfo | null => {
      let row: KeyRow | undefined;
      if (typeof ref === 'number') row = this.byIdStmt.get(ref);
      else if (isWellFormedApiKey(ref)) row = this.byHashStmt.get(hashApiKey(ref));
      else row = this.byPrefixStmt.get(ref);
      if (!row || (accountId !== undefined && row.account_id !== accountId)) return null;
      if (row.revoked_at === null) {
        this.revokeStmt.run(this.clock().getTime(), row.id);
        row = this.byIdStmt.get(row.id)!;
      }
      return toKeyInfo(row);
    });
  }

  /**
   * Issues a new key for the account. The full key is in the result and nowhere else. Throws
   * StoreError 'key_limit' when the account already holds `maxKeysPerAccount` active keys.
   */
  create(accountId: number): CreatedApiKey {
    return this.createTx.immediate(accountId);
  }

  /** The account's keys, revoked ones included, oldest first. */
  list(accountId: number): ApiKeyInfo[] {
    return this.listStmt.all(accountId).map(toKeyInfo);
  }

  get(keyId: number): ApiKeyInfo | null {
    const row = this.byIdStmt.get(keyId);
    return row ? toKeyInfo(row) : null;
  }

  /**
   * Revokes a key given by id, display prefix or the full key. With `accountId`, only a key of
   * that account is revoked. Returns the key (revoking twice keeps the first revocation time), or
   * null when there is no such key.
   */
  revoke(ref: number | string, options: { accountId?: number } = {}): ApiKeyInfo | null {
    return this.revokeTx.immediate(ref, options.accountId);
  }

  /**
   * Who a key belongs to, or null for a malformed, unknown or revoked key (one answer for all, the
   * service's uniform 401). A malformed key is rejected without touching the database; an unknown
   * or revoked key costs one indexed read and no write. A valid key updates last_used_at when it is
   * older than `lastUsedResolutionMs`. Disabled accounts are returned (`disabled`): telling them
   * apart is the service's job (403).
   */
  authenticate(rawKey: unknown): Authenticated | null {
    if (!isWellFormedApiKey(rawKey)) return null;
    const row = this.authStmt.get(hashApiKey(rawKey));
    if (!row || row.revoked_at !== null) return null;
    const now = this.clock().getTime();
    if (row.last_used_at === null || now - row.last_used_at >= this.lastUsedResolutionMs) this.touchStmt.run(now, row.id);
    return toAuthenticated(row, this.plans, now);
  }
}
