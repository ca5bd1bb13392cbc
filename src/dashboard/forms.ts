/**
 * application/x-www-form-urlencoded bodies of the dashboard's forms: size-limited, only the
 * expected fields, each at most once.
 */
export const MAX_FORM_BYTES = 16 * 1024;

export class FormError extends Error {
  constructor(
    message: string,
    readonly status: 400 | 413 | 415 = 400,
  ) {
    super(message);
    this.name = 'FormError';
  }
}

export function isUrlEncoded(contentType: string): boolean {
  return /^application\/x-www-form-urlencoded\s*(;|$)/i.test(contentType.trim());
}

/**
 * Parses a form body. Throws FormError on a wrong content type, a body over `maxBytes`, an unknown
 * field or a repeated one. Missing fields are simply absent from the result.
 */
export function parseForm(contentType: string, body: Buffer, allowed: readonly string[], maxBytes = MAX_FORM_BYTES): Map<string, string> {
  if (!isUrlEncoded(contentType)) throw new FormError('The form must be sent as application/x-www-form-urlencoded.', 415);
  if (body.length > maxBytes) throw new FormError('The form is too large.', 413);
  const fields = new Map<string, string>();
  for (const [name, value] of new URLSearchParams(body.toString('utf8'))) {
    if (!allowed.includes(name)) throw new FormError(`Unexpected form field "${name}".`);
    if (fields.has(name)) throw new FormError(`The form field "${name}" is given twice.`);
    fields.set(name, value);
  }
  return fields;
}
