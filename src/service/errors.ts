/**
 * The HTTP error contract (docs/contract.md): a closed list of codes and the one table from code to
 * status number. A service rule, not HTTP plumbing: which refusal is which status is the
 * contract's choice. ApiError carries the status this table gives its code to src/http, whose
 * HttpError (status, code, message) exchange.ts writes as { code, message, details?, request_id }.
 */
import { HttpError } from '../http/errors.js';
import { ERROR_STATUS, type ErrorCode } from '../lib/errors.js';

export type HttpErrorCode =
  | Exclude<ErrorCode, 'internal_error'>
  | 'authentication_error'
  | 'payment_required'
  | 'permission_denied'
  | 'not_found'
  | 'method_not_allowed'
  | 'rate_limit_exceeded'
  | 'request_timeout'
  | 'result_not_ready'
  | 'idempotency_in_progress'
  | 'result_expired'
  | 'overloaded'
  | 'internal_server_error';

// The library's codes keep the statuses it documents for embedders; its internal_error is answered
// as internal_server_error (below).
const { internal_error: _answeredAsInternalServerError, ...LIBRARY_STATUS } = ERROR_STATUS;

export const HTTP_STATUS: Readonly<Record<HttpErrorCode, number>> = {
  ...LIBRARY_STATUS,
  authentication_error: 401,
  payment_required: 402,
  permission_denied: 403,
  not_found: 404,
  method_not_allowed: 405,
  rate_limit_exceeded: 429,
  request_timeout: 408,
  result_not_ready: 409,
  idempotency_in_progress: 409,
  result_expired: 410,
  overloaded: 503,
  internal_server_error: 500,
};

export const HTTP_MESSAGES: Partial<Record<HttpErrorCode, string>> = {
  authentication_error: 'Missing or invalid API key. Send it as "Authorization: Bearer rb-sk_...".',
  payment_required: 'No credits left in this billing cycle.',
  permission_denied: 'This account is disabled.',
  not_found: 'No such endpoint.',
  method_not_allowed: 'Method not allowed on this endpoint.',
  rate_limit_exceeded: 'Rate limit of your plan exceeded; retry after the time in Retry-After.',
  overloaded: 'The server is busy; retry after the time in Retry-After.',
  request_timeout: 'The request body did not arrive in time. Nothing was charged.',
  result_not_ready: 'This image has not been processed yet; its batch reports when it is.',
  idempotency_in_progress:
    'The first request with this Idempotency-Key is still in progress; retry after the time in Retry-After, with the same image and options.',
  result_expired: 'This result has expired and is no longer kept.',
  internal_server_error: 'The request could not be processed because of an internal error. It was not charged.',
};

/** An error of the contract answered to the client, with its code's status; thrown inside handlers. */
export class ApiError extends HttpError {
  declare readonly code: HttpErrorCode;
  constructor(code: HttpErrorCode, message?: string, details?: Record<string, unknown>, headers: Record<string, string> = {}) {
    super(HTTP_STATUS[code], code, message ?? HTTP_MESSAGES[code] ?? code, details, headers);
    this.name = 'ApiError';
  }
}

/** Seconds a client is asked to wait while the database is unreachable. */
export const DATABASE_RETRY_AFTER_SECONDS = 5;

/**
 * The answer for a failure of the store: 503 with Retry-After while the database cannot be reached
 * (the request can succeed later, and it was not charged), 500 for anything else.
 */
export function storeFailure(unavailable: boolean): ApiError {
  if (!unavailable) return new ApiError('internal_server_error');
  return new ApiError('overloaded', 'The account database is unreachable; retry after the time in Retry-After. Nothing was charged.', undefined, {
    'Retry-After': String(DATABASE_RETRY_AFTER_SECONDS),
  });
}
