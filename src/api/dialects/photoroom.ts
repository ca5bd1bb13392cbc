import type { HttpError } from '../../http/errors.js';
import type { ErrorRenderer, Exchange } from '../../http/exchange.js';
import type { FallbackAnswers, Router } from '../../http/router.js';
import { MEDIA_TYPES } from '../../lib/index.js';
import { ApiError } from '../../service/errors.js';
import type { Balance } from '../../store/index.js';
import { type KeyedAuth, keyedHandler, principalOfKey } from '../api-key.js';
import { removalHandler } from '../metered-removal.js';
import {
  always,
  BOOLEAN,
  BOOLEAN_WORDS,
  type DialectErrorRow,
  type DialectField,
  dialectForm,
  dialectOptions,
  errorRow,
  isCode,
  type RemovalDialect,
  same,
  translateFields,
  uncertaintyHeader,
  wantsJson,
} from './engine.js';
import type { RemoveBgDeps } from './removebg.js';

export const PHOTOROOM_PATH = '/v1/segment';
export const PHOTOROOM_V1_ACCOUNT_PATH = '/v1/account';
export const PHOTOROOM_V2_ACCOUNT_PATH = '/v2/account';

/** Photoroom's fields (its document's, and the JSON source its npm client sends). */
export const PHOTOROOM_FIELDS: readonly DialectField[] = [
  { name: 'image_file', part: 'file', option: 'image_file', accepts: 'a JPG, PNG or WebP file part' },
  {
    name: 'image_file_b64',
    part: 'field',
    option: 'image_file_b64',
    accepts: 'the image in base64 (a JSON or urlencoded body)',
    note: "not in Photoroom's document: the npm `photoroom-sdk` sends it; the JSON answer then names the image `result_b64`",
  },
  { name: 'format', part: 'field', option: 'format', values: { png: 'png', jpg: 'jpg', jpeg: 'jpg', webp: 'webp' }, default: 'png' },
  { name: 'channels', part: 'field', option: 'channels', values: same('rgba', 'alpha'), default: 'rgba' },
  { name: 'bg_color', part: 'field', option: 'bg_color', accepts: "bgone's colours: hex (`#FF00FF`, with or without `#`), `rgb(...)` or an HTML colour name" },
  {
    name: 'size',
    part: 'field',
    option: 'size',
    values: same('preview', 'medium', 'hd', 'full'),
    default: 'full',
    accepts: '`preview` (0.25 MP), `medium` (1.5 MP), `hd` (4 MP), `full`',
  },
  { name: 'crop', part: 'field', option: 'crop', values: BOOLEAN, default: 'false', accepts: BOOLEAN_WORDS, note: "to the cut-out's border, with no margin" },
  {
    name: 'despill',
    part: 'field',
    option: 'despill',
    values: BOOLEAN,
    default: 'false',
    accepts: BOOLEAN_WORDS,
    note: "a green or blue screen's colour taken off the subject's edges",
  },
];

/** A crop is to the cut-out's border: no margin (bgone's own padding default is 10 %). */
const PHOTOROOM_FIXED = { padding: '0px' };

/** Photoroom's errors on /v1/segment: the status of each; `type` is bgone's code. */
export const PHOTOROOM_ERRORS: readonly DialectErrorRow[] = [
  { code: 'missing_image', status: 400, matches: isCode('missing_image'), when: 'no `image_file` (or `image_file_b64`)' },
  { code: 'validation_error', status: 431, matches: (err) => err.status === 431, when: 'request headers over 16 KiB' },
  {
    code: 'validation_error',
    status: 400,
    matches: isCode('validation_error'),
    when: "a value outside a field's values, an unknown field, a bad `Idempotency-Key`",
  },
  {
    code: 'image_too_large, unsupported_media_type, invalid_image, foreground_not_found',
    status: 400,
    matches: isCode('image_too_large', 'unsupported_media_type', 'invalid_image', 'foreground_not_found'),
    when: 'over 20 MB or 6000 px per side, not a JPG, PNG or WebP, a corrupt image, no subject',
  },
  { code: 'payment_required', status: 402, matches: isCode('payment_required'), when: 'no credits left' },
  {
    code: 'authentication_error, permission_denied',
    status: 403,
    matches: isCode('authentication_error', 'permission_denied'),
    when: 'a missing or wrong key, a disabled account; no `WWW-Authenticate` challenge',
  },
  { code: 'not_found', status: 404, matches: isCode('not_found'), when: 'an unknown path under `/v1/` or `/v2/`' },
  { code: 'method_not_allowed', status: 405, matches: isCode('method_not_allowed'), when: 'a known path with another method; `Allow`' },
  { code: 'request_timeout', status: 408, matches: isCode('request_timeout'), when: 'the body arrived too late or too slowly' },
  { code: 'idempotency_in_progress', status: 409, matches: isCode('idempotency_in_progress'), when: 'the first request with the `Idempotency-Key` still runs' },
  {
    code: 'rate_limit_exceeded',
    status: 429,
    matches: isCode('rate_limit_exceeded'),
    when: "over the rate limit or the account's in-flight cap; `Retry-After`",
  },
  { code: 'overloaded', status: 503, matches: isCode('overloaded'), when: 'the server is busy or draining; `Retry-After`' },
  { code: 'internal_server_error', status: 500, matches: always, when: 'anything else' },
];

const photoroomStatus = (err: HttpError): number => errorRow(PHOTOROOM_ERRORS, err).status;

/** Every error of /v1/segment, in Photoroom's shape; the type is bgone's error code, its message the detail. */
export const renderPhotoroomError: ErrorRenderer = (err) => {
  const status = photoroomStatus(err);
  return { status, body: { detail: err.message, status_code: status, type: err.code } };
};

/** The errors of Photoroom's account (and image editing) endpoints: `{"error": {"message"}}`, 402's `{"error": {"detail"}}`. */
export const renderPhotoroomAccountError: ErrorRenderer = (err) => {
  const status = photoroomStatus(err);
  return { status, body: { error: status === 402 ? { detail: err.message } : { message: err.message } } };
};

/** Unknown paths and wrong methods under /v1/ and /v2/, and the HTTP layer's own refusals there, each in its version's shape. */
const fallback = (render: ErrorRenderer): FallbackAnswers => ({
  notFound: (ex) => {
    ex.renderErrors(render);
    ex.error(new ApiError('not_found'));
  },
  methodNotAllowed: (ex, allowed) => {
    ex.renderErrors(render);
    ex.error(new ApiError('method_not_allowed'), { Allow: allowed.join(', ') });
  },
  render,
});
export const PHOTOROOM_V1_FALLBACK = fallback(renderPhotoroomError);
export const PHOTOROOM_V2_FALLBACK = fallback(renderPhotoroomAccountError);

/** What the answer needs of the request: the JSON answer's key for the base64 image. */
interface PhotoroomRequest {
  base64Key: 'base64img' | 'result_b64';
}

/** The removal in Photoroom's names, defaults and answer. */
export const PHOTOROOM_DIALECT: RemovalDialect<PhotoroomRequest> = {
  form: dialectForm(PHOTOROOM_FIELDS),
  read(form, model) {
    const options = dialectOptions(translateFields(PHOTOROOM_FIELDS, form, PHOTOROOM_FIXED), model);
    return { options, answer: { base64Key: form.fields.image_file_b64 === undefined && !form.decoded?.image_file_b64 ? 'base64img' : 'result_b64' } };
  },
  answer(ex, { result, charged, rateHeaders }, request) {
    const headers: Record<string, string> = {
      'x-uncertainty-score': uncertaintyHeader(result.uncertainty),
      'X-Credits-Charged': String(charged),
      'Cache-Control': 'no-store',
      ...rateHeaders,
    };
    if (wantsJson(ex.req.header('accept'))) ex.json(200, { [request.base64Key]: result.data.toString('base64') }, headers);
    else ex.send(200, { 'Content-Type': MEDIA_TYPES[result.format], ...headers }, result.data);
  },
};

export const PHOTOROOM_UNAUTHENTICATED = new ApiError('authentication_error', 'Missing or invalid API key. Send it as "x-api-key: rb-sk_...".');

/** The request's principal, by its `x-api-key`. */
export function photoroomPrincipal(deps: { store: RemoveBgDeps['store'] }, ex: Exchange) {
  return principalOfKey(deps.store, ex.req.header('x-api-key').trim() || null);
}

/** POST /v1/segment, GET /v1/account and GET /v2/account, behind the one admission path; Photoroom's answers to the rest of /v1/ and /v2/. */
export function mountPhotoroom(router: Router, deps: RemoveBgDeps): void {
  const { store, admission, logger } = deps;
  router.group('/v1/', PHOTOROOM_V1_FALLBACK);
  router.group('/v2/', PHOTOROOM_V2_FALLBACK);

  router.post(
    PHOTOROOM_PATH,
    removalHandler({
      admission,
      removal: { store, model: deps.model, logger, metrics: deps.metrics, memory: deps.memory, overloadRetryAfter: deps.overloadRetryAfter },
      authenticate: (ex: Exchange) => photoroomPrincipal(deps, ex),
      unauthenticated: PHOTOROOM_UNAUTHENTICATED,
      dialect: PHOTOROOM_DIALECT,
      renderErrors: renderPhotoroomError,
    }),
    PHOTOROOM_V1_FALLBACK,
  );
  // Photoroom's account endpoints, from the account's real balance: remaining and the cycle's
  // allowance; not metered, and under the account-read rate limit.
  const auth: KeyedAuth = {
    authenticate: (ex) => photoroomPrincipal(deps, ex),
    unauthenticated: PHOTOROOM_UNAUTHENTICATED,
    render: renderPhotoroomAccountError,
  };
  const account = (shape: (balance: Balance) => unknown) =>
    keyedHandler(
      deps,
      async (ex, ticket) => ex.json(200, shape(await store.credits.balance(ticket.principal.accountId)), ticket.rateHeaders),
      { accountRead: true },
      auth,
    );
  router.get(
    PHOTOROOM_V1_ACCOUNT_PATH,
    account(({ remaining, allowance }) => ({ credits: { available: remaining, subscription: allowance } })),
    PHOTOROOM_V2_FALLBACK,
  );
  router.get(
    PHOTOROOM_V2_ACCOUNT_PATH,
    account(({ remaining, allowance, plan }) => ({ images: { available: remaining, subscription: allowance }, plan })),
    PHOTOROOM_V2_FALLBACK,
  );
}
