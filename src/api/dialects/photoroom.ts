/**
 * Photoroom's "Remove Background" API as a dialect of bgone's: POST /v1/segment, so that a client
 * written for Photoroom works with only its base URL changed. As with remove.bg's (removebg.ts), the
 * dialect translates names, defaults, headers and errors; the options, the pipeline, the admission
 * path and the ledger are bgone's own, keyed by `x-api-key: rb-sk_...`.
 *
 * FIELDS follows Photoroom's published OpenAPI document (its `remove-background-post-params`): each
 * field, its values and its default. `despill` has no option of its own: bgone's foreground
 * estimate (native/foreground.cc) already takes the background's colour out of the subject's edges
 * whatever it is set to, so it is checked against its list and changes nothing. Errors are written
 * as Photoroom writes them, `{"detail", "status_code", "type"}`, with its statuses (403 for a
 * missing or wrong key, 402 for credits, 400 for any bad input).
 */
import { HttpError } from '../../http/errors.js';
import type { ErrorRenderer, Exchange, FormShape, ParsedForm } from '../../http/exchange.js';
import type { Router } from '../../http/router.js';
import { MEDIA_TYPES, type RemoveBackgroundOptions } from '../../lib/index.js';
import { MAX_FILE_BYTES, optionByName, optionsFromNames } from '../../lib/option-table.js';
import { ApiError } from '../../service/errors.js';
import { principalOfKey } from '../api-key.js';
import { type RemovalDialect, removalHandler, wantsJson } from '../metered-removal.js';
import type { RemoveBgDeps } from './removebg.js';

export const PHOTOROOM_PATH = '/v1/segment';

/** One Photoroom field: the bgone option it sets (none: checked only), its values, its default. */
interface Field {
  readonly option?: string;
  /** Photoroom's values (lower case); a value outside is a 400. Absent: passed on to the option's parser. */
  readonly values?: readonly string[];
  /** Photoroom's default, sent to bgone when the field is absent or empty. */
  readonly default?: string;
}

const BOOLEAN = ['true', 'false'] as const;

const FIELDS: Readonly<Record<string, Field>> = {
  format: { option: 'format', values: ['png', 'jpg', 'webp'], default: 'png' },
  channels: { option: 'channels', values: ['rgba', 'alpha'], default: 'rgba' },
  bg_color: { option: 'bg_color' },
  size: { option: 'size', values: ['preview', 'medium', 'hd', 'full'], default: 'full' },
  crop: { option: 'crop', values: BOOLEAN, default: 'false' },
  despill: { values: BOOLEAN, default: 'false' },
};

/** The form: image_file and the text fields, each as long as its option's row takes (16 for despill). */
const FORM: FormShape = {
  fields: Object.fromEntries(Object.entries(FIELDS).map(([name, field]) => [name, field.option ? optionByName(field.option)!.maxLength : 16])),
  files: { image_file: 1 },
  maxFileBytes: MAX_FILE_BYTES,
  maxTotalBytes: MAX_FILE_BYTES,
};

/** bgone's options (by API name) from a Photoroom form; a value outside Photoroom's lists is a 400. */
export function translateForm(form: ParsedForm): Record<string, unknown> {
  // A crop is to the cut-out's border: no margin (bgone's own padding default is 10 %).
  const named: Record<string, unknown> = { padding: '0px' };
  const data = form.files.image_file?.[0]?.data;
  if (data) named.image_file = data;
  for (const [name, field] of Object.entries(FIELDS)) {
    const given = form.fields[name]?.trim();
    let value = given === undefined || given === '' ? field.default : given;
    if (value !== undefined && field.values && given) {
      value = value.toLowerCase();
      if (!field.values.includes(value)) {
        throw new HttpError(400, 'validation_error', `${name} must be one of ${field.values.join(', ')}.`, { field: name, allowed: field.values });
      }
    }
    if (value !== undefined && field.option) named[field.option] = value;
  }
  return named;
}

/** Photoroom's status: 403 for a missing or wrong key, 400 for any bad input (bgone's 415 and 422 too). */
function photoroomStatus(status: number): number {
  if (status === 401) return 403;
  return status === 415 || status === 422 ? 400 : status;
}

/** Every error of the route, in Photoroom's shape; the type is bgone's error code, its message the detail. */
export const renderPhotoroomError: ErrorRenderer = (err) => {
  const status = photoroomStatus(err.status);
  return { status, body: { detail: err.message, status_code: status, type: err.code } };
};

/** The removal in Photoroom's names, defaults and answer. */
export const PHOTOROOM_DIALECT: RemovalDialect = {
  form: FORM,
  options: (form, model) => ({ ...optionsFromNames(translateForm(form)), model }) as RemoveBackgroundOptions,
  answer(ex, { result, charged, rateHeaders }) {
    // Photoroom's x-uncertainty-score is left out: bgone's model gives no such score.
    const headers: Record<string, string> = { 'X-Credits-Charged': String(charged), 'Cache-Control': 'no-store', ...rateHeaders };
    if (wantsJson(ex.req.header('accept'))) ex.json(200, { base64img: result.data.toString('base64') }, headers);
    else ex.send(200, { 'Content-Type': MEDIA_TYPES[result.format], ...headers }, result.data);
  },
};

/** POST /v1/segment, behind the one admission path. */
export function mountPhotoroom(router: Router, deps: RemoveBgDeps): void {
  const { store, admission, logger } = deps;
  const unauthenticated = new ApiError('authentication_error', 'Missing or invalid API key. Send it as "x-api-key: rb-sk_...".');

  router.post(
    PHOTOROOM_PATH,
    removalHandler({
      admission,
      removal: { store, model: deps.model, logger, metrics: deps.metrics, memory: deps.memory, overloadRetryAfter: deps.overloadRetryAfter },
      authenticate: (ex: Exchange) => principalOfKey(store, ex.req.header('x-api-key').trim() || null),
      unauthenticated,
      dialect: PHOTOROOM_DIALECT,
      renderErrors: renderPhotoroomError,
    }),
  );
}
