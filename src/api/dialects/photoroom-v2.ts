/**
 * Photoroom's Image Editing API v2, `GET /v2/edit` (query parameters, the image by `imageUrl`) and
 * `POST /v2/edit` (a multipart body, the image as `imageFile`), as a dialect beside Photoroom's v1
 * (photoroom.ts, whose key, error statuses and `{"error": {...}}` body it shares).
 *
 * V2_PARAMS is the one table: every parameter of Photoroom's OpenAPI document, each row how its
 * value is read, Photoroom's default, and the bgone option it becomes (its row in
 * src/lib/option-table.ts) or why it is refused (generative, a template, or a value bgone has no
 * answer for). A request is translated into bgone's options by v2Options, then checked against the
 * option table itself: a bgone option that is no row of it, or a value its row does not take,
 * answers 400 naming the Photoroom parameter ("not supported by this server"), so that the same
 * translation applies unchanged once the row exists. Nothing is ignored: an unknown parameter, a
 * refused one, a POST parameter in the query string, each is a 400 naming it, before any credit is
 * held. docs/compatibility.md's v2 table is generated from V2_PARAMS (test/unit/photoroom-v2.test.ts).
 */
import { HttpError } from '../../http/errors.js';
import type { ErrorRenderer, FormShape, ParsedForm } from '../../http/exchange.js';
import type { Router } from '../../http/router.js';
import { MAX_URL_LENGTH } from '../../lib/address-guard.js';
import { parseColor } from '../../lib/colors.js';
import { BgoneError } from '../../lib/errors.js';
import { MAX_FILE_BYTES, MAX_SIDE, MEDIA_TYPES, optionByName } from '../../lib/option-table.js';
import { removalHandler } from '../metered-removal.js';
import { type DialectErrorRow, dialectOptions, errorRow, fieldOf, isCode, type RemovalDialect, refuse, uncertaintyHeader } from './engine.js';
import { PHOTOROOM_ERRORS, PHOTOROOM_UNAUTHENTICATED, PHOTOROOM_V2_FALLBACK, photoroomPrincipal } from './photoroom.js';
import type { RemoveBgDeps } from './removebg.js';

export const PHOTOROOM_V2_EDIT_PATH = '/v2/edit';

/** How a parameter's value is read. */
export type V2Read =
  /** an http or https URL */
  | 'url'
  /** a file part of POST's body */
  | 'file'
  /** one of `values`, in any case */
  | 'enum'
  /** a decimal number within `range` */
  | 'number'
  /** `true` or `false`, in any case */
  | 'bool'
  /** a length: a fraction 0..0.49, `N%` (0–49) or `Npx` */
  | 'size'
  /** hex without `#` (3, 6 or 8 digits; with `#` too), a colour name, or `transparent` */
  | 'colour'
  /** `auto`, `originalImage`, `croppedSubject` or `WxH` */
  | 'dimensions'
  /** any text (refused rows: never read) */
  | 'text';

export type V2Refusal = 'generative' | 'template' | 'unsupported value';

export interface V2Param {
  /** Photoroom's name; a pattern row's as its document writes it (`{key}`, `*`). */
  readonly name: string;
  /** A pattern row: the names it stands for. */
  readonly pattern?: RegExp;
  /** Where it is taken: GET's query, POST's body, or both. */
  readonly methods: 'GET' | 'POST' | 'both';
  readonly read: V2Read;
  readonly values?: readonly string[];
  /** A number's range: [min, max], the minimum itself excluded when `exclusiveMin`. */
  readonly range?: readonly [number, number];
  readonly exclusiveMin?: boolean;
  readonly integer?: boolean;
  /** Photoroom's default, as its document gives it ('' for none). */
  readonly default: string;
  /** The bgone option(s) it becomes (API names), '' for none. */
  readonly option: string;
  /** Why it is refused: every value (generative, template), or every value but its default. */
  readonly refused?: V2Refusal;
  /** The docs' words: what bgone does with it. */
  readonly does: string;
  /** Said when its default (not sent) needs what the server lacks: how to send what it can do. */
  readonly hint?: string;
}

const LINK = 'https://docs.photoroom.com/image-editing-api-plus-plan';

function param(row: Omit<V2Param, 'methods' | 'default'> & { methods?: V2Param['methods']; default?: string }): V2Param {
  return { methods: 'both', default: '', ...row };
}
const generative = (name: string, pattern?: RegExp, methods: V2Param['methods'] = 'both'): V2Param => ({
  name,
  methods,
  read: 'text',
  default: '',
  option: '',
  refused: 'generative',
  does: '400: generative (needs a generative model bgone does not have)',
  ...(pattern ? { pattern } : {}),
});
const template = (name: string, pattern?: RegExp): V2Param => ({
  name,
  methods: 'both',
  read: 'text',
  default: '',
  option: '',
  refused: 'template',
  does: "400: templates (Photoroom's stored designs) are not offered",
  ...(pattern ? { pattern } : {}),
});
const SIDES = ['Top', 'Right', 'Bottom', 'Left'] as const;

/** Every parameter of Photoroom's /v2/edit, in its document's groups. */
export const V2_PARAMS: readonly V2Param[] = [
  // The image.
  param({ name: 'imageUrl', methods: 'GET', read: 'url', option: 'image_url', does: "the image, downloaded by bgone's URL fetcher (GET only)" }),
  param({ name: 'imageFile', methods: 'POST', read: 'file', option: 'image_file', does: 'the image, a file part (POST only)' }),
  // Geometry.
  param({
    name: 'outputSize',
    read: 'dimensions',
    default: 'auto',
    option: 'output_size',
    does: '`WxH` → `output_size=WxH` (with no placement option: `crop=true`, `padding=0px`: the subject box fitted, centred); `auto`, `originalImage` → `original`; `croppedSubject` → `subject`',
    hint: 'send outputSize=WxH',
  }),
  param({
    name: 'maxWidth',
    read: 'number',
    range: [1, MAX_SIDE],
    integer: true,
    option: 'max_width',
    does: 'only with outputSize `originalImage`, `croppedSubject` or `auto`',
  }),
  param({
    name: 'maxHeight',
    read: 'number',
    range: [1, MAX_SIDE],
    integer: true,
    option: 'max_height',
    does: 'only with outputSize `originalImage`, `croppedSubject` or `auto`',
  }),
  param({
    name: 'scaling',
    read: 'enum',
    values: ['fit', 'fill'],
    default: 'fit',
    option: 'fit',
    does: "`fit` → `contain` (bgone's default); `fill` → `cover`",
  }),
  param({ name: 'padding', read: 'size', default: '0', option: 'area_padding', does: 'all four sides of `area_padding` (a side of its own overrides it)' }),
  ...SIDES.map((side) => param({ name: `padding${side}`, read: 'size', option: 'area_padding', does: `the ${side.toLowerCase()} of \`area_padding\`` })),
  param({ name: 'margin', read: 'size', default: '0', option: 'margin', does: 'all four sides of `margin` (a side of its own overrides it)' }),
  ...SIDES.map((side) => param({ name: `margin${side}`, read: 'size', option: 'margin', does: `the ${side.toLowerCase()} of \`margin\`` })),
  param({
    name: 'ignorePaddingAndSnapOnCroppedSides',
    read: 'bool',
    default: 'true',
    option: 'snap',
    does: "`true` → `snap=both`, less each axis whose alignment is given; `false` → `none` (bgone's default)",
    hint: 'send ignorePaddingAndSnapOnCroppedSides=false, or both horizontalAlignment and verticalAlignment',
  }),
  param({
    name: 'horizontalAlignment',
    read: 'enum',
    values: ['left', 'center', 'right'],
    option: 'position',
    does: "`position`'s first value: 0%, 50%, 100%",
  }),
  param({ name: 'verticalAlignment', read: 'enum', values: ['top', 'center', 'bottom'], option: 'position', does: "`position`'s second value: 0%, 50%, 100%" }),
  param({
    name: 'referenceBox',
    read: 'enum',
    values: ['subjectBox', 'originalImage'],
    default: 'subjectBox',
    option: 'reference_box',
    does: "`subjectBox` → `subject` (bgone's default); `originalImage` → `image`",
  }),
  // The cut-out.
  param({ name: 'removeBackground', read: 'bool', default: 'true', option: 'remove_background', does: '`false` → `remove_background=false`' }),
  param({
    name: 'keepExistingAlphaChannel',
    read: 'enum',
    values: ['auto', 'never'],
    default: 'never',
    option: 'keep_alpha',
    does: "`auto` → `keep_alpha=auto`; `never` is bgone's default",
  }),
  generative('segmentation.mode'),
  generative('segmentation.prompt'),
  generative('segmentation.negativePrompt'),
  // The background.
  param({
    name: 'background.color',
    read: 'colour',
    default: 'transparent',
    option: 'bg_color',
    does: '`bg_color`: hex as `#hex`, a name as it is; `transparent` sets nothing',
  }),
  param({ name: 'background.imageUrl', read: 'url', option: 'bg_image_url', does: 'downloaded by the URL fetcher (GET, and POST as clients send it)' }),
  param({ name: 'background.imageFile', methods: 'POST', read: 'file', option: 'bg_image_file', does: 'a file part (POST only)' }),
  param({
    name: 'background.scaling',
    read: 'enum',
    values: ['fit', 'fill'],
    default: 'fill',
    option: 'bg_fit',
    does: "only with a background image; `fill` → `cover` (bgone's default); `fit` → `contain`",
  }),
  param({
    name: 'background.blur.mode',
    read: 'enum',
    values: ['gaussian', 'bokeh'],
    option: 'bg_blur_mode',
    does: 'turns the blur on (`bg_blur`); `bokeh` → `bg_blur_mode=bokeh`',
  }),
  param({
    name: 'background.blur.radius',
    read: 'number',
    range: [0, 0.05],
    exclusiveMin: true,
    default: '0.01',
    option: 'bg_blur',
    does: '`bg_blur`; only with background.blur.mode',
  }),
  generative('background.prompt'),
  generative('background.negativePrompt'),
  generative('background.expandPrompt'),
  generative('background.expandPrompt.mode'),
  generative('background.seed'),
  generative('background.guidance.imageUrl'),
  generative('background.guidance.imageFile', undefined, 'POST'),
  generative('background.guidance.scale'),
  // The outline.
  param({ name: 'outline.color', read: 'colour', option: 'outline_color', does: '`outline_color` (turns the outline on)' }),
  param({ name: 'outline.width', read: 'number', range: [0, 0.1], default: '0.03', option: 'outline_width', does: '`outline_width`; only with outline.color' }),
  param({
    name: 'outline.blurRadius',
    read: 'number',
    range: [0, 0.025],
    default: '0',
    option: 'outline_blur',
    does: '`outline_blur`; only with outline.color',
  }),
  // The export.
  param({
    name: 'export.format',
    read: 'enum',
    values: ['png', 'jpeg', 'jpg', 'webp', 'avif'],
    default: 'png',
    option: 'format',
    does: '`jpeg`, `jpg` → `jpg` with `quality=80`; `png`, `webp`, `avif` as they are (WebP and AVIF at quality 90)',
  }),
  param({ name: 'export.dpi', read: 'number', range: [72, 1200], option: 'dpi', does: '`dpi`' }),
  param({
    name: 'preserveMetadata',
    read: 'enum',
    values: ['never', 'xmp', 'exifSubset', 'exifSubsetWithXmpCompatibility'],
    default: 'never',
    option: 'metadata',
    does: '`metadata`: `never` → `none`, `xmp`, `exifSubset` → `exif_subset` (Copyright and UserComment only), `exifSubsetWithXmpCompatibility` → `exif_subset_xmp`',
  }),
  param({
    name: 'colorSpace',
    read: 'enum',
    values: ['sRGB', 'original'],
    default: 'sRGB',
    option: 'color_space',
    does: "`color_space`: `original` keeps the input's RGB ICC profile, only on a plain cutout to PNG (anything else beside it: 400 naming it)",
  }),
  // Generative features.
  ...['directionOverride', 'intensityOverride', 'mode', 'softnessOverride', 'spreadOverride', 'subjectPoseOverride'].map((n) => generative(`shadow.${n}`)),
  generative('lighting.mode'),
  generative('textRemoval.mode'),
  ...['expand.mode', 'expand.seed', 'uncrop.mode', 'uncrop.seed'].map((n) => generative(n)),
  ...['upscale.downscaleIfNeeded', 'upscale.mode'].map((n) => generative(n)),
  ...['beautify.mode', 'beautify.onSubjectMismatch', 'beautify.seed'].map((n) => generative(n)),
  ...['describeAnyChange.mode', 'describeAnyChange.prompt', 'describeAnyChange.seed'].map((n) => generative(n)),
  ...['editWithAI.mode', 'editWithAI.prompt', 'editWithAI.seed'].map((n) => generative(n)),
  generative('editWithAI.additionalImages.{key}.imageUrl', /^editWithAI\.additionalImages\.[^.]+\.imageUrl$/),
  generative('editWithAI.additionalImages.{key}.imageFile', /^editWithAI\.additionalImages\.[^.]+\.imageFile$/, 'POST'),
  ...['imageFromPrompt.prompt', 'imageFromPrompt.seed', 'imageFromPrompt.size'].map((n) => generative(n)),
  ...['flatLay.mode', 'flatLay.prompt', 'flatLay.size', 'ghostMannequin.mode', 'ghostMannequin.prompt', 'ghostMannequin.size', 'ironing.mode'].map((n) =>
    generative(n),
  ),
  ...['additionalProductImages', 'mode', 'model', 'pose', 'prompt', 'quality', 'scene', 'size'].map((n) => generative(`virtualModel.${n}`)),
  generative('virtualModel.{model,scene,additionalProductImages}.*', /^virtualModel\.(?:model|scene|additionalProductImages)[.[]/),
  // Templates.
  template('templateId'),
  template('layers'),
  template('layers.*', /^layers[.[]/),
];

/** Names some clients send that Photoroom's document does not have, with what to send instead (photoroom-cli's). */
const NOT_PHOTOROOM: Readonly<Record<string, string>> = {
  outputImageMimeType: 'send export.format',
  sizeWidth: 'send outputSize=WxH',
  sizeHeight: 'send outputSize=WxH',
};

const byName = new Map(V2_PARAMS.filter((p) => !p.pattern).map((p) => [p.name, p]));

/** The row of a name: its own, or a pattern's. */
export function v2Param(name: string): V2Param | undefined {
  return byName.get(name) ?? V2_PARAMS.find((p) => p.pattern?.test(name));
}

const takes = (p: V2Param, method: 'GET' | 'POST'): boolean => p.methods === 'both' || p.methods === method;

/** The 400 of a name a request may not carry (unknown, refused, or of the other method), undefined for one it may. */
export function refusedName(name: string, method: 'GET' | 'POST'): HttpError | undefined {
  const row = v2Param(name);
  if (!row) {
    const instead = Object.hasOwn(NOT_PHOTOROOM, name) ? `: ${NOT_PHOTOROOM[name]} (Photoroom ignores it)` : '';
    return refuse(name, `${name} is not a parameter of Photoroom's /v2/edit${instead}.`);
  }
  if (row.refused === 'generative') {
    return refuse(name, `${name} is a generative feature, which this server does not offer: it runs no generative model (${LINK}).`);
  }
  if (row.refused === 'template') return refuse(name, `${name}: templates are not offered by this server.`);
  if (!takes(row, method)) {
    return row.read === 'file'
      ? refuse(name, `${name} is a file part of POST /v2/edit; GET takes the image by imageUrl.`)
      : refuse(name, `${name} is taken by GET /v2/edit only; POST takes the image as the imageFile part.`);
  }
  return undefined;
}

/** The form each method reads: its text parameters (refused ones are refused by name as they arrive), POST's two file parts. */
function shapeOf(method: 'GET' | 'POST'): FormShape {
  const rows = V2_PARAMS.filter((p) => !p.pattern && p.refused !== 'generative' && p.refused !== 'template' && takes(p, method));
  return {
    fields: Object.fromEntries(rows.filter((p) => p.read !== 'file').map((p) => [p.name, p.read === 'url' ? MAX_URL_LENGTH : 256])),
    files: Object.fromEntries(rows.filter((p) => p.read === 'file').map((p) => [p.name, 1])),
    maxFileBytes: MAX_FILE_BYTES,
    maxTotalBytes: 2 * MAX_FILE_BYTES,
    unknown: (name) => refusedName(name, method),
  };
}
export const V2_GET_FORM = shapeOf('GET');
export const V2_POST_FORM = shapeOf('POST');

/** GET's query string as the form: each name once, within its length, refused by name otherwise. */
export function queryForm(query: string): ParsedForm {
  const fields: Record<string, string> = {};
  for (const [name, value] of new URLSearchParams(query)) {
    if (!Object.hasOwn(V2_GET_FORM.fields, name)) throw refusedName(name, 'GET') ?? refuse(name, `${name} is not taken by GET /v2/edit.`);
    if (Buffer.byteLength(value) > V2_GET_FORM.fields[name]!) throw refuse(name, `${name} is too long (at most ${V2_GET_FORM.fields[name]} bytes).`);
    if (Object.hasOwn(fields, name)) throw refuse(name, `${name} is given twice.`);
    fields[name] = value;
  }
  return { fields, files: {} };
}

const NUMBER = /^[+-]?(?:\d+(?:\.\d*)?|\.\d+)$/;
const SIZE = /^(?:(\d+(?:\.\d+)?|\.\d+)|(\d+(?:\.\d+)?)%|(\d{1,4})px)$/;
const HEX = /^#?([0-9a-f]{3}|[0-9a-f]{6}|[0-9a-f]{8})$/;
const WXH = /^(\d{1,5})x(\d{1,5})$/;

/** A value as its row reads it, canonical (an enum in its document's spelling, hex as `#hex`); a value outside the row is a 400 naming it. */
export function readValue(p: V2Param, raw: string): string {
  const v = raw.trim();
  const bad = (what: string): never => {
    throw refuse(p.name, `${p.name} must be ${what}.`, p.values);
  };
  switch (p.read) {
    case 'enum': {
      const found = p.values!.find((value) => value.toLowerCase() === v.toLowerCase());
      return found ?? bad(`one of ${p.values!.join(', ')}`);
    }
    case 'bool': {
      const b = v.toLowerCase();
      return b === 'true' || b === 'false' ? b : bad('boolean (true or false)');
    }
    case 'number': {
      const [min, max] = p.range!;
      const n = Number(v);
      const within = NUMBER.test(v) && (p.exclusiveMin ? n > min : n >= min) && n <= max && (!p.integer || Number.isInteger(n));
      return within ? String(n) : bad(`${p.integer ? 'a whole number' : 'a number'} from ${min}${p.exclusiveMin ? ' (excluded)' : ''} to ${max}`);
    }
    case 'size': {
      const m = SIZE.exec(v.toLowerCase());
      const fraction = m?.[1] !== undefined ? Number(m[1]) : undefined;
      const percent = m?.[2] !== undefined ? Number(m[2]) : undefined;
      const px = m?.[3] !== undefined ? Number(m[3]) : undefined;
      if ((fraction !== undefined && fraction <= 0.49) || (percent !== undefined && percent <= 49))
        return fraction !== undefined ? String(fraction) : `${percent}%`;
      if (px !== undefined && px <= MAX_SIDE) return `${px}px`;
      return bad(`a fraction from 0 to 0.49, a percentage from 0% to 49% or pixels ("100px")`);
    }
    case 'colour': {
      const c = v.toLowerCase();
      if (c === 'transparent') return c;
      const hex = HEX.exec(c);
      if (hex) return `#${hex[1]}`;
      try {
        parseColor(c);
        return c;
      } catch {
        return bad('a hex colour without # (FF0000, FF0000EE, F00), a colour name or transparent');
      }
    }
    case 'dimensions': {
      const named = ['auto', 'originalImage', 'croppedSubject'].find((value) => value.toLowerCase() === v.toLowerCase());
      if (named) return named;
      const m = WXH.exec(v.toLowerCase());
      return m && Number(m[1]) > 0 && Number(m[2]) > 0 ? `${Number(m[1])}x${Number(m[2])}` : bad('auto, originalImage, croppedSubject or WxH (e.g. 1000x1000)');
    }
    default:
      return v;
  }
}

/** Empty or whitespace: not given (clients send '' for what they leave out). */
const BLANK = /^\s*$/;

/** The options that make bgone's layout (v2-interface): with none of them, output_size=WxH places the crop box instead. */
const PLACEMENT = ['margin', 'area_padding', 'fit', 'snap', 'reference_box', 'max_width', 'max_height'];

/** One bgone option from the translation: its value, the Photoroom parameter it came from, and whether that was sent or its default. */
interface Produced {
  value: unknown;
  from: string;
  sent: boolean;
}

/**
 * bgone's options (API names) of a v2 request, checked against the option table: every parameter
 * read by its row, the rules between them (Photoroom's), then each option the translation gives
 * either a row that takes its value, or a 400 naming the parameter it came from.
 */
export function v2Options(form: ParsedForm, method: 'GET' | 'POST'): Record<string, unknown> {
  const given = new Map<string, string>();
  for (const p of V2_PARAMS) {
    if (p.pattern || p.read === 'file') continue;
    const raw = form.fields[p.name];
    if (raw === undefined || BLANK.test(raw)) continue;
    if (p.refused === 'generative' || p.refused === 'template') throw refusedName(p.name, method)!;
    const value = readValue(p, raw);
    if (p.refused === 'unsupported value' && value !== p.default) {
      throw refuse(p.name, `${p.name}=${value} is not supported by this server: it takes ${p.default} only.`, [p.default]);
    }
    given.set(p.name, value);
  }
  const file = (name: string): Buffer | undefined => {
    const data = form.files[name]?.[0]?.data;
    return data && data.length > 0 ? data : undefined;
  };
  const out = new Map<string, Produced>();
  const set = (option: string, value: unknown, from: string) => out.set(option, { value, from, sent: given.has(from) || file(from) !== undefined });
  const value = (name: string): string => given.get(name) ?? byName.get(name)!.default;
  const needs = (name: string, what: string, ok: boolean) => {
    if (given.has(name) && !ok) throw refuse(name, `${name} is taken only with ${what}.`);
  };

  // The image: GET by URL, POST as a file part.
  if (method === 'GET') {
    if (!given.has('imageUrl'))
      throw new HttpError(400, 'missing_image', 'imageUrl is required: GET /v2/edit takes the image by URL (POST /v2/edit as imageFile).', {
        field: 'imageUrl',
      });
    set('image_url', given.get('imageUrl'), 'imageUrl');
  } else {
    const image = file('imageFile');
    if (!image)
      throw new HttpError(400, 'missing_image', 'imageFile is required: POST /v2/edit takes the image as a file part (GET /v2/edit by imageUrl).', {
        field: 'imageFile',
      });
    set('image_file', image, 'imageFile');
  }

  // The cut-out.
  if (value('removeBackground') === 'false') set('remove_background', 'false', 'removeBackground');
  if (value('keepExistingAlphaChannel') === 'auto') set('keep_alpha', 'auto', 'keepExistingAlphaChannel');
  const keepsBackground = value('removeBackground') === 'false';
  for (const name of ['ignorePaddingAndSnapOnCroppedSides', 'referenceBox', 'background.imageUrl']) needs(name, 'removeBackground=true', !keepsBackground);
  if (keepsBackground && file('background.imageFile')) throw refuse('background.imageFile', 'background.imageFile is taken only with removeBackground=true.');

  // Geometry: the canvas, the margins and padding, the fit, the alignment and snapping.
  const size = value('outputSize');
  const exact = WXH.test(size);
  set('output_size', exact ? size : size === 'croppedSubject' ? 'subject' : 'original', 'outputSize');
  for (const name of ['maxWidth', 'maxHeight']) {
    needs(name, 'outputSize originalImage, croppedSubject or auto', !exact);
    if (given.has(name)) set(name === 'maxWidth' ? 'max_width' : 'max_height', given.get(name), name);
  }
  if (value('scaling') === 'fill') set('fit', 'cover', 'scaling');
  for (const [general, option] of [
    ['padding', 'area_padding'],
    ['margin', 'margin'],
  ] as const) {
    const sides = SIDES.map((side) => given.get(`${general}${side}`) ?? given.get(general) ?? '0');
    if (sides.some((s) => Number.parseFloat(s) > 0)) {
      set(option, sides.join(' '), given.has(general) ? general : `${general}${SIDES[sides.findIndex((s) => Number.parseFloat(s) > 0)]}`);
    }
  }
  const horizontal = given.get('horizontalAlignment');
  const vertical = given.get('verticalAlignment');
  if (value('ignorePaddingAndSnapOnCroppedSides') === 'true') {
    const snap = horizontal ? (vertical ? 'none' : 'vertical') : vertical ? 'horizontal' : 'both';
    if (snap !== 'none') set('snap', snap, 'ignorePaddingAndSnapOnCroppedSides');
  }
  if (horizontal || vertical) {
    const share = (a: string | undefined) => (a === 'left' || a === 'top' ? '0%' : a === 'right' || a === 'bottom' ? '100%' : '50%');
    set('position', `${share(horizontal)} ${share(vertical)}`, horizontal ? 'horizontalAlignment' : 'verticalAlignment');
  }
  if (value('referenceBox') === 'originalImage') set('reference_box', 'image', 'referenceBox');
  // Without bgone's layout options, output_size=WxH fits the crop box: the subject's box with no
  // margin is Photoroom's default reference box, fitted and centred as Photoroom does.
  if (exact && !PLACEMENT.some((option) => out.has(option))) {
    set('crop', 'true', 'outputSize');
    set('padding', '0px', 'outputSize');
  }

  // The background: a colour, or an image (and how it is scaled), or the photo's own, blurred.
  const colour = given.get('background.color');
  const imageUrl = given.get('background.imageUrl');
  const imageFile = file('background.imageFile');
  if (imageUrl && imageFile) throw refuse('background.imageUrl', 'background.imageUrl and background.imageFile were both given: give one background image.');
  if (colour && colour !== 'transparent' && (imageUrl || imageFile)) {
    throw refuse(
      'background.color',
      `background.color and ${imageUrl ? 'background.imageUrl' : 'background.imageFile'} were both given: bgone takes one background.`,
    );
  }
  if (colour && colour !== 'transparent') set('bg_color', colour, 'background.color');
  if (imageUrl) set('bg_image_url', imageUrl, 'background.imageUrl');
  if (imageFile) set('bg_image_file', imageFile, 'background.imageFile');
  needs('background.scaling', 'background.imageUrl or background.imageFile', Boolean(imageUrl || imageFile));
  if (value('background.scaling') === 'fit') set('bg_fit', 'contain', 'background.scaling');
  const blur = given.get('background.blur.mode');
  needs('background.blur.radius', 'background.blur.mode', blur !== undefined);
  if (blur) {
    set('bg_blur', value('background.blur.radius'), given.has('background.blur.radius') ? 'background.blur.radius' : 'background.blur.mode');
    if (blur === 'bokeh') set('bg_blur_mode', 'bokeh', 'background.blur.mode');
  }

  // The outline.
  const outline = given.get('outline.color');
  for (const [name, option] of [
    ['outline.width', 'outline_width'],
    ['outline.blurRadius', 'outline_blur'],
  ] as const) {
    needs(name, 'outline.color', outline !== undefined);
    if (given.has(name)) set(option, given.get(name), name);
  }
  // A transparent outline is no outline.
  if (outline && outline !== 'transparent') set('outline_color', outline, 'outline.color');

  // The export: Photoroom's JPEG quality is 80 (WebP and AVIF: 90, bgone's default).
  const format = value('export.format');
  if (format !== 'png') set('format', format === 'jpeg' ? 'jpg' : format, 'export.format');
  if (format === 'jpeg' || format === 'jpg') set('quality', '80', 'export.format');
  if (given.has('export.dpi')) set('dpi', given.get('export.dpi'), 'export.dpi');
  const metadata = value('preserveMetadata');
  const METADATA: Readonly<Record<string, string>> = { xmp: 'xmp', exifSubset: 'exif_subset', exifSubsetWithXmpCompatibility: 'exif_subset_xmp' };
  if (metadata !== 'never') set('metadata', METADATA[metadata], 'preserveMetadata');
  if (value('colorSpace') === 'original') {
    // Photoroom's rule: a plain cutout to PNG only; the first other parameter given is named.
    const plain: Readonly<Record<string, (v: string) => boolean>> = {
      colorSpace: () => true,
      imageUrl: () => true,
      removeBackground: (v) => v === 'true',
      keepExistingAlphaChannel: (v) => v === 'never',
      'export.format': (v) => v === 'png',
      preserveMetadata: (v) => v === 'never' || v === 'xmp',
    };
    for (const [name, v] of given) {
      if (!(plain[name]?.(v) ?? false))
        throw refuse(name, `colorSpace=original keeps the input's colour profile on a plain cutout to PNG: ${name}=${v} cannot be given with it.`);
    }
    if (file('background.imageFile'))
      throw refuse(
        'background.imageFile',
        "colorSpace=original keeps the input's colour profile on a plain cutout to PNG: background.imageFile cannot be given with it.",
      );
    // A plain cutout: the layout its defaults give (the photo's own size, the subject where it is)
    // is bgone's plain cutout, which color_space=original takes alone.
    for (const option of [...out.keys()]) if (!['image_url', 'image_file', 'metadata'].includes(option)) out.delete(option);
    set('color_space', 'original', 'colorSpace');
  }

  // Each option against the option table: a row that takes the value, or a 400 naming the parameter.
  const named: Record<string, unknown> = {};
  for (const [option, { value: v, from, sent }] of out) {
    const row = optionByName(option);
    const what = sent ? from : `${from} (its default, ${byName.get(from)!.default})`;
    const hint = !sent && byName.get(from)?.hint ? `; ${byName.get(from)!.hint}` : '';
    if (!row) throw refuse(from, `${what} is not supported by this server yet: it needs bgone's ${option} option, which this server does not have${hint}.`);
    if (typeof v === 'string') {
      try {
        row.parse(v);
      } catch (err) {
        if (!(err instanceof BgoneError)) throw err;
        throw refuse(from, `${what} is not supported by this server: bgone's ${option} does not take ${v} (it takes ${row.values})${hint}.`);
      }
    }
    named[option] = v;
  }
  return named;
}

/** bgone's names in its messages, as the v2 parameters they came from (errors after the translation: downloads, images). */
const PHOTOROOM_NAMES: Readonly<Record<string, string>> = {
  image_url: 'imageUrl',
  image_file: 'imageFile',
  bg_image_url: 'background.imageUrl',
  bg_image_file: 'background.imageFile',
  bg_color: 'background.color',
  color_space: 'colorSpace',
};
const BGONE_NAMES = new RegExp(`\\b(?:${Object.keys(PHOTOROOM_NAMES).join('|')})\\b`, 'g');

/** The statuses of /v2/edit: /v1/segment's (photoroom.ts), and a 400 for an image URL refused or whose download failed. */
export const PHOTOROOM_V2_ERRORS: readonly DialectErrorRow[] = [
  {
    code: 'invalid_image_url, failed_image_download',
    status: 400,
    matches: isCode('invalid_image_url', 'failed_image_download'),
    when: 'imageUrl or background.imageUrl is not a URL the fetcher takes, or its download failed',
  },
  ...PHOTOROOM_ERRORS,
];

/** Errors of /v2/edit: Photoroom's `{"error": {"message"}}` (402: `{"error": {"detail"}}`), in Photoroom's names. */
export const renderPhotoroomV2Error: ErrorRenderer = (err) => {
  const { status } = errorRow(PHOTOROOM_V2_ERRORS, err);
  const renamed = err.message.replace(BGONE_NAMES, (name) => PHOTOROOM_NAMES[name]!);
  // An error of a later stage (a download, the image) named by its field: the parameter first.
  const field = PHOTOROOM_NAMES[fieldOf(err)];
  const message = field && !renamed.includes(field) ? `${field}: ${renamed}` : renamed;
  return { status, body: { error: status === 402 ? { detail: message } : { message } } };
};

/** The success answer: the image, its Content-Type, and x-uncertainty-score as /v1/segment gives it. */
const answer: RemovalDialect<undefined>['answer'] = (ex, { result, charged, rateHeaders }) => {
  ex.send(
    200,
    {
      'Content-Type': MEDIA_TYPES[result.format],
      'x-uncertainty-score': uncertaintyHeader(result.uncertainty),
      'X-Credits-Charged': String(charged),
      'Cache-Control': 'no-store',
      ...rateHeaders,
    },
    result.data,
  );
};

/** GET /v2/edit: the form is the query string. */
export const PHOTOROOM_V2_GET_DIALECT: RemovalDialect<undefined> = {
  form: V2_GET_FORM,
  formOf: async (ex) => queryForm(ex.req.query),
  read: (form, model) => ({ options: dialectOptions(v2Options(form, 'GET'), model), answer: undefined }),
  answer,
};

/** POST /v2/edit: the multipart body; a parameter in the query string is refused, naming it (Photoroom: "must not be passed using the query string"). */
export const PHOTOROOM_V2_POST_DIALECT: RemovalDialect<undefined> = {
  form: V2_POST_FORM,
  formOf: async (ex, body) => {
    const names = [...new URLSearchParams(ex.req.query).keys()];
    if (names.length > 0) {
      throw new HttpError(
        400,
        'validation_error',
        `POST /v2/edit takes its parameters in the multipart body, never in the query string: ${names.join(', ')}.`,
        {
          field: names[0],
          fields: names,
        },
      );
    }
    return body(V2_POST_FORM, false);
  },
  read: (form, model) => ({ options: dialectOptions(v2Options(form, 'POST'), model), answer: undefined }),
  answer,
};

/** GET and POST /v2/edit, behind the one admission path, metered like every removal. */
export function mountPhotoroomV2(router: Router, deps: RemoveBgDeps): void {
  const route = (dialect: RemovalDialect<undefined>) =>
    removalHandler({
      admission: deps.admission,
      removal: {
        store: deps.store,
        model: deps.model,
        logger: deps.logger,
        metrics: deps.metrics,
        memory: deps.memory,
        overloadRetryAfter: deps.overloadRetryAfter,
      },
      authenticate: (ex) => photoroomPrincipal(deps, ex),
      unauthenticated: PHOTOROOM_UNAUTHENTICATED,
      dialect,
      renderErrors: renderPhotoroomV2Error,
    });
  router.get(PHOTOROOM_V2_EDIT_PATH, route(PHOTOROOM_V2_GET_DIALECT), PHOTOROOM_V2_FALLBACK);
  router.post(PHOTOROOM_V2_EDIT_PATH, route(PHOTOROOM_V2_POST_DIALECT), PHOTOROOM_V2_FALLBACK);
}
