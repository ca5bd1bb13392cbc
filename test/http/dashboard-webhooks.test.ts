/**
 * The dashboard's webhooks page against a real server and SQLite file: adding an endpoint (its
 * secret shown once), refused URLs and the per-account limit, test events and their deliveries,
 * delete, CSRF and other accounts. No delivery is sent anywhere: the outbox rows are read back
 * from the store, and attempts are recorded on it directly.
 */
import { describe, expect, it } from 'vitest';
import { html } from '../../src/dashboard/html.js';
import { webhooksPage } from '../../src/dashboard/views/webhooks.js';
import type { WebhookDelivery, WebhookEndpoint } from '../../src/store/index.js';
import { csrfToken, DashboardClient, message, type PageResult } from '../helpers/dashboard-client.js';
import { type DashboardServer, useDashboardServers } from '../helpers/dashboard-server.js';

const PASSWORD = 'correct horse battery';
const HOOK_URL = 'https://hooks.example.com/bgone';
const PAGE = '/dashboard/webhooks';

const server = useDashboardServers();

async function signedUp(s: DashboardServer, email = 'ada@example.com') {
  const client = new DashboardClient(s.url);
  expect((await client.signUp(email, PASSWORD)).status).toBe(200);
  const account = await s.store.accounts.getByEmail(email);
  if (!account) throw new Error(`no account ${email}`);
  return { client, account };
}

/** The signing secret shown after creation ('' when the page shows none). */
function shownSecret(page: string): string {
  return /<code id="new-webhook-secret"[^>]*>([^<]+)<\/code>/.exec(page)?.[1] ?? '';
}

/** The card of one endpoint on the page. */
function card(page: string, endpointId: string): string {
  const m = new RegExp(`<section class="card webhook" data-endpoint-id="${endpointId}">[\\s\\S]*?</section>`).exec(page);
  if (!m) throw new Error(`no card for ${endpointId}`);
  return m[0];
}

/** The rows of an endpoint's deliveries table. */
function deliveryRows(page: string, endpointId: string): string[] {
  return [...card(page, endpointId).matchAll(/<tr data-delivery-id="[^"]+"[\s\S]*?<\/tr>/g)].map((m) => m[0]);
}

async function addEndpoint(client: DashboardClient, url = HOOK_URL, description = ''): Promise<PageResult> {
  return client.submit(PAGE, PAGE, { url, description });
}

describe('the webhooks page', () => {
  it('is linked from the navigation, needs a session, and loads nothing from outside the service', async () => {
    const s = await server();
    expect((await new DashboardClient(s.url).get(PAGE)).location).toBe('/dashboard/login');
    const { client } = await signedUp(s);
    const usage = await client.get('/dashboard');
    expect(usage.html).toContain('<a href="/dashboard/webhooks">Webhooks</a>');
    const page = await client.get(PAGE);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(page.headers.get('cache-control')).toBe('no-store');
    expect(page.html).toContain('<a href="/dashboard/webhooks" aria-current="page">Webhooks</a>');
    expect(page.html).toContain('id="no-webhooks"');
    expect(page.html).toContain('id="add-webhook"');
    expect(page.html).not.toMatch(/<script(?![^>]*\ssrc=)/); // no inline script: the CSP would block it
    await addEndpoint(client);
    const urls = [...(await client.get(PAGE)).html.matchAll(/\s(?:src|href|action)="([^"]*)"/g)].map((m) => m[1]!);
    for (const url of urls) expect(url).toMatch(/^(\/dashboard|#)/);
  });
});

describe('adding an endpoint', () => {
  it('creates it, lists it, and shows its secret once', async () => {
    const s = await server();
    const { client, account } = await signedUp(s);
    const created = await addEndpoint(client, HOOK_URL, 'Orders <b>"prod"</b>');
    expect(created.status).toBe(200);
    const secret = shownSecret(created.html);
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(created.html).toContain('you will not see this secret again');
    expect(created.html).toContain('data-copy="new-webhook-secret"');
    expect(/id="new-webhook-panel"[\s\S]*?<\/section>/.exec(created.html)![0]).toContain(`<code>${HOOK_URL}</code>`);

    const endpoints = await s.store.webhooks.list(account.id);
    expect(endpoints).toHaveLength(1);
    const endpoint = endpoints[0]!;
    expect(endpoint).toMatchObject({ url: HOOK_URL, description: 'Orders <b>"prod"</b>', disabledAt: null });
    expect(endpoint.id).toMatch(/^wh_/);
    expect(created.html).toContain(`data-endpoint-id="${endpoint.id}"`);

    const page = await client.get(PAGE);
    expect(page.status).toBe(200);
    expect(shownSecret(page.html)).toBe('');
    expect(page.html).not.toContain(secret);
    const shown = card(page.html, endpoint.id);
    expect(shown).toContain(`<code>${HOOK_URL}</code>`);
    expect(shown).toContain('Orders &lt;b&gt;&quot;prod&quot;&lt;/b&gt;');
    expect(shown).not.toContain('<b>');
    expect(shown).toContain('<span class="badge ok">active</span>');
    expect(shown).toContain(`<time datetime="${endpoint.createdAt.toISOString()}">`);
    expect(shown).toContain('No deliveries yet.');
    expect(shown).toContain('action="/dashboard/webhooks/test"');
    expect(shown).toContain('action="/dashboard/webhooks/delete"');
    expect(page.html).not.toContain('id="no-webhooks"');
  });

  it.each([
    ['http://hooks.example.com/bgone', 'The URL must start with https://.'],
    ['https://127.0.0.1/', 'The URL must not point to a loopback, private, link-local or metadata address.'],
    ['https://169.254.169.254/latest/meta-data', 'The URL must not point to a loopback, private, link-local or metadata address.'],
    ['https://localhost/hook', 'The URL must not point to this machine.'],
    ['https://localhost./hook', 'The URL must not point to this machine.'],
    ['https://[fec0::1]/hook', 'The URL must not point to a loopback, private, link-local or metadata address.'],
    ['https://hooks.example.com/a\r\nX-Injected: 1', 'The URL must not contain control characters (such as CR, LF or NUL).'],
    ['not a url', 'The URL is not a valid absolute URL.'],
    ['', 'url is required.'],
  ])('refuses %j with its reason, keeps what was typed, and creates nothing', async (url, reason) => {
    const s = await server();
    const { client, account } = await signedUp(s);
    const page = await addEndpoint(client, url, 'kept <i>');
    expect(page.status).toBe(400);
    expect(message(page.html)).toBe(reason);
    expect(page.html).toContain(`value="${html`${url}`.value}"`);
    expect(page.html).toContain('value="kept &lt;i&gt;"');
    expect(shownSecret(page.html)).toBe('');
    expect(await s.store.webhooks.list(account.id)).toEqual([]);
  });

  it('refuses a description over the limit', async () => {
    const s = await server();
    const { client, account } = await signedUp(s);
    const page = await addEndpoint(client, HOOK_URL, 'x'.repeat(201));
    expect(page.status).toBe(400);
    expect(message(page.html)).toMatch(/description/);
    expect(await s.store.webhooks.list(account.id)).toEqual([]);
  });

  it('accepts a local http:// URL when private addresses are allowed', async () => {
    const s = await server({ webhookAllowPrivate: true });
    const { client, account } = await signedUp(s);
    expect((await client.get(PAGE)).html).toContain('BGONE_WEBHOOK_ALLOW_PRIVATE');
    const page = await addEndpoint(client, 'http://127.0.0.1:9/hook');
    expect(page.status).toBe(200);
    expect(shownSecret(page.html)).toMatch(/^whsec_/);
    expect((await s.store.webhooks.list(account.id)).map((e) => e.url)).toEqual(['http://127.0.0.1:9/hook']);
  });

  it('allows five endpoints per account and refuses a sixth', async () => {
    const s = await server();
    const { client, account } = await signedUp(s);
    for (let i = 1; i <= 5; i++) expect((await addEndpoint(client, `${HOOK_URL}/${i}`)).status).toBe(200);
    const full = await client.get(PAGE);
    expect(full.html).toContain('id="webhooks-full"');
    expect(full.html).not.toContain('id="add-webhook"');
    // The form is gone, but a POST (an old tab, a script) is still refused by the same rule as the API's.
    const sixth = await client.post(PAGE, { csrf: csrfToken(full.html), url: `${HOOK_URL}/6`, description: '' });
    expect(sixth.status).toBe(400);
    expect(message(sixth.html)).toMatch(/at most 5 webhook endpoints/);
    expect(shownSecret(sixth.html)).toBe('');
    expect(await s.store.webhooks.list(account.id)).toHaveLength(5);
  });
});

describe('test events and deliveries', () => {
  it('queues a webhook.test delivery, wakes the worker, and lists it under the endpoint', async () => {
    let wakeUps = 0;
    const s = await server({ onWebhookTest: () => wakeUps++ });
    const { client, account } = await signedUp(s);
    await addEndpoint(client);
    const [endpoint] = await s.store.webhooks.list(account.id);
    const sent = await client.submit(PAGE, '/dashboard/webhooks/test', { endpoint_id: endpoint!.id });
    expect(sent.status).toBe(303);
    expect(sent.location).toBe('/dashboard/webhooks?done=webhook-test-sent');
    expect(wakeUps).toBe(1);

    const deliveries = await s.store.webhooks.deliveries(account.id, endpoint!.id, 10);
    expect(deliveries).toHaveLength(1);
    const delivery = deliveries[0]!;
    expect(delivery).toMatchObject({ type: 'webhook.test', status: 'pending', endpointId: endpoint!.id });
    const page = await client.get(sent.location!);
    expect(message(page.html)).toMatch(/webhook\.test event is queued/);
    const rows = deliveryRows(page.html, endpoint!.id);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toContain(`data-delivery-id="${delivery.id}" data-delivery-type="webhook.test" data-delivery-status="pending"`);
    expect(rows[0]).toContain('<code>webhook.test</code>');
    expect(rows[0]).toContain('<span class="badge">pending</span>');
    expect(rows[0]).toContain(`data-attempts="${delivery.attempts}"`);
  });

  it('is rate-limited like the API: the account’s per-minute bucket, shared with its keys; past it 429 and nothing queued', async () => {
    const s = await server({ rateLimits: { free: 3, pro: 3, ultra: 3, mega: 3 } });
    const { client, account } = await signedUp(s);
    await addEndpoint(client);
    const [endpoint] = await s.store.webhooks.list(account.id);
    const { key } = await s.store.keys.create(account.id);
    const apiTest = () => fetch(`${s.url}/api/v1/webhooks/${endpoint!.id}/test`, { method: 'POST', headers: { authorization: `Bearer ${key}` } });
    // A test from the API and two from the page use the account's 3 of this minute.
    expect((await apiTest()).status).toBe(202);
    for (let i = 0; i < 2; i++) expect((await client.submit(PAGE, '/dashboard/webhooks/test', { endpoint_id: endpoint!.id })).status).toBe(303);
    const refused = await client.submit(PAGE, '/dashboard/webhooks/test', { endpoint_id: endpoint!.id });
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
    expect(refused.headers.get('x-ratelimit-limit')).toBe('3');
    expect(refused.headers.get('x-ratelimit-remaining')).toBe('0');
    expect(refused.headers.get('content-type')).toMatch(/^text\/html/);
    expect(message(refused.html)).toMatch(/Too many requests for this account/);
    expect(card(refused.html, endpoint!.id)).toContain('action="/dashboard/webhooks/test"'); // the page itself, still usable
    expect(await s.store.webhooks.deliveries(account.id, endpoint!.id, 10)).toHaveLength(3);
    // The page's tests count against the API too.
    expect((await apiTest()).status).toBe(429);
    // Once the sliding minute has passed on the store's clock, the page may test again.
    s.clock.advance(120_000);
    expect((await client.submit(PAGE, '/dashboard/webhooks/test', { endpoint_id: endpoint!.id })).status).toBe(303);
    expect(await s.store.webhooks.deliveries(account.id, endpoint!.id, 10)).toHaveLength(4);
  });

  it('shows a failed attempt: its status code, the attempts and the next retry', async () => {
    const s = await server();
    const { client, account } = await signedUp(s);
    await addEndpoint(client);
    const [endpoint] = await s.store.webhooks.list(account.id);
    await client.submit(PAGE, '/dashboard/webhooks/test', { endpoint_id: endpoint!.id });
    const [claimed] = await s.store.webhooks.claimDue(10, 60_000);
    expect(claimed?.endpointId).toBe(endpoint!.id);
    const retryAt = new Date(s.clock.ms + 5_000);
    await s.store.webhooks.recordAttempt(claimed!.id, { delivered: false, statusCode: 503, error: 'HTTP 503', nextAttemptAt: retryAt, disableEndpoint: false });

    const row = deliveryRows((await client.get(PAGE)).html, endpoint!.id)[0]!;
    expect(row).toContain('data-delivery-status="pending"');
    expect(row).toContain('<code>503</code>');
    expect(row).toContain('data-attempts="1"');
    expect(row).toContain(`<time datetime="${retryAt.toISOString()}">`);
  });

  it('marks an endpoint that answered 410 Gone as disabled, without a test button', async () => {
    const s = await server();
    const { client, account } = await signedUp(s);
    await addEndpoint(client);
    const [endpoint] = await s.store.webhooks.list(account.id);
    await client.submit(PAGE, '/dashboard/webhooks/test', { endpoint_id: endpoint!.id });
    const [claimed] = await s.store.webhooks.claimDue(10, 60_000);
    await s.store.webhooks.recordAttempt(claimed!.id, { delivered: false, statusCode: 410, error: 'HTTP 410', nextAttemptAt: null, disableEndpoint: true });

    const page = await client.get(PAGE);
    const shown = card(page.html, endpoint!.id);
    expect(shown).toContain('<span class="badge off">disabled</span>');
    expect(shown).not.toContain('action="/dashboard/webhooks/test"');
    expect(shown).toContain('action="/dashboard/webhooks/delete"');
    const row = deliveryRows(page.html, endpoint!.id)[0]!;
    expect(row).toContain('<code>410</code>');
    expect(row).toContain('data-delivery-status="failed"');
    const refused = await client.post('/dashboard/webhooks/test', { csrf: csrfToken(page.html), endpoint_id: endpoint!.id });
    expect(refused.status).toBe(400);
    expect(message(refused.html)).toMatch(/disabled/);
    expect(await s.store.webhooks.deliveries(account.id, endpoint!.id, 10)).toHaveLength(1);
  });

  it('renders every delivery state, escaping what the receiver caused', () => {
    const at = new Date('2026-03-10T12:00:00.000Z');
    const endpoint: WebhookEndpoint = { id: 'wh_x', accountId: 1, url: 'https://h.example/"><script>', description: '', createdAt: at, disabledAt: null };
    const base = { endpointId: 'wh_x', accountId: 1, body: '{}', createdAt: at, lastError: null, deliveredAt: null } as const;
    const deliveries: WebhookDelivery[] = [
      { ...base, id: 'msg_a', type: 'image.processed', attempts: 1, status: 'delivered', nextAttemptAt: null, lastStatusCode: 204, deliveredAt: at },
      { ...base, id: 'msg_b', type: 'batch.completed', attempts: 8, status: 'failed', nextAttemptAt: null, lastStatusCode: null, lastError: '<img src=x>' },
      { ...base, id: 'msg_c', type: 'webhook.test', attempts: 0, status: 'pending', nextAttemptAt: at, lastStatusCode: null },
    ];
    const page = webhooksPage({
      viewer: { email: 'a@example.com', csrf: 'token' },
      endpoints: [{ endpoint, deliveries }],
      maxEndpoints: 5,
      maxUrlLength: 2048,
      maxDescriptionLength: 200,
      allowPrivate: false,
    });
    expect(page).not.toContain('<script>');
    expect(page).not.toContain('<img src=x>');
    expect(page).toContain('&lt;img src=x&gt;');
    const rows = deliveryRows(page, 'wh_x');
    expect(rows).toHaveLength(3);
    expect(rows[0]).toContain('<span class="badge ok">delivered</span>');
    expect(rows[0]).toContain('<code>204</code>');
    expect(rows[1]).toContain('<span class="badge bad">failed</span>');
    expect(rows[1]).toContain('no more attempts');
    expect(rows[2]).toContain(`<time datetime="${at.toISOString()}">10 Mar 2026, 12:00:00 UTC</time>`); // retries come seconds apart
  });
});

describe('deleting an endpoint', () => {
  it('removes it from the store and the page', async () => {
    const s = await server();
    const { client, account } = await signedUp(s);
    await addEndpoint(client);
    const [endpoint] = await s.store.webhooks.list(account.id);
    const deleted = await client.submit(PAGE, '/dashboard/webhooks/delete', { endpoint_id: endpoint!.id });
    expect(deleted.status).toBe(303);
    expect(deleted.location).toBe('/dashboard/webhooks?done=webhook-deleted');
    expect(await s.store.webhooks.list(account.id)).toEqual([]);
    const page = await client.get(deleted.location!);
    expect(message(page.html)).toMatch(/deleted/);
    expect(page.html).not.toContain(endpoint!.id);
    expect(page.html).toContain('id="no-webhooks"');
    const again = await client.post('/dashboard/webhooks/delete', { csrf: csrfToken(page.html), endpoint_id: endpoint!.id });
    expect(again.status).toBe(404);
    expect(message(again.html)).toBe('No such webhook endpoint on this account.');
  });
});

describe('protection', () => {
  it('refuses every webhook form without the session CSRF token', async () => {
    const s = await server();
    const { client, account } = await signedUp(s);
    const { client: mallory } = await signedUp(s, 'mallory@example.com');
    const malloryToken = csrfToken((await mallory.get(PAGE)).html);
    for (const csrf of [undefined, '', malloryToken]) {
      const fields: Record<string, string> = csrf === undefined ? {} : { csrf };
      const res = await client.post(PAGE, { ...fields, url: HOOK_URL, description: '' });
      expect(res.status).toBe(403);
      expect(res.html).toContain('This form has expired');
    }
    expect(await s.store.webhooks.list(account.id)).toEqual([]);

    await addEndpoint(client);
    const [endpoint] = await s.store.webhooks.list(account.id);
    expect((await client.post('/dashboard/webhooks/test', { endpoint_id: endpoint!.id })).status).toBe(403);
    expect((await client.post('/dashboard/webhooks/delete', { endpoint_id: endpoint!.id })).status).toBe(403);
    expect((await client.post('/dashboard/webhooks/delete', { csrf: malloryToken, endpoint_id: endpoint!.id })).status).toBe(403);
    expect(await s.store.webhooks.list(account.id)).toHaveLength(1);
    expect(await s.store.webhooks.deliveries(account.id, endpoint!.id, 10)).toEqual([]);
  });

  it("another account neither sees, tests nor deletes an account's endpoint", async () => {
    let wakeUps = 0;
    const s = await server({ onWebhookTest: () => wakeUps++ });
    const { client, account } = await signedUp(s);
    await addEndpoint(client, HOOK_URL, 'secret project');
    const [endpoint] = await s.store.webhooks.list(account.id);
    const { client: mallory } = await signedUp(s, 'mallory@example.com');
    const page = await mallory.get(PAGE);
    expect(page.html).not.toContain(endpoint!.id);
    expect(page.html).not.toContain('secret project');

    const del = await mallory.submit(PAGE, '/dashboard/webhooks/delete', { endpoint_id: endpoint!.id });
    expect(del.status).toBe(404);
    const test = await mallory.submit(PAGE, '/dashboard/webhooks/test', { endpoint_id: endpoint!.id });
    expect(test.status).toBe(404);
    expect(wakeUps).toBe(0);
    expect(await s.store.webhooks.list(account.id)).toHaveLength(1);
    expect(await s.store.webhooks.deliveries(account.id, endpoint!.id, 10)).toEqual([]);
    // Missing and unknown ids get the same answer.
    expect((await mallory.submit(PAGE, '/dashboard/webhooks/delete')).status).toBe(404);
    expect((await mallory.submit(PAGE, '/dashboard/webhooks/test', { endpoint_id: 'x'.repeat(500) })).status).toBe(404);
  });
});
