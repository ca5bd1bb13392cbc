/**
 * The closed list of error codes of bgone, shared by the native core (native/errors.h), the
 * library API and the HTTP service. User-facing messages live here, not in C++.
 */
export const ERROR_CODES = [
  'missing_image',
  'validation_error',
  'image_too_large',
  'unsupported_media_type',
  'invalid_image',
  'foreground_not_found',
  'internal_error',
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

const MESSAGES: Record<ErrorCode, string> = {
  missing_image: 'No image was provided.',
  validation_error: 'An option has an invalid value.',
  image_too_large: 'The image is too large: at most 20 MB and 6000 px per side.',
  unsupported_media_type: 'The file is not a JPG, PNG or WebP image.',
  invalid_image: 'The image could not be decoded: it is corrupt or truncated.',
  foreground_not_found: 'No foreground subject was found in the image.',
  internal_error: 'The image could not be processed because of an internal error.',
};

export class BgoneError extends Error {
  readonly code: ErrorCode;
  /** Machine-readable context, e.g. the offending field and its allowed values. */
  readonly details?: Record<string, unknown>;
  /** Developer-facing cause from the native core (never contains image bytes). */
  readonly detail?: string;

  constructor(code: ErrorCode, message?: string, details?: Record<string, unknown>, detail?: string) {
    super(message ?? MESSAGES[code]);
    this.name = 'BgoneError';
    this.code = code;
    if (details !== undefined) this.details = details;
    if (detail !== undefined) this.detail = detail;
  }
}

/** Maps an error thrown by the native addon to a BgoneError with the user-facing message. */
export function fromNativeError(err: unknown): BgoneError {
  if (err instanceof BgoneError) return err;
  const code = (err as { code?: unknown })?.code;
  const detail = err instanceof Error ? err.message : String(err);
  if (typeof code === 'string' && (ERROR_CODES as readonly string[]).includes(code)) {
    return new BgoneError(code as ErrorCode, undefined, undefined, detail);
  }
  return new BgoneError('internal_error', undefined, undefined, detail);
}
