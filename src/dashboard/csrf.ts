/**
 * CSRF protection for every form.
 *
 * - Logged in: a synchronizer token stored with the session (the store's sessions), rendered into
 *   each form as the hidden field `csrf` (or sent as the X-CSRF-Token header by the try-it script),
 *   and compared in constant time.
 * - Before login (sign-up, login): a signed double-submit cookie. The cookie holds a random nonce;
 *   the form holds HMAC(server secret, nonce). A cross-site page can neither read the cookie nor
 *   forge the HMAC, and a cookie planted by a sibling host is useless without the matching token.
 *
 * Both cookies are HttpOnly and SameSite=Strict on top of this.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

export const CSRF_FIELD = 'csrf';
export const CSRF_HEADER = 'x-csrf-token';
export const PRE_LOGIN_COOKIE = 'bgone_csrf';
const NONCE_PATTERN = /^[A-Za-z0-9_-]{43}$/;

export function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a, 'utf8');
  const y = Buffer.from(b, 'utf8');
  return x.length === y.length && x.length > 0 && timingSafeEqual(x, y);
}

/** The session's synchronizer token against what the request sent. */
export function checkSessionToken(sessionToken: string, sent: string | undefined): boolean {
  return typeof sent === 'string' && safeEqual(sessionToken, sent);
}

export class PreLoginCsrf {
  constructor(private readonly secret: Buffer = randomBytes(32)) {}

  /** The nonce to keep (the request's own, when well-formed) and the token for the form. */
  issue(cookieNonce: string | undefined): { nonce: string; token: string; fresh: boolean } {
    const fresh = cookieNonce === undefined || !NONCE_PATTERN.test(cookieNonce);
    const nonce = fresh ? randomBytes(32).toString('base64url') : cookieNonce;
    return { nonce, token: this.sign(nonce), fresh };
  }

  verify(cookieNonce: string | undefined, sent: string | undefined): boolean {
    if (cookieNonce === undefined || !NONCE_PATTERN.test(cookieNonce) || typeof sent !== 'string') return false;
    return safeEqual(this.sign(cookieNonce), sent);
  }

  private sign(nonce: string): string {
    return createHmac('sha256', this.secret).update(`bgone-pre-login-csrf:${nonce}`).digest('base64url');
  }
}
