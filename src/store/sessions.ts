/**
 * Dashboard sessions: a session id is 32 random bytes (base64url in an HttpOnly cookie); only its
 * SHA-256 is stored, so a copy of the database does not hold usable session ids. As for API keys, a
 * fast unsalted hash is right for 256 random bits and lets a session be found by an indexed lookup.
 *
 * Expiry is fixed (`ttlMs` after login, default 12 h) and read from the store's clock; expired rows
 * are ignored at once and deleted lazily. Each session carries its own CSRF synchronizer token.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Clock } from './clock.js';
import type { Db } from './database.js';
import { StoreError } from './errors.js';

export const SESSION_TTL_MS = 12 * 60 * 60 * 1000;
const TOKEN_BYTES = 32;
/** A session id as issued: 43 base64url characters. Anything else is rejected without a query. */
const TOKEN_PATTERN = /^[A-Za-z0-9_-]{43}$/;
const PURGE_INTERVAL_MS = 10 * 60 * 1000;

export interface Session {
  readonly id: number;
  readonly accountId: number;
  /** The synchronizer token every form of this session must send back. */
  readonly csrfToken: string;
  readonly createdAt: Date;
  readonly expiresAt: Date;
}

export interface CreatedSession {
  /** The cookie value: returned once, never stored. */
  readonly token: string;
  readonly session: Session;
}

interface SessionRow {
  id: number;
  account_id: number;
  csrf_token: string;
  created_at: number;
  expires_at: number;
}

function hashToken(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}

function toSession(row: SessionRow): Session {
  return {
    id: row.id,
    accountId: row.account_id,
    csrfToken: row.csrf_token,
    createdAt: new Date(row.created_at),
    expiresAt: new Date(row.expires_at),
  };
}

export class Sessions {
  private readonly insertStmt;
  private readonly byHashStmt;
  private readonly deleteByHashStmt;
  private readonly deleteByAccountStmt;
  private readonly purgeStmt;
  private lastPurgeMs = Number.NEGATIVE_INFINITY;

  constructor(
    db: Db,
    private readonly clock: Clock,
    readonly ttlMs: number = SESSION_TTL_MS,
  ) {
    if (!Number.isSafeInteger(ttlMs) || ttlMs < 1) throw new StoreError('invalid_argument', 'session ttlMs must be a positive integer');
    this.insertStmt = db.prepare<[Buffer, number, string, number, number], SessionRow>(
      'INSERT INTO sessions (token_hash, account_id, csrf_token, created_at, expires_at) VALUES (?, ?, ?, ?, ?) RETURNING id, account_id, csrf_token, created_at, expires_at',
    );
    this.byHashStmt = db.prepare<[Buffer], SessionRow>('SELECT id, account_id, csrf_token, created_at, expires_at FROM sessions WHERE token_hash = ?');
    this.deleteByHashStmt = db.prepare<[Buffer]>('DELETE FROM sessions WHERE token_hash = ?');
    this.deleteByAccountStmt = db.prepare<[number]>('DELETE FROM sessions WHERE account_id = ?');
    this.purgeStmt = db.prepare<[number]>('DELETE FROM sessions WHERE expires_at <= ?');
  }

  /** Opens a session for the account (login or sign-up). */
  create(accountId: number): CreatedSession {
    const now = this.clock().getTime();
    this.purge(now);
    const token = randomBytes(TOKEN_BYTES).toString('base64url');
    const csrf = randomBytes(TOKEN_BYTES).toString('base64url');
    const row = this.insertStmt.get(hashToken(token), accountId, csrf, now, now + this.ttlMs)!;
    return { token, session: toSession(row) };
  }

  /** The live session of a cookie value, or null (malformed, unknown, logged out or expired). */
  get(token: string | undefined): Session | null {
    if (token === undefined || !TOKEN_PATTERN.test(token)) return null;
    const row = this.byHashStmt.get(hashToken(token));
    if (!row || row.expires_at <= this.clock().getTime()) return null;
    return toSession(row);
  }

  /** Logs out: the session is deleted. Returns whether it existed. */
  delete(token: string | undefined): boolean {
    if (token === undefined || !TOKEN_PATTERN.test(token)) return false;
    return this.deleteByHashStmt.run(hashToken(token)).changes > 0;
  }

  /** Ends every session of an account (e.g. after a password change). */
  deleteForAccount(accountId: number): number {
    return this.deleteByAccountStmt.run(accountId).changes;
  }

  private purge(nowMs: number): void {
    if (nowMs - this.lastPurgeMs < PURGE_INTERVAL_MS) return;
    this.purgeStmt.run(nowMs);
    this.lastPurgeMs = nowMs;
  }
}
