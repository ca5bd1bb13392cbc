/**
 * Sessions as seen by the dashboard: the HttpOnly, SameSite=Strict cookie (Secure over TLS) holding
 * the session id, resolved through the store's sessions to the account. The cookie lives as long as
 * the session (fixed expiry, the store's `sessionTtlMs`, 12 h by default). The callers read the
 * cookie (SESSION_COOKIE) from the request and pass its value here.
 */
import type { Account, Session, Store } from '../store/index.js';
import { SESSION_COOKIE, serializeCookie } from './cookies.js';

export interface SignedIn {
  session: Session;
  account: Account;
}

export class SessionManager {
  constructor(private readonly store: Store) {}

  /**
   * The live session of a session cookie value and its account, or null. A disabled account has
   * none: disabling deletes its sessions, and this also covers one a login started meanwhile.
   */
  async current(token: string | undefined): Promise<SignedIn | null> {
    const session = await this.store.sessions.get(token);
    if (!session) return null;
    const account = await this.store.accounts.get(session.accountId);
    return account && !account.disabled ? { session, account } : null;
  }

  /** A new session (a fresh id at every login: no fixation) and its Set-Cookie header. */
  async start(accountId: number, secure: boolean): Promise<{ session: Session; cookie: string }> {
    const { token, session } = await this.store.sessions.create(accountId);
    return { session, cookie: serializeCookie(SESSION_COOKIE, token, { secure, maxAgeSeconds: this.store.sessions.ttlMs / 1000 }) };
  }

  /** Logs out: deletes the session and returns the Set-Cookie header that clears the cookie. */
  async end(token: string | undefined, secure: boolean): Promise<string> {
    await this.store.sessions.delete(token);
    return serializeCookie(SESSION_COOKIE, '', { secure, maxAgeSeconds: 0 });
  }
}
