/**
 * An error answered to the client: its status, and the JSON body { code, message, details?,
 * request_id } that exchange.ts writes, with any headers it carries. The HTTP layer raises the few
 * codes below by itself (a malformed form, an unknown path, a body too late...); which status
 * every other code gets is the service's contract (src/service/errors.ts, whose ApiError builds on
 * this class and whose table agrees with this one: test/unit/http-boundary.test.ts).
 */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: Record<string, unknown>,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'HttpError';
  }
}

/** The codes src/http answers by itself, with their statuses and default messages. */
export const HTTP_LAYER_ERRORS = {
  validation_error: { status: 400, message: 'An option has an invalid value.' },
  image_too_large: { status: 400, message: 'The image is too large: at most 20 MB and 6000 px per side.' },
  not_found: { status: 404, message: 'No such endpoint.' },
  method_not_allowed: { status: 405, message: 'Method not allowed on this endpoint.' },
  request_timeout: { status: 408, message: 'The request body did not arrive in time. Nothing was charged.' },
  internal_server_error: { status: 500, message: 'The request could not be processed because of an internal error. It was not charged.' },
} as const satisfies Record<string, { status: number; message: string }>;

export type HttpLayerErrorCode = keyof typeof HTTP_LAYER_ERRORS;

/** One of the HTTP layer's own errors. */
export function httpError(code: HttpLayerErrorCode, message?: string, details?: Record<string, unknown>, headers?: Record<string, string>): HttpError {
  const { status, message: standard } = HTTP_LAYER_ERRORS[code];
  return new HttpError(status, code, message ?? standard, details, headers);
}
