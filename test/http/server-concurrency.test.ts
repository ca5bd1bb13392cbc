/**
 * The service under concurrency and hostile clients, through real HTTP: exact charging when many
 * requests race for the last credits, clients that vanish mid-upload or mid-processing (never
 * charged), a storm of malformed multipart bodies, and no API key secret ever written to the
 * database file.
 *
 * Real parts only: startServer on 127.0.0.1:0, a SQLite file in a temp folder, the real model and
 * photos; raw requests over node:net.
 */
import { existsSync, readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { PHOTOS } from '../helpers/constants.js';
import { expectError, trackUncaught } from '../helpers/http-assert.js';
import { multipartBody, type RawResponse, rawConnection, rawExchange, requestHead } from '../helpers/http-raw.js';
import { readFixture, readPhoto } from '../helpers/paths.js';
import { randomBytes } from '../helpers/prng.js';
import { credits, get, metricsUrl, postImage, startTestServer, type TestServer, waitFor } from '../helpers/server.js';

const teddy = readPhoto(PHOTOS.teddy);
const uncaught = trackUncaught();

/** The counter of POST /api/v1/remove answers with this status and code in GET /metrics (0 when absent). */
async function metricCount(ts: TestServer, status: number, code: string): Promise<number> {
  const text = (await get(metricsUrl(ts.server), '/metrics')).body.toString('utf8');
  const m = new RegExp(`^bgone_requests_total\\{route="/api/v1/remove",status="${status}",code="${code}"\\} (\\d+)$`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

async function expectHealthy(ts: TestServer): Promise<void> {
  const health = await get(ts.url, '/healthz');
  expect({ status: health.status, body: health.json }).toEqual({ status: 200, body: { status: 'ok' } });
}

/** No form of the key's secret is anywhere in the database files (main file, WAL, shared memory). */
function expectNoSecretOnDisk(ts: TestServer, keys: string[]): void {
  const files = [ts.dbPath, `${ts.dbPath}-wal`, `${ts.dbPath}-shm`].filter((f) => existsSync(f));
  expect(files).toContain(ts.dbPath);
  for (const file of files) {
    const bytes = readFileSync(file);
    for (const key of keys) {
      const secret = key.slice('rb-sk_'.length);
      // The display prefix (6 secret characters) and last 4 are stored on purpose; the middle never is.
      const middle = secret.slice(6, -4);
      for (const [what, needle] of [
        ['full key', key],
        ['secret part', secret],
        ['hidden middle', middle],
      ] as const) {
        expect(bytes.includes(Buffer.from(needle, 'utf8')), `${what} of ${key.slice(0, 12)}… found in ${file}`).toBe(false);
        expect(bytes.includes(Buffer.from(needle, 'utf16le')), `${what} (UTF-16) found in ${file}`).toBe(false);
      }
    }
  }
}

describe('exact charging: 50 concurrent requests for the last 5 credits', () => {
  let ts: TestServer;

  beforeAll(async () => {
    ts = await startTestServer({ credits: 5, queueLimit: 100, rateLimits: { free: 1000 } });
  });

  afterAll(async () => {
    await ts?.close();
  });

  it('exactly 5 succeed and 45 get 402 payment_required; the balance ends at 0 with exactly 5 charges', async () => {
    const before = await credits(ts);
    expect(before).toEqual({ used: 95, reserved: 0, remaining: 5 });
    const results = await Promise.all(Array.from({ length: 50 }, () => postImage(ts.url, ts.key, { size: 'preview' }, teddy)));
    const statuses = results.map((r) => r.status);
    const ok = results.filter((r) => r.status === 200);
    const refused = results.filter((r) => r.status === 402);
    expect({ ok: ok.length, refused: refused.length, other: statuses.filter((s) => s !== 200 && s !== 402) }).toEqual({ ok: 5, refused: 45, other: [] });
    for (const r of refused) expectError(r, 402, 'payment_required');
    for (const r of ok) {
      expect(r.headers.get('x-credits-charged')).toBe('1');
      expect(Number(r.headers.get('x-credits-remaining'))).toBeGreaterThanOrEqual(0);
      expect(Number(r.headers.get('x-credits-remaining'))).toBeLessThan(5);
    }
    expect(await credits(ts)).toEqual({ used: 100, reserved: 0, remaining: 0 });
    // The charges ledger holds exactly the five successful requests, by their X-Request-ID (read from the SQLite file).
    const charged = SqliteStore.databaseOf(ts.store)
      .prepare<[], { request_id: string }>("SELECT request_id FROM charges WHERE request_id NOT LIKE 'req_setup%' ORDER BY request_id")
      .all()
      .map((row) => row.request_id);
    expect(charged).toEqual(ok.map((r) => r.headers.get('x-request-id')).sort());
    expect(ts.server.inFlight()).toBe(0);
  });

  it('with the balance at 0, one more request is refused and the key never reaches the database file', async () => {
    const res = await postImage(ts.url, ts.key, { size: 'preview' }, teddy);
    expectError(res, 402, 'payment_required');
    expectNoSecretOnDisk(ts, [ts.key]);
    await uncaught.check();
  });
});

describe('clients that go away, and malformed bodies', () => {
  let ts: TestServer;
  const boundary = 'AbortBoundary';
  const body = multipartBody(boundary, [
    { name: 'size', data: 'preview' },
    { name: 'image_file', filename: 'photo.jpg', type: 'image/jpeg', data: teddy },
  ]);
  const head = (key: string) => requestHead(key, `multipart/form-data; boundary=${boundary}`, body.length);
  // A job that stays in the native core for a good while (a 5 MP photo at full size, about half a
  // second here): the preview of a small photo could finish before the client is made to leave.
  const slowBody = multipartBody(boundary, [{ name: 'image_file', filename: 'swan.jpg', type: 'image/jpeg', data: readFixture('swan-big.jpg') }]);
  const slowHead = (key: string) => requestHead(key, `multipart/form-data; boundary=${boundary}`, slowBody.length);

  beforeAll(async () => {
    ts = await startTestServer({ queueLimit: 64 });
  });

  afterAll(async () => {
    await ts?.close();
  });

  it('an upload aborted mid-body charges nothing; the server stays healthy', async () => {
    const before = await credits(ts);
    const abortedBefore = await metricCount(ts, 499, 'client_aborted');
    const conn = rawConnection(ts.port);
    await conn.ready;
    conn.write(head(ts.key));
    conn.write(body.subarray(0, body.length >> 1));
    await waitFor(() => ts.server.inFlight() === 1, 'the upload to be admitted');
    conn.destroy();
    await waitFor(() => ts.server.inFlight() === 0, 'the server to notice the abort');
    expect(await credits(ts)).toEqual(before);
    expect(await metricCount(ts, 499, 'client_aborted')).toBe(abortedBefore + 1);
    await expectHealthy(ts);
    await uncaught.check();
  });

  it('a client that disconnects while its image is being processed is not charged; the next request succeeds', async () => {
    const before = await credits(ts);
    const conn = rawConnection(ts.port, 60_000);
    await conn.ready;
    conn.write(slowHead(ts.key));
    conn.write(slowBody);
    // The credit is reserved once the upload is parsed and validated: processing has started.
    await waitFor(async () => (await credits(ts)).reserved === 1, 'the credit reservation');
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect({ inFlight: ts.server.inFlight(), reserved: (await credits(ts)).reserved }, 'still processing when the client leaves').toEqual({
      inFlight: 1,
      reserved: 1,
    });
    conn.destroy();
    const outcome = await conn.response;
    expect(outcome.status).toBeNull();
    await waitFor(async () => ts.server.inFlight() === 0 && (await credits(ts)).reserved === 0, 'the reservation to be released');
    // Let the abandoned job leave the native core, then check it was never charged.
    await waitFor(async () => (await get(ts.url, '/readyz')).json?.queue === 0, 'the native queue to drain');
    expect(await credits(ts)).toEqual(before);

    const next = await postImage(ts.url, ts.key, { size: 'preview' }, teddy);
    expect(next.status).toBe(200);
    expect(next.headers.get('x-credits-charged')).toBe('1');
    expect(await credits(ts)).toEqual({ used: before.used + 1, reserved: 0, remaining: before.remaining - 1 });
    await uncaught.check();
  });

  it('a storm of 200 malformed requests: each gets a 400 (or its connection is dropped), then a normal request succeeds', async () => {
    const before = await credits(ts);
    const auth = `Authorization: Bearer ${ts.key}`;
    const requests: Array<{ kind: string; bytes: Buffer; answered: boolean; destroyAfterWrite?: boolean }> = [];
    const kinds: Array<(i: number) => { kind: string; bytes: Buffer; answered: boolean; destroyAfterWrite?: boolean }> = [
      (i) => {
        const b = `rnd${randomBytes(12, i + 1).toString('hex')}`;
        const junk = randomBytes(200 + (i % 7) * 300, i + 1000);
        return {
          kind: 'garbage body',
          bytes: Buffer.concat([Buffer.from(requestHead(ts.key, `multipart/form-data; boundary=${b}`, junk.length)), junk]),
          answered: true,
        };
      },
      (i) => {
        const b = `hdr${randomBytes(8, i + 2).toString('hex')}`;
        const other = multipartBody(`other${i}`, [{ name: 'image_file', filename: 'a.jpg', type: 'image/jpeg', data: teddy.subarray(0, 2000) }]);
        return {
          kind: 'boundary mismatch',
          bytes: Buffer.concat([Buffer.from(requestHead(ts.key, `multipart/form-data; boundary=${b}`, other.length)), other]),
          answered: true,
        };
      },
      (i) => {
        const b = `trunc${i}`;
        const full = multipartBody(b, [{ name: 'image_file', filename: 'a.jpg', type: 'image/jpeg', data: teddy }]);
        const cut = full.subarray(0, 200 + ((i * 997) % (full.length - 300)));
        return {
          kind: 'truncated part',
          bytes: Buffer.concat([Buffer.from(requestHead(ts.key, `multipart/form-data; boundary=${b}`, cut.length)), cut]),
          answered: true,
        };
      },
      (i) => {
        const b = `hugepart${i}`;
        const part = Buffer.concat([
          Buffer.from(`--${b}\r\nContent-Disposition: form-data; name="image_file"; filename="${'x'.repeat(100_000)}.jpg"\r\n\r\n`),
          teddy.subarray(0, 1000),
          Buffer.from(`\r\n--${b}--\r\n`),
        ]);
        return {
          kind: 'huge part header line',
          bytes: Buffer.concat([Buffer.from(requestHead(ts.key, `multipart/form-data; boundary=${b}`, part.length)), part]),
          answered: true,
        };
      },
      (i) => ({
        kind: 'huge HTTP header line',
        bytes: Buffer.from(`POST /api/v1/remove HTTP/1.1\r\nHost: x\r\n${auth}\r\nX-Junk: ${'j'.repeat(64 * 1024 + i)}\r\nContent-Length: 0\r\n\r\n`),
        answered: false,
      }),
      (i) => {
        const b = `short${i}`;
        const full = multipartBody(b, [{ name: 'image_file', filename: 'a.jpg', type: 'image/jpeg', data: teddy }]);
        const sent = full.subarray(0, full.length >> 1);
        return {
          kind: 'body shorter than Content-Length, then the client leaves',
          bytes: Buffer.concat([Buffer.from(requestHead(ts.key, `multipart/form-data; boundary=${b}`, full.length)), sent]),
          answered: false,
          destroyAfterWrite: true,
        };
      },
      () => ({ kind: 'empty boundary', bytes: Buffer.from(`${requestHead(ts.key, 'multipart/form-data; boundary=', 10)}0123456789`), answered: true }),
      (i) => {
        const b = `nameless${i}`;
        const part = Buffer.concat([
          Buffer.from(`--${b}\r\nContent-Disposition: form-data; filename="a.jpg"\r\n\r\n`),
          teddy.subarray(0, 500),
          Buffer.from(`\r\n--${b}--\r\n`),
        ]);
        return {
          kind: 'file part without a name',
          bytes: Buffer.concat([Buffer.from(requestHead(ts.key, `multipart/form-data; boundary=${b}`, part.length)), part]),
          answered: true,
        };
      },
      (i) => {
        const b = `many${i}`;
        const parts = Array.from({ length: 30 }, (_, k) => ({ name: ['format', 'size', 'crop'][k % 3]!, data: 'png' }));
        const form = multipartBody(b, parts);
        return {
          kind: 'too many parts',
          bytes: Buffer.concat([Buffer.from(requestHead(ts.key, `multipart/form-data; boundary=${b}`, form.length)), form]),
          answered: true,
        };
      },
      (i) => {
        const b = `long${i}`;
        const form = multipartBody(b, [
          { name: 'bg_color', data: 'r'.repeat(10_000) },
          { name: 'image_file', filename: 'a.jpg', type: 'image/jpeg', data: teddy },
        ]);
        return {
          kind: 'field value too long',
          bytes: Buffer.concat([Buffer.from(requestHead(ts.key, `multipart/form-data; boundary=${b}`, form.length)), form]),
          answered: true,
        };
      },
      (i) => {
        const b = `nul${i}`;
        const part = Buffer.concat([
          Buffer.from(`--${b}\r\nContent-Disposition: form-data; name="image\0file"\r\n\0\0\r\n\r\n`),
          randomBytes(300, i + 7),
          Buffer.from(`\r\n--${b}--\r\n`),
        ]);
        return {
          kind: 'NUL bytes in part headers',
          bytes: Buffer.concat([Buffer.from(requestHead(ts.key, `multipart/form-data; boundary=${b}`, part.length)), part]),
          answered: true,
        };
      },
      (i) => {
        const b = `pre${i}`;
        const form = Buffer.concat([randomBytes(500, i + 99), Buffer.from(`\r\n--${b}--\r\n`)]);
        return {
          kind: 'preamble only',
          bytes: Buffer.concat([Buffer.from(requestHead(ts.key, `multipart/form-data; boundary=${b}`, form.length)), form]),
          answered: true,
        };
      },
    ];
    for (let i = 0; i < 200; i++) requests.push(kinds[i % kinds.length]!(i));

    const outcomes: Array<{ kind: string; answered: boolean; res: RawResponse }> = [];
    for (let i = 0; i < requests.length; i += 20) {
      const batch = requests.slice(i, i + 20);
      const res = await Promise.all(batch.map((r) => rawExchange(ts.port, r.bytes, { timeoutMs: 15_000, destroyAfterWrite: r.destroyAfterWrite })));
      for (const [k, r] of batch.entries()) outcomes.push({ kind: r.kind, answered: r.answered, res: res[k]! });
    }
    // Every request whose bytes were complete got a 400 with a JSON error of the contract.
    const wrong = outcomes
      .filter((o) => o.answered && !(o.res.status === 400 && ['validation_error', 'missing_image'].includes(o.res.json?.code)))
      .map((o) => ({ kind: o.kind, status: o.res.status, code: o.res.json?.code, end: o.res.end }));
    expect(wrong).toEqual([]);
    for (const o of outcomes.filter((x) => x.answered)) expect(o.res.headers['x-request-id']).toBe(o.res.json.request_id);
    // The others were dropped or refused, never left hanging until the timeout.
    const hung = outcomes.filter((o) => !o.answered && o.res.end === 'timeout').map((o) => o.kind);
    expect(hung).toEqual([]);
    for (const o of outcomes.filter((x) => !x.answered && x.res.status !== null)) expect(o.res.status, o.kind).toBeGreaterThanOrEqual(400);

    await waitFor(() => ts.server.inFlight() === 0, 'every malformed request to be let go');
    expect(await credits(ts)).toEqual(before);
    await expectHealthy(ts);
    const normal = await postImage(ts.url, ts.key, { size: 'preview' }, teddy);
    expect(normal.status).toBe(200);
    expect((await credits(ts)).used).toBe(before.used + 1);
    await uncaught.check();
  });

  it('after all of it, no form of the key secret is in the database file or its WAL', () => {
    expectNoSecretOnDisk(ts, [ts.key]);
  });
});

describe('load shedding with clients that give up (time out and retry)', () => {
  let ts: TestServer;

  beforeAll(async () => {
    ts = await startTestServer({ queueLimit: 1 });
  });

  afterAll(async () => {
    if (ts) await waitFor(async () => (await get(ts.url, '/readyz')).json?.queue === 0, 'the native queue to drain', 60_000);
    await ts?.close();
  });

  it('queue limit 1: three clients that each disconnect once processing started never put more than 1 job in the queue', async () => {
    const boundary = 'RetryBoundary';
    const body = multipartBody(boundary, [{ name: 'image_file', filename: 'photo.jpg', type: 'image/jpeg', data: teddy }]);
    const before = await credits(ts);
    const answers: Array<number | null> = [];
    const queue: number[] = [];
    for (let attempt = 0; attempt < 3; attempt++) {
      const conn = rawConnection(ts.port, 60_000);
      await conn.ready;
      conn.write(requestHead(ts.key, `multipart/form-data; boundary=${boundary}`, body.length));
      conn.write(body);
      let answered: RawResponse | undefined;
      void conn.response.then((r) => (answered = r));
      // Either the server refuses it (503: its place is taken) or starts processing it (credit reserved).
      await waitFor(async () => answered !== undefined || (await credits(ts)).reserved === 1, 'a 503 or the start of processing');
      answers.push(answered?.status ?? null);
      conn.destroy(); // the client times out and goes away
      await waitFor(() => ts.server.inFlight() === 0, 'the server to let the request go');
      queue.push((await get(ts.url, '/readyz')).json?.queue);
    }
    // Work abandoned by a client still occupies the server: the queue never holds more than queueLimit jobs.
    expect(
      Math.max(...queue),
      `jobs in the queue after each abandoned request: ${JSON.stringify(queue)} (answers: ${JSON.stringify(answers)})`,
    ).toBeLessThanOrEqual(1);
    for (const status of answers) if (status !== null) expect(status).toBe(503);
    expect((await credits(ts)).used).toBe(before.used);
    await uncaught.check();
  });
});
