/**
 * The pre-login forms (sign-up, login) against real servers with the dashboard mounted: a form
 * fetched from one node posts on another node of the same PostgreSQL database, and a form fetched
 * before a restart of a server on a SQLite file still posts after it. Their CSRF key comes from the
 * store, the same for every process on one database.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import { mountDashboard } from '../../src/dashboard/index.js';
import { openStore, type Store } from '../../src/store/index.js';
import { openPostgresStore } from '../../src/store/postgres/postgres-store.js';
import { csrfToken, DashboardClient, newKey } from '../helpers/dashboard-client.js';
import { freshDatabase, testDatabaseUrl } from '../helpers/postgres.js';
import { serveStore } from '../helpers/server.js';

const PASSWORD = 'correct horse battery';

const cleanups: Array<() => Promise<void>> = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A server with the dashboard on `store`; its close() closes the store too. */
async function dashboardOn(store: Store): Promise<{ url: string; close(): Promise<void> }> {
  const { server, close } = await serveStore(store, mkdtempSync(join(tmpdir(), 'bgone-pre-login-')), {
    mount: (context) => mountDashboard(context, { store, logger: createLogger('silent') }),
  });
  cleanups.push(close);
  return { url: `http://127.0.0.1:${server.port}`, close };
}

/** A fresh SQLite file in its own temporary folder, removed after the test. */
function sqliteFile(): string {
  const dir = mkdtempSync(join(tmpdir(), 'bgone-pre-login-db-'));
  cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
  return join(dir, 'db.sqlite');
}

/** The browser's cookies, carried to another address (the balancer's next node, or the restarted server). */
function carried(browser: DashboardClient, url: string): DashboardClient {
  const next = new DashboardClient(url);
  for (const [name, value] of browser.cookies) next.cookies.set(name, value);
  return next;
}

/** A browser that fetched `page` from `from` and posts its form, with its cookies, to `to`. */
async function fetchThenPost(from: string, to: string, page: string, fields: Record<string, string>) {
  const browser = new DashboardClient(from);
  const token = csrfToken((await browser.get(page)).html);
  return carried(browser, to).post(page, { csrf: token, ...fields });
}

const ADA = { email: 'ada@example.com', password: PASSWORD };

describe('pre-login forms', () => {
  it('a form served by one node posts on another node of the same PostgreSQL database (sign-up and login)', async () => {
    const database = await freshDatabase(await testDatabaseUrl());
    cleanups.push(() => database.drop());
    const a = await dashboardOn(await openPostgresStore({ url: database.url }));
    const b = await dashboardOn(await openPostgresStore({ url: database.url }));

    const signedUp = await fetchThenPost(a.url, b.url, '/dashboard/signup', ADA);
    expect(signedUp.status).toBe(200);
    expect(newKey(signedUp.html)).toMatch(/^rb-sk_/);
    expect(signedUp.setCookies.some((c) => c.startsWith('bgone_session='))).toBe(true);

    const loggedIn = await fetchThenPost(b.url, a.url, '/dashboard/login', ADA);
    expect(loggedIn.status).toBe(303);
    expect(loggedIn.location).toBe('/dashboard');
  });

  it('a form served before a restart of the server on a SQLite file still posts after it (sign-up and login)', async () => {
    const path = sqliteFile();
    const first = await dashboardOn(await openStore({ path }));
    const signupBrowser = new DashboardClient(first.url);
    const signupToken = csrfToken((await signupBrowser.get('/dashboard/signup')).html);
    await first.close();

    const second = await dashboardOn(await openStore({ path }));
    const signedUp = await carried(signupBrowser, second.url).post('/dashboard/signup', { csrf: signupToken, ...ADA });
    expect(signedUp.status).toBe(200);
    expect(newKey(signedUp.html)).toMatch(/^rb-sk_/);
    const loginBrowser = new DashboardClient(second.url);
    const loginToken = csrfToken((await loginBrowser.get('/dashboard/login')).html);
    await second.close();

    const third = await dashboardOn(await openStore({ path }));
    const loggedIn = await carried(loginBrowser, third.url).post('/dashboard/login', { csrf: loginToken, ...ADA });
    expect(loggedIn.status).toBe(303);
    expect(loggedIn.location).toBe('/dashboard');
  });

  it('a form served over another database is refused', async () => {
    const one = await dashboardOn(await openStore({ path: sqliteFile() }));
    const other = await dashboardOn(await openStore({ path: sqliteFile() }));
    const refused = await fetchThenPost(one.url, other.url, '/dashboard/signup', ADA);
    expect(refused.status).toBe(403);
    expect(newKey(refused.html)).toBe('');
  });
});
