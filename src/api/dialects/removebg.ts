/**
 * remove.bg's API as a dialect of bgone's: POST /v1.0/removebg and GET /v1.0/account, so that a
 * client written for remove.bg works with only its base URL changed. The dialect translates names,
 * defaults, headers and errors; the options, the pipeline, the admission path and the ledger are
 * bgone's own (metered-removal.ts, service/admission.ts), keyed by `X-Api-Key: rb-sk_...`.
 *
 * FIELDS is the one table of the translation: each remove.bg field, the option it sets (its row in
 * src/lib/option-table.ts gives the longest text taken) and how its values translate. The fields
 * without an option (type, shadows, semitransparency) are checked against remove.bg's lists and
 * change nothing. Errors are written as remove.bg writes them, `{"errors": [{title, code, detail}]}`,
 * with its statuses (403 for a missing or wrong key, 400 for any bad input).
 */
import type { Logger } from '../../config/logger.js';
import { HttpError } from '../../http/errors.js';
import type { ErrorRenderer, Exchange, FormShape, ParsedForm } from '../../http/exchange.js';
import type { Router } from '../../http/router.js';
import { MEDIA_TYPES, type RemoveBackgroundOptions } from '../../lib/index.js';
import { MAX_FILE_BYTES, optionByName, optionsFromNames } from '../../lib/option-table.js';
import type { Admission } from '../../service/admission.js';
import { ApiError, storeFailure } from '../../service/errors.js';
import type { JobMemoryGate } from '../../service/job-memory-gate.js';
import type { Metrics } from '../../service/metrics.js';
import { isDatabaseUnavailable, type Store } from '../../store/index.js';
import { principalOfKey } from '../api-key.js';
import { type RemovalDialect, removalHandler, wantsJson } from '../metered-removal.js';

export const REMOVEBG_PATH = '/v1.0/removebg';
export const REMOVEBG_ACCOUNT_PATH = '/v1.0/account';

/** One remove.bg field: the bgone option it sets (none: accepted and without effect), its values, its default. */
interface Field {
  /** The option's API name in the option table; absent for a field bgone only checks. */
  readonly option?: string;
  readonly part?: 'file';
  /** remove.bg's value (lower case) → bgone's; a value outside is `invalid_<field>`. Absent: translate or pass on. */
  readonly values?: Readonly<Record<string, string>>;
  /** A value's translation or check (throws the field's HttpError); absent: passed on as it is. */
  readonly translate?: (value: string) => string;
  /** What bgone receives when the field is absent (remove.bg's default in bgone's words). */
  readonly default?: string;
}

const same = (...values: string[]) => Object.fromEntries(values.map((v) => [v, v]));
const BOOLEAN = same('true', 'false');

/** crop_margin: 1, 2 or 4 values, each px or % (a bare number is px), at most 50% or 500px per side. */
function cropMargin(value: string): string {
  const tokens = value.trim().toLowerCase().split(/\s+/);
  const px = tokens.map((token) => {
    const m = /^(\d{1,3}(?:\.\d+)?)(px|%)?$/.exec(token);
    if (!m || ![1, 2, 4].includes(tokens.length)) return undefined;
    const n = Number(m[1]);
    if (m[2] === '%') return n <= 50 ? `${m[1]}%` : undefined;
    return Number.isInteger(n) && n <= 500 ? `${n}px` : undefined;
  });
  if (px.some((t) => t === undefined)) {
    throw invalidField('crop_margin', 'crop_margin must be 1, 2 or 4 values, each in px or %, at most 50% or 500px per side, e.g. "10px" or "5% 10%".');
  }
  return px.join(' ');
}

/** bg_color: remove.bg's 4-digit hex (#RGBA, with or without #) as 8 digits; every other form is bgone's own. */
function bgColor(value: string): string {
  const m = /^\s*#?([0-9a-f])([0-9a-f])([0-9a-f])([0-9a-f])\s*$/i.exec(value);
  return m
    ? `#${m
        .slice(1)
        .map((d) => d + d)
        .join('')}`
    : value;
}

function shadowOpacity(value: string): string {
  const v = value.trim();
  if (!/^\d{1,3}$/.test(v) || Number(v) > 100) throw invalidField('shadow_opacity', 'shadow_opacity must be an integer from 0 to 100.');
  return v;
}

const FIELDS: Readonly<Record<string, Field>> = {
  image_file: { option: 'image_file', part: 'file' },
  image_file_b64: { option: 'image_file_b64' },
  image_url: { option: 'image_url' },
  size: {
    option: 'size',
    values: { preview: 'preview', small: 'preview', regular: 'preview', medium: 'medium', hd: 'hd', full: 'full', '4k': 'full', '50mp': 'full', auto: 'full' },
    default: 'preview',
  },
  format: { option: 'format', values: same('auto', 'png', 'jpg', 'webp', 'zip'), default: 'auto' },
  channels: { option: 'channels', values: same('rgba', 'alpha') },
  bg_color: { option: 'bg_color', translate: bgColor },
  bg_image_url: { option: 'bg_image_url' },
  bg_image_file: { option: 'bg_image_file', part: 'file' },
  crop: { option: 'crop', values: BOOLEAN },
  crop_margin: { option: 'padding', translate: cropMargin, default: '0px' },
  scale: { option: 'scale' },
  position: { option: 'position' },
  roi: { option: 'roi' },
  type: { values: same('auto', 'person', 'product', 'car', 'animal', 'graphic', 'transportation') },
  type_level: { values: same('none', '1', '2', 'latest') },
  add_shadow: { values: BOOLEAN },
  shadow_type: { values: same('car', '3d', 'drop') },
  shadow_opacity: { translate: shadowOpacity },
  shadow_method: { values: same('legacy', 'latest') },
  semitransparency: { values: BOOLEAN },
};

/** The remove.bg field of a bgone option name (crop_margin for padding), or the name itself. */
const FIELD_OF_OPTION: Readonly<Record<string, string>> = Object.fromEntries(
  Object.entries(FIELDS).flatMap(([name, field]) => (field.option ? [[field.option, name]] : [])),
);

function invalidField(field: string, message: string): HttpError {
  return new HttpError(400, `invalid_${field}`, message, { field });
}

/** The form: text fields as long as their option's row takes (16 for a field without one), and the two files. */
const FORM: FormShape = {
  fields: Object.fromEntries(
    Object.entries(FIELDS)
      .filter(([, field]) => field.part !== 'file')
      .map(([name, field]) => [name, field.option ? optionByName(field.option)!.maxLength : 16]),
  ),
  files: { image_file: 1, bg_image_file: 1 },
  maxFileBytes: MAX_FILE_BYTES,
  maxTotalBytes: 2 * MAX_FILE_BYTES,
};

/** bgone's options (by API name) from a remove.bg form; a value outside remove.bg's lists is a 400 with its code. */
export function translateForm(form: ParsedForm): Record<string, unknown> {
  const named: Record<string, unknown> = {};
  for (const [name, field] of Object.entries(FIELDS)) {
    if (field.part === 'file') {
      const data = form.files[name]?.[0]?.data;
      if (data && field.option) named[field.option] = data;
      continue;
    }
    const given = form.fields[name];
    let value: string | undefined;
    if (given === undefined || given.trim() === '') value = field.default;
    else if (field.values) {
      value = field.values[given.trim().toLowerCase()];
      if (value === undefined) throw invalidField(name, `${name} must be one of ${Object.keys(field.values).join(', ')}.`);
    } else value = field.translate ? field.translate(given) : given;
    if (value !== undefined && field.option) named[field.option] = value;
  }
  return named;
}

/** remove.bg's code for a bgone error. */
function removeBgCode(err: HttpError): string {
  const field = typeof err.details?.field === 'string' ? err.details.field : '';
  const fields = Array.isArray(err.details?.fields) ? (err.details.fields as string[]) : [];
  const background = field.startsWith('bg_image');
  switch (err.code) {
    case 'authentication_error':
      return 'auth_failed';
    case 'payment_required':
      return 'insufficient_credits';
    case 'missing_image':
      return 'missing_source';
    case 'image_too_large':
      return err.details?.max_side !== undefined ? 'resolution_too_high' : 'file_too_large';
    case 'unsupported_media_type':
      return 'invalid_file_type';
    case 'invalid_image':
      return 'failed_to_read_image';
    case 'foreground_not_found':
      return 'unknown_foreground';
    case 'invalid_image_url':
      return background ? 'invalid_bg_image_url' : 'invalid_image_url';
    case 'failed_image_download':
      return background ? 'failed_bg_download' : 'failed_image_download';
    case 'invalid_roi':
      if (err.details?.image !== undefined) return 'roi_exceeds_bounds';
      return err.details?.allowed !== undefined ? 'invalid_roi' : 'roi_region_empty';
    case 'validation_error':
      if (fields.length > 1) return fields.some((f) => f.startsWith('bg_')) ? 'multiple_bg_sources' : 'multiple_sources';
      if (field === 'image_file_b64') return 'failed_to_read_image';
      if (Object.hasOwn(FIELD_OF_OPTION, field)) return `invalid_${FIELD_OF_OPTION[field]}`;
      return field === 'Idempotency-Key' ? 'invalid_idempotency_key' : 'invalid_parameters';
    default:
      return err.code;
  }
}

/** remove.bg's status: 403 for a missing or wrong key, 400 for any bad input (bgone's 415 and 422 too). */
function removeBgStatus(status: number): number {
  if (status === 401) return 403;
  return status === 415 || status === 422 ? 400 : status;
}

/** Every error of the dialect's routes, in remove.bg's shape; bgone's message is the detail. */
export const renderRemoveBgError: ErrorRenderer = (err) => {
  const code = removeBgCode(err);
  const title = code.replaceAll('_', ' ').replace(/^./, (c) => c.toUpperCase());
  return { status: removeBgStatus(err.status), body: { errors: [{ title, code, detail: err.message }] } };
};

/** The removal in remove.bg's names, defaults and answer. */
export const REMOVEBG_DIALECT: RemovalDialect = {
  form: FORM,
  options: (form, model) => ({ ...optionsFromNames(translateForm(form)), model }) as RemoveBackgroundOptions,
  answer(ex, { result, charged, rateHeaders }) {
    const { foreground } = result;
    const headers: Record<string, string> = {
      'X-Width': String(result.width),
      'X-Height': String(result.height),
      'X-Type': 'other',
      'X-Foreground-Top': String(foreground.top),
      'X-Foreground-Left': String(foreground.left),
      'X-Foreground-Width': String(foreground.width),
      'X-Foreground-Height': String(foreground.height),
      'X-Credits-Charged': String(charged),
      'Cache-Control': 'no-store',
      ...rateHeaders,
    };
    if (!wantsJson(ex.req.header('accept'))) return ex.send(200, { 'Content-Type': MEDIA_TYPES[result.format], ...headers }, result.data);
    ex.json(
      200,
      {
        data: {
          result_b64: result.data.toString('base64'),
          foreground_top: foreground.top,
          foreground_left: foreground.left,
          foreground_width: foreground.width,
          foreground_height: foreground.height,
        },
      },
      headers,
    );
  },
};

export interface RemoveBgDeps {
  store: Store;
  admission: Admission;
  metrics: Metrics;
  model?: string | undefined;
  logger?: Logger | undefined;
  memory?: JobMemoryGate | undefined;
  overloadRetryAfter?: number | undefined;
}

/** POST /v1.0/removebg and GET /v1.0/account, behind the one admission path. */
export function mountRemoveBg(router: Router, deps: RemoveBgDeps): void {
  const { store, admission, logger } = deps;
  const authenticate = (ex: Exchange) => () => principalOfKey(store, ex.req.header('x-api-key').trim() || null);
  const unauthenticated = new ApiError('authentication_error', 'Missing or invalid API key. Send it as "X-Api-Key: rb-sk_...".');

  router.post(
    REMOVEBG_PATH,
    removalHandler({
      admission,
      removal: { store, model: deps.model, logger, metrics: deps.metrics, memory: deps.memory, overloadRetryAfter: deps.overloadRetryAfter },
      authenticate: (ex) => authenticate(ex)(),
      unauthenticated,
      dialect: REMOVEBG_DIALECT,
      renderErrors: renderRemoveBgError,
    }),
  );

  // The balance, not metered: remove.bg's credit kinds are one balance here (subscription).
  router.get(REMOVEBG_ACCOUNT_PATH, async (ex) => {
    ex.renderErrors(renderRemoveBgError);
    const ticket = await admission.admit(ex, authenticate(ex), unauthenticated);
    if (!ticket) return;
    try {
      const { remaining } = await store.credits.balance(ticket.principal.accountId);
      const credits = { total: remaining, subscription: remaining, payg: 0, enterprise: 0 };
      ex.json(200, { data: { attributes: { credits, api: { free_calls: 0, sizes: 'all' } } } }, ticket.rateHeaders);
    } catch (err) {
      logger?.error({ requestId: ex.requestId, route: ex.route, err }, 'request failed');
      ex.error(storeFailure(isDatabaseUnavailable(err)), ticket.rateHeaders);
    } finally {
      ticket.release();
    }
  });
}
