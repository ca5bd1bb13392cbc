/**
 * API keys on PostgreSQL: creation under the account's row lock (the cap holds across nodes),
 * revocation, and authentication of a raw key by its hash.
 *
 * Authentication keeps what it read of a valid key (its row and its account's) for `cacheMs`
 * (1 s by default), measured on the store's clock: within that bound a request with the same key
 * costs no round trip. A revocation, a disabled account or a plan change made on another node is
 * seen by this node within the bound; made through this node, at once (its entries are dropped).
 * A disabled account is refused its reservations at once on every node whatever the cache holds:
 * reserve reads the account row. Unknown and revoked keys are never kept. The lookups that miss
 * go in groups (../groups.ts): one statement for all the keys asked for meanwhile, which also
 * writes last_used_at where it is due.
 */
import type pg from 'pg';
import { Grouped, type Settled } from '../groups.js';
import type { PlanTable } from '../plans.js';
import { KEY_COLUMNS, type KeyAccountRow, type KeyRow, toAuthenticated, toKeyInfo } from '../rows.js';
import { keyLimitError } from '../rules.js';
import { DISPLAY_PREFIX_LENGTH, generateApiKey, hashApiKey, isWellFormedApiKey } from '../secrets.js';
import type { ApiKeyInfo, Authenticated, CreatedApiKey, KeyStore } from '../store.js';
import type { Queryable } from './context.js';
import { notFound } from './errors.js';
import { accountRow, inTransaction } from './pool.js';

/** Keys kept at most (the oldest entries go first beyond it). */
const CACHE_ENTRIES = 10_000;
/** Lookups per group. */
const MAX_GROUP = 256;

/** A valid key's row, read at `at` (the store's clock). */
interface CachedKey {
  row: KeyAccountRow;
  at: number;
}

/** The lookup of one group: each key's row and account, last_used_at written where due. */
const LOOKUP_SQL = `WITH found AS MATERIALIZED (
    SELECT k.id, k.key_hash, k.account_id, k.last_used_at, k.revoked_at, a.plan, a.cancel_at, a.disabled_at
    FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.key_hash = ANY($1::bytea[])
  ), touched AS (
    UPDATE api_keys SET last_used_at = $2
    WHERE id IN (SELECT id FROM found WHERE revoked_at IS NULL AND (last_used_at IS NULL OR $2 - last_used_at >= $3))
  )
  SELECT * FROM found`;

export class PostgresKeys implements KeyStore {
  readonly #cache = new Map<string, CachedKey>();
  readonly #lookups: Grouped<Buffer, KeyAccountRow | null>;

  constructor(
    private readonly pool: pg.Pool,
    private readonly now: () => number,
    private readonly plans: PlanTable,
    private readonly lastUsedResolutionMs: number,
    private readonly maxKeysPerAccount: number,
    /** How long a valid key's lookup is kept (0: never). */
    private readonly cacheMs: number,
  ) {
    this.#lookups = new Grouped((hashes) => this.#lookupGroup(hashes), MAX_GROUP);
  }

  /** Drops what the cache holds of the account's keys (its plan or state changed through this node). */
  forgetAccount(accountId: number): void {
    for (const [hash, entry] of this.#cache) if (entry.row.account_id === accountId) this.#cache.delete(hash);
  }

  #forgetKey(keyId: number): void {
    for (const [hash, entry] of this.#cache) if (entry.row.id === keyId) this.#cache.delete(hash);
  }

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
    if (rows[0]) this.#forgetKey(rows[0].id);
    return rows[0] ? toKeyInfo(rows[0]) : null;
  }

  async authenticate(rawKey: unknown): Promise<Authenticated | null> {
    if (!isWellFormedApiKey(rawKey)) return null;
    const hash = hashApiKey(rawKey);
    const name = hash.toString('base64');
    const cached = this.#cache.get(name);
    if (cached) {
      const now = this.now();
      const age = now - cached.at;
      // Kept, unless its last use is due to be written: the lookup writes it.
      if (age >= 0 && age < this.cacheMs && !this.#lastUseDue(cached.row, now)) return toAuthenticated(cached.row, this.plans, now);
      this.#cache.delete(name);
    }
    const row = await this.#lookups.submit(hash);
    const now = this.now();
    if (!row || row.revoked_at !== null) return null;
    if (this.cacheMs > 0) {
      this.#cache.delete(name);
      this.#cache.set(name, { row, at: now });
      if (this.#cache.size > CACHE_ENTRIES) this.#cache.delete(this.#cache.keys().next().value!);
    }
    return toAuthenticated(row, this.plans, now);
  }

  #lastUseDue(row: KeyAccountRow, now: number): boolean {
    return row.last_used_at === null || now - row.last_used_at >= this.lastUsedResolutionMs;
  }

  /** One group of lookups: one statement for every key asked for (the same key asked twice is read once). */
  async #lookupGroup(hashes: Buffer[]): Promise<Settled<KeyAccountRow | null>[]> {
    const names = hashes.map((h) => h.toString('base64'));
    const unique = [...new Map(names.map((n, i) => [n, hashes[i]!])).values()];
    const now = this.now();
    const { rows } = await this.pool.query<KeyAccountRow & { key_hash: Buffer }>({ name: 'bgone_key_lookup', text: LOOKUP_SQL }, [
      unique,
      now,
      this.lastUsedResolutionMs,
    ]);
    // As the statement left them: a last use due was written now.
    for (const r of rows) if (r.revoked_at === null && this.#lastUseDue(r, now)) r.last_used_at = now;
    const byName = new Map(rows.map((r) => [r.key_hash.toString('base64'), r]));
    return names.map((n) => ({ value: byName.get(n) ?? null }));
  }
}
