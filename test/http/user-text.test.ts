/**
 * Text that users send and the store keeps (a webhook endpoint's description, a batch image's file
 * name, an email) with a control character in it, on a real server with the dashboard mounted, on
 * a SQLite file and on a PostgreSQL database: each answers 400 validation_error (the dashboard's
 * form again with the reason), stores nothing, charges nothing, and the server goes on answering.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import { mountDashboard } from '../../src/dashboard/index.js';
import { openStore, type Store } from '../../src/store/index.js';
import { openPostgresStore } from '../../src/store/postgres/postgres-store.js';
import { PHOTOS } from '../helpers/constants.js';
import { DashboardClient, message } from '../helpers/dashboard-client.js';
import { expectError } from '../helpers/http-assert.js';
import { multipartBody } from '../helpers/http-raw.js';
import { readPhoto } from '../helpers/paths.js';
import { freshDatabase, testDatabaseUrl } from '../helpers/postgres.js';
import { get, type HttpResult, serveStore, toResult } from '../helpers/server.js';

const PASSWORD = 'correct horse battery';
const teddy = readPhoto(PHOTOS.teddy);

describe.each(['sqlite', 'postgres'] as const)('user text with control characters, on %s', (kind) => {
  let url = '';
  let store: Store;
  let key = '';
  let accountId = 0;
  let browser: DashboardClient;
  const cleanups: Array<() => Promise<void>> = [];

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'bgone-user-text-'));
    if (kind === 'postgres') {
      const database = await freshDatabase(await testDatabaseUrl());
      cleanups.push(() => database.drop());
      store = await openPostgresStore({ url: database.url });
    } else {
      cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
      store = await openStore({ path: join(dir, 'db.sqlite') });
    }
    const { server, close } = await serveStore(store, dir, {
      mount: (context) => mountDashboard(context, { store, logger: createLogger('silent') }),
    });
    cleanups.push(close);
    url = `http://127.0.0.1:${server.port}`;
    browser = new DashboardClient(url);
    expect((await browser.signUp('owner@example.com', PASSWORD)).status).toBe(200);
    accountId = (await store.accounts.getByEmail('owner@example.com'))!.id;
    key = (await store.keys.create(accountId)).key;
  });

  afterAll(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  const auth = () => ({ authorization: `Bearer ${key}` });

  async function postWebhook(body: Record<string, string>): Promise<HttpResult> {
    return toResult(
      await fetch(`${url}/api/v1/webhooks`, { method: 'POST', headers: { ...auth(), 'content-type': 'application/json' }, body: JSON.stringify(body) }),
    );
  }

  /** A batch of one teddy photo whose part names its file with `disposition` (after `name="image_file"; `). */
  async function postBatch(disposition: string): Promise<HttpResult> {
    const boundary = 'bgone-user-text';
    const body = multipartBody(boundary, [{ name: 'image_file', type: 'image/jpeg', data: teddy }]);
    const named = Buffer.from(body.toString('latin1').replace('name="image_file"', `name="image_file"; ${disposition}`), 'latin1');
    return toResult(
      await fetch(`${url}/api/v1/batches`, {
        method: 'POST',
        headers: { ...auth(), 'content-type': `multipart/form-data; boundary=${boundary}` },
        body: named,
      }),
    );
  }

  async function serverStillAnswers(): Promise<void> {
    expect((await get(url, '/healthz')).status).toBe(200);
  }

  it('a webhook description with NUL (or another control character) is 400 validation_error, nothing stored', async () => {
    for (const description of ['before\u0000after', 'bell\u0007', 'delete\u007f', 'tab\tinside', 'line\nbreak']) {
      const refused = await postWebhook({ url: 'https://hooks.example.com/bgone', description });
      expectError(refused, 400, 'validation_error');
      expect(refused.json.details).toMatchObject({ field: 'description' });
    }
    expect(await store.webhooks.list(accountId)).toEqual([]);
    const page = await browser.submit('/dashboard/webhooks', '/dashboard/webhooks', {
      url: 'https://hooks.example.com/bgone',
      description: 'before\u0000after',
    });
    expect(page.status).toBe(400);
    expect(message(page.html)).toMatch(/control character/);
    expect(await store.webhooks.list(accountId)).toEqual([]);
    await serverStillAnswers();
    // Accents, emoji and the like are not control characters.
    expect((await postWebhook({ url: 'https://hooks.example.com/bgone', description: 'Café — ünïcode ✓' })).status).toBe(201);
  });

  it('a batch file name with NUL is 400 validation_error for the whole request: no batch, no credit', async () => {
    const before = await store.credits.balance(accountId);
    // Percent-encoded (RFC 5987): the multipart parser itself refuses raw control bytes in a header.
    for (const disposition of ["filename*=UTF-8''teddy%00.jpg", "filename*=UTF-8''teddy%1B%5B2J.jpg", "filename*=UTF-8''teddy%0D%0A.jpg"]) {
      const refused = await postBatch(disposition);
      expectError(refused, 400, 'validation_error');
      expect(refused.json.details).toMatchObject({ field: 'image_file' });
    }
    expect(await store.batches.list(accountId, 10)).toEqual([]);
    expect(await store.credits.balance(accountId)).toMatchObject({ used: before.used, reserved: 0, remaining: before.remaining });
    await serverStillAnswers();
  });

  it('an email with NUL is refused at sign-up (400, no account) and at login (400)', async () => {
    const accounts = (await store.accounts.list()).length;
    const signUp = await new DashboardClient(url).signUp('ada\u0000@example.com', PASSWORD);
    expect(signUp.status).toBe(400);
    expect(signUp.key).toBe('');
    expect(await store.accounts.list()).toHaveLength(accounts);
    const logIn = await new DashboardClient(url).logIn('owner\u0000@example.com', PASSWORD);
    expect(logIn.status).toBe(400);
    expect(logIn.setCookies.some((c) => c.startsWith('bgone_session='))).toBe(false);
    await serverStillAnswers();
    expect((await new DashboardClient(url).logIn('owner@example.com', PASSWORD)).status).toBe(303);
  });
});
