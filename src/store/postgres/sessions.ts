/** Dashboard sessions on PostgreSQL: stored by the token's hash, purged lazily once expired. */
import type pg from 'pg';
import { SESSION_COLUMNS, type SessionRow, toSession } from '../rows.js';
import { generateSessionToken, hashSessionToken, isWellFormedSessionToken } from '../secrets.js';
import type { CreatedSession, Session, SessionStore } from '../store.js';
import { notFound } from './errors.js';

/** Expired sessions are deleted at most this often (lazily, on a creation). */
const PURGE_INTERVAL_MS = 10 * 60 * 1000;

export class PostgresSessions implements SessionStore {
  #lastPurgeMs = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly pool: pg.Pool,
    private readonly now: () => number,
    readonly ttlMs: number,
  ) {}

  async create(accountId: number): Promise<CreatedSession> {
    const now = this.now();
    if (now - this.#lastPurgeMs >= PURGE_INTERVAL_MS) {
      this.#lastPurgeMs = now;
      await this.pool.query('DELETE FROM sessions WHERE expires_at <= $1', [now]);
    }
    const token = generateSessionToken();
    const { rows } = await this.pool.query<SessionRow>(
      `INSERT INTO sessions (token_hash, account_id, csrf_token, created_at, expires_at)
       SELECT $1, id, $3, $4, $5 FROM accounts WHERE id = $2 RETURNING ${SESSION_COLUMNS}`,
      [hashSessionToken(token), accountId, generateSessionToken(), now, now + this.ttlMs],
    );
    if (!rows[0]) throw notFound(accountId);
    return { token, session: toSession(rows[0]) };
  }

  async get(token: string | undefined): Promise<Session | null> {
    if (!isWellFormedSessionToken(token)) return null;
    const { rows } = await this.pool.query<SessionRow>(`SELECT ${SESSION_COLUMNS} FROM sessions WHERE token_hash = $1`, [hashSessionToken(token)]);
    const row = rows[0];
    return row && row.expires_at > this.now() ? toSession(row) : null;
  }

  async delete(token: string | undefined): Promise<boolean> {
    if (!isWellFormedSessionToken(token)) return false;
    const { rowCount } = await this.pool.query('DELETE FROM sessions WHERE token_hash = $1', [hashSessionToken(token)]);
    return (rowCount ?? 0) > 0;
  }

  async deleteForAccount(accountId: number): Promise<number> {
    const { rowCount } = await this.pool.query('DELETE FROM sessions WHERE account_id = $1', [accountId]);
    return rowCount ?? 0;
  }
}
