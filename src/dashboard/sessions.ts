/**
 * Sessions as seen by the dashboard: the HttpOnly, SameSite=Strict cookie (Secure over TLS) holding
 * the session id, resolved through the store's sessions table (src/store/sessions.ts) to the
 * account. The cookie lives as long as the session (fixed expiry, 12 h by default).
 */
import type { Account, Session, Store } from '../store/index.js';
import { Sessions } from '../store/index.js';
import { SESSION_COOKIE, serializeCookie } from './cookies.js';
import type { RequestInfo } from './http.js';

export interface SignedIn {
  session: Session;
  account: Account;
}

export class SessionManager {
  readonly sessions: Sessions;

  constructor(
    private readonly store: Store,
    ttlMs?: number,
  ) {
    this.sessions = new Sessions(store.db, store.clock, ttlMs);
  }

  /** The request's live session and its account, or null. */
  current(info: RequestInfo): SignedIn | null {
    const session = this.sessions.get(info.cookies.get(SESSION_COOKIE));
    if (!session) return null;
    const account = this.store.accounts.get(session.accountId);
    return account ? { session, account } : null;
  }

  /** A new session (a fresh id at every login: no fixation) and its Set-Cookie header. */
  start(accountId: number, secure: boolean): { session: Session; cookie: string } {
    const { token, session } = this.sessions.create(accountId);
    return { session, cookie: serializeCookie(SESSION_COOKIE, token, { secure, maxAgeSeconds: this.sessions.ttlMs / 1000 }) };
  }

  /** Logs out: deletes the session and returns the Set-Cookie header that clears the cookie. */
  end(info: RequestInfo): string {
    this.sessions.delete(info.cookies.get(SESSION_COOKIE));
    return serializeCookie(SESSION_COOKIE, '', { secure: info.secure, maxAgeSeconds: 0 });
  }
}
