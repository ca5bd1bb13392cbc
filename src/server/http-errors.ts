/**
 * The HTTP error contract (api-contract.md): a closed list of codes, each with its status, and the
 * JSON body { code, message, details?, request_id }.
 */
import type { ErrorCode } from '../errors.js';

export type HttpErrorCode =
  | Exclude<ErrorCode, 'internal_error'>
  | 'authentication_error'
  | 'payment_required'
  | 'permission_denied'
  | 'not_found'
  | 'method_not_allowed'
  | 'rate_limit_exceeded'
  | 'overloaded'
  | 'internal_server_error';

export const HTTP_STATUS: Record<HttpErrorCode, string> = {
  missing_image: '400 Bad Request',
  validation_error: '400 Bad Request',
  image_too_large: '400 Bad Request',
  unsupported_media_type: '415 Unsupported Media Type',
  invalid_image: '422 Unprocessable Entity',
  foreground_not_found: '422 Unprocessable Entity',
  authentication_error: '401 Unauthorized',
  payment_required: '402 Payment Required',
  permission_denied: '403 Forbidden',
  not_found: '404 Not Found',
  method_not_allowed: '405 Method Not Allowed',
  rate_limit_exceeded: '429 Too Many Requests',
  overloaded: '503 Service Unavailable',
  internal_server_error: '500 Internal Server Error',
};

export const HTTP_MESSAGES: Partial<Record<HttpErrorCode, string>> = {
  authentication_error: 'Missing or invalid API key. Send it as "Authorization: Bearer rb-sk_...".',
  payment_required: 'No credits left in this billing cycle.',
  permission_denied: 'This account is disabled.',
  not_found: 'No such endpoint.',
  method_not_allowed: 'Method not allowed on this endpoint.',
  rate_limit_exceeded: 'Rate limit of your plan exceeded; retry after the time in Retry-After.',
  overloaded: 'The server is busy; retry after the time in Retry-After.',
  internal_server_error: 'The request could not be processed because of an internal error. It was not charged.',
};

/** An error answered to the client; thrown inside handlers. */
export class HttpError extends Error {
  constructor(
    readonly code: HttpErrorCode,
    message?: string,
    readonly details?: Record<string, unknown>,
    readonly headers: Record<string, string> = {},
  ) {
    super(message ?? HTTP_MESSAGES[code] ?? code);
    this.name = 'HttpError';
  }
}
