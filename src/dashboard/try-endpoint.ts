/**
 * POST /dashboard/try: the try-it panel's request. Full API keys are never stored, so the browser
 * cannot call /api/v1/remove with one; this endpoint authenticates by session (plus the session's
 * CSRF token in X-CSRF-Token) and otherwise runs the API's path: the same multipart parser and
 * limits, option validation (normaliseOptions), a credit reserved in the store before the work and
 * committed only on success (released on failure or abort), removeBackground, and the same answers:
 * the image with the API's headers, or the JSON error body of the API's closed list of codes.
 * Rate-limited per account with the plan's limit.
 */
import type { Logger } from '../logger.js';
import { HTTP_STATUS, HttpError } from '../server/http-errors.js';
import { MAX_BODY_BYTES, MeteredRemoval, tooLarge, type Headers } from '../server/metered-removal.js';
import type { Metrics } from '../server/metrics.js';
import { rateLimitHeaders, type RateLimiter } from '../server/rate-limit.js';
import { sqliteServiceStore, type ServiceStore } from '../server/service-store.js';
import type { Account, Session, Store } from '../store/index.js';
import { checkSessionToken } from './csrf.js';
import type { Exchange } from './http.js';

export interface TryDeps {
  store: Store;
  model?: string | undefined;
  metrics?: Metrics | undefined;
  logger?: Logger | undefined;
  rateLimiter: RateLimiter;
  /** Try-it requests processed at once in this process; beyond it 503 overloaded. */
  maxInFlight: number;
  overloadRetryAfter: number;
}

export class TryEndpoint {
  private inFlight = 0;
  private readonly serviceStore: ServiceStore;

  constructor(private readonly deps: TryDeps) {
    this.serviceStore = sqliteServiceStore(deps.store);
  }

  /** `auth` is the session found from the cookie (null: none or expired) and its account. */
  handle(ex: Exchange, auth: { session: Session; account: Account } | null): void {
    const requestId = ex.info.requestId;
    const answerError = (err: HttpError, headers: Headers = {}) => {
      const body: Record<string, unknown> = { code: err.code, message: err.message, request_id: requestId };
      if (err.details !== undefined) body.details = err.details;
      ex.send(
        { status: Number(HTTP_STATUS[err.code].slice(0, 3)), headers: { 'Content-Type': 'application/json', 'Cache-Control': 'no-store', ...headers, ...err.headers }, body: JSON.stringify(body) },
        err.code,
      );
    };

    // 1. Session and its CSRF token (sent as a header by the page's script).
    if (!auth) return answerError(new HttpError('authentication_error', 'Not logged in, or the session has expired. Log in to the dashboard again.'));
    if (!checkSessionToken(auth.session.csrfToken, ex.info.csrfHeader)) {
      return answerError(new HttpError('permission_denied', 'Missing or invalid CSRF token: reload the page and try again.', { field: 'X-CSRF-Token' }));
    }
    const account = auth.account;
    if (account.disabled) return answerError(new HttpError('permission_denied'));
    // 2. The plan's rate limit, per account.
    const limit = this.deps.store.plans[account.plan].rateLimitPerMinute;
    const rate = this.deps.rateLimiter.take(`dashboard:${account.id}`, limit);
    const rh = rateLimitHeaders(rate);
    if (!rate.allowed) return answerError(new HttpError('rate_limit_exceeded'), { ...rh, 'Retry-After': String(rate.retryAfter) });
    // 3. Load shedding, before reading the body.
    if (this.inFlight >= this.deps.maxInFlight) return answerError(new HttpError('overloaded'), { ...rh, 'Retry-After': String(this.deps.overloadRetryAfter) });
    if (ex.info.contentLength && Number(ex.info.contentLength) > MAX_BODY_BYTES) return answerError(tooLarge(), rh);
    // 4. The API's path from here on (server/metered-removal.ts); charges carry no key.
    this.inFlight++;
    const removal = new MeteredRemoval(
      { requestId, contentType: ex.info.contentType, accountId: account.id, rateHeaders: rh, started: performance.now() - ex.seconds() * 1000 },
      {
        onData: (handler) => ex.res.onData(handler),
        answerError: (err, headers) => answerError(err, headers),
        answerImage: (headers, body) => ex.send({ status: 200, headers, body }),
        release: () => {
          this.inFlight--;
        },
      },
      { store: this.serviceStore, model: this.deps.model, logger: this.deps.logger, metrics: this.deps.metrics },
    );
    ex.onAbort(() => removal.abort());
    removal.start();
  }
}
