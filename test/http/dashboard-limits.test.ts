/**
 * The dashboard's abuse limits (docs/contract.md, "Abuse limits") against real servers
 * (startServer + mountDashboard on 127.0.0.1, port 0): sign-ups counted per address for an hour,
 * successful ones included (on one SQLite file, and across two nodes on one PostgreSQL database);
 * sign-up switched off; the bound on concurrent scrypt work under a burst; disabling an account
 * logging its dashboard out; try-it requests taking the API's admission places and held by the
 * drain; and the CSP's form-action.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import { ACCOUNT_DISABLED, PASSWORD_WORK_BUSY } from '../../src/dashboard/auth.js';
import { type BillingProvider, mountDashboard } from '../../src/dashboard/index.js';
import { DEFAULT_SCRYPT, hashPassword, PasswordHasher, scryptDerive } from '../../src/dashboard/passwords.js';
import type { RunningServer } from '../../src/server.js';
import { openStore, type Store } from '../../src/store/index.js';
import { openPostgresStore } from '../../src/store/postgres/postgres-store.js';
import { killChildren, runCli } from '../helpers/cli-process.js';
import { csrfToken, DashboardClient, message, tryToken } from '../helpers/dashboard-client.js';
import { type DashboardServer, type DashboardServerOptions, startDashboardServer } from '../helpers/dashboard-server.js';
import { multipartBody, rawConnection } from '../helpers/http-raw.js';
import { freshDatabase, testDatabaseUrl } from '../helpers/postgres.js';
import { serveStore, waitFor } from '../helpers/server.js';

const PASSWORD = 'correct horse battery';
const HOUR = 60 * 60 * 1000;

const cleanups: Array<() => Promise<void>> = [];

async function server(options: DashboardServerOptions = {}): Promise<DashboardServer> {
  const s = await startDashboardServer(options);
  cleanups.push(() => s.close());
  return s;
}

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

afterAll(() => killChildren());

/** A visitor behind the trusted proxy, coming from `ip`. */
const from = (s: { url: string }, ip: string) => new DashboardClient(s.url, { 'x-forwarded-for': ip });

/**
 * One client signing up `count` times with new emails (`<name>-1@example.com`, ...), on each of
 * `nodes` in turn and from each of its addresses `ips` in turn. The statuses, in order.
 */
async function signUps(nodes: ReadonlyArray<{ url: string }>, ips: readonly string[], name: string, count: number): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < count; i++) {
    const visitor = from(nodes[i % nodes.length]!, ips[i % ips.length]!);
    statuses.push((await visitor.signUp(`${name}-${i + 1}@example.com`, PASSWORD)).status);
  }
  return statuses;
}

async function accounts(store: Store): Promise<string[]> {
  return (await store.accounts.list()).map((a) => a.email);
}

describe('sign-ups per address', () => {
  it('counts successful sign-ups too: the sixth in an hour is a 429 page that creates nothing', async () => {
    const s = await server({ trustProxy: true });
    // A password that breaks the rules does not count (nothing was tried); a taken email does.
    expect((await from(s, '203.0.113.7').signUp('short@example.com', 'abc')).status).toBe(400);
    expect(await signUps([s], ['203.0.113.7'], 'user', 4)).toEqual([200, 200, 200, 200]);
    expect((await from(s, '203.0.113.7').signUp('user-1@example.com', PASSWORD)).status).toBe(400);

    const client = from(s, '203.0.113.7');
    const refused = await client.signUp('sixth@example.com', PASSWORD);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(Number(refused.headers.get('retry-after'))).toBe(3600);
    expect(message(refused.html)).toMatch(/^Too many sign-ups from your network address: at most 5 an hour\. Wait 60 minutes/);
    expect(refused.key).toBe('');
    expect(client.cookies.has('bgone_session')).toBe(false);
    expect(await s.store.accounts.getByEmail('sixth@example.com')).toBeNull();
    expect(await accounts(s.store)).toHaveLength(4);

    // Another address is not affected; this one can sign up again once the hour has slid by.
    expect((await from(s, '198.51.100.1').signUp('other@example.com', PASSWORD)).status).toBe(200);
    s.clock.advance(HOUR - 1000);
    expect((await from(s, '203.0.113.7').signUp('sixth@example.com', PASSWORD)).status).toBe(429);
    s.clock.advance(1000);
    expect((await from(s, '203.0.113.7').signUp('sixth@example.com', PASSWORD)).status).toBe(200);
  });

  it('takes its limit from the options (BGONE_SIGNUP_PER_IP_PER_HOUR), from the same address without a proxy', async () => {
    const s = await server({ signupsPerIpPerHour: 2 });
    expect((await new DashboardClient(s.url).signUp('a@example.com', PASSWORD)).status).toBe(200);
    expect((await new DashboardClient(s.url).signUp('b@example.com', PASSWORD)).status).toBe(200);
    const refused = await new DashboardClient(s.url).signUp('c@example.com', PASSWORD);
    expect(refused.status).toBe(429);
    expect(message(refused.html)).toContain('at most 2 an hour');
    expect(await accounts(s.store)).toEqual(['a@example.com', 'b@example.com']);
    // Logging in is not a sign-up: the accounts made still log in from that address.
    expect((await new DashboardClient(s.url).logIn('a@example.com', PASSWORD)).status).toBe(303);
  });

  it('over IPv6 are counted per /64: new addresses of one /64 share its count, another /64 has its own', async () => {
    const s = await server({ trustProxy: true, signupsPerIpPerHour: 3 });
    // One client's /64 spelled three ways: each sign-up comes from a fresh address of it.
    const slash64 = ['2001:db8:a:b::1', '2001:db8:a:b:dead:beef:0:2', '2001:0db8:000a:000b:ffff:ffff:ffff:ffff'];
    expect(await signUps([s], slash64, 'v6', 3)).toEqual([200, 200, 200]);
    const refused = await from(s, '2001:db8:a:b:1234::5').signUp('four@example.com', PASSWORD);
    expect(refused.status).toBe(429);
    expect(message(refused.html)).toContain('at most 3 an hour');
    expect(await s.store.accounts.getByEmail('four@example.com')).toBeNull();
    // The neighbouring /64 is another client.
    expect((await from(s, '2001:db8:a:c::1').signUp('four@example.com', PASSWORD)).status).toBe(200);
    // An IPv4 client is counted by its address, whether it arrives as IPv4 or IPv4-mapped IPv6.
    expect(await signUps([s], ['203.0.113.20', '::ffff:203.0.113.20'], 'v4', 4)).toEqual([200, 200, 200, 429]);
    expect((await from(s, '203.0.113.21').signUp('v4-4@example.com', PASSWORD)).status).toBe(200);
  });

  it('are counted together by every node on one PostgreSQL database', async () => {
    const database = await freshDatabase(await testDatabaseUrl());
    cleanups.push(() => database.drop());
    const nodes: Array<{ url: string; store: Store }> = [];
    for (let i = 0; i < 2; i++) {
      const store = await openPostgresStore({ url: database.url });
      const dir = mkdtempSync(join(tmpdir(), 'bgone-abuse-pg-'));
      const { server: running, close } = await serveStore(store, dir, {
        mount: (context) => mountDashboard(context, { store, logger: createLogger('silent'), trustProxy: true, signupsPerIpPerHour: 3 }),
      });
      cleanups.push(close);
      nodes.push({ url: `http://127.0.0.1:${running.port}`, store });
    }
    const [a, b] = nodes as [(typeof nodes)[0], (typeof nodes)[0]];
    // One address through either node, in turn: one count.
    expect(await signUps([a, b], ['203.0.113.9'], 'pg', 5)).toEqual([200, 200, 200, 429, 429]);
    expect((await from(b, '203.0.113.10').signUp('pg-4@example.com', PASSWORD)).status).toBe(200);
    expect(await accounts(a.store)).toEqual(['pg-1@example.com', 'pg-2@example.com', 'pg-3@example.com', 'pg-4@example.com']);
  });
});

describe('sign-up switched off (BGONE_SIGNUP=false)', () => {
  it('answers 403 "sign-up is closed" on the page and the form, creates nothing, and still lets accounts log in', async () => {
    const s = await server({ signup: false });
    const client = new DashboardClient(s.url);
    const page = await client.get('/dashboard/signup');
    expect(page.status).toBe(403);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(page.html).toContain('<h1>Sign-up is closed</h1>');
    expect(page.html).not.toContain('name="password"');
    expect(page.html).not.toContain('href="/dashboard/signup"');

    // The login page offers no sign-up; a form posted with a valid pre-login token is refused.
    const login = await client.get('/dashboard/login');
    expect(login.status).toBe(200);
    expect(login.html).not.toContain('href="/dashboard/signup"');
    const posted = await client.post('/dashboard/signup', { csrf: csrfToken(login.html), email: 'new@example.com', password: PASSWORD });
    expect(posted.status).toBe(403);
    expect(posted.html).toContain('Sign-up is closed');
    expect(client.cookies.has('bgone_session')).toBe(false);
    expect(await s.store.accounts.list()).toEqual([]);

    await s.store.accounts.createWithPassword({ email: 'old@example.com', passwordHash: await hashPassword(PASSWORD) });
    expect((await new DashboardClient(s.url).logIn('old@example.com', PASSWORD)).status).toBe(303);
  });
});

describe('scrypt work', () => {
  it('a burst of sign-ups and logins never hashes more than the bound at once; the overflow is a 503 page with Retry-After', async () => {
    // node:crypto's scrypt, held back while `hold` is pending: the test fills every place at will.
    let hold: Promise<void> | undefined;
    const hasher = new PasswordHasher(DEFAULT_SCRYPT, { concurrency: 1, queue: 3, retryAfterSeconds: 4 }, async (...args) => {
      await hold;
      return scryptDerive(...args);
    });
    // One sign-up per address an hour: a refusal counted against its address would leave none.
    const s = await server({ trustProxy: true, passwordHasher: hasher, signupsPerIpPerHour: 1 });
    await s.store.accounts.createWithPassword({ email: 'ada@example.com', passwordHash: await hashPassword(PASSWORD) });
    const clients = Array.from({ length: 16 }, (_, i) => from(s, `192.0.2.${i + 1}`));
    const tokens = await Promise.all(clients.map(async (c) => csrfToken((await c.get('/dashboard/login')).html)));

    // Watched from outside too, while the burst runs.
    let seen = 0;
    const watch = setInterval(() => {
      seen = Math.max(seen, hasher.hashing);
    }, 1);
    const results = await Promise.all(
      clients.map((c, i) =>
        i < 12
          ? c.post('/dashboard/signup', { csrf: tokens[i]!, email: `burst${i}@example.com`, password: PASSWORD })
          : c.post('/dashboard/login', { csrf: tokens[i]!, email: 'ada@example.com', password: 'a wrong password' }),
      ),
    );
    clearInterval(watch);

    expect(hasher.peakHashing).toBe(1);
    expect(seen).toBeLessThanOrEqual(1);
    const busy = results.filter((r) => r.status === 503);
    expect(busy.length).toBeGreaterThan(0);
    for (const r of busy) {
      expect(r.headers.get('retry-after')).toBe('4');
      expect(message(r.html)).toBe(PASSWORD_WORK_BUSY);
      expect(r.html).toContain('name="password"'); // the form again, for a retry
    }
    const signups = results.slice(0, 12);
    expect(signups.every((r) => r.status === 200 || r.status === 503)).toBe(true);
    expect(results.slice(12).every((r) => r.status === 401 || r.status === 503)).toBe(true);
    const created = signups.filter((r) => r.status === 200).length;
    expect(created).toBeGreaterThanOrEqual(1);
    expect(await accounts(s.store)).toHaveLength(1 + created);
    expect(clients.slice(0, 12).filter((c) => c.cookies.has('bgone_session'))).toHaveLength(created);

    // A refused sign-up was not counted against its address: with every place taken, a sign-up is
    // refused; once they are free, its retry from that address goes through.
    let release!: () => void;
    hold = new Promise<void>((resolve) => {
      release = resolve;
    });
    const held = Array.from({ length: 4 }, (_, i) => hasher.hash(`held password ${i}`));
    await waitFor(() => hasher.hashing === 1 && hasher.waiting === 3, 'every place of the hasher to be taken');
    const late = from(s, '192.0.2.100');
    const refused = await late.signUp('late@example.com', PASSWORD);
    expect(refused.status).toBe(503);
    expect(message(refused.html)).toBe(PASSWORD_WORK_BUSY);
    hold = undefined;
    release();
    await Promise.all(held);
    expect((await late.signUp('late@example.com', PASSWORD)).status).toBe(200);
    expect(late.cookies.has('bgone_session')).toBe(true);
  });
});

describe('disabling an account', () => {
  it('logs its dashboard out at once (operator CLI), refuses its logins until enabled again', async () => {
    const s = await server();
    const client = new DashboardClient(s.url);
    expect((await client.signUp('ada@example.com', PASSWORD)).status).toBe(200);
    const token = tryToken((await client.get('/dashboard/try')).html);
    expect((await client.get('/dashboard')).status).toBe(200);

    const cli = await runCli(s.dir, ['accounts', 'disable', 'ada@example.com', '--db', join(s.dir, 'db.sqlite')]);
    expect(cli.stderr).toBe('');
    expect(cli.code).toBe(0);

    const after = await client.get('/dashboard');
    expect(after.status).toBe(303);
    expect(after.location).toBe('/dashboard/login?done=expired');
    const tried = await client.request('POST', '/dashboard/try', { body: new FormData(), headers: { 'x-csrf-token': token } });
    expect(tried.status).toBe(401);
    expect(JSON.parse(tried.html)).toMatchObject({ code: 'authentication_error' });

    // The right password says why; a wrong one gets the usual answer.
    const wrong = await new DashboardClient(s.url).logIn('ada@example.com', 'a wrong password');
    expect(wrong.status).toBe(401);
    const again = new DashboardClient(s.url);
    const refused = await again.logIn('ada@example.com', PASSWORD);
    expect(refused.status).toBe(403);
    expect(message(refused.html)).toBe(ACCOUNT_DISABLED);
    expect(again.cookies.has('bgone_session')).toBe(false);

    const account = (await s.store.accounts.getByEmail('ada@example.com'))!;
    await s.store.accounts.enable(account.id);
    expect((await again.logIn('ada@example.com', PASSWORD)).status).toBe(303);
    expect((await again.get('/dashboard')).status).toBe(200);
  });
});

describe('try-it requests in the service admission', () => {
  it('take the places of API requests, and the drain on close waits for them', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'bgone-abuse-try-'));
    const store = await openStore({ path: join(dir, 'db.sqlite') });
    let running: RunningServer;
    let close: () => Promise<void>;
    try {
      ({ server: running, close } = await serveStore(store, dir, {
        queueLimit: 1,
        uploadLimit: 1, // the slow try-it upload below holds the one upload place
        drainTimeout: 30,
        mount: (context) => mountDashboard(context, { store, logger: createLogger('silent') }),
      }));
    } catch (err) {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
      throw err;
    }
    cleanups.push(close);
    const url = `http://127.0.0.1:${running.port}`;
    const api = await store.accounts.create({ email: 'api@example.com' });
    const { key } = await store.keys.create(api.id);
    const client = new DashboardClient(url);
    expect((await client.signUp('try@example.com', PASSWORD)).status).toBe(200);
    const token = tryToken((await client.get('/dashboard/try')).html);

    // A try-it upload that has sent its head and part of its body: admitted, holding the one place.
    const boundary = 'bgoneTryBoundary';
    const body = multipartBody(boundary, [{ name: 'image_file', filename: 'x.jpg', type: 'image/jpeg', data: Buffer.from('not an image, only bytes') }]);
    const head = [
      'POST /dashboard/try HTTP/1.1',
      'Host: 127.0.0.1',
      'Connection: close',
      `Cookie: ${client.cookieHeader()}`,
      `X-CSRF-Token: ${token}`,
      `Content-Type: multipart/form-data; boundary=${boundary}`,
      `Content-Length: ${body.length}`,
    ].join('\r\n');
    const upload = rawConnection(running.port, 60_000);
    await upload.ready;
    upload.write(Buffer.concat([Buffer.from(`${head}\r\n\r\n`, 'latin1'), body.subarray(0, 20)]));
    await waitFor(() => running.inFlight() === 1, 'the try-it upload to be admitted');

    // The API finds no place, nor does a second try-it request.
    const apiRes = await fetch(`${url}/api/v1/remove`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: new FormData() });
    expect(apiRes.status).toBe(503);
    expect(((await apiRes.json()) as { code: string }).code).toBe('overloaded');
    const second = await client.request('POST', '/dashboard/try', { body: new FormData(), headers: { 'x-csrf-token': token } });
    expect(second.status).toBe(503);

    // SIGTERM's close waits for the upload.
    let closed = false;
    const closing = running.close().then(() => {
      closed = true;
    });
    await sleep(300);
    expect(closed).toBe(false);
    expect(running.inFlight()).toBe(1);

    upload.write(body.subarray(20));
    const answered = await upload.response;
    expect(answered.status).toBeGreaterThanOrEqual(400);
    expect(answered.status).toBeLessThan(500);
    expect(answered.json?.code).toEqual(expect.any(String));
    await closing;
    expect(closed).toBe(true);
    expect(running.inFlight()).toBe(0);
  });
});

describe('Content-Security-Policy', () => {
  it("limits form targets to the dashboard itself (form-action 'self') on every page", async () => {
    const s = await server();
    const client = new DashboardClient(s.url);
    const pages = [await client.get('/dashboard/login'), await client.get('/dashboard/signup'), await client.signUp('ada@example.com', PASSWORD)];
    pages.push(await client.get('/dashboard/keys'), await client.get('/dashboard/nope'));
    for (const page of pages) {
      const csp = page.headers.get('content-security-policy') ?? '';
      expect(csp.split(';').map((d) => d.trim())).toContain("form-action 'self'");
      expect(csp).toContain("default-src 'none'");
    }
  });

  it("sends upgrades to the provider's checkout through a page with a link, since form-action would block a redirect", async () => {
    const billing: BillingProvider = { checkoutUrl: async (_account, plan) => `https://billing.example/checkout?plan=${plan}&a=1` };
    const s = await server({ billing });
    const client = new DashboardClient(s.url);
    await client.signUp('ada@example.com', PASSWORD);
    const res = await client.submit('/dashboard/plan', '/dashboard/plan/change', { plan: 'pro' });
    expect(res.status).toBe(200);
    expect(res.location).toBeNull();
    expect(res.html).toContain('<a class="button" id="checkout-link" href="https://billing.example/checkout?plan=pro&amp;a=1" data-follow>');
    expect(res.headers.get('content-security-policy')).toContain("form-action 'self'");
    // The page's script follows it.
    const js = /src="(\/dashboard\/assets\/dashboard\.js\?v=\w+)"/.exec(res.html)![1]!;
    expect(await (await fetch(`${s.url}${js}`)).text()).toContain("querySelector('a[data-follow]')");
  });
});
