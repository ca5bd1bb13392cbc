/** Who calls the API: the principal of an `Authorization: Bearer rb-sk_...` header, shared by every /api/v1 route. */
import type { Logger } from '../config/logger.js';
import { HttpError } from '../http/errors.js';
import type { ErrorRenderer, Exchange } from '../http/exchange.js';
import type { Admission, AdmitOptions, Principal, Ticket } from '../service/admission.js';
import { ApiError, storeFailure } from '../service/errors.js';
import { isDatabaseUnavailable, type Store } from '../store/index.js';

/** The API key of an `Authorization: Bearer ...` header, or null. */
export function bearer(header: string): string | null {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return m ? m[1]! : null;
}

/** The principal of the request's API key; null for a missing, malformed, unknown or revoked key. */
export function principalOfApiKey(store: Store, ex: Exchange): Promise<Principal | null> {
  return principalOfKey(store, bearer(ex.req.header('authorization')));
}

/** The principal of an API key, however the request carried it; null for none, or an unknown or revoked one. */
export async function principalOfKey(store: Store, key: string | null): Promise<Principal | null> {
  if (!key) return null; // a missing or malformed header never reaches the database
  const auth = await store.keys.authenticate(key);
  if (!auth) return null;
  return { accountId: auth.accountId, keyId: auth.keyId, disabled: auth.disabled, rateLimitPerMinute: auth.rateLimitPerMinute, rateKey: `key:${auth.keyId}` };
}

/** What keyedHandler needs of the service. */
export interface KeyedDeps {
  store: Store;
  admission: Admission;
  logger?: Logger | undefined;
}

/** How a route of another API's dialect takes its key and writes its errors (default: bgone's Bearer key, the contract's body). */
export interface KeyedAuth {
  authenticate(ex: Exchange): Promise<Principal | null>;
  unauthenticated: HttpError;
  render?: ErrorRenderer | undefined;
}

/**
 * A JSON route of the API behind the one admission path (key, rate limits, in-flight caps, load
 * shedding; `route` adds a body limit or the credit pre-check): the
 * handler answers; an HttpError it throws is answered with the rate-limit headers, anything else
 * as a store failure (503 while the database is unreachable, else 500); the place is given back
 * when the handler ends.
 */
export function keyedHandler(
  deps: KeyedDeps,
  handler: (ex: Exchange, ticket: Ticket) => Promise<void>,
  route?: AdmitOptions,
  auth?: KeyedAuth,
): (ex: Exchange) => Promise<void> {
  const { store, admission, logger } = deps;
  return async (ex) => {
    if (auth?.render) ex.renderErrors(auth.render);
    const authenticate = auth ? () => auth.authenticate(ex) : () => principalOfApiKey(store, ex);
    const ticket = await admission.admit(ex, authenticate, auth?.unauthenticated ?? new ApiError('authentication_error'), route);
    if (!ticket) return;
    try {
      await handler(ex, ticket);
    } catch (err) {
      if (err instanceof HttpError) ex.error(err, ticket.rateHeaders);
      else {
        logger?.error({ requestId: ex.requestId, route: ex.route, err }, 'request failed');
        ex.error(storeFailure(isDatabaseUnavailable(err)), ticket.rateHeaders);
      }
    } finally {
      ticket.release();
    }
  };
}
