/**
 * The account-read rate limit (BGONE_ACCOUNT_READ_RATE_LIMIT) through real HTTP: the balance routes
 * of the dialects (remove.bg's GET /v1.0/account, Photoroom's GET /v1/account and /v2/account)
 * count in a limit of their own, per key and per account, so polling the balance takes nothing of
 * the removals' limit; past its own figure an account read is answered 429 in the dialect's shape,
 * and its X-RateLimit-* headers describe that limit.
 *
 * Real parts: startServer on 127.0.0.1:0 over a SQLite file, with the store's clock fixed in the
 * middle of a minute (so no count slides out while the test runs). The removals are refused by
 * validation (format=bmp): they count against the rate limit and need no model run.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/index.js';
import { PHOTOS } from '../helpers/constants.js';
import { expectError } from '../helpers/http-assert.js';
import { readPhoto } from '../helpers/paths.js';
import { type HttpResult, postImage, serveStore, toResult } from '../helpers/server.js';

const teddy = readPhoto(PHOTOS.teddy);
const MINUTE = Date.UTC(2030, 0, 1, 12, 0, 0);
/** The account routes, each read with its dialect's key header. */
const ACCOUNT_ROUTES = ['/v1.0/account', '/v1/account', '/v2/account'];

interface LimitServer {
  url: string;
  key: string;
  second: string;
  other: string;
}

const closers: Array<() => Promise<void>> = [];

afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

/** A server whose Free plan allows `removals` a minute and whose account reads allow `reads`. */
async function serve(removals: number, reads: number): Promise<LimitServer> {
  const dir = mkdtempSync(join(tmpdir(), 'bgone-account-read-'));
  const store = await openStore({
    path: join(dir, 'db.sqlite'),
    clock: () => new Date(MINUTE + 30_000),
    rateLimits: { free: removals, pro: removals, ultra: removals, mega: removals },
  });
  const account = await store.accounts.create({ email: 'client@example.com' });
  const other = await store.accounts.create({ email: 'other@example.com' });
  const { server, close } = await serveStore(store, dir, { accountReadsPerMinute: reads });
  closers.push(close);
  return {
    url: `http://127.0.0.1:${server.port}`,
    key: (await store.keys.create(account.id)).key,
    second: (await store.keys.create(account.id)).key,
    other: (await store.keys.create(other.id)).key,
  };
}

async function read(s: LimitServer, path: string, key: string): Promise<HttpResult> {
  return toResult(await fetch(`${s.url}${path}`, { headers: { 'x-api-key': key } }));
}

/** A removal refused by validation: counted against the removal limit, charged nothing. */
const removal = (s: LimitServer, key: string) => postImage(s.url, key, { format: 'bmp' }, teddy);

const limitHeaders = (r: HttpResult) => [r.headers.get('x-ratelimit-limit'), r.headers.get('x-ratelimit-remaining')];

describe('the account-read rate limit', () => {
  it('polling the balance N times leaves the removal limit whole', async () => {
    const s = await serve(3, 12);
    const polls: HttpResult[] = [];
    for (let i = 0; i < 9; i++) polls.push(await read(s, ACCOUNT_ROUTES[i % 3]!, s.key));
    expect(polls.map((r) => r.status)).toEqual(Array(9).fill(200));
    // Their headers describe the account-read limit: 12 a minute, counted across the three routes.
    expect(polls.map(limitHeaders)).toEqual(Array.from({ length: 9 }, (_, i) => ['12', String(11 - i)]));

    // The removals still have their 3 of the minute, and only those.
    const removals: HttpResult[] = [];
    for (let i = 0; i < 3; i++) removals.push(await removal(s, s.key));
    expect(removals.map((r) => r.status)).toEqual([400, 400, 400]);
    expect(removals.map(limitHeaders)).toEqual([
      ['3', '2'],
      ['3', '1'],
      ['3', '0'],
    ]);
    expectError(await removal(s, s.key), 429, 'rate_limit_exceeded');
    // And the removals took nothing of the account reads: 3 of the 12 are left.
    expect(limitHeaders(await read(s, '/v1.0/account', s.key))).toEqual(['12', '2']);
  });

  it('answers 429 past its own figure, per account across its keys, in each dialect; removals are still admitted', async () => {
    const s = await serve(3, 4);
    for (let i = 0; i < 4; i++) expect((await read(s, ACCOUNT_ROUTES[i % 3]!, i < 2 ? s.key : s.second)).status).toBe(200);

    const removeBg = await read(s, '/v1.0/account', s.key);
    expect(removeBg.status).toBe(429);
    expect(removeBg.json.errors).toEqual([
      { title: 'Rate limit exceeded', code: 'rate_limit_exceeded', detail: expect.stringMatching(/account reads: at most 4 a minute/) },
    ]);
    expect(removeBg.headers.get('retry-after')).toBe('30');
    expect(limitHeaders(removeBg)).toEqual(['4', '0']);
    // The account's second key, and Photoroom's routes, meet the same count.
    for (const path of ['/v1/account', '/v2/account']) {
      const photoroom = await read(s, path, s.second);
      expect(photoroom.status).toBe(429);
      expect(photoroom.json).toEqual({ error: { message: expect.stringMatching(/account reads: at most 4 a minute/) } });
      expect(photoroom.headers.get('retry-after')).toBe('30');
      expect(limitHeaders(photoroom)).toEqual(['4', '0']);
    }
    // Another account has its own count; this account's removals are admitted (400: validation).
    expect((await read(s, '/v1.0/account', s.other)).status).toBe(200);
    const admitted = await removal(s, s.key);
    expect(admitted.status).toBe(400);
    expect(limitHeaders(admitted)).toEqual(['3', '2']);
  });
});
