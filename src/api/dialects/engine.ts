/**
 * The one engine of the removal dialects: bgone's own API (bgone.ts), remove.bg's (removebg.ts)
 * and Photoroom's (photoroom.ts) are each one table of fields and one table of errors, read by the
 * functions below. A field is a name the dialect's clients send, the bgone option it sets (its row
 * in src/lib/option-table.ts), the dialect's values and what each means in bgone's words, the
 * dialect's default, and a translator for what a value map cannot say. A request is translated by
 * one loop (translateFields) that refuses a value outside a field's values the same way in every
 * dialect; its errors are answered by the first row of the dialect's error table that matches
 * (renderWith). docs/compatibility.md's tables are generated from these tables
 * (test/unit/dialects.test.ts).
 */
import { HttpError } from '../../http/errors.js';
import type { ErrorRenderer, Exchange, FormShape, ParsedForm } from '../../http/exchange.js';
import type { RemoveBackgroundOptions } from '../../lib/index.js';
import { DecodedBase64, MAX_FILE_BYTES, optionByName, optionsFromNames } from '../../lib/option-table.js';
import { base64Fields, formFieldBytes } from '../form-fields.js';
import type { RemovalOutcome } from '../metered-removal.js';

/** A field's values as another field's translator sees them: after the value map, undefined when absent. */
export type GivenFields = (name: string) => string | undefined;

export interface DialectField {
  /** The name the dialect's clients send. */
  readonly name: string;
  /** A text field (also a JSON or urlencoded key), or a file part of a multipart body. */
  readonly part: 'field' | 'file';
  /**
   * The bgone option (its API name in the option table) the field sets; null for a field that sets
   * none (`note` says why). test/unit/dialects.test.ts checks each against the table.
   */
  readonly option: string | null;
  /** The dialect's values (matched in lower case) and bgone's value of each; another value is refused. */
  readonly values?: Readonly<Record<string, string>>;
  /**
   * What the option receives, from the value (after the value map) and the other fields' values;
   * undefined sets nothing. Throws refuse(...) for a value it cannot take.
   */
  readonly translate?: (value: string, given: GivenFields) => string | undefined;
  /** The dialect's own default, translated like a value sent (absent: bgone's option default applies). */
  readonly default?: string;
  /** The longest text taken (default: the option's row's, else 16). */
  readonly maxLength?: number;
  /** The docs' words: the values taken (default: the value map's keys). */
  readonly accepts?: string;
  /** The docs' words: what it does in bgone, where more than "sets <option>" needs saying. */
  readonly note?: string;
}

/** One row of a dialect's error table: which bgone errors it answers, with what. */
export interface DialectErrorRow {
  /** The dialect's code (remove.bg's `code`, Photoroom's `type`). */
  readonly code: string;
  readonly status: number;
  /** remove.bg's title: its document's words; a function where the title carries the error's own message. */
  readonly title?: string | ((err: HttpError) => string);
  /** Whether the row answers this error (rows are tried in order; the last one answers anything). */
  readonly matches: (err: HttpError) => boolean;
  /** The docs' words: when it is answered. */
  readonly when: string;
}

/** The value maps every dialect shares. */
export const same = (...values: string[]): Record<string, string> => Object.fromEntries(values.map((v) => [v, v]));

/** Booleans in every spelling clients send: true/false, True (Python), 1/0 (PHP), yes/no, on/off. */
export const BOOLEAN: Readonly<Record<string, string>> = {
  true: 'true',
  false: 'false',
  1: 'true',
  0: 'false',
  yes: 'true',
  no: 'false',
  on: 'true',
  off: 'false',
};
export const BOOLEAN_WORDS = '`true`, `false` in any case, `1`, `0`, `yes`, `no`, `on`, `off`';

/** A value of a field refused: 400 validation_error naming the field (the dialect's error table gives its own code). */
export function refuse(field: string, message: string, allowed?: readonly string[]): HttpError {
  return new HttpError(400, 'validation_error', message, allowed ? { field, allowed } : { field });
}

/** Empty or whitespace only: not given (clients send '' for every field they leave out). Tested without a copy of a long value. */
const BLANK = /^\s*$/;

/** The bytes a form takes for a field carrying `option` (undefined: no option). */
function fieldBytesOf(option: string | null | undefined): number | undefined {
  const row = option ? optionByName(option) : undefined;
  return row ? formFieldBytes(row) : undefined;
}

/** The form a dialect reads: its text fields with their longest values, its file parts, 20 MB each. */
export function dialectForm(fields: readonly DialectField[]): FormShape {
  const text = fields.filter((f) => f.part === 'field');
  const files = fields.filter((f) => f.part === 'file');
  return {
    fields: Object.fromEntries(text.map((f) => [f.name, f.maxLength ?? fieldBytesOf(f.option) ?? 16])),
    files: Object.fromEntries(files.map((f) => [f.name, 1])),
    maxFileBytes: MAX_FILE_BYTES,
    maxTotalBytes: Math.max(1, files.length) * MAX_FILE_BYTES,
    base64: base64Fields(text.map((f) => [f.name, f.option])),
  };
}

/**
 * bgone's options (by API name) from a form, by the dialect's table: a field absent or empty takes
 * the dialect's default; a value is matched against its value map (a value outside is refused,
 * naming the field), then translated; a file part that is empty is absent. `fixed` comes first:
 * options every request of the dialect sets.
 */
export function translateFields(fields: readonly DialectField[], form: ParsedForm, fixed: Readonly<Record<string, string>> = {}): Record<string, unknown> {
  const named: Record<string, unknown> = { ...fixed };
  const mapped = new Map<string, string>();
  for (const field of fields) {
    if (field.part === 'file') continue;
    const sent = form.fields[field.name];
    const raw = sent === undefined || BLANK.test(sent) ? field.default : sent;
    if (raw === undefined) continue;
    if (!field.values) {
      mapped.set(field.name, raw);
      continue;
    }
    const value = field.values[raw.trim().toLowerCase()];
    if (value === undefined) throw refuse(field.name, `${field.name} must be one of ${Object.keys(field.values).join(', ')}.`, Object.keys(field.values));
    mapped.set(field.name, value);
  }
  const given: GivenFields = (name) => mapped.get(name);
  for (const field of fields) {
    if (!field.option) continue;
    if (field.part === 'file') {
      const data = form.files[field.name]?.[0]?.data;
      if (data && data.length > 0) named[field.option] = data;
      continue;
    }
    const decoded = form.decoded?.[field.name];
    if (decoded) {
      named[field.option] = new DecodedBase64(decoded);
      continue;
    }
    const value = mapped.get(field.name);
    if (value === undefined) continue;
    const option = field.translate ? field.translate(value, given) : value;
    if (option !== undefined) named[field.option] = option;
  }
  return named;
}

/** The library's options of a dialect's form, with the service's model. */
export function dialectOptions(named: Record<string, unknown>, model: string | undefined): RemoveBackgroundOptions {
  const options = optionsFromNames(named) as RemoveBackgroundOptions;
  return { ...options, model: options.model || model };
}

/** The error table's row for an error: the first that matches. */
export function errorRow(rows: readonly DialectErrorRow[], err: HttpError): DialectErrorRow {
  return rows.find((row) => row.matches(err)) ?? rows[rows.length - 1]!;
}

/** The error renderer of a table, writing each error's row into `body`. */
export function renderWith(rows: readonly DialectErrorRow[], body: (row: DialectErrorRow, err: HttpError) => unknown): ErrorRenderer {
  return (err) => {
    const row = errorRow(rows, err);
    return { status: row.status, body: body(row, err) };
  };
}

/**
 * Whether the client asks for the JSON answer: application/json is the media range it prefers in
 * Accept (the highest q, the first listed among equals, q=0 never). `Accept: image/png,
 * application/json` (a Photoroom CLI's) asks for the image; `Accept: application/json` (remove.bg's
 * clients that read `result_b64`) for JSON; none, or `*` ranges alone, for the image.
 */
export function wantsJson(accept: string): boolean {
  let best: { type: string; q: number } | undefined;
  for (const range of accept.split(',')) {
    const [type = '', ...params] = range.split(';').map((p) => p.trim().toLowerCase());
    if (type === '') continue;
    const q = params.find((p) => p.startsWith('q='));
    const weight = q === undefined ? 1 : Number(q.slice(2));
    if (!(weight > 0)) continue;
    if (!best || weight > best.q) best = { type, q: weight };
  }
  return best?.type === 'application/json';
}

/** The matte's uncertainty (0..1) as a header's value: three decimals. */
export function uncertaintyHeader(uncertainty: number): string {
  return uncertainty.toFixed(3);
}

/** The title of a row for an error. */
export function titleOf(row: DialectErrorRow, err: HttpError): string {
  return typeof row.title === 'function' ? row.title(err) : (row.title ?? row.code);
}

/** Matchers of the error tables. */
export const isCode =
  (...codes: string[]) =>
  (err: HttpError): boolean =>
    codes.includes(err.code);
export const fieldOf = (err: HttpError): string => (typeof err.details?.field === 'string' ? err.details.field : '');
export const fieldsOf = (err: HttpError): string[] => (Array.isArray(err.details?.fields) ? (err.details.fields as string[]) : []);
export const always = (): boolean => true;

/**
 * The names a removal is asked and answered in: the form it reads, how its fields become the
 * library's options (a value outside the dialect's values throws an HttpError or a BgoneError) and
 * what its answer needs to know of the request (kept small: the form itself, with a base64 image in
 * it, is not kept while the image is worked on), and the success answer. The pipeline, the ledger
 * and the errors' meaning stay the same.
 */
export interface RemovalDialect<A = unknown> {
  form: FormShape;
  /**
   * Where the form comes from, where it is not simply the body read by `form` (GET /v2/edit: the
   * query string); `body` reads the body by a shape, as the removal does without this.
   */
  formOf?(ex: Exchange, body: (shape: FormShape, textBodies: boolean) => Promise<ParsedForm>): Promise<ParsedForm>;
  read(form: ParsedForm, model: string | undefined): { options: RemoveBackgroundOptions; answer: A };
  answer(ex: Exchange, outcome: RemovalOutcome, request: A): void;
}

/** A dialect of any request type: the removal hands what `read` returns to `answer` untouched. */
// biome-ignore lint/suspicious/noExplicitAny: the request's type is each dialect's own; the removal only carries it
export type AnyRemovalDialect = RemovalDialect<any>;
