/**
 * The one admission path of every metered request (POST /api/v1/remove and the dashboard's try-it
 * endpoint), in the contract's order, all before a byte of the body is read:
 *
 *   shutting down → authentication → rate limit → disabled account → load shedding → Content-Length
 *
 * Refusals are answered here with the contract's JSON error and cost nothing. An admitted request
 * holds one of `queueLimit` places until its ticket is released; SIGTERM's drain waits for them.
 */
import type { Logger } from '../config/logger.js';
import { isDatabaseUnavailable, type RateDecision, type RateLimitStore } from '../store/index.js';
import { HttpError, storeFailure } from './errors.js';
import type { Exchange } from './exchange.js';
import { rateLimitHeaders } from './rate-limit.js';

/** Who is asking, once authenticated (by API key or by dashboard session). */
export interface Principal {
  accountId: number;
  /** The API key, when authenticated by one. */
  keyId?: number | undefined;
  disabled: boolean;
  rateLimitPerMinute: number;
  /** The rate limiter's bucket for this principal (e.g. the key). */
  rateKey: string;
}

export interface Ticket {
  principal: Principal;
  /** X-RateLimit-* headers, added to every answer of this request. */
  rateHeaders: Record<string, string>;
  /** Gives the place back (idempotent). */
  release(): void;
}

export interface AdmissionOptions {
  /** Requests admitted at once (uploading, queued or processing); beyond it 503 at once. */
  queueLimit: number;
  /** Seconds in Retry-After of a 503. */
  overloadRetryAfter: number;
  /** Bodies declared larger than this are refused from Content-Length. */
  maxBodyBytes: number;
  /** The store's counters: shared by every node on one database. */
  rateLimits: RateLimitStore;
  logger?: Logger | undefined;
}

/** The answer for a body declared (or found) too large. */
export type TooLarge = () => HttpError;

export class Admission {
  private admitted = 0;
  private draining = false;
  private drained: (() => void) | undefined;

  constructor(
    private readonly options: AdmissionOptions,
    private readonly tooLarge: TooLarge,
  ) {}

  /** Requests holding a place now. */
  get inFlight(): number {
    return this.admitted;
  }

  get isDraining(): boolean {
    return this.draining;
  }

  /**
   * Runs the admission path for `ex`. `authenticate` resolves to the principal, or null when the
   * credentials are missing or invalid (answered with `unauthenticated`), or throws an HttpError to
   * refuse otherwise. Returns the ticket, or null when the request was refused (and answered).
   */
  async admit(
    ex: Exchange,
    authenticate: () => Promise<Principal | null>,
    unauthenticated: HttpError,
    /** The body limit of this route, when not the default (the batch endpoint's is larger). */
    body: { maxBytes: number; tooLarge: TooLarge } = { maxBytes: this.options.maxBodyBytes, tooLarge: this.tooLarge },
  ): Promise<Ticket | null> {
    const retryAfter = { 'Retry-After': String(this.options.overloadRetryAfter) };
    if (this.draining) {
      ex.error(new HttpError('overloaded', 'The server is shutting down.'), retryAfter);
      return null;
    }
    let principal: Principal | null;
    try {
      principal = await authenticate();
    } catch (err) {
      // An HttpError is the authenticator's own refusal (e.g. a missing CSRF token); anything else is ours.
      if (err instanceof HttpError) ex.error(err);
      else {
        this.options.logger?.error({ requestId: ex.requestId, err }, 'authentication failed');
        ex.error(storeFailure(isDatabaseUnavailable(err)));
      }
      return null;
    }
    if (!ex.open) return null;
    if (!principal) {
      ex.error(unauthenticated);
      return null;
    }
    // The rate limit's headers go on every authenticated answer, 403 included.
    let rate: RateDecision;
    try {
      rate = await this.options.rateLimits.take(principal.rateKey, principal.rateLimitPerMinute);
    } catch (err) {
      this.options.logger?.error({ requestId: ex.requestId, err }, 'rate limit check failed');
      ex.error(storeFailure(isDatabaseUnavailable(err)));
      return null;
    }
    if (!ex.open) return null;
    const rateHeaders = rateLimitHeaders(rate);
    if (!rate.allowed) {
      ex.error(new HttpError('rate_limit_exceeded'), { ...rateHeaders, 'Retry-After': String(rate.retryAfter) });
      return null;
    }
    if (principal.disabled) {
      ex.error(new HttpError('permission_denied'), rateHeaders);
      return null;
    }
    if (this.draining) {
      ex.error(new HttpError('overloaded', 'The server is shutting down.'), { ...rateHeaders, ...retryAfter });
      return null;
    }
    if (this.admitted >= this.options.queueLimit) {
      ex.error(new HttpError('overloaded'), { ...rateHeaders, ...retryAfter });
      return null;
    }
    const declared = ex.req.header('content-length');
    if (declared && Number(declared) > body.maxBytes) {
      ex.error(body.tooLarge(), rateHeaders);
      return null;
    }
    this.admitted++;
    let held = true;
    return {
      principal,
      rateHeaders,
      release: () => {
        if (!held) return;
        held = false;
        this.admitted--;
        if (this.draining && this.admitted === 0) this.drained?.();
      },
    };
  }

  /** Refuses new requests from now on and resolves when none holds a place (or after `timeoutMs`). */
  drain(timeoutMs: number): Promise<void> {
    this.draining = true;
    if (this.admitted === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, timeoutMs);
      timer.unref();
      this.drained = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
}
