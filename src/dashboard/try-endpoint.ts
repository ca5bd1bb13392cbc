/**
 * POST /dashboard/try: the try-it panel's request. Full API keys are never stored, so the browser
 * cannot call /api/v1/remove with one; this endpoint authenticates by session (plus the session's
 * CSRF token in X-CSRF-Token) and otherwise runs the API's own path: the one admission path
 * (rate limit per account with the plan's limit, the credit pre-check, the account's in-flight
 * cap, load shedding, Content-Length), then the metered
 * removal (the same multipart limits, option validation, a credit reserved before the work and
 * committed only on success) and the same answers: the image with the API's headers, or the JSON
 * error body of the API's closed list of codes.
 */
import { MeteredRemoval, type RemovalDeps } from '../api/metered-removal.js';
import type { Exchange } from '../http/exchange.js';
import { type Admission, accountRateKey, type Principal } from '../service/admission.js';
import { ApiError } from '../service/errors.js';
import { checkSessionToken } from './csrf.js';
import type { SignedIn } from './sessions.js';

export interface TryDeps extends RemovalDeps {
  admission: Admission;
}

export class TryEndpoint {
  constructor(private readonly deps: TryDeps) {}

  /** `current` resolves the session of the request's cookie (null: none or expired) and its account. */
  async handle(ex: Exchange, current: () => Promise<SignedIn | null>): Promise<void> {
    const plans = this.deps.store.plans;
    const bySession = async (): Promise<Principal | null> => {
      const signedIn = await current();
      if (!signedIn) return null;
      // The session's CSRF token, sent as a header by the page's script.
      if (!checkSessionToken(signedIn.session.csrfToken, ex.req.header('x-csrf-token'))) {
        throw new ApiError('permission_denied', 'Missing or invalid CSRF token: reload the page and try again.', { field: 'X-CSRF-Token' });
      }
      const { account } = signedIn;
      return {
        accountId: account.id,
        disabled: account.disabled,
        rateLimitPerMinute: plans[account.plan].rateLimitPerMinute,
        rateKey: accountRateKey(account.id),
      };
    };
    const ticket = await this.deps.admission.admit(
      ex,
      bySession,
      new ApiError('authentication_error', 'Not logged in, or the session has expired. Log in to the dashboard again.'),
      { metered: true },
    );
    if (!ticket) return;
    new MeteredRemoval(ex, ticket, this.deps).start();
  }
}
