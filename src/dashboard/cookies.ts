/**
 * Cookies of the dashboard: always HttpOnly and SameSite=Strict, scoped to /dashboard, and Secure
 * when the request came over TLS (see config.ts: X-Forwarded-Proto is honoured only behind a
 * trusted proxy).
 */
export const SESSION_COOKIE = 'bgone_session';
export const COOKIE_PATH = '/dashboard';

export function parseCookies(header: string): Map<string, string> {
  const cookies = new Map<string, string>();
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 1) continue;
    const name = part.slice(0, eq).trim();
    let value = part.slice(eq + 1).trim();
    if (value.startsWith('"') && value.endsWith('"') && value.length >= 2) value = value.slice(1, -1);
    if (!cookies.has(name)) cookies.set(name, value); // the most specific path comes first
  }
  return cookies;
}

export interface CookieOptions {
  secure: boolean;
  /** Seconds; 0 deletes the cookie; undefined: a browser-session cookie. */
  maxAgeSeconds?: number;
}

export function serializeCookie(name: string, value: string, options: CookieOptions): string {
  if (!/^[A-Za-z0-9_-]+$/.test(name) || !/^[A-Za-z0-9_-]*$/.test(value)) throw new Error('cookie names and values are base64url here');
  let cookie = `${name}=${value}; Path=${COOKIE_PATH}; HttpOnly; SameSite=Strict`;
  if (options.maxAgeSeconds !== undefined) cookie += `; Max-Age=${Math.max(0, Math.floor(options.maxAgeSeconds))}`;
  if (options.secure) cookie += '; Secure';
  return cookie;
}
