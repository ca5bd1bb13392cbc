/**
 * The one admission path (src/service/admission.ts): its order (shutting down → authentication →
 * rate limit → disabled → credits → account cap → load shedding → Content-Length), the answers of
 * each refusal, the places it holds and gives back, and the drain.
 */
import { describe, expect, it } from 'vitest';
import { Exchange } from '../../src/http/exchange.js';
import { Admission, type Principal } from '../../src/service/admission.js';
import { ApiError } from '../../src/service/errors.js';
import { MemoryRateWindows } from '../../src/store/rate-window.js';
import { memoryRequest, RecordedResponse } from '../helpers/recorded-exchange.js';

/** The store's rate-limit counters in memory (as the SQLite store keeps them), on a fixed clock. */
function rateLimitsAt(nowMs: number) {
  const windows = new MemoryRateWindows(() => nowMs);
  return { take: async (bucket: string, limit: number) => windows.take(bucket, limit) };
}

const T0 = Date.UTC(2026, 2, 10, 12, 0, 0);
const principal = (over: Partial<Principal> = {}): Principal => ({
  accountId: 1,
  keyId: 7,
  disabled: false,
  rateLimitPerMinute: 100,
  rateKey: 'key:7',
  ...over,
});

function setup(options: { queueLimit?: number; uploadLimit?: number; maxBodyBytes?: number } = {}) {
  const records: Array<{ route: string; status: number; code: string }> = [];
  const admission = new Admission(
    {
      queueLimit: options.queueLimit ?? 2,
      uploadLimit: options.uploadLimit,
      overloadRetryAfter: 7,
      maxBodyBytes: options.maxBodyBytes ?? 1000,
      rateLimits: rateLimitsAt(T0),
    },
    () => new ApiError('image_too_large', 'too large'),
  );
  const exchange = (headers: Record<string, string> = {}, body: Uint8Array[] = []) => {
    const res = new RecordedResponse();
    const ex = new Exchange(memoryRequest('POST', '/api/v1/remove', headers, body), res, '/api/v1/remove', (route, status, code) =>
      records.push({ route, status, code }),
    );
    return { ex, res };
  };
  const unauthenticated = new ApiError('authentication_error');
  return { admission, exchange, records, unauthenticated };
}

describe('Admission.admit', () => {
  it('admits an authenticated request, holds a place and returns the rate-limit headers', async () => {
    const { admission, exchange, unauthenticated } = setup();
    const { ex, res } = exchange();
    const ticket = await admission.admit(ex, async () => principal(), unauthenticated);
    expect(ticket).not.toBeNull();
    expect(res.sent).toBe(false);
    expect(admission.inFlight).toBe(1);
    expect(ticket!.rateHeaders['X-RateLimit-Limit']).toBe('100');
    expect(ticket!.rateHeaders['X-RateLimit-Remaining']).toBe('99');
    ticket!.release();
    ticket!.release(); // idempotent
    expect(admission.inFlight).toBe(0);
  });

  it('answers 401 with the given error when the authenticator finds nobody, and counts it in metrics', async () => {
    const { admission, exchange, unauthenticated, records } = setup();
    const { ex, res } = exchange();
    expect(await admission.admit(ex, async () => null, unauthenticated)).toBeNull();
    expect(res.status).toBe(401);
    expect(res.json).toMatchObject({ code: 'authentication_error', request_id: ex.requestId });
    expect(records).toEqual([{ route: '/api/v1/remove', status: 401, code: 'authentication_error' }]);
    expect(admission.inFlight).toBe(0);
  });

  it("answers the authenticator's own HttpError as it is, and a crash of it as a 500", async () => {
    const { admission, exchange, unauthenticated } = setup();
    const a = exchange();
    await admission.admit(
      a.ex,
      async () => {
        throw new ApiError('permission_denied', 'bad csrf');
      },
      unauthenticated,
    );
    expect(a.res.status).toBe(403);
    expect(a.res.json.message).toBe('bad csrf');
    const b = exchange();
    await admission.admit(
      b.ex,
      async () => {
        throw new Error('database is locked');
      },
      unauthenticated,
    );
    expect(b.res.status).toBe(500);
    expect(b.res.json.code).toBe('internal_server_error');
    expect(JSON.stringify(b.res.json)).not.toContain('database is locked');
  });

  it('refuses past the rate limit with 429, Retry-After and the rate-limit headers', async () => {
    const { admission, exchange, unauthenticated } = setup({ queueLimit: 10 });
    for (let i = 0; i < 3; i++) (await admission.admit(exchange().ex, async () => principal({ rateLimitPerMinute: 3 }), unauthenticated))!.release();
    const { ex, res } = exchange();
    expect(await admission.admit(ex, async () => principal({ rateLimitPerMinute: 3 }), unauthenticated)).toBeNull();
    expect(res.status).toBe(429);
    expect(res.answers[0]!.headers['X-RateLimit-Remaining']).toBe('0');
    expect(Number(res.answers[0]!.headers['Retry-After'])).toBeGreaterThan(0);
  });

  it('refuses a disabled account with 403 after the rate limit took its place (headers included)', async () => {
    const { admission, exchange, unauthenticated } = setup();
    const { ex, res } = exchange();
    expect(await admission.admit(ex, async () => principal({ disabled: true }), unauthenticated)).toBeNull();
    expect(res.status).toBe(403);
    expect(res.answers[0]!.headers['X-RateLimit-Limit']).toBe('100');
  });

  it('sheds load with 503 and Retry-After once queueLimit requests hold a place, and admits again after a release', async () => {
    const { admission, exchange, unauthenticated } = setup({ queueLimit: 2 });
    const first = await admission.admit(exchange().ex, async () => principal(), unauthenticated);
    await admission.admit(exchange().ex, async () => principal(), unauthenticated);
    const { ex, res } = exchange();
    expect(await admission.admit(ex, async () => principal(), unauthenticated)).toBeNull();
    expect(res.status).toBe(503);
    expect(res.json.code).toBe('overloaded');
    expect(res.answers[0]!.headers['Retry-After']).toBe('7');
    first!.release();
    expect(await admission.admit(exchange().ex, async () => principal(), unauthenticated)).not.toBeNull();
  });

  it('refuses a body declared larger than the limit from Content-Length, before reading it', async () => {
    const { admission, exchange, unauthenticated } = setup({ maxBodyBytes: 1000 });
    const ok = exchange({ 'content-length': '1000' });
    expect(await admission.admit(ok.ex, async () => principal(), unauthenticated)).not.toBeNull();
    const big = exchange({ 'content-length': '1001' });
    expect(await admission.admit(big.ex, async () => principal(), unauthenticated)).toBeNull();
    expect(big.res.status).toBe(400);
    expect(big.res.json.code).toBe('image_too_large');
  });

  it('admits nobody once draining (503 before authentication), and drain() resolves when the last place is released', async () => {
    const { admission, exchange, unauthenticated } = setup();
    const held = await admission.admit(exchange().ex, async () => principal(), unauthenticated);
    let drained = false;
    const drain = admission.drain(60_000).then(() => {
      drained = true;
    });
    let asked = false;
    const { ex, res } = exchange();
    expect(
      await admission.admit(
        ex,
        async () => {
          asked = true;
          return principal();
        },
        unauthenticated,
      ),
    ).toBeNull();
    expect(asked).toBe(false);
    expect(res.status).toBe(503);
    expect(admission.isDraining).toBe(true);
    await new Promise((r) => setTimeout(r, 10));
    expect(drained).toBe(false);
    held!.release();
    await drain;
    expect(drained).toBe(true);
  });

  it('does not answer or admit a request whose client left during authentication', async () => {
    const { admission, exchange } = setup();
    const { ex, res } = exchange();
    const ticket = await admission.admit(
      ex,
      async () => {
        res.abort();
        return principal();
      },
      new ApiError('authentication_error'),
    );
    expect(ticket).toBeNull();
    expect(res.answers).toHaveLength(0);
    expect(admission.inFlight).toBe(0);
  });
});

describe('Admission: the abuse limits', () => {
  /** An admission with the per-account options, over a balance the test sets. */
  function abuseSetup(options: { accountInFlight?: number; remaining?: number } = {}) {
    let balanceReads = 0;
    const credits = {
      balance: async () => {
        balanceReads++;
        return { remaining: options.remaining ?? 10 } as never;
      },
    };
    const admission = new Admission(
      {
        queueLimit: 16,
        overloadRetryAfter: 7,
        maxBodyBytes: 1000,
        rateLimits: rateLimitsAt(T0),
        accountInFlight: options.accountInFlight,
        credits,
      },
      () => new ApiError('image_too_large', 'too large'),
    );
    const exchange = (headers: Record<string, string> = {}) => {
      const res = new RecordedResponse();
      return { ex: new Exchange(memoryRequest('POST', '/api/v1/remove', headers), res, '/api/v1/remove', () => {}), res };
    };
    return { admission, exchange, balanceReads: () => balanceReads };
  }
  const unauthenticated = new ApiError('authentication_error');

  it('caps the requests one account holds at once with 429 (Retry-After, details), while other accounts are admitted', async () => {
    const { admission, exchange } = abuseSetup({ accountInFlight: 2 });
    const a1 = await admission.admit(exchange().ex, async () => principal({ accountId: 1, rateKey: 'key:1' }), unauthenticated);
    const a2 = await admission.admit(exchange().ex, async () => principal({ accountId: 1, rateKey: 'key:2' }), unauthenticated);
    expect(admission.accountInFlight(1)).toBe(2);
    const { ex, res } = exchange();
    expect(await admission.admit(ex, async () => principal({ accountId: 1, rateKey: 'key:3' }), unauthenticated)).toBeNull();
    expect(res.status).toBe(429);
    expect(res.json).toMatchObject({ code: 'rate_limit_exceeded', details: { in_flight_limit: 2 } });
    expect(res.answers[0]!.headers['Retry-After']).toBe('7');
    const b = await admission.admit(exchange().ex, async () => principal({ accountId: 2, rateKey: 'key:9' }), unauthenticated);
    expect(b).not.toBeNull();
    a1!.release();
    a1!.release(); // idempotent: one place back, not two
    expect(admission.accountInFlight(1)).toBe(1);
    expect(await admission.admit(exchange().ex, async () => principal({ accountId: 1 }), unauthenticated)).not.toBeNull();
    a2!.release();
    b!.release();
    expect(admission.inFlight).toBe(1);
  });

  it("counts every key of an account in the account's bucket: a second key does not double the limit; the headers show the tighter count", async () => {
    const { admission, exchange } = abuseSetup();
    const limit = { rateLimitPerMinute: 3 };
    (await admission.admit(exchange().ex, async () => principal({ ...limit, rateKey: 'key:1' }), unauthenticated))!.release();
    (await admission.admit(exchange().ex, async () => principal({ ...limit, rateKey: 'key:1' }), unauthenticated))!.release();
    const third = await admission.admit(exchange().ex, async () => principal({ ...limit, rateKey: 'key:2' }), unauthenticated);
    // key:2 has used 1 of 3, the account 3 of 3: the account's count is the one shown.
    expect(third!.rateHeaders).toMatchObject({ 'X-RateLimit-Limit': '3', 'X-RateLimit-Remaining': '0' });
    third!.release();
    const fourth = exchange();
    expect(await admission.admit(fourth.ex, async () => principal({ ...limit, rateKey: 'key:3' }), unauthenticated)).toBeNull();
    expect(fourth.res.status).toBe(429);
    expect(fourth.res.answers[0]!.headers['X-RateLimit-Remaining']).toBe('0');
    // Another account has its own bucket.
    expect(await admission.admit(exchange().ex, async () => principal({ ...limit, accountId: 2, rateKey: 'key:8' }), unauthenticated)).not.toBeNull();
  });

  it('refuses a metered request of an account with no credit left with 402 before the body, and reads no balance for other routes', async () => {
    const poor = abuseSetup({ remaining: 0 });
    const { ex, res } = poor.exchange({ 'content-length': '500' });
    expect(await poor.admission.admit(ex, async () => principal(), unauthenticated, { metered: true })).toBeNull();
    expect(res.status).toBe(402);
    expect(res.json.code).toBe('payment_required');
    expect(res.answers[0]!.headers['X-RateLimit-Limit']).toBe('100');
    expect(poor.admission.inFlight).toBe(0);
    expect(await poor.admission.admit(poor.exchange().ex, async () => principal(), unauthenticated)).not.toBeNull();
    expect(poor.balanceReads()).toBe(1);

    const rich = abuseSetup({ remaining: 1 });
    expect(await rich.admission.admit(rich.exchange().ex, async () => principal(), unauthenticated, { metered: true })).not.toBeNull();
  });

  it('counts uploads and jobs in two budgets: uploads that never finish fill the upload places only, and a request whose body is here is still admitted', async () => {
    const { admission, exchange, unauthenticated } = setup({ queueLimit: 2, uploadLimit: 3 });
    const withBody = { 'content-length': '100' };
    const uploads = [];
    for (let account = 1; account <= 3; account++)
      uploads.push(await admission.admit(exchange(withBody).ex, async () => principal({ accountId: account, rateKey: `key:${account}` }), unauthenticated));
    expect(uploads.every((t) => t !== null)).toBe(true);
    expect({ uploading: admission.uploading, working: admission.working, inFlight: admission.inFlight }).toEqual({ uploading: 3, working: 0, inFlight: 3 });

    // A fourth upload finds the upload places taken: 503, with the reason.
    const refused = exchange(withBody);
    expect(await admission.admit(refused.ex, async () => principal({ accountId: 4, rateKey: 'key:4' }), unauthenticated)).toBeNull();
    expect(refused.res.status).toBe(503);
    expect(refused.res.json.code).toBe('overloaded');
    expect(refused.res.json.message).toMatch(/uploads in progress/);
    expect(refused.res.answers[0]!.headers['Retry-After']).toBe('7');

    // A request without a body takes a job place, not an upload place.
    const bodiless = await admission.admit(exchange().ex, async () => principal({ accountId: 5, rateKey: 'key:5' }), unauthenticated);
    expect(bodiless).not.toBeNull();
    expect({ uploading: admission.uploading, working: admission.working }).toEqual({ uploading: 3, working: 1 });

    // An upload whose last chunk arrives moves from the upload places to the job places.
    const done = exchange(withBody, [new Uint8Array(100)]);
    const ticket = await admission.admit(done.ex, async () => principal({ accountId: 6, rateKey: 'key:6' }), unauthenticated);
    expect(ticket).toBeNull(); // the upload places are still all taken
    uploads[0]!.release();
    const arriving = exchange(withBody, [new Uint8Array(100)]);
    const moved = await admission.admit(arriving.ex, async () => principal({ accountId: 6, rateKey: 'key:6' }), unauthenticated);
    expect({ uploading: admission.uploading, working: admission.working }).toEqual({ uploading: 3, working: 1 });
    arriving.ex.onBody(
      () => {},
      () => {},
    );
    expect({ uploading: admission.uploading, working: admission.working }).toEqual({ uploading: 2, working: 2 });

    // The job places are full now: a new request is refused before its body, whatever it is.
    const shed = exchange(withBody);
    expect(await admission.admit(shed.ex, async () => principal({ accountId: 7, rateKey: 'key:7' }), unauthenticated)).toBeNull();
    expect(shed.res.status).toBe(503);
    moved!.release();
    moved!.release();
    bodiless!.release();
    for (const t of uploads) t!.release();
    expect({ uploading: admission.uploading, working: admission.working, inFlight: admission.inFlight }).toEqual({ uploading: 0, working: 0, inFlight: 0 });
  });
});
