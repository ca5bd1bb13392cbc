/**
 * API keys on PostgreSQL: creation under the account's row lock (the cap holds across nodes),
 * revocation, and authentication of a raw key by its hash.
 */
import type pg from 'pg';
import type { PlanTable } from '../plans.js';
import { KEY_COLUMNS, type KeyAccountRow, type KeyRow, toAuthenticated, toKeyInfo } from '../rows.js';
import { keyLimitError } from '../rules.js';
import { DISPLAY_PREFIX_LENGTH, generateApiKey, hashApiKey, isWellFormedApiKey } from '../secrets.js';
import type { ApiKeyInfo, Authenticated, CreatedApiKey, KeyStore } from '../store.js';
import type { Queryable } from './context.js';
import { notFound } from './errors.js';
import { accountRow, inTransaction } from './pool.js';

export class PostgresKeys implements KeyStore {
  constructor(
    private readonly pool: pg.Pool,
    private readonly now: () => number,
    private readonly plans: PlanTable,
    private readonly lastUsedResolutionMs: number,
    private readonly maxKeysPerAccount: number,
  ) {}

  async create(accountId: number): Promise<CreatedApiKey> {
    return inTransaction(this.pool, (c) => this.createIn(c, accountId));
  }

  async list(accountId: number): Promise<ApiKeyInfo[]> {
    const { rows } = await this.pool.query<KeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE account_id = $1 ORDER BY id`, [accountId]);
    return rows.map(toKeyInfo);
  }

  async get(keyId: number): Promise<ApiKeyInfo | null> {
    const { rows } = await this.pool.query<KeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE id = $1`, [keyId]);
    return rows[0] ? toKeyInfo(rows[0]) : null;
  }

  /**
   * Inside a transaction (`q` is its client): the account row is locked first, so that creations
   * for one account on any number of nodes are counted against the cap one after another.
   */
  async createIn(q: Queryable, accountId: number): Promise<CreatedApiKey> {
    if (!(await accountRow(q, accountId, true))) throw notFound(accountId);
    const { rows: active } = await q.query<{ n: number }>('SELECT count(*) AS n FROM api_keys WHERE account_id = $1 AND revoked_at IS NULL', [accountId]);
    if (Number(active[0]?.n ?? 0) >= this.maxKeysPerAccount) throw keyLimitError(accountId, this.maxKeysPerAccount);
    const now = this.now();
    for (;;) {
      const key = generateApiKey();
      // No row: no such account, or (rarely) a display prefix already taken, then drawn again.
      const { rows } = await q.query<KeyRow>(
        `INSERT INTO api_keys (account_id, key_hash, prefix, last4, created_at)
         SELECT id, $2, $3, $4, $5 FROM accounts WHERE id = $1
         ON CONFLICT DO NOTHING RETURNING ${KEY_COLUMNS}`,
        [accountId, hashApiKey(key), key.slice(0, DISPLAY_PREFIX_LENGTH), key.slice(-4), now],
      );
      if (rows[0]) return { key, info: toKeyInfo(rows[0]) };
      if (!(await accountRow(q, accountId))) throw notFound(accountId);
    }
  }

  async revoke(ref: number | string, options?: { accountId?: number }): Promise<ApiKeyInfo | null> {
    let where: string;
    let value: unknown;
    if (typeof ref === 'number') [where, value] = ['id = $1', ref];
    else if (isWellFormedApiKey(ref)) [where, value] = ['key_hash = $1', hashApiKey(ref)];
    else [where, value] = ['prefix = $1', ref];
    const { rows } = await this.pool.query<KeyRow>(
      `UPDATE api_keys SET revoked_at = coalesce(revoked_at, $2)
       WHERE ${where} AND ($3::bigint IS NULL OR account_id = $3) RETURNING ${KEY_COLUMNS}`,
      [value, this.now(), options?.accountId ?? null],
    );
    return rows[0] ? toKeyInfo(rows[0]) : null;
  }

  async authenticate(rawKey: unknown): Promise<Authenticated | null> {
    if (!isWellFormedApiKey(rawKey)) return null;
    const { rows } = await this.pool.query<KeyAccountRow>(
      `SELECT k.id, k.account_id, k.last_used_at, k.revoked_at, a.plan, a.cancel_at, a.disabled_at
       FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.key_hash = $1`,
      [hashApiKey(rawKey)],
    );
    const row = rows[0];
    if (!row || row.revoked_at !== null) return null;
    const now = this.now();
    if (row.last_used_at === null || now - row.last_used_at >= this.lastUsedResolutionMs) {
      await this.pool.query('UPDATE api_keys SET last_used_at = $2 WHERE id = $1', [row.id, now]);
    }
    return toAuthenticated(row, this.plans, now);
  }
}
