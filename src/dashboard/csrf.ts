/**
 * CSRF protection for every form.
 *
 * - Logged in: a synchronizer token stored with the session (the store's sessions), rendered into
 *   each form as the hidden field `csrf` (or sent as the X-CSRF-Token header by the try-it script),
 *   and compared in constant time.
 * - Before login (sign-up, login): a signed double-submit cookie. The cookie holds a random nonce;
 *   the form holds HMAC(server secret, nonce). A cross-site page can neither read the cookie nor
 *   forge the HMAC, and a cookie planted by a sibling host is useless without the matching token.
 *   The secret is derived from the store's server key (Store.serverKey), so every node on one
 *   database accepts a form any of them served, and a restart expires no form.
 *
 * Both cookies are HttpOnly and SameSite=Strict on top of this.
 */
import { createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';

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
  #secret: Promise<Buffer> | undefined;

  /** `serverKey`: the store's server key, read once (again after a failed read). */
  constructor(private readonly serverKey: () => Promise<Buffer>) {}

  /** Starts reading the server key now, so that the first form does not wait for it. */
  preload(): void {
    this.secret().catch(() => {}); // a failed read is tried again by the first form
  }

  /** The nonce to keep (the request's own, when well-formed) and the token for the form. */
  async issue(cookieNonce: string | undefined): Promise<{ nonce: string; token: string; fresh: boolean }> {
    const fresh = cookieNonce === undefined || !NONCE_PATTERN.test(cookieNonce);
    const nonce = fresh ? randomBytes(32).toString('base64url') : cookieNonce;
    return { nonce, token: await this.sign(nonce), fresh };
  }

  async verify(cookieNonce: string | undefined, sent: string | undefined): Promise<boolean> {
    if (cookieNonce === undefined || !NONCE_PATTERN.test(cookieNonce) || typeof sent !== 'string') return false;
    return safeEqual(await this.sign(cookieNonce), sent);
  }

  private async sign(nonce: string): Promise<string> {
    return createHmac('sha256', await this.secret())
      .update(`bgone-pre-login-csrf:${nonce}`)
      .digest('base64url');
  }

  /** The HMAC key: its own key derived from the server key, which other uses may share. */
  private secret(): Promise<Buffer> {
    this.#secret ??= this.serverKey().then(
      (key) => Buffer.from(hkdfSync('sha256', key, Buffer.alloc(0), 'bgone dashboard pre-login csrf', 32)),
      (err: unknown) => {
        this.#secret = undefined;
        throw err;
      },
    );
    return this.#secret;
  }
}
