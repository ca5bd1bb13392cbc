/**
 * The dashboard in a real browser: headless Chromium (Debian's /usr/bin/chromium) driven by
 * playwright-core, against a real server (startServer + mountDashboard on 127.0.0.1, a fresh SQLite
 * file) and the real model.
 *
 * sign up → copy the key (clipboard) → call the API with it → the usage chart counts it → try it in
 * the browser → revoke the key → the API answers 401 → cancel a paid plan → the page says it stays
 * until the end of the cycle → phone-sized layout → log out.
 *
 * Screenshots of every page go to test-results/e2e/, the whole usage page as dashboard.png (the
 * picture docs/operations.md shows: copy it over docs/dashboard.png to refresh it). Nothing is
 * written into the tree.
 */
import { mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BrowserContext, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHROMIUM, CHROMIUM_ARGS } from '../helpers/chromium.js';
import { type DashboardServer, startDashboardServer } from '../helpers/dashboard-server.js';
import { photoPath, REPO_ROOT, readPhoto } from '../helpers/paths.js';

const SHOTS = join(REPO_ROOT, 'test-results', 'e2e');
const DOCS_SHOT = join(SHOTS, 'dashboard.png');
const EMAIL = 'grace@example.com';
const PASSWORD = 'a long enough password';

let server: DashboardServer;
let context: BrowserContext;
let page: Page;
let profile: string;

async function shot(name: string, fullPage = true): Promise<void> {
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage });
}

/** A link of the dashboard's navigation bar. */
function nav(name: string) {
  return page.getByRole('navigation', { name: 'Dashboard' }).getByRole('link', { name, exact: true });
}

async function callApi(key: string): Promise<Response> {
  const form = new FormData();
  form.append('size', 'preview');
  form.append('image_file', new Blob([new Uint8Array(readPhoto('gc_book.jpg'))], { type: 'image/jpeg' }), 'gc_book.jpg');
  return fetch(`${server.url}/api/v1/remove`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: form });
}

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  server = await startDashboardServer({ start: new Date() });
  profile = mkdtempSync(join(tmpdir(), 'bgone-chromium-'));
  context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', ...CHROMIUM_ARGS],
    viewport: { width: 1024, height: 768 },
    permissions: ['clipboard-read', 'clipboard-write'],
  });
  page = context.pages()[0] ?? (await context.newPage());
  // Nothing may come from outside the service.
  await context.route('**/*', (route) =>
    route.request().url().startsWith(server.url) || route.request().url().startsWith('blob:') ? route.continue() : route.abort(),
  );
});

afterAll(async () => {
  await context?.close();
  await server?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
});

describe('dashboard in Chromium', () => {
  let key = '';
  const external: string[] = [];

  it('signs up and shows the first key once, with a working copy button', async () => {
    page.on('request', (req) => {
      if (!req.url().startsWith(server.url) && !req.url().startsWith('blob:') && !req.url().startsWith('data:')) external.push(req.url());
    });
    await page.goto(`${server.url}/dashboard`);
    await expect.poll(() => page.url()).toBe(`${server.url}/dashboard/login`);
    await shot('01-login');
    await page.getByRole('link', { name: 'Sign up' }).first().click();
    await page.getByLabel('Email').fill(EMAIL);
    await page.getByLabel('Password').fill(PASSWORD);
    await shot('02-signup');
    await page.getByRole('button', { name: 'Sign up' }).click();
    await page.waitForSelector('#new-key');
    key = (await page.locator('#new-key').textContent())!.trim();
    expect(key).toMatch(/^rb-sk_[A-Za-z0-9_-]{43}$/);
    await expect.poll(() => page.getByText('you will not see this key again').isVisible()).toBe(true);
    await page.getByRole('button', { name: 'Copy' }).click();
    await expect.poll(() => page.locator('button[data-copy="new-key"]').textContent()).toBe('Copied');
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(key);
    await shot('03-welcome-key');
  });

  it('the key works on the API and the usage chart counts the request', async () => {
    const res = await callApi(key);
    expect(res.status).toBe(200);
    expect(res.headers.get('x-credits-remaining')).toBe('99');
    await nav('Usage').click();
    await page.waitForSelector('#usage-chart');
    expect(await page.locator('#credits-used').textContent()).toBe('1');
    expect(await page.locator('#credits-remaining').textContent()).toBe('99');
    expect(await page.locator('#usage-chart').getAttribute('data-total')).toBe('1');
    const today = new Date().toISOString().slice(0, 10);
    const bar = page.locator(`#usage-chart g[data-day="${today}"]`);
    expect(await bar.getAttribute('data-requests')).toBe('1');
    expect(await bar.locator('rect.chart-bar').count()).toBe(1);
    const box = await bar.locator('rect.chart-bar').boundingBox();
    expect(box!.height).toBeGreaterThan(50); // the only request: the full height of the plot
    await shot('04-usage');
    await page.screenshot({ path: DOCS_SHOT, fullPage: true });
    expect(statSync(DOCS_SHOT).size).toBeLessThan(150 * 1024);
  });

  it('tries an image in the browser: the result shows over a checkerboard and costs a credit', async () => {
    await nav('Try it').click();
    await page.setInputFiles('#image_file', photoPath('gc_book.jpg'));
    await page.selectOption('#size', 'preview');
    await page.getByRole('button', { name: 'Remove the background' }).click();
    await page.waitForSelector('#try-result:not([hidden])', { timeout: 60_000 });
    await page.waitForFunction(() => {
      const img = document.getElementById('try-image') as HTMLImageElement | null;
      return !!img && img.complete && img.naturalWidth > 0;
    });
    expect(await page.locator('#try-status').textContent()).toMatch(/1 credit charged, 98 left/);
    expect(await page.locator('#credits-remaining').textContent()).toBe('98');
    const background = await page.locator('.checker').evaluate((el) => getComputedStyle(el).backgroundImage);
    expect(background).toContain('linear-gradient');
    await shot('05-try-it');
  });

  it('revokes the key: the API then answers 401', async () => {
    await nav('API keys').click();
    const row = page.locator('#keys-table tbody tr').first();
    expect(await row.textContent()).toContain(`${key.slice(0, 12)}…${key.slice(-4)}`);
    expect(await page.content()).not.toContain(key);
    await row.getByRole('button', { name: /Revoke/ }).click();
    await page.waitForSelector('[data-testid="message"]');
    expect(await page.locator('[data-testid="message"]').textContent()).toMatch(/revoked/);
    expect(await page.locator('#keys-table tbody tr').first().textContent()).toContain('revoked');
    await shot('06-keys-revoked');
    const res = await callApi(key);
    expect(res.status).toBe(401);
    expect(((await res.json()) as { code: string }).code).toBe('authentication_error');
  });

  it('cancels a paid plan: it stays until the end of the cycle', async () => {
    const account = (await server.store.accounts.getByEmail(EMAIL))!;
    await server.store.accounts.setPlan(account.id, 'pro'); // as an operator would with `bgone plans set`
    await nav('Plan').click();
    expect(await page.locator('article.plan.current').getAttribute('data-plan')).toBe('pro');
    await page.locator('#cancel-plan').click();
    await page.waitForSelector('#resume-plan');
    const cycleEnd = (await server.store.credits.balance(account.id)).cycleEnd.toISOString();
    const status = page.locator('#plan-status');
    expect(await status.textContent()).toContain('Your Pro plan is cancelled.');
    expect(await status.textContent()).toContain('It stays until the end of the billing cycle');
    expect(await status.locator('time').getAttribute('datetime')).toBe(cycleEnd);
    expect((await server.store.accounts.get(account.id))!.cancelAt?.toISOString()).toBe(cycleEnd);
    expect(await page.locator('article.plan.current').getAttribute('data-plan')).toBe('pro');
    await shot('07-plan-cancelled');
  });

  it('fits a phone-sized screen and logs out', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    for (const [path, name] of [
      ['/dashboard', '08-phone-usage'],
      ['/dashboard/plan', '09-phone-plan'],
    ] as const) {
      await page.goto(`${server.url}${path}`);
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
      expect(overflow, path).toBeLessThanOrEqual(0);
      await shot(name);
    }
    await page.getByRole('button', { name: 'Log out' }).click();
    await page.waitForURL(`${server.url}/dashboard/login?done=logged-out`);
    await page.goto(`${server.url}/dashboard`);
    await expect.poll(() => page.url()).toBe(`${server.url}/dashboard/login`);
    expect(external).toEqual([]);
  });
});
