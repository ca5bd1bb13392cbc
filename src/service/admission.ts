/**
 * The one admission path of every keyed request (the API's routes and the dashboard's try-it
 * endpoint), in the contract's order, all before a byte of the body is read:
 *
 *   shutting down → authentication → rate limit (account, then key; an account read counts in a
 *   limit of its own) → disabled account
 *   → credits (metered routes) → the account's in-flight cap → load shedding → Content-Length
 *
 * Refusals are answered here with the contract's JSON error and cost nothing. Uploads in progress
 * and jobs in progress are two budgets: a request with a body holds one of `uploadLimit` places
 * while its body arrives, then one of `queueLimit` places until its ticket is released; a request
 * without one goes straight to the second. So clients that trickle their uploads fill the upload
 * places at most, never the places of work whose bytes are here, and another account's /remove is
 * still admitted. Every request also holds one of its account's `accountInFlight`. SIGTERM's drain
 * waits for them all. A body has `bodyTimeoutMs` to arrive, and must bring `bodyMinRate` in each
 * window of it.
 */
import type { Logger } from '../config/logger.js';
import { HttpError } from '../http/errors.js';
import type { BodyMinRate, Exchange } from '../http/exchange.js';
import { type CreditStore, isDatabaseUnavailable, type RateDecision, type RateLimitStore } from '../store/index.js';
import { ApiError, storeFailure } from './errors.js';
import { rateLimitHeaders } from './rate-limit.js';

/** The rate-limit bucket every request of an account counts in, whichever key (or session) made it. */
export function accountRateKey(accountId: number): string {
  return `account:${accountId}`;
}

/** Who is asking, once authenticated (by API key or by dashboard session). */
export interface Principal {
  accountId: number;
  /** The API key, when authenticated by one. */
  keyId?: number | undefined;
  disabled: boolean;
  rateLimitPerMinute: number;
  /**
   * The rate limiter's bucket for this principal (e.g. the key); the account's bucket
   * (accountRateKey) is always taken as well, with the same limit.
   */
  rateKey: string;
}

export interface Ticket {
  principal: Principal;
  /** X-RateLimit-* headers, added to every answer of this request. */
  rateHeaders: Record<string, string>;
  /** Gives the place back (idempotent). */
  release(): void;
  /**
   * A download for the request (image_url, bg_image_url) holds an upload place, as a body arriving
   * does, until the function returned is called.
   */
  downloading(): () => void;
}

export interface AdmissionOptions {
  /**
   * Requests whose body has arrived (queued or processing) at once: at this number a new request is
   * refused with 503 before its body is read. An upload that completes meanwhile still goes on (the
   * job memory gate bounds what runs), so the count can pass it by up to `uploadLimit`.
   */
  queueLimit: number;
  /** Bodies arriving at once (default: queueLimit); beyond it 503 at once. */
  uploadLimit?: number | undefined;
  /** Seconds in Retry-After of a 503 (and of the 429 of the per-account in-flight cap). */
  overloadRetryAfter: number;
  /** Bodies declared larger than this are refused from Content-Length. */
  maxBodyBytes: number;
  /** The store's counters: shared by every node on one database. */
  rateLimits: RateLimitStore;
  /**
   * The limit per minute of the routes that only read the account (`accountRead`), per key and per
   * account, whatever the plan (default: the plan's own limit, counted with the other requests).
   */
  accountReadsPerMinute?: number | undefined;
  /**
   * Requests one account may hold admitted at once on this node (default: no cap beyond
   * queueLimit); beyond it 429, so that one slow client cannot take every place.
   */
  accountInFlight?: number | undefined;
  /** Time for an admitted request's whole body to arrive, in ms from its arrival (default: none). */
  bodyTimeoutMs?: number | undefined;
  /** The least a body must bring in each window (default: none); less is 408 at the window's end. */
  bodyMinRate?: BodyMinRate | undefined;
  /** The balance read by the credit pre-check of metered routes (required for `metered: true`). */
  credits?: Pick<CreditStore, 'balance'> | undefined;
  logger?: Logger | undefined;
}

/** The answer for a body declared (or found) too large. */
export type TooLarge = () => HttpError;

/** What a route adds to the common admission path. */
export interface AdmitOptions {
  /** The body limit of this route, when not the default (the batch endpoint's is larger). */
  body?: { maxBytes: number; tooLarge: TooLarge } | undefined;
  /**
   * The route spends credits (/remove, the dashboard's try-it, a batch submission): an account
   * with none left is refused with 402 here, before its upload is read. The reservation made after
   * the upload stays the exact check (this one can pass for two requests racing for one credit).
   */
  metered?: boolean | undefined;
  /**
   * The route only reads the account (its balance): it counts in buckets of its own under
   * `accountReadsPerMinute`, so a client polling its balance takes nothing of its removals' limit,
   * and its X-RateLimit-* headers describe that limit.
   */
  accountRead?: boolean | undefined;
}

/** The bucket of an account read, beside the removal limit's bucket `bucket`. */
function accountReadBucket(bucket: string): string {
  return `account-read:${bucket}`;
}

/** Whether the request announces a body (a GET's, or an empty POST's, needs no upload place). */
function hasBody(ex: Exchange): boolean {
  const length = ex.req.header('content-length');
  if (length) return Number(length) > 0;
  return ex.req.header('transfer-encoding') !== '';
}

export class Admission {
  /** Requests holding a place: uploads (body arriving) and jobs (body here, or none). */
  private uploads = 0;
  private jobs = 0;
  /** Admitted requests per account (only accounts holding one). */
  private readonly byAccount = new Map<number, number>();
  private draining = false;
  private drained: (() => void) | undefined;

  constructor(
    private readonly options: AdmissionOptions,
    private readonly tooLarge: TooLarge,
  ) {}

  /** Requests holding a place now, uploading or not. */
  get inFlight(): number {
    return this.uploads + this.jobs;
  }

  /** Requests whose body is still arriving. */
  get uploading(): number {
    return this.uploads;
  }

  /** Requests whose body has arrived (or that have none), queued or processing. */
  get working(): number {
    return this.jobs;
  }

  /** Requests of one account holding a place now. */
  accountInFlight(accountId: number): number {
    return this.byAccount.get(accountId) ?? 0;
  }

  get isDraining(): boolean {
    return this.draining;
  }

  /**
   * Runs the admission path for `ex`. `authenticate` resolves to the principal, or null when the
   * credentials are missing or invalid (answered with `unauthenticated`), or throws an HttpError to
   * refuse otherwise. Returns the ticket, or null when the request was refused (and answered).
   */
  async admit(ex: Exchange, authenticate: () => Promise<Principal | null>, unauthenticated: HttpError, route: AdmitOptions = {}): Promise<Ticket | null> {
    const body = route.body ?? { maxBytes: this.options.maxBodyBytes, tooLarge: this.tooLarge };
    const retryAfter = { 'Retry-After': String(this.options.overloadRetryAfter) };
    if (this.draining) {
      ex.error(new ApiError('overloaded', 'The server is shutting down.'), retryAfter);
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
      rate = await this.takeRate(principal, route.accountRead === true);
    } catch (err) {
      this.options.logger?.error({ requestId: ex.requestId, err }, 'rate limit check failed');
      ex.error(storeFailure(isDatabaseUnavailable(err)));
      return null;
    }
    if (!ex.open) return null;
    const rateHeaders = rateLimitHeaders(rate);
    if (!rate.allowed) {
      const refusal = route.accountRead
        ? new ApiError('rate_limit_exceeded', `Too many account reads: at most ${rate.limit} a minute; retry after the time in Retry-After.`)
        : new ApiError('rate_limit_exceeded');
      ex.error(refusal, { ...rateHeaders, 'Retry-After': String(rate.retryAfter) });
      return null;
    }
    if (principal.disabled) {
      ex.error(new ApiError('permission_denied'), rateHeaders);
      return null;
    }
    if (route.metered) {
      // Before the body: an account with nothing left must not get to upload 20 MB first.
      let remaining: number;
      try {
        if (!this.options.credits) throw new Error('Admission: a metered route needs options.credits');
        remaining = (await this.options.credits.balance(principal.accountId)).remaining;
      } catch (err) {
        this.options.logger?.error({ requestId: ex.requestId, err }, 'balance check failed');
        ex.error(storeFailure(isDatabaseUnavailable(err)), rateHeaders);
        return null;
      }
      if (!ex.open) return null;
      if (remaining < 1) {
        ex.error(new ApiError('payment_required'), rateHeaders);
        return null;
      }
    }
    // From here on nothing awaits: the places counted below are taken in the same tick.
    if (this.draining) {
      ex.error(new ApiError('overloaded', 'The server is shutting down.'), { ...rateHeaders, ...retryAfter });
      return null;
    }
    const { accountId } = principal;
    const accountCap = this.options.accountInFlight;
    const held = this.byAccount.get(accountId) ?? 0;
    if (accountCap !== undefined && held >= accountCap) {
      // The account's own limit, not the server's load: 429 like the per-minute limit, so that a
      // client backs off its own concurrency instead of taking the service for overloaded.
      ex.error(
        new ApiError(
          'rate_limit_exceeded',
          `This account already has ${accountCap} requests in progress, the most it may have at once; retry after the time in Retry-After.`,
          { in_flight_limit: accountCap },
        ),
        { ...rateHeaders, ...retryAfter },
      );
      return null;
    }
    // Load shedding on the work whose bytes are here; an upload is also refused when the upload
    // places are all taken (clients that are slow to send hold those, and only those).
    const uploading = hasBody(ex);
    if (this.jobs >= this.options.queueLimit) {
      ex.error(new ApiError('overloaded'), { ...rateHeaders, ...retryAfter });
      return null;
    }
    if (uploading && this.uploads >= (this.options.uploadLimit ?? this.options.queueLimit)) {
      ex.error(new ApiError('overloaded', 'The server has too many uploads in progress now; retry after the time in Retry-After.'), {
        ...rateHeaders,
        ...retryAfter,
      });
      return null;
    }
    const declared = ex.req.header('content-length');
    if (declared && Number(declared) > body.maxBytes) {
      ex.error(body.tooLarge(), rateHeaders);
      return null;
    }
    let phase: 'upload' | 'job' | 'released' = uploading ? 'upload' : 'job';
    if (uploading) this.uploads++;
    else this.jobs++;
    this.byAccount.set(accountId, held + 1);
    if (this.options.bodyTimeoutMs) ex.limitBodyTime(this.options.bodyTimeoutMs, this.options.bodyMinRate);
    if (uploading)
      ex.onBodyComplete(() => {
        if (phase !== 'upload') return;
        phase = 'job';
        this.uploads--;
        this.jobs++;
      });
    return {
      principal,
      rateHeaders,
      release: () => {
        if (phase === 'released') return;
        if (phase === 'upload') this.uploads--;
        else this.jobs--;
        phase = 'released';
        const left = (this.byAccount.get(accountId) ?? 1) - 1;
        if (left > 0) this.byAccount.set(accountId, left);
        else this.byAccount.delete(accountId);
        if (this.draining && this.inFlight === 0) this.drained?.();
      },
      downloading: () => {
        if (phase !== 'job') return () => {};
        phase = 'upload';
        this.jobs--;
        this.uploads++;
        return () => {
          if (phase !== 'upload') return;
          phase = 'job';
          this.uploads--;
          this.jobs++;
        };
      },
    };
  }

  /**
   * Counts the request against its account's bucket, then its key's: more keys must not mean a
   * higher limit. The account bucket is taken first because it is the wider one (every key's
   * requests count in it, with the same per-minute limit), so when it has room the key's almost
   * always has too; a key refused after its account allowed leaves that one request counted in
   * the account's minute. The headers show the tighter of the two decisions. An account read
   * (`accountRead`, with `accountReadsPerMinute` set) counts the same way in buckets of its own.
   */
  private async takeRate(principal: Principal, accountRead: boolean): Promise<RateDecision> {
    const ownLimit = accountRead ? this.options.accountReadsPerMinute : undefined;
    const limit = ownLimit ?? principal.rateLimitPerMinute;
    const bucket = ownLimit === undefined ? (name: string) => name : accountReadBucket;
    const accountBucket = accountRateKey(principal.accountId);
    const account = await this.options.rateLimits.take(bucket(accountBucket), limit);
    if (!account.allowed || principal.rateKey === accountBucket) return account;
    const key = await this.options.rateLimits.take(bucket(principal.rateKey), limit);
    if (!key.allowed) return key;
    return key.remaining < account.remaining ? key : account;
  }

  /** Refuses new requests from now on and resolves when none holds a place (or after `timeoutMs`). */
  drain(timeoutMs: number): Promise<void> {
    this.draining = true;
    if (this.inFlight === 0) return Promise.resolve();
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
