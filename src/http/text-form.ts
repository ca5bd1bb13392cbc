/**
 * A form sent as text: `application/json` (an object of strings, numbers or booleans) or
 * `application/x-www-form-urlencoded`, checked against the same shape as a multipart form: known
 * fields only, each at most once and within its length. A text body carries no file parts.
 */
import { type HttpError, httpError } from './errors.js';
import type { FormShape, ParsedForm } from './multipart.js';

/** The text encodings readForm takes besides multipart/form-data. */
export function textFormKind(contentType: string): 'json' | 'urlencoded' | undefined {
  if (/^application\/json\s*(?:;|$)/i.test(contentType)) return 'json';
  if (/^application\/x-www-form-urlencoded\s*(?:;|$)/i.test(contentType)) return 'urlencoded';
  return undefined;
}

/** The form in `body`; throws the HttpError of a malformed body or a field outside the shape. */
export function parseTextForm<F extends string>(kind: 'json' | 'urlencoded', body: Buffer, shape: FormShape<F>): ParsedForm<F> {
  const fields: Partial<Record<F, string>> = {};
  const allowed = [...Object.keys(shape.fields), ...Object.keys(shape.files)];
  const take = (name: string, value: string): HttpError | undefined => {
    if (!Object.hasOwn(shape.fields, name)) {
      if (Object.hasOwn(shape.files, name)) return httpError('validation_error', `${name} is a file: send it in a multipart/form-data body.`, { field: name });
      return httpError('validation_error', `Unknown field "${name}".`, { field: name, allowed });
    }
    if (Buffer.byteLength(value) > shape.fields[name as F]) {
      return httpError('validation_error', `Field "${name}" is too long (at most ${shape.fields[name as F]} bytes).`, { field: name });
    }
    if (fields[name as F] !== undefined) return httpError('validation_error', `Field "${name}" is given twice.`, { field: name });
    fields[name as F] = value;
    return undefined;
  };
  if (kind === 'json') {
    let parsed: unknown;
    try {
      parsed = JSON.parse(body.toString('utf8'));
    } catch {
      throw httpError('validation_error', 'Malformed JSON body.', { field: 'body' });
    }
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed))
      throw httpError('validation_error', 'The JSON body must be an object.', { field: 'body' });
    for (const [name, value] of Object.entries(parsed)) {
      if (value === null) continue;
      if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean') {
        throw httpError('validation_error', `Field "${name}" must be a string, a number or a boolean.`, { field: name });
      }
      const refused = take(name, String(value));
      if (refused) throw refused;
    }
  } else {
    for (const [name, value] of new URLSearchParams(body.toString('latin1'))) {
      const refused = take(name, value);
      if (refused) throw refused;
    }
  }
  return { files: {}, fields };
}
