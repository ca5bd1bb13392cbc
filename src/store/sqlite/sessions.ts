/**
 * Dashboard sessions on SQLite: only the SHA-256 of a session id is stored (secrets.ts), found by
 * an indexed lookup. Expiry is fixed (`ttlMs` after login) and read from the store's clock;
 * expired rows are ignored at once and deleted lazily. Each session carries its own CSRF
 * synchronizer token.
 */

import type { Clock } from '../clock.js';
import { StoreError } from '../errors.js';
import { SESSION_COLUMNS, type SessionRow, toSession } from '../rows.js';
import { generateSessionToken, hashSessionToken, isWellFormedSessionToken } from '../secrets.js';
import type { CreatedSession, Session } from '../store.js';
import type { Db } from './database.js';

/** Expired sessions are deleted at most this often (lazily, by create). */
const PURGE_INTERVAL_MS = 10 * 60 * 1000;

const COLUMNS = SESSION_COLUMNS;

export class Sessions {
  private readonly insertStmt;
  private readonly byHashStmt;
  private readonly deleteByHashStmt;
  private readonly deleteByAccountStmt;
  private readonly purgeStmt;
  private readonly createTx;
  private lastPurgeMs = Number.NEGATIVE_INFINITY;

  constructor(
    db: Db,
    private readonly clock: Clock,
    /** Lifetime of a session from its creation (checked by the caller). */
    readonly ttlMs: number,
  ) {
    this.insertStmt = db.prepare<[Buffer, number, string, number, number], SessionRow>(
      `INSERT INTO sessions (token_hash, account_id, csrf_token, created_at, expires_at) VALUES (?, ?, ?, ?, ?) RETURNING ${COLUMNS}`,
    );
    this.byHashStmt = db.prepare<[Buffer], SessionRow>(`SELECT ${COLUMNS} FROM sessions WHERE token_hash = ?`);
    this.deleteByHashStmt = db.prepare<[Buffer]>('DELETE FROM sessions WHERE token_hash = ?');
    this.deleteByAccountStmt = db.prepare<[number]>('DELETE FROM sessions WHERE account_id = ?');
    this.purgeStmt = db.prepare<[number]>('DELETE FROM sessions WHERE expires_at <= ?');

    this.createTx = db.transaction((accountId: number): CreatedSession => {
      const now = this.clock().getTime();
      if (now - this.lastPurgeMs >= PURGE_INTERVAL_MS) {
        this.purgeStmt.run(now);
        this.lastPurgeMs = now;
      }
      const token = generateSessionToken();
      try {
        const row = this.insertStmt.get(hashSessionToken(token), accountId, generateSessionToken(), now, now + this.ttlMs)!;
        return { token, session: toSession(row) };
      } catch (err) {
        if ((err as { code?: unknown }).code === 'SQLITE_CONSTRAINT_FOREIGNKEY') throw new StoreError('not_found', `no account ${accountId}`);
        throw err;
      }
    });
  }

  /** Opens a session for the account (login or sign-up). The token is the cookie value, returned only here. */
  create(accountId: number): CreatedSession {
    return this.createTx.immediate(accountId);
  }

  /** The live session of a cookie value, or null (malformed, unknown, logged out or expired). */
  get(token: string | undefined): Session | null {
    if (!isWellFormedSessionToken(token)) return null;
    const row = this.byHashStmt.get(hashSessionToken(token));
    if (!row || row.expires_at <= this.clock().getTime()) return null;
    return toSession(row);
  }

  /** Logs out: the session is deleted. Returns whether it existed. */
  delete(token: string | undefined): boolean {
    if (!isWellFormedSessionToken(token)) return false;
    return this.deleteByHashStmt.run(hashSessionToken(token)).changes > 0;
  }

  /** Ends every session of an account (e.g. after a password change). */
  deleteForAccount(accountId: number): number {
    return this.deleteByAccountStmt.run(accountId).changes;
  }
}
