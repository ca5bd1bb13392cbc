/**
 * The dashboard's cookies (src/dashboard/cookies.ts): reading a Cookie header, and the exact
 * Set-Cookie values written (HttpOnly, SameSite=Strict, scoped to /dashboard, Secure over TLS).
 */
import { describe, expect, it } from 'vitest';
import { COOKIE_PATH, parseCookies, SESSION_COOKIE, serializeCookie } from '../../src/dashboard/cookies.js';

describe('parseCookies', () => {
  it('reads name=value pairs separated by semicolons, trimming spaces', () => {
    expect([...parseCookies('a=1; b=two;c=3 ;  d = x ')]).toEqual([
      ['a', '1'],
      ['b', 'two'],
      ['c', '3'],
      ['d', 'x'],
    ]);
  });

  it('keeps the first of two cookies with the same name (the most specific path comes first)', () => {
    expect(parseCookies('bgone_session=inner; bgone_session=outer').get('bgone_session')).toBe('inner');
  });

  it('removes the double quotes around a quoted value', () => {
    expect(parseCookies('a="quoted"; b=""; c="').get('a')).toBe('quoted');
    expect(parseCookies('a="quoted"; b=""; c="').get('b')).toBe('');
    expect(parseCookies('a="quoted"; b=""; c="').get('c')).toBe('"');
  });

  it('keeps "=" inside a value', () => {
    expect(parseCookies('t=abc==; u=a=b').get('t')).toBe('abc==');
    expect(parseCookies('t=abc==; u=a=b').get('u')).toBe('a=b');
  });

  it('skips parts without a name or without "="', () => {
    expect([...parseCookies('=nameless; flag; ; ok=1')]).toEqual([['ok', '1']]);
  });

  it('reads an empty header as no cookies', () => {
    expect(parseCookies('').size).toBe(0);
  });
});

describe('serializeCookie', () => {
  it('writes a browser-session cookie scoped to /dashboard, HttpOnly and SameSite=Strict', () => {
    expect(COOKIE_PATH).toBe('/dashboard');
    expect(serializeCookie(SESSION_COOKIE, 'abc_DEF-123', { secure: false })).toBe('bgone_session=abc_DEF-123; Path=/dashboard; HttpOnly; SameSite=Strict');
  });

  it('adds Secure when the request came over TLS', () => {
    expect(serializeCookie('bgone_csrf', 'v', { secure: true })).toBe('bgone_csrf=v; Path=/dashboard; HttpOnly; SameSite=Strict; Secure');
  });

  it('writes Max-Age in whole seconds, rounding down', () => {
    expect(serializeCookie('a', 'v', { secure: true, maxAgeSeconds: 3600.9 })).toBe('a=v; Path=/dashboard; HttpOnly; SameSite=Strict; Max-Age=3600; Secure');
  });

  it('deletes a cookie with Max-Age=0, also for a negative age', () => {
    expect(serializeCookie('a', '', { secure: false, maxAgeSeconds: 0 })).toBe('a=; Path=/dashboard; HttpOnly; SameSite=Strict; Max-Age=0');
    expect(serializeCookie('a', '', { secure: false, maxAgeSeconds: -5 })).toBe('a=; Path=/dashboard; HttpOnly; SameSite=Strict; Max-Age=0');
  });

  it.each([
    ['a name with a space', 'bad name', 'v'],
    ['a name with "="', 'a=b', 'v'],
    ['an empty name', '', 'v'],
    ['a value with ";"', 'a', 'v;Path=/'],
    ['a value with a space', 'a', 'v w'],
    ['a value with "="', 'a', 'abc='],
  ])('refuses %s (names and values are base64url)', (_what, name, value) => {
    expect(() => serializeCookie(name, value, { secure: false })).toThrow('cookie names and values are base64url here');
  });
});
