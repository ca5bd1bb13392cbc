/**
 * remove.bg's API as a dialect of bgone's: POST /v1.0/removebg, GET /v1.0/account and POST
 * /v1.0/improve, so that a client written for remove.bg works with only its base URL changed. The
 * options, the pipeline, the admission path and the ledger are bgone's own (metered-removal.ts,
 * service/admission.ts), keyed by `X-Api-Key: rb-sk_...` or `Authorization: Bearer rb-sk_...`.
 *
 * FIELDS is remove.bg's published OpenAPI document field by field, as lenient as what its public
 * clients send by default (empty strings for fields left out, booleans as True or 1, bare numbers
 * as pixels); ERRORS is its error table: its codes, its statuses (403 for a key, 400 for any bad
 * input) and its titles, which are messages. Both are read by the one engine (engine.ts), and
 * docs/compatibility.md's tables are generated from them.
 */
import type { Logger } from '../../config/logger.js';
import { HttpError } from '../../http/errors.js';
import type { Exchange } from '../../http/exchange.js';
import type { FallbackAnswers, Router } from '../../http/router.js';
import { MEDIA_TYPES } from '../../lib/index.js';
import type { Admission } from '../../service/admission.js';
import { ApiError } from '../../service/errors.js';
import type { JobMemoryGate } from '../../service/job-memory-gate.js';
import type { Metrics } from '../../service/metrics.js';
import type { Store } from '../../store/index.js';
import { bearer, type KeyedAuth, keyedHandler, principalOfKey } from '../api-key.js';
import { removalHandler } from '../metered-removal.js';
import {
  always,
  BOOLEAN,
  BOOLEAN_WORDS,
  type DialectErrorRow,
  type DialectField,
  dialectForm,
  dialectOptions,
  fieldOf,
  fieldsOf,
  isCode,
  type RemovalDialect,
  refuse,
  renderWith,
  same,
  titleOf,
  translateFields,
  wantsJson,
} from './engine.js';

export const REMOVEBG_PREFIX = '/v1.0/';
export const REMOVEBG_PATH = '/v1.0/removebg';
export const REMOVEBG_ACCOUNT_PATH = '/v1.0/account';
export const REMOVEBG_IMPROVE_PATH = '/v1.0/improve';

/** A bare number: remove.bg's clients send pixels without a unit (`0 0 100% 100%`). */
const BARE = /^\d+(?:\.\d+)?$/;

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
    throw refuse('crop_margin', 'crop_margin must be 1, 2 or 4 values, each in px or %, at most 50% or 500px per side, e.g. "10px" or "5% 10%".');
  }
  return px.join(' ');
}

/** roi: four values, each px or %; a bare number is px. */
function roi(value: string): string {
  return value
    .trim()
    .split(/[\s,]+/)
    .map((token) => (BARE.test(token) ? `${token}px` : token))
    .join(' ');
}

/** scale and position: a bare number is a percentage. */
function percent(value: string): string {
  return value
    .trim()
    .split(/\s+/)
    .map((token) => (BARE.test(token) ? `${token}%` : token))
    .join(' ');
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

/** remove.bg's shadow types and bgone's shadow of each: a drop shadow, or a contact shadow under the subject. */
const SHADOW_TYPES: Readonly<Record<string, string>> = { drop: 'drop', '3d': 'contact', car: 'contact' };

/** add_shadow=true: the shadow of shadow_type (drop by default); false: none. */
function shadow(value: string, given: (name: string) => string | undefined): string | undefined {
  return value === 'true' ? SHADOW_TYPES[given('shadow_type') ?? 'drop'] : undefined;
}

/** shadow_opacity: an integer from 0 to 100 (or a percentage), with add_shadow=true only. */
function shadowOpacity(value: string, given: (name: string) => string | undefined): string | undefined {
  const m = /^\s*(\d{1,3})\s*%?\s*$/.exec(value);
  if (!m || Number(m[1]) > 100) throw refuse('shadow_opacity', 'shadow_opacity must be an integer from 0 to 100.');
  return given('add_shadow') === 'true' ? `${Number(m[1])}%` : undefined;
}

/** remove.bg's fields, in its document's order, and what each sets of bgone's options. */
export const REMOVEBG_FIELDS: readonly DialectField[] = [
  { name: 'image_file', part: 'file', option: 'image_file', accepts: 'a JPG, PNG or WebP file part (an empty part is absent)' },
  { name: 'image_file_b64', part: 'field', option: 'image_file_b64', accepts: 'the image in base64, with or without a `data:` prefix' },
  { name: 'image_url', part: 'field', option: 'image_url', accepts: 'an http or https URL' },
  {
    name: 'size',
    part: 'field',
    option: 'size',
    values: { preview: 'preview', small: 'preview', regular: 'preview', medium: 'medium', hd: 'hd', full: 'full', '4k': 'full', '50mp': 'full', auto: 'full' },
    default: 'preview',
    accepts: '`preview`, `small`, `regular` (preview, 0.25 MP); `medium` (1.5 MP); `hd` (4 MP); `full`, `4k`, `50MP`, `auto` (full)',
  },
  {
    name: 'type',
    part: 'field',
    option: null,
    values: same('auto', 'person', 'product', 'car', 'animal', 'graphic', 'graphics', 'transportation', 'car_interior', 'car_part', 'other'),
    default: 'auto',
    note: "a hint for remove.bg's models; bgone's one model needs none",
  },
  {
    name: 'type_level',
    part: 'field',
    option: null,
    values: same('none', '1', '2', 'latest'),
    default: '1',
    note: '`none` leaves out `X-Type`; the others send `X-Type: other` (bgone does not classify the subject)',
  },
  { name: 'format', part: 'field', option: 'format', values: { auto: 'auto', png: 'png', jpg: 'jpg', jpeg: 'jpg', webp: 'webp', zip: 'zip' }, default: 'auto' },
  {
    name: 'roi',
    part: 'field',
    option: 'roi',
    translate: roi,
    accepts: '`x1 y1 x2 y2`, each px (a bare number is px) or %',
    note: 'the whole image by default',
  },
  { name: 'crop', part: 'field', option: 'crop', values: BOOLEAN, accepts: BOOLEAN_WORDS },
  {
    name: 'crop_margin',
    part: 'field',
    option: 'padding',
    translate: cropMargin,
    default: '0',
    accepts: "1, 2 or 4 values (top right bottom left), each px (a bare number is px) or % of the subject's width; at most 500px or 50% per side",
    note: "sets `padding`: up to 500px on every side fits any image; a box past bgone's crop cap (4× the image's area) is `invalid_crop`",
  },
  { name: 'scale', part: 'field', option: 'scale', translate: percent, accepts: '`10%` to `100%` (a bare number is %), `original`' },
  { name: 'position', part: 'field', option: 'position', translate: percent, accepts: '`original`, `center`, one or two % values (a bare number is %)' },
  { name: 'channels', part: 'field', option: 'channels', values: same('rgba', 'alpha') },
  { name: 'bg_color', part: 'field', option: 'bg_color', translate: bgColor, accepts: "bgone's colours, and the 4-digit hex `#RGBA` (with or without `#`)" },
  { name: 'bg_image_url', part: 'field', option: 'bg_image_url', accepts: 'an http or https URL' },
  { name: 'bg_image_file', part: 'file', option: 'bg_image_file', accepts: 'a JPG, PNG or WebP file part (an empty part is absent)' },
  { name: 'add_shadow', part: 'field', option: 'shadow', values: BOOLEAN, translate: shadow, accepts: BOOLEAN_WORDS, note: 'a shadow of `shadow_type`' },
  {
    name: 'shadow_type',
    part: 'field',
    option: null,
    values: { drop: 'drop', '3d': '3d', car: 'car' },
    default: 'drop',
    accepts: '`drop`, `3D`, `car`',
    note: 'with add_shadow=true: `drop` is a drop shadow; `3D` and `car` a contact shadow under the subject (an approximation of theirs)',
  },
  {
    name: 'shadow_opacity',
    part: 'field',
    option: 'shadow_opacity',
    translate: shadowOpacity,
    accepts: 'an integer from 0 to 100',
    note: "with add_shadow=true (bgone's default: 50)",
  },
  { name: 'shadow_method', part: 'field', option: null, values: same('legacy', 'latest'), note: 'accepted from older clients; bgone has one shadow method' },
  {
    name: 'semitransparency',
    part: 'field',
    option: 'semitransparency',
    values: BOOLEAN,
    accepts: BOOLEAN_WORDS,
    note: '`false`: the subject made opaque where it is semi-transparent inside its outline',
  },
  {
    name: 'api_key',
    part: 'field',
    option: null,
    maxLength: 256,
    accepts: 'anything',
    note: "sent by remove.bg's own browser sample beside the header; the key is read from the header only",
  },
];

/** remove.bg's field of a bgone option (crop_margin for padding), for an error the option's parser raised. */
const FIELD_OF_OPTION: Readonly<Record<string, string>> = Object.fromEntries(
  REMOVEBG_FIELDS.flatMap((field) => (field.option && field.option !== field.name ? [[field.option, field.name]] : [])),
);
const dialectField = (err: HttpError): string => FIELD_OF_OPTION[fieldOf(err)] ?? fieldOf(err);
const background = (err: HttpError): boolean => fieldOf(err).startsWith('bg_image');

/** A 400 for a refused value of `field`, with remove.bg's title for it. */
const fieldRow = (field: string, title: string): DialectErrorRow => ({
  code: `invalid_${field}`,
  status: 400,
  title,
  matches: (err) => (err.code === 'validation_error' || err.code === 'invalid_roi') && dialectField(err) === field && fieldsOf(err).length < 2,
  when: `a value of \`${field}\` outside its values`,
});

/** What a failed download's title says of it: remove.bg's "HTTP Status 404", else bgone's message. */
const downloadCause = (err: HttpError): string => (typeof err.details?.status === 'number' ? `HTTP Status ${err.details.status}` : err.message);

/** remove.bg's errors: its codes, statuses and titles, the first row that matches answering. */
export const REMOVEBG_ERRORS: readonly DialectErrorRow[] = [
  {
    code: 'auth_failed',
    status: 403,
    title: 'Missing API Key',
    matches: (err) => err.code === 'authentication_error' && err.details?.reason === 'missing',
    when: 'no key',
  },
  { code: 'auth_failed', status: 403, title: 'API Key invalid', matches: isCode('authentication_error'), when: 'a wrong or revoked key' },
  { code: 'permission_denied', status: 403, title: 'Account disabled', matches: isCode('permission_denied'), when: 'a disabled account' },
  { code: 'insufficient_credits', status: 402, title: 'Insufficient credits', matches: isCode('payment_required'), when: 'no credits left' },
  {
    code: 'rate_limit_exceeded',
    status: 429,
    title: 'Rate limit exceeded',
    matches: isCode('rate_limit_exceeded'),
    when: "over the rate limit or the account's in-flight cap; `Retry-After`",
  },
  { code: 'missing_source', status: 400, title: 'No image given', matches: isCode('missing_image'), when: 'no image' },
  {
    code: 'multiple_bg_sources',
    status: 400,
    title: 'Multiple background sources given: Please provide either the bg_color, the bg_image_url or the bg_image_file parameter.',
    matches: (err) => err.code === 'validation_error' && fieldsOf(err).length > 1 && fieldsOf(err).some((f) => f.startsWith('bg_')),
    when: 'two backgrounds',
  },
  {
    code: 'multiple_sources',
    status: 400,
    title: 'Multiple image sources given: Please provide either the image_url, image_file or image_file_b64 parameter.',
    matches: (err) => err.code === 'validation_error' && fieldsOf(err).length > 1,
    when: 'two images',
  },
  {
    code: 'resolution_too_high',
    status: 400,
    title: 'Image resolution too high',
    matches: (err) => err.code === 'image_too_large' && err.details?.max_side !== undefined,
    when: 'over 6000 px per side',
  },
  { code: 'file_too_large', status: 400, title: 'File too large', matches: isCode('image_too_large'), when: 'over 20 MB' },
  { code: 'invalid_file_type', status: 400, title: 'Invalid file type', matches: isCode('unsupported_media_type'), when: 'not a JPG, PNG or WebP' },
  {
    code: 'invalid_dimensions',
    status: 400,
    title: 'Failed to read image dimensions',
    matches: (err) => err.code === 'invalid_image' && err.details?.reason === 'dimensions',
    when: "the image's header has no readable size",
  },
  {
    code: 'failed_to_read_image',
    status: 400,
    title: 'There was an error reading the image.',
    matches: (err) => err.code === 'invalid_image' || (err.code === 'validation_error' && fieldOf(err) === 'image_file_b64'),
    when: 'a corrupt image, or base64 that is none',
  },
  {
    code: 'unknown_foreground',
    status: 400,
    title: 'Could not identify foreground in image. For details and recommendations see https://www.remove.bg/supported-images.',
    matches: isCode('foreground_not_found'),
    when: 'no subject found',
  },
  {
    code: 'invalid_bg_image_url',
    status: 400,
    title: 'Invalid bg_image_url: Please provide a valid URL.',
    matches: (err) => err.code === 'invalid_image_url' && background(err),
    when: "the background's URL is malformed",
  },
  {
    code: 'invalid_image_url',
    status: 400,
    title: 'Invalid image_url: Please provide a valid URL.',
    matches: isCode('invalid_image_url'),
    when: "the image's URL is malformed",
  },
  {
    code: 'failed_bg_download',
    status: 400,
    title: (err) => `Failed to download background image from given image_url: ${downloadCause(err)}`,
    matches: (err) => err.code === 'failed_image_download' && background(err),
    when: 'the background could not be downloaded',
  },
  {
    code: 'failed_image_download',
    status: 400,
    title: (err) => `Failed to download image from given image_url: ${downloadCause(err)}`,
    matches: isCode('failed_image_download'),
    when: 'the image could not be downloaded',
  },
  {
    code: 'roi_exceeds_bounds',
    status: 400,
    title: 'ROI exceeds image bounds',
    matches: (err) => err.code === 'invalid_roi' && err.details?.image !== undefined,
    when: 'the roi reaches outside the image',
  },
  {
    code: 'roi_region_empty',
    status: 400,
    title: 'ROI region is empty',
    matches: (err) => err.code === 'invalid_roi' && err.details?.allowed === undefined,
    when: 'the roi is empty',
  },
  fieldRow('size', "Invalid value for parameter 'size'"),
  fieldRow('channels', "Invalid value for parameter 'channels'"),
  ...REMOVEBG_FIELDS.filter((f) => f.part === 'field' && !['size', 'channels', 'image_file_b64', 'image_url', 'bg_image_url', 'api_key'].includes(f.name)).map(
    (f) => fieldRow(f.name, `Invalid ${f.name} parameter given`),
  ),
  {
    code: 'invalid_idempotency_key',
    status: 400,
    title: 'Invalid Idempotency-Key header given',
    matches: (err) => err.code === 'validation_error' && fieldOf(err) === 'Idempotency-Key',
    when: 'an `Idempotency-Key` that is not 1 to 255 visible ASCII characters',
  },
  {
    code: 'invalid_parameters',
    status: 400,
    title: 'Invalid parameters',
    matches: (err) => err.status === 400,
    when: 'any other bad input (an unknown field)',
  },
  {
    code: 'idempotency_in_progress',
    status: 409,
    title: 'Request with this Idempotency-Key in progress',
    matches: isCode('idempotency_in_progress'),
    when: 'the first request with this `Idempotency-Key` still runs; `Retry-After`',
  },
  { code: 'not_found', status: 404, title: 'Not found', matches: isCode('not_found'), when: 'an unknown path under `/v1.0/`' },
  {
    code: 'method_not_allowed',
    status: 405,
    title: 'Method not allowed',
    matches: isCode('method_not_allowed'),
    when: 'a known path with another method; `Allow`',
  },
  { code: 'request_timeout', status: 408, title: 'Request timeout', matches: isCode('request_timeout'), when: 'the body arrived too late or too slowly' },
  {
    code: 'not_supported',
    status: 501,
    title: 'The improvement program is not offered: this server stores no image',
    matches: isCode('not_supported'),
    when: '`POST /v1.0/improve`',
  },
  {
    code: 'request_header_fields_too_large',
    status: 431,
    title: 'Request header fields too large',
    matches: (err) => err.status === 431,
    when: 'request headers over 16 KiB',
  },
  {
    code: 'service_unavailable',
    status: 503,
    title: 'Service unavailable',
    matches: isCode('overloaded'),
    when: 'the server is busy or draining; `Retry-After`',
  },
  { code: 'internal_server_error', status: 500, title: 'Internal server error', matches: always, when: 'anything else' },
];

/** Every error under /v1.0/, in remove.bg's shape: `{"errors": [{title, code, detail}]}`, bgone's message as the detail. */
export const renderRemoveBgError = renderWith(REMOVEBG_ERRORS, (row, err) => ({ errors: [{ title: titleOf(row, err), code: row.code, detail: err.message }] }));

/** Unknown paths and wrong methods under /v1.0/, and the HTTP layer's own refusals there. */
export const REMOVEBG_FALLBACK: FallbackAnswers = {
  notFound: (ex) => {
    ex.renderErrors(renderRemoveBgError);
    ex.error(new ApiError('not_found'));
  },
  methodNotAllowed: (ex, allowed) => {
    ex.renderErrors(renderRemoveBgError);
    ex.error(new ApiError('method_not_allowed'), { Allow: allowed.join(', ') });
  },
  render: renderRemoveBgError,
};

/** What the answer needs of the request: whether X-Type is sent. */
interface RemoveBgRequest {
  xType: boolean;
}

/** The removal in remove.bg's names, defaults and answer. */
export const REMOVEBG_DIALECT: RemovalDialect<RemoveBgRequest> = {
  form: dialectForm(REMOVEBG_FIELDS),
  read(form, model) {
    const options = dialectOptions(translateFields(REMOVEBG_FIELDS, form), model);
    const typeLevel = form.fields.type_level?.trim().toLowerCase();
    return { options, answer: { xType: typeLevel !== 'none' } };
  },
  answer(ex, { result, charged, rateHeaders }, request) {
    const { foreground } = result;
    const headers: Record<string, string> = {
      'X-Width': String(result.width),
      'X-Height': String(result.height),
      ...(request.xType ? { 'X-Type': 'other' } : {}),
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

/** The API key of a remove.bg request: `X-Api-Key`, or an `Authorization: Bearer` token (remove.bg's OAuth header). */
export function removeBgKey(ex: Exchange): string | null {
  const header = ex.req.header('x-api-key').trim();
  if (header) return header;
  return bearer(ex.req.header('authorization'));
}

/** Missing and wrong keys: remove.bg's two titles of auth_failed. */
const missingKey = new ApiError('authentication_error', 'No API key: send it as "X-Api-Key: rb-sk_..." or "Authorization: Bearer rb-sk_...".', {
  reason: 'missing',
});
const invalidKey = new ApiError('authentication_error', 'The API key is not valid: send a key of this server as "X-Api-Key: rb-sk_...".');

/** Reads and drops a request's body under its admission limits; resolves when it has ended (or stopped). */
function discardBody(ex: Exchange, maxBytes: number): Promise<HttpError | undefined> {
  return new Promise((resolve) => {
    let size = 0;
    ex.onAbort(() => resolve(undefined));
    ex.onBody(
      (chunk, isLast) => {
        size += chunk.byteLength;
        if (size > maxBytes) resolve(new ApiError('image_too_large', `The request body is larger than ${maxBytes} bytes.`));
        else if (isLast) resolve(undefined);
      },
      (err) => resolve(err),
    );
  });
}

/** POST /v1.0/removebg, GET /v1.0/account and POST /v1.0/improve, behind the one admission path; remove.bg's answers to the rest of /v1.0/. */
export function mountRemoveBg(router: Router, deps: RemoveBgDeps & { maxBodyBytes: number }): void {
  const { store, admission, logger } = deps;
  const authenticate = (ex: Exchange) => {
    const key = removeBgKey(ex);
    if (!key) throw missingKey;
    return principalOfKey(store, key);
  };
  const auth: KeyedAuth = { authenticate, unauthenticated: invalidKey, render: renderRemoveBgError };
  router.group(REMOVEBG_PREFIX, REMOVEBG_FALLBACK);

  router.post(
    REMOVEBG_PATH,
    removalHandler({
      admission,
      removal: { store, model: deps.model, logger, metrics: deps.metrics, memory: deps.memory, overloadRetryAfter: deps.overloadRetryAfter },
      authenticate: async (ex) => authenticate(ex),
      unauthenticated: invalidKey,
      dialect: REMOVEBG_DIALECT,
      renderErrors: renderRemoveBgError,
    }),
    REMOVEBG_FALLBACK,
  );

  // The balance, not metered, under the account-read rate limit: remove.bg's credit kinds are one
  // balance here (subscription).
  router.get(
    REMOVEBG_ACCOUNT_PATH,
    keyedHandler(
      deps,
      async (ex, ticket) => {
        const { remaining } = await store.credits.balance(ticket.principal.accountId);
        const credits = { total: remaining, subscription: remaining, payg: 0, enterprise: 0 };
        ex.json(200, { data: { attributes: { credits, api: { free_calls: 0, sizes: 'all' } } } }, ticket.rateHeaders);
      },
      { accountRead: true },
      auth,
    ),
    REMOVEBG_FALLBACK,
  );

  // remove.bg's improvement program keeps the images sent to it; bgone keeps no image, and says so.
  // The upload is read to its end (and dropped), so that the client reads the answer, not a reset.
  router.post(
    REMOVEBG_IMPROVE_PATH,
    keyedHandler(
      deps,
      async (ex) => {
        throw (
          (await discardBody(ex, deps.maxBodyBytes)) ??
          new HttpError(501, 'not_supported', 'bgone stores no image, so it takes part in no improvement program: nothing was kept and nothing was charged.')
        );
      },
      undefined,
      auth,
    ),
    REMOVEBG_FALLBACK,
  );
}
