/**
 * The dashboard's HTTP routes against a real server (startServer + mountDashboard on 127.0.0.1,
 * port 0) and a real SQLite file: sign-up, login, logout, CSRF, login throttling, keys, usage,
 * plan cancel/resume, billing, session expiry on a test clock, escaping, and the try-it endpoint
 * (the only test that runs the model).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { usageChart } from '../../src/dashboard/chart.js';
import { html } from '../../src/dashboard/html.js';
import type { BillingProvider } from '../../src/dashboard/index.js';
import { hashPassword, verifyPassword } from '../../src/dashboard/passwords.js';
import { SESSION_TTL_MS } from '../../src/store/index.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { csrfToken, DashboardClient, message, newKey, parseSetCookie, tryToken } from '../helpers/dashboard-client.js';
import { type DashboardServer, startDashboardServer, useDashboardServers } from '../helpers/dashboard-server.js';
import { readPhoto } from '../helpers/paths.js';

const PASSWORD = 'correct horse battery';
const MINUTE = 60_000;

const server = useDashboardServers();

async function accountOf(s: DashboardServer, email: string) {
  const account = await s.store.accounts.getByEmail(email);
  if (!account) throw new Error(`no account ${email}`);
  return account;
}

/** POSTs to the API with a key; an empty multipart body is enough to see the authentication answer. */
async function apiStatus(url: string, key: string): Promise<{ status: number; code?: string }> {
  const res = await fetch(`${url}/api/v1/remove`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: new FormData() });
  const body = (await res.json()) as { code?: string };
  return { status: res.status, code: body.code };
}

async function signedUp(s: DashboardServer, email = 'ada@example.com') {
  const client = new DashboardClient(s.url);
  const page = await client.signUp(email, PASSWORD);
  expect(page.status).toBe(200);
  return { client, key: page.key, account: await accountOf(s, email) };
}

describe('pages and cookies', () => {
  it('sends visitors without a session to the login page, which sets a pre-login CSRF cookie', async () => {
    const s = await server();
    const client = new DashboardClient(s.url);
    for (const path of ['/dashboard', '/dashboard/keys', '/dashboard/plan', '/dashboard/try']) {
      const res = await client.get(path);
      expect(res.status, path).toBe(303);
      expect(res.location).toBe('/dashboard/login');
    }
    const login = await client.get('/dashboard/login');
    expect(login.status).toBe(200);
    expect(login.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(login.headers.get('cache-control')).toBe('no-store');
    expect(login.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(login.headers.get('x-frame-options')).toBe('DENY');
    expect(login.html).toContain('<meta name="viewport" content="width=device-width, initial-scale=1">');
    const cookie = parseSetCookie(login.setCookies[0]!);
    expect(cookie.name).toBe('bgone_csrf');
    expect(cookie.attributes).toEqual(expect.arrayContaining(['httponly', 'samesite=strict', 'path=/dashboard']));
    expect(cookie.attributes).not.toContain('secure');
  });

  it('loads no asset from outside the service, and serves its own CSS and script', async () => {
    const s = await server();
    const { client } = await signedUp(s);
    const visitor = new DashboardClient(s.url);
    for (const path of ['/dashboard', '/dashboard/keys', '/dashboard/plan', '/dashboard/try', '/dashboard/login', '/dashboard/signup']) {
      const page = await (path.endsWith('login') || path.endsWith('signup') ? visitor : client).get(path);
      expect(page.status, path).toBe(200);
      const urls = [...page.html.matchAll(/\s(?:src|href|action)="([^"]*)"/g)].map((m) => m[1]!);
      expect(urls.length).toBeGreaterThan(0);
      for (const url of urls) expect(url, `${path}: ${url}`).toMatch(/^(\/dashboard|#)/);
    }
    const page = await client.get('/dashboard');
    const css = /href="(\/dashboard\/assets\/dashboard\.css\?v=\w+)"/.exec(page.html)![1]!;
    const js = /src="(\/dashboard\/assets\/dashboard\.js\?v=\w+)"/.exec(page.html)![1]!;
    const cssRes = await fetch(`${s.url}${css}`);
    expect(cssRes.status).toBe(200);
    expect(cssRes.headers.get('content-type')).toContain('text/css');
    expect(await cssRes.text()).toContain('.checker');
    const jsRes = await fetch(`${s.url}${js}`);
    expect(jsRes.headers.get('content-type')).toContain('javascript');
    expect(await jsRes.text()).toContain('X-CSRF-Token');
  });

  it('answers 404 for unknown dashboard paths and 405 (with Allow) for a wrong method', async () => {
    const s = await server();
    const nope = await fetch(`${s.url}/dashboard/nope`);
    expect(nope.status).toBe(404);
    expect(nope.headers.get('content-type')).toContain('text/html');
    const wrong = await fetch(`${s.url}/dashboard/logout`);
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get('allow')).toBe('POST');
  });

  it('marks cookies Secure only behind a trusted proxy that says https', async () => {
    const plain = await server();
    const spoofed = await new DashboardClient(plain.url).get('/dashboard/login', { 'x-forwarded-proto': 'https' });
    expect(parseSetCookie(spoofed.setCookies[0]!).attributes).not.toContain('secure');

    const proxied = await server({ trustProxy: true });
    const https = new DashboardClient(proxied.url, { 'x-forwarded-proto': 'https' });
    const page = await https.get('/dashboard/login');
    expect(parseSetCookie(page.setCookies[0]!).attributes).toContain('secure');
    const signup = await https.signUp('tls@example.com', PASSWORD);
    const session = signup.setCookies.map(parseSetCookie).find((c) => c.name === 'bgone_session')!;
    expect(session.attributes).toEqual(expect.arrayContaining(['httponly', 'samesite=strict', 'secure']));
    const http = await new DashboardClient(proxied.url, { 'x-forwarded-proto': 'http' }).get('/dashboard/login');
    expect(parseSetCookie(http.setCookies[0]!).attributes).not.toContain('secure');
  });

  it('reads BGONE_TRUST_PROXY strictly', () => {
    expect(loadConfig({}).trustProxy).toBe(false);
    expect(loadConfig({ BGONE_TRUST_PROXY: 'true' }).trustProxy).toBe(true);
    expect(loadConfig({ BGONE_TRUST_PROXY: 'false' }).trustProxy).toBe(false);
    expect(() => loadConfig({ BGONE_TRUST_PROXY: 'maybe' })).toThrow(/BGONE_TRUST_PROXY/);
  });
});

describe('sign-up', () => {
  it('creates a Free account with an scrypt password hash and shows its first key once', async () => {
    const s = await server();
    const client = new DashboardClient(s.url);
    const page = await client.signUp('Ada@Example.com', PASSWORD);
    expect(page.status).toBe(200);
    expect(page.key).toMatch(/^rb-sk_[A-Za-z0-9_-]{43}$/);
    expect(page.html).toContain('you will not see this key again');
    expect(page.html).toMatch(/<button type="button" data-copy="new-key">Copy<\/button>/);
    const session = page.setCookies.map(parseSetCookie).find((c) => c.name === 'bgone_session')!;
    expect(session.value).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(session.attributes).toEqual(expect.arrayContaining(['httponly', 'samesite=strict', 'path=/dashboard', `max-age=${SESSION_TTL_MS / 1000}`]));
    expect(session.attributes).not.toContain('secure');

    const account = await accountOf(s, 'ada@example.com');
    expect(account.plan).toBe('free');
    const stored = (await s.store.accounts.passwordHash(account.id))!;
    expect(stored).toMatch(/^scrypt\$32768\$8\$1\$[A-Za-z0-9_-]{22}\$[A-Za-z0-9_-]{43}$/);
    expect(stored).not.toContain(PASSWORD);
    // The key works on the API, and only its hash is stored: the keys page never shows it again.
    expect((await s.store.keys.authenticate(page.key))?.accountId).toBe(account.id);
    const keys = await client.get('/dashboard/keys');
    expect(keys.html).not.toContain(page.key);
    expect(keys.html).toContain(`${page.key.slice(0, 12)}…${page.key.slice(-4)}`);
    // Session ids are stored hashed (read from the SQLite file).
    const row = SqliteStore.databaseOf(s.store).prepare('SELECT token_hash FROM sessions').get() as { token_hash: Buffer };
    expect(row.token_hash.length).toBe(32);
    expect(row.token_hash.toString('base64url')).not.toBe(session.value);
  });

  it('does not reveal whether an email is registered', async () => {
    const s = await server();
    await signedUp(s, 'taken@example.com');
    const attempt = async (email: string) => {
      const client = new DashboardClient(s.url);
      const page = await client.signUp(email, PASSWORD);
      return { status: page.status, message: message(page.html), session: client.cookies.has('bgone_session'), key: page.key };
    };
    const taken = await attempt('TAKEN@example.com');
    const invalid = await attempt('not-an-email');
    expect(taken).toEqual(invalid);
    expect(taken.status).toBe(400);
    expect(taken.session).toBe(false);
    expect(taken.key).toBe('');
    expect(taken.message).toMatch(/check/i);
    expect(taken.message).not.toMatch(/exist|taken|already (registered|used)/i);
    expect(await s.store.accounts.list()).toHaveLength(1);
  });

  it('refuses a malformed email (HTML in the domain, quotes, no top-level domain) and creates nothing', async () => {
    const s = await server();
    for (const email of ['x@ex<b>ample.com', '"ada"@example.com', 'ada@example', 'ada@exam_ple.com']) {
      const client = new DashboardClient(s.url);
      const page = await client.signUp(email, PASSWORD);
      expect(page.status, email).toBe(400);
      expect(message(page.html)).toMatch(/check the email address/i);
      expect(page.key).toBe('');
      expect(client.cookies.has('bgone_session')).toBe(false);
    }
    expect(await s.store.accounts.list()).toEqual([]);
  });

  it('states the password rule', async () => {
    const s = await server();
    const page = await new DashboardClient(s.url).signUp('short@example.com', 'abc');
    expect(page.status).toBe(400);
    expect(message(page.html)).toMatch(/at least 10 characters/);
    expect(await s.store.accounts.getByEmail('short@example.com')).toBeNull();
  });

  it('escapes every interpolated value', async () => {
    const s = await server();
    // An email holds none of < > " '; & is allowed, and unescaped it would read as an entity.
    const email = 'ada&lt&gt@example.com';
    const { client } = await signedUp(s, email);
    for (const path of ['/dashboard', '/dashboard/plan']) {
      const page = await client.get(path);
      expect(page.html, path).not.toContain('ada&lt&gt@');
      expect(page.html, path).toContain('ada&amp;lt&amp;gt@example.com');
    }
    expect(html`<a title="${'"><script>'}">${'<b>'}</a>`.value).toBe('<a title="&quot;&gt;&lt;script&gt;">&lt;b&gt;</a>');
  });
});

describe('login and logout', () => {
  it('answers an unknown email and a wrong password identically, and logs in with the right one', async () => {
    const s = await server();
    await signedUp(s);
    const unknown = await new DashboardClient(s.url).logIn('nobody@example.com', PASSWORD);
    const wrong = await new DashboardClient(s.url).logIn('ada@example.com', 'wrong password!');
    expect(unknown.status).toBe(401);
    expect(wrong.status).toBe(unknown.status);
    expect(message(wrong.html)).toBe(message(unknown.html));
    expect(message(wrong.html)).toBe('Wrong email or password.');

    const client = new DashboardClient(s.url);
    const ok = await client.logIn('ADA@example.com', PASSWORD);
    expect(ok.status).toBe(303);
    expect(ok.location).toBe('/dashboard');
    expect(client.cookies.has('bgone_session')).toBe(true);
    expect(client.cookies.has('bgone_csrf')).toBe(false); // the pre-login cookie is cleared
    const usage = await client.get('/dashboard');
    expect(usage.status).toBe(200);
    expect(usage.html).toContain('ada@example.com');
  });

  it('an account without a password (created by the CLI) cannot log in, with the same message', async () => {
    const s = await server();
    await s.store.accounts.create({ email: 'cli@example.com' });
    const page = await new DashboardClient(s.url).logIn('cli@example.com', PASSWORD);
    expect(page.status).toBe(401);
    expect(message(page.html)).toBe('Wrong email or password.');
  });

  it('logout deletes the session: the old cookie no longer works', async () => {
    const s = await server();
    const { client } = await signedUp(s);
    const cookie = client.cookies.get('bgone_session')!;
    const out = await client.submit('/dashboard', '/dashboard/logout');
    expect(out.status).toBe(303);
    expect(out.location).toBe('/dashboard/login?done=logged-out');
    expect(client.cookies.has('bgone_session')).toBe(false);
    const replay = await fetch(`${s.url}/dashboard`, { headers: { cookie: `bgone_session=${cookie}` }, redirect: 'manual' });
    expect(replay.status).toBe(303);
    expect(replay.headers.get('location')).toBe('/dashboard/login?done=expired');
  });

  it('throttles failed logins per email (429 page with Retry-After), even with the right password', async () => {
    const s = await server({ trustProxy: true });
    await signedUp(s);
    for (let i = 1; i <= 5; i++) {
      const page = await new DashboardClient(s.url, { 'x-forwarded-for': `10.0.0.${i}` }).logIn('ada@example.com', `wrong password ${i}`);
      expect(page.status).toBe(401);
    }
    const blocked = await new DashboardClient(s.url, { 'x-forwarded-for': '10.0.0.99' }).logIn('ada@example.com', PASSWORD);
    expect(blocked.status).toBe(429);
    expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(blocked.html).toContain('Too many failed attempts');
    // Another email from a fresh IP is not affected; after the 15-minute window the account can log in.
    expect((await new DashboardClient(s.url, { 'x-forwarded-for': '10.0.1.1' }).logIn('other@example.com', PASSWORD)).status).toBe(401);
    s.clock.advance(15 * MINUTE + 1000);
    expect((await new DashboardClient(s.url, { 'x-forwarded-for': '10.0.0.99' }).logIn('ada@example.com', PASSWORD)).status).toBe(303);
  });

  it('counts parallel guesses before their hashes are checked', async () => {
    const s = await server();
    await signedUp(s);
    const clients = Array.from({ length: 10 }, () => new DashboardClient(s.url));
    const tokens = await Promise.all(clients.map(async (c) => csrfToken((await c.get('/dashboard/login')).html)));
    const results = await Promise.all(
      clients.map((c, i) => c.post('/dashboard/login', { csrf: tokens[i]!, email: 'ada@example.com', password: `guess number ${i}` })),
    );
    const statuses = results.map((r) => r.status).sort();
    expect(statuses.filter((st) => st === 401)).toHaveLength(5);
    expect(statuses.filter((st) => st === 429)).toHaveLength(5);
  });

  it('throttles failed logins per IP across emails', async () => {
    const s = await server();
    await signedUp(s);
    for (let i = 1; i <= 5; i++) expect((await new DashboardClient(s.url).logIn(`user${i}@example.com`, PASSWORD)).status).toBe(401);
    const blocked = await new DashboardClient(s.url).logIn('ada@example.com', PASSWORD);
    expect(blocked.status).toBe(429);
  });
});

describe('CSRF', () => {
  it('rejects pre-login forms without the double-submit cookie or with a forged token', async () => {
    const s = await server();
    await signedUp(s);
    const bare = await fetch(`${s.url}/dashboard/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ email: 'ada@example.com', password: PASSWORD }).toString(),
      redirect: 'manual',
    });
    expect(bare.status).toBe(403);
    const client = new DashboardClient(s.url);
    await client.get('/dashboard/login');
    const forged = await client.post('/dashboard/login', { csrf: 'x'.repeat(43), email: 'ada@example.com', password: PASSWORD });
    expect(forged.status).toBe(403);
    expect(client.cookies.has('bgone_session')).toBe(false);
    // A token from another browser's cookie does not fit this browser's cookie.
    const other = new DashboardClient(s.url);
    const token = csrfToken((await other.get('/dashboard/signup')).html);
    const crossed = await client.post('/dashboard/signup', { csrf: token, email: 'new@example.com', password: PASSWORD });
    expect(crossed.status).toBe(403);
    expect(await s.store.accounts.getByEmail('new@example.com')).toBeNull();
  });

  it("rejects logged-in forms without the session token, or with another session's token", async () => {
    const s = await server();
    const { client, account } = await signedUp(s, 'ada@example.com');
    const { client: mallory } = await signedUp(s, 'mallory@example.com');
    const malloryToken = csrfToken((await mallory.get('/dashboard/keys')).html);
    const before = (await s.store.keys.list(account.id)).length;
    const missing = await client.post('/dashboard/keys', {});
    expect(missing.status).toBe(403);
    expect(missing.html).toContain('This form has expired');
    expect((await client.post('/dashboard/keys', { csrf: malloryToken })).status).toBe(403);
    expect((await client.post('/dashboard/keys', { csrf: '' })).status).toBe(403);
    expect(await s.store.keys.list(account.id)).toHaveLength(before);
    const keyId = (await s.store.keys.list(account.id))[0]!.id;
    expect((await client.post('/dashboard/keys/revoke', { csrf: malloryToken, key_id: String(keyId) })).status).toBe(403);
    expect((await s.store.keys.get(keyId))!.revoked).toBe(false);
    expect((await client.post('/dashboard/logout', { csrf: malloryToken })).status).toBe(403);
    expect((await client.get('/dashboard')).status).toBe(200);
    // The try-it endpoint wants the token as a header.
    const form = new FormData();
    form.append('size', 'preview');
    const tryRes = await client.request('POST', '/dashboard/try', { body: form });
    expect(tryRes.status).toBe(403);
    expect(JSON.parse(tryRes.html)).toMatchObject({ code: 'permission_denied', details: { field: 'X-CSRF-Token' } });
  });

  it('refuses oversized and malformed form bodies', async () => {
    const s = await server();
    const { client } = await signedUp(s);
    const token = csrfToken((await client.get('/dashboard/keys')).html);
    const big = await client.post('/dashboard/keys', { csrf: token, pad: 'x'.repeat(20_000) });
    expect(big.status).toBe(413);
    const extra = await client.post('/dashboard/keys', { csrf: token, surprise: '1' });
    expect(extra.status).toBe(400);
    const json = await client.request('POST', '/dashboard/keys', { body: JSON.stringify({ csrf: token }), headers: { 'content-type': 'application/json' } });
    expect(json.status).toBe(415);
  });
});

describe('API keys', () => {
  it('creates a key (shown once), lists keys by prefix and last four, and revokes one: the API then answers 401', async () => {
    const s = await server();
    const { client, key: first, account } = await signedUp(s);
    const created = await client.submit('/dashboard/keys', '/dashboard/keys');
    expect(created.status).toBe(200);
    const second = newKey(created.html);
    expect(second).toMatch(/^rb-sk_/);
    expect(second).not.toBe(first);
    expect(created.html).toContain('you will not see this key again');
    const keys = await s.store.keys.list(account.id);
    expect(keys).toHaveLength(2);
    const list = await client.get('/dashboard/keys');
    for (const k of keys) {
      expect(list.html).toContain(`${k.prefix}…${k.last4}`);
      expect(list.html).toContain(`data-key-id="${k.id}"`);
    }
    expect(list.html).not.toContain(second);
    expect(list.html).toContain(new Date(keys[0]!.createdAt).toISOString());

    // Last used: the API's authentication updates it.
    expect((await apiStatus(s.url, first)).status).toBe(400); // authenticated; the empty form has no image
    const row = new RegExp(`<tr data-key-id="${keys[0]!.id}"[\\s\\S]*?</tr>`).exec((await client.get('/dashboard/keys')).html)![0];
    expect(row).not.toContain('never');
    expect(row.match(/<time /g)).toHaveLength(2);

    const revoked = await client.submit('/dashboard/keys', '/dashboard/keys/revoke', { key_id: String(keys[0]!.id) });
    expect(revoked.status).toBe(303);
    expect(revoked.location).toBe('/dashboard/keys?done=key-revoked');
    expect((await s.store.keys.get(keys[0]!.id))!.revoked).toBe(true);
    expect(await apiStatus(s.url, first)).toEqual({ status: 401, code: 'authentication_error' });
    expect((await apiStatus(s.url, second)).status).toBe(400);
    const after = await client.get('/dashboard/keys?done=key-revoked');
    expect(message(after.html)).toMatch(/revoked/);
    expect(after.html).toMatch(/revoked<\/span>/);
  });

  it("cannot revoke another account's key", async () => {
    const s = await server();
    const { client } = await signedUp(s, 'ada@example.com');
    const { account: other } = await signedUp(s, 'bob@example.com');
    const otherKey = (await s.store.keys.list(other.id))[0]!;
    const res = await client.submit('/dashboard/keys', '/dashboard/keys/revoke', { key_id: String(otherKey.id) });
    expect(res.status).toBe(404);
    expect((await s.store.keys.get(otherKey.id))!.revoked).toBe(false);
  });
});

describe('usage', () => {
  it('shows credits used and remaining, the reset time, the rate limit, and a bar chart of requests per day', async () => {
    const s = await server();
    const { client, account } = await signedUp(s);
    const charge = async (n: number) => {
      for (let i = 0; i < n; i++) {
        const r = await s.store.credits.reserve(account.id, { requestId: `req_test${i}` });
        if (!r.ok || r.reservationId === null) throw new Error('cannot reserve');
        await s.store.credits.commit(r.reservationId);
      }
    };
    await charge(2);
    s.clock.advance(24 * 60 * MINUTE);
    await charge(3);
    expect((await client.logIn('ada@example.com', PASSWORD)).status).toBe(303); // the first session ended after 12 h
    const page = await client.get('/dashboard');
    expect(page.status).toBe(200);
    expect(page.html).toMatch(/id="credits-used">5</);
    expect(page.html).toMatch(/id="credits-remaining">95</);
    expect(page.html).toContain('of 100');
    expect(page.html).toContain('id="rate-limit">10 requests per minute per key');
    const cycleEnd = (await s.store.credits.balance(account.id)).cycleEnd;
    expect(cycleEnd.toISOString()).toBe('2026-04-10T12:00:00.000Z');
    expect(page.html).toContain(`<time datetime="${cycleEnd.toISOString()}">10 Apr 2026, 12:00 UTC</time>`);
    const svg = /<svg class="chart" id="usage-chart"[\s\S]*?<\/svg>/.exec(page.html)![0];
    expect(svg).toContain('data-total="5"');
    expect(svg).toContain('<g class="chart-day" data-day="2026-03-10" data-requests="2">');
    expect(svg).toContain('<g class="chart-day" data-day="2026-03-11" data-requests="3">');
    expect(svg.match(/class="chart-day"/g)).toHaveLength(32); // 10 Mar 12:00 to 10 Apr 12:00 touches 32 UTC days
    expect(svg).toContain('class="chart-bar chart-today"');
    expect(page.html).not.toMatch(/<table/); // a picture, not a table of numbers
  });

  it('draws bars proportional to the counts', () => {
    const svg = usageChart([
      { day: '2026-01-01', requests: 0 },
      { day: '2026-01-02', requests: 5 },
      { day: '2026-01-03', requests: 10 },
    ]).value;
    const heights = [...svg.matchAll(/class="chart-bar[^"]*"[^>]*height="([\d.]+)"/g)].map((m) => Number(m[1]));
    expect(heights).toHaveLength(2);
    expect(heights[1]! / heights[0]!).toBeCloseTo(2, 1);
    expect(svg).toContain('15 requests in this billing cycle');
  });
});

describe('plan', () => {
  it('shows the four plans with the current one marked, and the CLI command when no billing provider is configured', async () => {
    const s = await server();
    const { client } = await signedUp(s);
    const page = await client.get('/dashboard/plan');
    expect(page.status).toBe(200);
    for (const plan of ['free', 'pro', 'ultra', 'mega']) expect(page.html).toContain(`data-plan="${plan}"`);
    expect(page.html).toMatch(/<article class="plan current" data-plan="free" aria-current="true">/);
    expect(page.html).toContain('an operator changes plans with the CLI');
    expect(page.html).toContain('npx bgone plans set --account ada@example.com --plan pro');
    expect(page.html).not.toContain('id="cancel-plan"');
    const change = await client.submit('/dashboard/plan', '/dashboard/plan/change', { plan: 'pro' });
    expect(change.status).toBe(400);
    expect(message(change.html)).toContain('npx bgone plans set --account ada@example.com --plan pro');
    // Free cannot be cancelled.
    const cancel = await client.submit('/dashboard/plan', '/dashboard/plan/cancel');
    expect(cancel.status).toBe(400);
    expect(message(cancel.html)).toMatch(/Free plan cannot be cancelled/);
  });

  it('cancels a paid plan until the end of the cycle, resumes it, and falls back to Free after the cycle', async () => {
    const s = await server();
    const { client, account } = await signedUp(s);
    await s.store.accounts.setPlan(account.id, 'pro');
    let page = await client.get('/dashboard/plan');
    expect(page.html).toMatch(/<article class="plan current" data-plan="pro"/);
    expect(page.html).toContain('id="cancel-plan"');

    const cancel = await client.submit('/dashboard/plan', '/dashboard/plan/cancel');
    expect(cancel.status).toBe(303);
    expect(cancel.location).toBe('/dashboard/plan?done=plan-cancelled');
    const cycleEnd = '2026-04-10T12:00:00.000Z';
    expect((await s.store.accounts.get(account.id))!.cancelAt?.toISOString()).toBe(cycleEnd);
    page = await client.get('/dashboard/plan');
    expect(page.html).toContain('Your Pro plan is cancelled.');
    expect(page.html).toContain(`It stays until the end of the billing cycle, <time datetime="${cycleEnd}">`);
    expect(page.html).toMatch(/<article class="plan current" data-plan="pro"/);
    expect(page.html).toContain('id="resume-plan"');
    expect((await s.store.accounts.get(account.id))!.plan).toBe('pro');

    const resume = await client.submit('/dashboard/plan', '/dashboard/plan/resume');
    expect(resume.status).toBe(303);
    expect((await s.store.accounts.get(account.id))!.cancelAt).toBeNull();
    page = await client.get('/dashboard/plan?done=plan-resumed');
    expect(message(page.html)).toMatch(/resumed/);
    expect(page.html).toContain('id="cancel-plan"');

    // Cancel again and let the cycle end: Free from then on, and resuming is no longer possible.
    await client.submit('/dashboard/plan', '/dashboard/plan/cancel');
    s.clock.advance(31 * 24 * 60 * MINUTE);
    const relogin = new DashboardClient(s.url);
    expect((await relogin.logIn('ada@example.com', PASSWORD)).status).toBe(303);
    page = await relogin.get('/dashboard/plan');
    expect(page.html).toMatch(/<article class="plan current" data-plan="free"/);
    expect(page.html).toContain('Your cancelled Pro plan ended');
    const late = await relogin.submit('/dashboard/plan', '/dashboard/plan/resume');
    expect(late.status).toBe(400);
  });

  it("sends upgrades to the billing provider's checkout", async () => {
    const calls: string[] = [];
    const billing: BillingProvider = {
      checkoutUrl: async (account, plan) => {
        calls.push(`${account.email}:${plan}`);
        return plan === 'mega' ? 'javascript:alert(1)' : `https://billing.example/checkout?plan=${plan}`;
      },
    };
    const s = await server({ billing });
    const { client } = await signedUp(s);
    const page = await client.get('/dashboard/plan');
    expect(page.html).not.toContain('npx bgone plans set');
    expect(page.html).toContain('Switch to Pro');
    const res = await client.submit('/dashboard/plan', '/dashboard/plan/change', { plan: 'pro' });
    // A page linking to the checkout (its script follows the link): the CSP's form-action would block a redirect.
    expect(res.status).toBe(200);
    expect(res.html).toContain('href="https://billing.example/checkout?plan=pro" data-follow');
    expect(calls).toEqual(['ada@example.com:pro']);
    expect((await client.submit('/dashboard/plan', '/dashboard/plan/change', { plan: 'mega' })).status).toBe(502);
    expect((await client.submit('/dashboard/plan', '/dashboard/plan/change', { plan: 'gold' })).status).toBe(400);
  });
});

describe('sessions', () => {
  it("expire 12 hours after login (on the store's clock)", async () => {
    const s = await server();
    const { client } = await signedUp(s);
    s.clock.advance(SESSION_TTL_MS - MINUTE);
    const page = await client.get('/dashboard/keys');
    expect(page.status).toBe(200);
    const token = csrfToken(page.html);
    s.clock.advance(2 * MINUTE);
    const expired = await client.get('/dashboard');
    expect(expired.status).toBe(303);
    expect(expired.location).toBe('/dashboard/login?done=expired');
    const post = await client.post('/dashboard/keys', { csrf: token });
    expect(post.status).toBe(303);
    expect(post.location).toBe('/dashboard/login?done=expired');
    const form = new FormData();
    const tryRes = await client.request('POST', '/dashboard/try', { body: form, headers: { 'x-csrf-token': token } });
    expect(tryRes.status).toBe(401);
    expect(JSON.parse(tryRes.html)).toMatchObject({ code: 'authentication_error' });
    const login = await client.get('/dashboard/login?done=expired');
    expect(message(login.html)).toMatch(/session has ended/);
  });

  it('a short custom lifetime works the same way', async () => {
    const s = await server({ sessionTtlMs: 5 * MINUTE });
    const { client } = await signedUp(s);
    s.clock.advance(5 * MINUTE);
    expect((await client.get('/dashboard')).status).toBe(303);
  });
});

describe('passwords', () => {
  it('verifies scrypt hashes in constant form and rejects tampered ones', async () => {
    const params = { N: 1024, r: 8, p: 1 };
    const hash = await hashPassword('hunter2 hunter2', params);
    expect(hash).toMatch(/^scrypt\$1024\$8\$1\$/);
    expect(await hashPassword('hunter2 hunter2', params)).not.toBe(hash); // salted
    expect(await verifyPassword('hunter2 hunter2', hash, params)).toBe(true);
    expect(await verifyPassword('hunter3 hunter3', hash, params)).toBe(false);
    expect(await verifyPassword('hunter2 hunter2', null, params)).toBe(false);
    expect(await verifyPassword('hunter2 hunter2', hash.replace('$1024$', '$2048$'), params)).toBe(false);
    expect(await verifyPassword('hunter2 hunter2', 'garbage', params)).toBe(false);
  });
});

describe('try it (real model)', () => {
  let s: DashboardServer;
  beforeAll(async () => {
    s = await startDashboardServer();
  });
  afterAll(async () => {
    await s.close();
  });

  it('processes an upload like the API and charges one credit', async () => {
    const client = new DashboardClient(s.url);
    await client.signUp('try@example.com', PASSWORD);
    const account = await accountOf(s, 'try@example.com');
    const token = tryToken((await client.get('/dashboard/try')).html);
    const photo = readPhoto('gc_book.jpg');

    const bad = new FormData();
    bad.append('size', 'enormous');
    bad.append('image_file', new Blob([new Uint8Array(photo)], { type: 'image/jpeg' }), 'gc_book.jpg');
    const rejected = await client.request('POST', '/dashboard/try', { body: bad, headers: { 'x-csrf-token': token } });
    expect(rejected.status).toBe(400);
    const error = JSON.parse(rejected.html);
    expect(error).toMatchObject({ code: 'validation_error', details: { field: 'size' } });
    expect(error.request_id).toBe(rejected.headers.get('x-request-id'));
    expect((await s.store.credits.balance(account.id)).used).toBe(0);

    const form = new FormData();
    form.append('size', 'preview');
    form.append('image_file', new Blob([new Uint8Array(photo)], { type: 'image/jpeg' }), 'gc_book.jpg');
    const res = await fetch(`${s.url}/dashboard/try`, { method: 'POST', body: form, headers: { cookie: client.cookieHeader(), 'x-csrf-token': token } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('image/png');
    const png = Buffer.from(await res.arrayBuffer());
    expect(png.subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
    const width = Number(res.headers.get('x-image-width'));
    const height = Number(res.headers.get('x-image-height'));
    expect(png.readUInt32BE(16)).toBe(width);
    expect(png.readUInt32BE(20)).toBe(height);
    expect(width * height).toBeLessThanOrEqual(250_000);
    expect(res.headers.get('x-credits-charged')).toBe('1');
    expect(res.headers.get('x-credits-remaining')).toBe('99');
    expect(res.headers.get('x-request-id')).toMatch(/^req_[0-9a-f]{20}$/);
    const balance = await s.store.credits.balance(account.id);
    expect(balance.used).toBe(1);
    expect(balance.reserved).toBe(0);
    expect((await s.store.usage.byDay(account.id)).reduce((n, d) => n + d.requests, 0)).toBe(1);
  });
});
