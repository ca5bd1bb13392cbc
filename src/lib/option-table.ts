/**
 * Every request option, declared once: its API name (the form field, the JSON key, what a batch
 * stores), its library key, how it arrives in a multipart body (a text field or a file part), which
 * inputs carry it, the longest text it takes, its allowed values and default in words, a one-line
 * description, an example, the error code of a wrong value, its JSON Schema, and its parser. The
 * multipart reader's fields, the JSON body's keys, the OpenAPI schema, the CLI's flags and help, the
 * try-it page's form, what a batch stores, the idempotency fingerprint and the table in docs/api.md
 * all come from OPTION_TABLE (test/unit/option-table.test.ts checks each against it).
 *
 * A parser takes the value as given (a string from a form, JSON or the command line; a library
 * caller may also give a number, a boolean or bytes where the row says so) and returns its parsed
 * form, or undefined when the option is left out (undefined, null or ''); a value outside the row's
 * values is a BgoneError with the row's code naming the field. What options mean together (one
 * source, one background, the default position) is in options.ts, which builds the native options.
 */
import { MAX_URL_LENGTH } from './address-guard.js';
import { COLOR_FORMS, parseColor, type Rgba } from './colors.js';
import { BgoneError, type ErrorCode } from './errors.js';

export const FORMATS = ['png', 'jpg', 'webp', 'avif', 'zip', 'auto'] as const;
export const CHANNELS = ['rgba', 'alpha'] as const;
export const SIZES = ['preview', 'medium', 'hd', 'full'] as const;
export const EFFORTS = ['standard', 'best'] as const;
export const SHADOWS = ['none', 'drop', 'contact'] as const;
export type OutputFormat = (typeof FORMATS)[number];
/** What an encoded result is: `auto` becomes one of these. */
export type EncodedFormat = Exclude<OutputFormat, 'auto'>;
/** The media type of each encoded result (zip: color.jpg and alpha.png in a ZIP file). */
export const MEDIA_TYPES: Readonly<Record<EncodedFormat, string>> = {
  png: 'image/png',
  jpg: 'image/jpeg',
  webp: 'image/webp',
  avif: 'image/avif',
  zip: 'application/zip',
};
/** keep_alpha: never, or auto (an image whose alpha is below 255 anywhere is its own matte). */
export const KEEP_ALPHA = ['never', 'auto'] as const;
/** metadata: what of the input's metadata the output carries (docs/contract.md, "Export and cutout"). */
export const METADATA = ['none', 'xmp', 'exif_subset', 'exif_subset_xmp'] as const;
/** color_space: srgb, or original (the input's ICC profile kept; a pure PNG cutout only). */
export const COLOR_SPACES = ['srgb', 'original'] as const;
export type MetadataMode = (typeof METADATA)[number];
export type ColorSpace = (typeof COLOR_SPACES)[number];
export type Channels = (typeof CHANNELS)[number];
export type SizePreset = (typeof SIZES)[number];
export type Effort = (typeof EFFORTS)[number];
export type Shadow = (typeof SHADOWS)[number];

export const MAX_FILE_BYTES = 20 * 1024 * 1024;
export const MAX_SIDE = 6000;
/** The most pixels of an exact canvas (output_size). */
export const MAX_CANVAS_PIXELS = 16_000_000;
/**
 * The longest base64 text of an image: 20 MB encoded, wrapped in lines of 76 characters ended by
 * CRLF (as MIME and most encoders write it), plus 64 KiB for a data: prefix and spaces.
 */
export const MAX_BASE64_LENGTH = Math.ceil((Math.ceil(MAX_FILE_BYTES / 3) * 4 * 78) / 76) + 64 * 1024;

/** Where an option is accepted. */
export type Carrier = 'form' | 'json' | 'cli' | 'batch' | 'library';

/** A length or offset: a share (of the subject's width, or of the image's side) and pixels. */
export interface Measure {
  share: number;
  px: number;
}

export interface OptionRow<T = unknown> {
  /** The API's name: form field, file part, JSON key, batch option. */
  readonly name: string;
  /** The library's key in RemoveBackgroundOptions (and the CLI's flag, spelt with dashes from `name`). */
  readonly key: string;
  /** A text field, or a file part of a multipart body (bytes in the library). */
  readonly part: 'field' | 'file';
  readonly carriers: readonly Carrier[];
  /** The longest text taken (a file part: its bytes). */
  readonly maxLength: number;
  /** The allowed values in words. */
  readonly values: string;
  /** The default in words ('' when leaving it out means "none"). */
  readonly default: string;
  readonly description: string;
  /** A value as a client would send it. */
  readonly example: string;
  /** The code of a value outside `values`. */
  readonly code: ErrorCode;
  /** JSON Schema of the text (OpenAPI). */
  readonly schema: Readonly<Record<string, unknown>>;
  /** The closed list of values, where there is one (a select on the try-it page). */
  readonly choices?: readonly string[];
  readonly parse: (value: unknown) => T | undefined;
}

function invalid(field: string, message: string, allowed?: unknown, code: ErrorCode = 'validation_error'): never {
  throw new BgoneError(code, message, allowed === undefined ? { field } : { field, allowed });
}

function absent(value: unknown): boolean {
  return value === undefined || value === null || value === '';
}

/** A string option's text, trimmed; anything else is a validation_error. */
function text(field: string, value: unknown): string {
  if (typeof value !== 'string') invalid(field, `${field} must be a string.`);
  return value.trim();
}

function oneOf<T extends string>(field: string, allowed: readonly T[]): (value: unknown) => T | undefined {
  return (value) => {
    if (absent(value)) return undefined;
    if (typeof value === 'string' && (allowed as readonly string[]).includes(value.trim().toLowerCase())) return value.trim().toLowerCase() as T;
    invalid(field, `${field} must be one of ${allowed.join(', ')}.`, allowed);
  };
}

function bytes(field: string): (value: unknown) => Buffer | undefined {
  return (value) => {
    if (value === undefined || value === null) return undefined;
    if (!(value instanceof Uint8Array)) invalid(field, `${field} must be a Buffer or Uint8Array.`);
    return Buffer.isBuffer(value) ? value : Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  };
}

function url(field: string): (value: unknown) => string | undefined {
  return (value) => {
    if (absent(value)) return undefined;
    const v = text(field, value);
    if (v.length > MAX_URL_LENGTH) invalid(field, `${field} is longer than ${MAX_URL_LENGTH} characters.`, undefined, 'invalid_image_url');
    return v;
  };
}

/**
 * An image's base64 that the service's transport decoded as it arrived (a JSON or urlencoded body,
 * src/http/text-form.ts, with the same rules as below): image_file_b64 takes its bytes as they are.
 * Not part of the package's interface.
 */
export class DecodedBase64 {
  constructor(readonly bytes: Buffer) {}
}

/** Base64 text, with or without a data: prefix; line breaks and spaces are skipped. */
const DATA_PREFIX = /^\s*data:[a-z0-9.+/-]*(?:;[a-z0-9=.+-]+)*;base64,/i;
/** Letters of either alphabet with whitespace between them, then at most two `=` (whitespace may follow). */
const BASE64 = /^[A-Za-z0-9+/\-_ \t\n\r\v\f]*(?:=[ \t\n\r\v\f]*){0,2}$/;

function base64(field: string): (value: unknown) => Buffer | undefined {
  return (value) => {
    if (absent(value)) return undefined;
    const decoded = value instanceof DecodedBase64 ? value.bytes : fromBase64(field, value);
    if (decoded.length === 0) throw new BgoneError('missing_image', `${field} is empty.`, { field });
    if (decoded.length > MAX_FILE_BYTES) throw new BgoneError('image_too_large', `${field} holds more than 20 MB.`, { field, limit_bytes: MAX_FILE_BYTES });
    return decoded;
  };
}

/** The bytes of base64 text, checked without a copy of it (Node's decoder skips the whitespace itself). */
function fromBase64(field: string, value: unknown): Buffer {
  if (typeof value !== 'string') invalid(field, `${field} must be a string.`);
  if (value.length > MAX_BASE64_LENGTH) {
    throw new BgoneError('image_too_large', `${field} is longer than 20 MB of image encoded in base64.`, { field, limit_bytes: MAX_FILE_BYTES });
  }
  const prefix = DATA_PREFIX.exec(value);
  const body = prefix ? value.slice(prefix[0].length) : value;
  if (!BASE64.test(body)) invalid(field, `${field} is not base64 text.`);
  let letters = 0;
  for (let i = 0; i < body.length; i++) {
    const c = body.charCodeAt(i);
    if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d && c !== 0x0b && c !== 0x0c) letters++;
  }
  if (letters % 4 === 1) invalid(field, `${field} is not base64 text.`);
  return Buffer.from(body, 'base64');
}

function parseCrop(value: unknown): { crop: 'none' | 'subject' | 'aspect'; aspectWidth: number; aspectHeight: number } | undefined {
  const none = { crop: 'none' as const, aspectWidth: 1, aspectHeight: 1 };
  if (absent(value)) return undefined;
  if (value === false) return none;
  if (value === true) return { ...none, crop: 'subject' };
  if (typeof value === 'string') {
    const v = value.trim().toLowerCase();
    if (v === 'false') return none;
    if (v === 'true') return { ...none, crop: 'subject' };
    const ratio = /^(\d{1,5}):(\d{1,5})$/.exec(v);
    if (ratio) {
      const w = Number(ratio[1]);
      const h = Number(ratio[2]);
      if (w > 0 && h > 0 && w / h <= 100 && h / w <= 100) return { crop: 'aspect', aspectWidth: w, aspectHeight: h };
    }
  }
  invalid('crop', 'crop must be true, false or an aspect ratio W:H of positive integers (at most 100:1).', ['true', 'false', 'W:H']);
}

/**
 * One padding value: a percentage of the subject's width from 0% to 100%, pixels from 0px to 6000px,
 * or a fraction from 0 to 1. The OpenAPI document publishes PADDING_PATTERN: this, 1, 2 or 4 times.
 */
const PADDING_PERCENT = '(?:100(?:\\.0+)?|0?\\d{1,2}(?:\\.\\d+)?)%';
const PADDING_PX = '(?:6000|[0-5]?\\d{1,3})px';
const PADDING_FRACTION = '(?:0(?:\\.\\d+)?|1(?:\\.0+)?|\\.\\d+)';
const PADDING_VALUE = `(?:${PADDING_PERCENT}|${PADDING_PX}|${PADDING_FRACTION})`;
export const PADDING_PATTERN = new RegExp(`^\\s*${PADDING_VALUE}(?:\\s+${PADDING_VALUE}(?:\\s+${PADDING_VALUE}\\s+${PADDING_VALUE})?)?\\s*$`);
const ONE_PADDING = new RegExp(`^${PADDING_VALUE}$`);
const PADDING_FORMS = ['<n>%', '<n>px', '0.<n>', 'one, two or four of them (top right bottom left)'];

function paddingValue(token: string): Measure | undefined {
  if (!ONE_PADDING.test(token)) return undefined;
  const v = token;
  if (v.endsWith('%')) return { share: Number(v.slice(0, -1)) / 100, px: 0 };
  if (v.endsWith('px')) return { share: 0, px: Number(v.slice(0, -2)) };
  return { share: Number(v), px: 0 };
}

/** Margins per side, top, right, bottom, left (CSS order: one value for all, two for vertical and horizontal). */
export type Padding = [Measure, Measure, Measure, Measure];

function parsePadding(value: unknown): Padding | undefined {
  if (absent(value)) return undefined;
  const fail = () =>
    invalid(
      'padding',
      'padding must be one, two or four values, each a percentage of the subject width (0% to 100%), pixels (0px to 6000px) or a fraction from 0 to 1, e.g. "10%" or "10px 20px".',
      PADDING_FORMS,
    );
  if (typeof value !== 'number' && typeof value !== 'string') fail();
  const tokens = typeof value === 'number' ? [String(value)] : (value as string).trim().split(/\s+/);
  if (![1, 2, 4].includes(tokens.length)) fail();
  const values = tokens.map(paddingValue);
  if (values.some((v) => v === undefined) || (typeof value === 'number' && !(value >= 0 && value <= 1))) fail();
  const [a, b, c, d] = values as Measure[];
  if (tokens.length === 1) return [a!, a!, a!, a!];
  if (tokens.length === 2) return [a!, b!, a!, b!];
  return [a!, b!, c!, d!];
}

/** scale: the share of the canvas the subject's box takes (its larger side ratio), or null for original. */
function parseScale(value: unknown): number | null | undefined {
  if (absent(value)) return undefined;
  const fail = () => invalid('scale', 'scale must be a percentage from 10% to 100%, or original.', ['10%..100%', 'original']);
  if (typeof value === 'number') return value >= 0.1 && value <= 1 ? value : fail();
  if (typeof value !== 'string') fail();
  const v = (value as string).trim().toLowerCase();
  if (v === 'original') return null;
  const m = /^(\d{1,3}(?:\.\d+)?)%$/.exec(v);
  if (!m || Number(m[1]) < 10 || Number(m[1]) > 100) fail();
  return Number(m![1]) / 100;
}

/** position: [x, y] shares of the free space (0.5 0.5 is centred), or null for original. */
function parsePosition(value: unknown): [number, number] | null | undefined {
  if (absent(value)) return undefined;
  const fail = () =>
    invalid('position', 'position must be original, center, or one or two percentages from 0% to 100% (horizontal, vertical).', [
      'original',
      'center',
      '<x>%',
      '<x>% <y>%',
    ]);
  if (typeof value !== 'string') fail();
  const v = (value as string).trim().toLowerCase();
  if (v === 'original') return null;
  if (v === 'center' || v === 'centre') return [0.5, 0.5];
  const parts = v.split(/\s+/);
  if (parts.length > 2) fail();
  const shares = parts.map((p) => {
    const m = /^(\d{1,3}(?:\.\d+)?)%$/.exec(p);
    return m && Number(m[1]) <= 100 ? Number(m[1]) / 100 : fail();
  });
  return [shares[0]!, shares[1] ?? shares[0]!];
}

/** output_size: an exact canvas, or one made from the image (after the roi) or from the subject's box. */
export type OutputSize = [number, number] | 'original' | 'subject';

function parseOutputSize(value: unknown): OutputSize | undefined {
  if (absent(value)) return undefined;
  if (typeof value === 'string' && ['original', 'subject'].includes(value.trim().toLowerCase())) return value.trim().toLowerCase() as 'original' | 'subject';
  const m = typeof value === 'string' ? /^\s*(\d{1,5})\s*x\s*(\d{1,5})\s*$/i.exec(value) : null;
  const w = Number(m?.[1]);
  const h = Number(m?.[2]);
  if (!m || w < 1 || h < 1 || w > MAX_SIDE || h > MAX_SIDE || w * h > MAX_CANVAS_PIXELS) {
    invalid('output_size', `output_size must be WxH, each side from 1 to ${MAX_SIDE} px and at most 16 MP in all (e.g. 1000x1000), original or subject.`, [
      '<w>x<h>',
      'original',
      'subject',
    ]);
  }
  return [w, h];
}

/** One value of margin or area_padding: a fraction from 0 to 0.49, a percentage from 0% to 49%, or pixels. */
const PLACEMENT_VALUE = `(?:(?:0?\\.\\d+|0)|(?:[0-4]?\\d(?:\\.\\d+)?)%|${PADDING_PX})`;
const PLACEMENT_PATTERN = new RegExp(`^\\s*${PLACEMENT_VALUE}(?:\\s+${PLACEMENT_VALUE}(?:\\s+${PLACEMENT_VALUE}\\s+${PLACEMENT_VALUE})?)?\\s*$`);

/** margin and area_padding: one, two or four values (CSS order), each a share of the side it is on (at most 0.49) or pixels. */
function parsePlacementBox(field: string, of: string): (value: unknown) => Padding | undefined {
  return (value) => {
    if (absent(value)) return undefined;
    const fail = () =>
      invalid(
        field,
        `${field} must be one, two or four values (top right bottom left), each a fraction from 0 to 0.49 or a percentage from 0% to 49% of ${of}, or pixels (0px to 6000px), e.g. "0.1" or "10% 5%".`,
        ['0.<n>', '<n>%', '<n>px', 'one, two or four of them (top right bottom left)'],
      );
    const text = typeof value === 'number' ? String(value) : typeof value === 'string' ? value : fail();
    if (!PLACEMENT_PATTERN.test(text as string)) fail();
    const tokens = (text as string).trim().split(/\s+/);
    const values = tokens.map(paddingValue) as Measure[];
    if (values.some((v) => v === undefined || v.share > 0.49)) fail();
    const [a, b, c, d] = values;
    if (tokens.length === 1) return [a!, a!, a!, a!];
    if (tokens.length === 2) return [a!, b!, a!, b!];
    return [a!, b!, c!, d!];
  };
}

/** max_width and max_height: whole pixels from 1 to MAX_SIDE. */
function parseMaxSide(field: string): (value: unknown) => number | undefined {
  return (value) => {
    if (absent(value)) return undefined;
    const n = typeof value === 'number' ? value : typeof value === 'string' && /^\s*\d{1,5}\s*$/.test(value) ? Number(value) : Number.NaN;
    if (!Number.isInteger(n) || n < 1 || n > MAX_SIDE) invalid(field, `${field} must be a whole number of pixels from 1 to ${MAX_SIDE}.`, [`1..${MAX_SIDE}`]);
    return n;
  };
}

/** A roi corner coordinate: pixels, or a share of the image's side. */
export type RoiValue = Measure;

function parseRoi(value: unknown): [RoiValue, RoiValue, RoiValue, RoiValue] | undefined {
  if (absent(value)) return undefined;
  const fail = () =>
    invalid(
      'roi',
      'roi must be four values x1 y1 x2 y2 (the box\'s top-left and bottom-right corners), each in px or %, e.g. "0% 0% 50% 100%".',
      ['<x1> <y1> <x2> <y2>'],
      'invalid_roi',
    );
  if (typeof value !== 'string') fail();
  const parts = (value as string).trim().toLowerCase().split(/\s+/);
  if (parts.length !== 4) fail();
  return parts.map((p) => {
    const m = /^(\d{1,5}(?:\.\d+)?)(px|%)$/.exec(p);
    if (!m) fail();
    return m![2] === '%' ? { share: Number(m![1]) / 100, px: 0 } : { share: 0, px: Number(m![1]) };
  }) as [RoiValue, RoiValue, RoiValue, RoiValue];
}

function parseBgColor(value: unknown): Rgba | undefined {
  if (absent(value)) return undefined;
  if (typeof value !== 'string') invalid('bg_color', 'bg_color must be a string.', COLOR_FORMS);
  return value.trim() === '' ? undefined : parseColor(value);
}

function parseBoolean(field: string): (value: unknown) => boolean | undefined {
  return (value) => {
    if (value === undefined || value === null) return undefined;
    if (typeof value !== 'boolean') invalid(field, `${field} must be a boolean.`);
    return value;
  };
}

/** A boolean option of a form (true or false in any case) or of the library and JSON (a boolean). */
function parseFlag(field: string): (value: unknown) => boolean | undefined {
  return (value) => {
    if (absent(value)) return undefined;
    if (typeof value === 'boolean') return value;
    if (typeof value === 'string') {
      const v = value.trim().toLowerCase();
      if (v === 'true' || v === 'false') return v === 'true';
    }
    invalid(field, `${field} must be true or false.`, ['true', 'false']);
  };
}

/** shadow_opacity: a percentage from 0% to 100%, or a fraction from 0 to 1 (the forms of one padding value but pixels). */
export const OPACITY_PATTERN = new RegExp(`^\\s*(?:${PADDING_PERCENT}|${PADDING_FRACTION})\\s*$`);

function parseShadowOpacity(value: unknown): number | undefined {
  if (absent(value)) return undefined;
  const fail = () => invalid('shadow_opacity', 'shadow_opacity must be a percentage from 0% to 100%, or a fraction from 0 to 1.', ['0%..100%', '0..1']);
  if (typeof value === 'number') return value >= 0 && value <= 1 ? value : fail();
  if (typeof value !== 'string' || !OPACITY_PATTERN.test(value)) fail();
  const v = (value as string).trim();
  return v.endsWith('%') ? Number(v.slice(0, -1)) / 100 : Number(v);
}

/** outline_color: a colour in the forms of bg_color. */
function parseOutlineColor(value: unknown): Rgba | undefined {
  if (absent(value)) return undefined;
  if (typeof value !== 'string') invalid('outline_color', 'outline_color must be a string.', COLOR_FORMS);
  return parseColor(value, 'outline_color');
}

/** A fraction below 1 as decimal text: 0, 0.03, .5 (the effects' shares of the result's larger side). */
export const FRACTION_PATTERN = /^\s*(?:0(?:\.\d+)?|\.\d+)\s*$/;

/** A share of the result's larger side: a number, or its decimal text, from min (excluded when `above`) to max. */
function parseShare(field: string, min: number, max: number, above = false): (value: unknown) => number | undefined {
  return (value) => {
    if (absent(value)) return undefined;
    const n = typeof value === 'number' ? value : typeof value === 'string' && FRACTION_PATTERN.test(value) ? Number(value) : Number.NaN;
    if (!(above ? n > min : n >= min) || !(n <= max))
      invalid(field, `${field} must be a fraction of the result's larger side, ${above ? 'above' : 'from'} ${min} ${above ? 'and at most' : 'to'} ${max}.`, [
        `${min}..${max}`,
      ]);
    return n;
  };
}

function parseModel(value: unknown): string | undefined {
  if (absent(value)) return undefined;
  if (typeof value !== 'string') invalid('model', 'model must be a string.');
  const name = value.trim();
  if (name.length > 64) invalid('model', 'model is longer than 64 characters.', undefined, 'model_unavailable');
  return name === '' ? undefined : name;
}

/** A whole number from `min` to `max`, as a number or its digits (quality, dpi). */
function parseWhole(field: string, min: number, max: number, what: string): (value: unknown) => number | undefined {
  return (value) => {
    if (absent(value)) return undefined;
    const n = typeof value === 'number' ? value : typeof value === 'string' && /^\s*\d{1,5}\s*$/.test(value) ? Number(value) : Number.NaN;
    if (!Number.isInteger(n) || n < min || n > max) invalid(field, `${field} must be a whole number from ${min} to ${max}${what}.`, [`${min}..${max}`]);
    return n;
  };
}

const ALL: readonly Carrier[] = ['form', 'json', 'cli', 'batch', 'library'];
const PERCENT_OR_PX = '(?:\\d{1,5}(?:\\.\\d+)?)(?:px|%)';

/**
 * The options, in the order the docs list them. Each is typed by its parser; OPTION_TABLE is the
 * same rows as a list.
 */
export const OPTIONS = {
  imageFile: {
    name: 'image_file',
    key: 'imageFile',
    part: 'file',
    carriers: ['form', 'library'],
    maxLength: MAX_FILE_BYTES,
    values: 'a JPG, PNG or WebP file, at most 20 MB and 6000 px per side',
    default: '',
    description: 'The image, as a file part. Exactly one of image_file, image_url and image_file_b64.',
    example: '@photo.jpg',
    code: 'missing_image',
    schema: { type: 'string', format: 'binary' },
    parse: bytes('image_file'),
  },
  imageUrl: {
    name: 'image_url',
    key: 'imageUrl',
    part: 'field',
    carriers: ['form', 'json', 'library'],
    maxLength: MAX_URL_LENGTH,
    values: 'an http or https URL of a JPG, PNG or WebP image (at most 20 MB, downloaded within 10 s)',
    default: '',
    description: 'The image, downloaded from this URL.',
    example: 'https://example.com/photo.jpg',
    code: 'invalid_image_url',
    schema: { type: 'string', format: 'uri', maxLength: MAX_URL_LENGTH },
    parse: url('image_url'),
  },
  imageFileB64: {
    name: 'image_file_b64',
    key: 'imageFileB64',
    part: 'field',
    carriers: ['form', 'json', 'library'],
    maxLength: MAX_BASE64_LENGTH,
    values: 'the image in base64, with or without a data: prefix',
    default: '',
    description: 'The image, as base64 text.',
    example: 'iVBORw0KGgoAAAANSUhEUgAA',
    code: 'validation_error',
    schema: { type: 'string', contentEncoding: 'base64', maxLength: MAX_BASE64_LENGTH },
    parse: base64('image_file_b64'),
  },
  format: {
    name: 'format',
    key: 'format',
    part: 'field',
    carriers: ALL,
    maxLength: 16,
    values:
      "png, jpg, webp, avif (AV1 in HEIF, with alpha), zip (color.jpg and alpha.png in a ZIP, remove.bg's layout), auto (PNG when the result has any transparency, else JPG)",
    default: 'png',
    description: "The result's file format.",
    example: 'auto',
    code: 'validation_error',
    schema: { type: 'string', enum: [...FORMATS], default: 'png' },
    choices: FORMATS,
    parse: oneOf('format', FORMATS),
  },
  channels: {
    name: 'channels',
    key: 'channels',
    part: 'field',
    carriers: ALL,
    maxLength: 16,
    values: 'rgba (the cut-out), alpha (a greyscale mask)',
    default: 'rgba',
    description: 'The cut-out, or its mask alone.',
    example: 'alpha',
    code: 'validation_error',
    schema: { type: 'string', enum: [...CHANNELS], default: 'rgba' },
    choices: CHANNELS,
    parse: oneOf('channels', CHANNELS),
  },
  // Export and cutout: quality, dpi, remove_background, keep_alpha (options.ts exportAndCutoutOf).
  quality: {
    name: 'quality',
    key: 'quality',
    part: 'field',
    carriers: ALL,
    maxLength: 8,
    values: '1 to 100; with format jpg, webp, avif, zip (its color.jpg) or auto (when it gives JPG), not png',
    default: '90',
    description: "The lossy encoders' quality: higher is larger and closer to the original.",
    example: '80',
    code: 'validation_error',
    schema: { type: 'string', pattern: '^[0-9]{1,3}$', default: '90' },
    parse: parseWhole('quality', 1, 100, ''),
  },
  dpi: {
    name: 'dpi',
    key: 'dpi',
    part: 'field',
    carriers: ALL,
    maxLength: 8,
    values: '72 to 1200 (dots per inch)',
    default: "the encoder's (none for PNG, WebP and AVIF)",
    description:
      "The pixel density written into the file: PNG's pHYs chunk, JPEG's JFIF header, WebP's and AVIF's EXIF resolution (the only metadata written).",
    example: '300',
    code: 'validation_error',
    schema: { type: 'string', pattern: '^[0-9]{2,4}$' },
    parse: parseWhole('dpi', 72, 1200, ' (dots per inch)'),
  },
  removeBackground: {
    name: 'remove_background',
    key: 'removeBackground',
    part: 'field',
    carriers: ALL,
    maxLength: 8,
    values: 'true, false (no model runs: the whole photo, with its own transparency, is the subject)',
    default: 'true',
    description:
      "With false, only the layout, the background and the export, on the photo itself: its own alpha (opaque without one) is the matte; the effects that need the model's matte are refused.",
    example: 'false',
    code: 'validation_error',
    schema: { type: 'string', enum: ['true', 'false'], default: 'true' },
    choices: ['true', 'false'],
    parse: parseFlag('remove_background'),
  },
  keepAlpha: {
    name: 'keep_alpha',
    key: 'keepAlpha',
    part: 'field',
    carriers: ALL,
    maxLength: 8,
    values: 'never, auto (a PNG or WebP whose alpha is below 255 anywhere is its own matte: no model runs)',
    default: 'never',
    description: 'With auto, an image that already has transparency keeps exactly its alpha as the matte; any other image is cut out by the model.',
    example: 'auto',
    code: 'validation_error',
    schema: { type: 'string', enum: [...KEEP_ALPHA], default: 'never' },
    choices: KEEP_ALPHA,
    parse: oneOf('keep_alpha', KEEP_ALPHA),
  },
  metadata: {
    name: 'metadata',
    key: 'metadata',
    part: 'field',
    carriers: ALL,
    maxLength: 16,
    values:
      "none; xmp (the input's XMP packet); exif_subset (its EXIF Copyright and UserComment, nothing else); exif_subset_xmp (the same, also as XMP dc:rights and exif:UserComment)",
    default: 'none',
    description:
      "The input's metadata kept in the output; with none, the output carries none of it (only what dpi writes). An input without it: nothing written.",
    example: 'xmp',
    code: 'validation_error',
    schema: { type: 'string', enum: [...METADATA], default: 'none' },
    choices: METADATA,
    parse: oneOf('metadata', METADATA),
  },
  colorSpace: {
    name: 'color_space',
    key: 'colorSpace',
    part: 'field',
    carriers: ALL,
    maxLength: 16,
    values: "srgb, original (the input's RGB ICC profile kept in a PNG; only for a plain cutout to PNG)",
    default: 'srgb',
    description:
      "With original, the input's ICC profile is written into the PNG (iCCP) and its pixels are left in that colour space; any other operation or format beside it is refused.",
    example: 'original',
    code: 'validation_error',
    schema: { type: 'string', enum: [...COLOR_SPACES], default: 'srgb' },
    choices: COLOR_SPACES,
    parse: oneOf('color_space', COLOR_SPACES),
  },
  size: {
    name: 'size',
    key: 'size',
    part: 'field',
    carriers: ALL,
    maxLength: 16,
    values: 'preview (0.25 MP), medium (1.5 MP), hd (4 MP), full (up to 16 MP)',
    default: 'full',
    description: 'The largest result, in pixels; never upscaled. Ignored with output_size.',
    example: 'hd',
    code: 'validation_error',
    schema: { type: 'string', enum: [...SIZES], default: 'full' },
    choices: SIZES,
    parse: oneOf('size', SIZES),
  },
  effort: {
    name: 'effort',
    key: 'effort',
    part: 'field',
    carriers: ALL,
    maxLength: 16,
    values: 'standard, best (about twice the time, still one credit)',
    default: 'standard',
    description:
      'How much inference the matte gets: best also runs the model on the mirrored image and keeps, per pixel, the larger of the two answers: closer edges, about twice the time (docs/quality.md).',
    example: 'best',
    code: 'validation_error',
    schema: { type: 'string', enum: [...EFFORTS], default: 'standard' },
    choices: EFFORTS,
    parse: oneOf('effort', EFFORTS),
  },
  bgColor: {
    name: 'bg_color',
    key: 'bgColor',
    part: 'field',
    carriers: ALL,
    maxLength: 256,
    values: '#RGB, #RRGGBB, #RRGGBBAA (with or without #), rgb(r, g, b) or a CSS colour name',
    default: 'transparent (white for jpg)',
    description: 'A colour behind the subject.',
    example: '#ffffff',
    code: 'validation_error',
    schema: { type: 'string', maxLength: 256 },
    parse: parseBgColor,
  },
  bgImageFile: {
    name: 'bg_image_file',
    key: 'bgImageFile',
    part: 'file',
    carriers: ['form', 'cli', 'batch', 'library'],
    maxLength: MAX_FILE_BYTES,
    values: 'a JPG, PNG or WebP file, at most 20 MB and 6000 px per side',
    default: '',
    description: 'An image behind the subject, scaled to cover the result (centred, aspect ratio kept). At most one of bg_color, bg_image_file, bg_image_url.',
    example: '@background.jpg',
    code: 'validation_error',
    schema: { type: 'string', format: 'binary' },
    parse: bytes('bg_image_file'),
  },
  bgImageUrl: {
    name: 'bg_image_url',
    key: 'bgImageUrl',
    part: 'field',
    carriers: ALL,
    maxLength: MAX_URL_LENGTH,
    values: 'an http or https URL of a JPG, PNG or WebP image (at most 20 MB, downloaded within 10 s)',
    default: '',
    description: 'An image behind the subject, downloaded from this URL, as bg_image_file.',
    example: 'https://example.com/background.jpg',
    code: 'invalid_image_url',
    schema: { type: 'string', format: 'uri', maxLength: MAX_URL_LENGTH },
    parse: url('bg_image_url'),
  },
  // The background's effects: the image's fit, the blurred original (native/bg_blur.h).
  bgFit: {
    name: 'bg_fit',
    key: 'bgFit',
    part: 'field',
    carriers: ALL,
    maxLength: 8,
    values: 'cover, contain; only with bg_image_file or bg_image_url',
    default: 'cover',
    description:
      'How the background image is scaled to the result: covering it (centred, what overflows cut off), or fitted inside it (centred, the rest transparent).',
    example: 'contain',
    code: 'validation_error',
    schema: { type: 'string', enum: ['cover', 'contain'], default: 'cover' },
    choices: ['cover', 'contain'],
    parse: oneOf('bg_fit', ['cover', 'contain'] as const),
  },
  bgBlur: {
    name: 'bg_blur',
    key: 'bgBlur',
    part: 'field',
    carriers: ALL,
    maxLength: 16,
    values: "a fraction above 0 and at most 0.05 of the result's larger side; not with bg_color, bg_image_file, bg_image_url or channels=alpha",
    default: '',
    description:
      "The original photo, placed as the subject is (its edge repeated where the result reaches past it), blurred behind the sharp subject: the blur's standard deviation (gaussian) or half its disc's radius (bokeh).",
    example: '0.01',
    code: 'validation_error',
    schema: { type: 'string', pattern: FRACTION_PATTERN.source },
    parse: parseShare('bg_blur', 0, 0.05, true),
  },
  bgBlurMode: {
    name: 'bg_blur_mode',
    key: 'bgBlurMode',
    part: 'field',
    carriers: ALL,
    maxLength: 16,
    values: 'gaussian, bokeh (a flat disc); only with bg_blur',
    default: 'gaussian',
    description: "The blur's kernel: a Gaussian, or a flat disc of twice bg_blur's radius (the same spread, a lens's look).",
    example: 'bokeh',
    code: 'validation_error',
    schema: { type: 'string', enum: ['gaussian', 'bokeh'], default: 'gaussian' },
    choices: ['gaussian', 'bokeh'],
    parse: oneOf('bg_blur_mode', ['gaussian', 'bokeh'] as const),
  },
  crop: {
    name: 'crop',
    key: 'crop',
    part: 'field',
    carriers: ALL,
    maxLength: 16,
    values: 'true (to the subject), false, or an aspect ratio W:H centred on the subject',
    default: 'false',
    description: 'Crops the result to the subject and its padding.',
    example: '1:1',
    code: 'validation_error',
    schema: { type: 'string', pattern: '^(true|false|[0-9]{1,5}:[0-9]{1,5})$', default: 'false' },
    parse: parseCrop,
  },
  padding: {
    name: 'padding',
    key: 'padding',
    part: 'field',
    carriers: ALL,
    maxLength: 64,
    values: "one, two or four values (CSS order: top right bottom left), each n% of the subject's width, npx, or a fraction 0..1",
    default: '10%',
    description: 'The margins around the subject when cropping.',
    example: '10px 20px 30px 40px',
    code: 'validation_error',
    schema: { type: 'string', pattern: PADDING_PATTERN.source, default: '10%' },
    parse: parsePadding,
  },
  scale: {
    name: 'scale',
    key: 'scale',
    part: 'field',
    carriers: ALL,
    maxLength: 16,
    values: '10% to 100%, or original',
    default: 'original',
    description: 'Resizes the subject so that the larger of its width and height ratios to the result is this share.',
    example: '50%',
    code: 'validation_error',
    schema: { type: 'string', pattern: '^(original|[0-9]{1,3}(\\.[0-9]+)?%)$', default: 'original' },
    parse: parseScale,
  },
  position: {
    name: 'position',
    key: 'position',
    part: 'field',
    carriers: ALL,
    maxLength: 32,
    values: 'original, center, or one or two percentages (horizontal, vertical) of the free space',
    default: 'original; center once scale or output_size is set',
    description: 'Where the subject (with scale) or the cut-out (with output_size) sits in the result.',
    example: 'center',
    code: 'validation_error',
    schema: { type: 'string', pattern: '^(original|center|centre|[0-9]{1,3}(\\.[0-9]+)?%(\\s+[0-9]{1,3}(\\.[0-9]+)?%)?)$', default: 'original' },
    parse: parsePosition,
  },
  outputSize: {
    name: 'output_size',
    key: 'outputSize',
    part: 'field',
    carriers: ALL,
    maxLength: 16,
    values: "WxH (each side 1 to 6000 px, at most 16 MP), original (the image, after roi) or subject (the subject's box)",
    default: '',
    description:
      'The size of the result. WxH alone: the cut-out (cropped when crop is set) fitted inside it and placed by position. With the placement options, or original or subject: the canvas they place the subject on.',
    example: '1000x1000',
    code: 'validation_error',
    schema: { type: 'string', pattern: '^([0-9]{1,4}[xX][0-9]{1,4}|original|subject)$' },
    parse: parseOutputSize,
  },
  maxWidth: {
    name: 'max_width',
    key: 'maxWidth',
    part: 'field',
    carriers: ALL,
    maxLength: 8,
    values: '1 to 6000 (px); with output_size=original or subject',
    default: '',
    description: 'The most the result is wide: the canvas shrinks to it, keeping its ratio.',
    example: '800',
    code: 'validation_error',
    schema: { type: 'string', pattern: '^[0-9]{1,4}$' },
    parse: parseMaxSide('max_width'),
  },
  maxHeight: {
    name: 'max_height',
    key: 'maxHeight',
    part: 'field',
    carriers: ALL,
    maxLength: 8,
    values: '1 to 6000 (px); with output_size=original or subject',
    default: '',
    description: 'The most the result is high: the canvas shrinks to it, keeping its ratio.',
    example: '800',
    code: 'validation_error',
    schema: { type: 'string', pattern: '^[0-9]{1,4}$' },
    parse: parseMaxSide('max_height'),
  },
  margin: {
    name: 'margin',
    key: 'margin',
    part: 'field',
    carriers: ALL,
    maxLength: 64,
    values:
      "one, two or four values (top right bottom left), each a fraction 0..0.49 or n% (0-49) of the result's height (top, bottom) or width (right, left), or npx",
    default: '0',
    description: 'Placement: the empty border of the result, never crossed.',
    example: '5% 10%',
    code: 'validation_error',
    schema: { type: 'string', pattern: PLACEMENT_PATTERN.source, default: '0' },
    parse: parsePlacementBox('margin', "the result's side"),
  },
  areaPadding: {
    name: 'area_padding',
    key: 'areaPadding',
    part: 'field',
    carriers: ALL,
    maxLength: 64,
    values: 'as margin, of the side of the result less its margins',
    default: '0',
    description:
      "Placement: the space between the margins and the area the subject is fitted in; a side where the photo's edge cuts the subject drops it when that axis snaps.",
    example: '0.1',
    code: 'validation_error',
    schema: { type: 'string', pattern: PLACEMENT_PATTERN.source, default: '0' },
    parse: parsePlacementBox('area_padding', 'the side less its margins'),
  },
  fit: {
    name: 'fit',
    key: 'fit',
    part: 'field',
    carriers: ALL,
    maxLength: 8,
    values: 'contain, cover',
    default: 'contain',
    description: 'Placement: the reference box fitted inside the area (contain) or covering it (cover, what overflows the result is cut off).',
    example: 'cover',
    code: 'validation_error',
    schema: { type: 'string', enum: ['contain', 'cover'], default: 'contain' },
    choices: ['contain', 'cover'],
    parse: oneOf('fit', ['contain', 'cover'] as const),
  },
  snap: {
    name: 'snap',
    key: 'snap',
    part: 'field',
    carriers: ALL,
    maxLength: 16,
    values: 'none, both, horizontal, vertical',
    default: 'none',
    description:
      "Placement: on these axes, a side where the photo's edge cuts the subject (a portrait cut at the waist) keeps no area padding and the subject sits on the margin there.",
    example: 'both',
    code: 'validation_error',
    schema: { type: 'string', enum: ['none', 'both', 'horizontal', 'vertical'], default: 'none' },
    choices: ['none', 'both', 'horizontal', 'vertical'],
    parse: oneOf('snap', ['none', 'both', 'horizontal', 'vertical'] as const),
  },
  referenceBox: {
    name: 'reference_box',
    key: 'referenceBox',
    part: 'field',
    carriers: ALL,
    maxLength: 8,
    values: 'subject, image',
    default: 'subject',
    description: "Placement: what is fitted into the area, the subject's box or the whole image (the subject keeps its place in it).",
    example: 'image',
    code: 'validation_error',
    schema: { type: 'string', enum: ['subject', 'image'], default: 'subject' },
    choices: ['subject', 'image'],
    parse: oneOf('reference_box', ['subject', 'image'] as const),
  },
  roi: {
    name: 'roi',
    key: 'roi',
    part: 'field',
    carriers: ALL,
    maxLength: 64,
    values: 'x1 y1 x2 y2 (top-left and bottom-right corners), each in px or % of the image',
    default: '0% 0% 100% 100%',
    description: 'The region of interest: the subject is looked for only inside it; the result is transparent outside it.',
    example: '0% 0% 50% 100%',
    code: 'invalid_roi',
    schema: { type: 'string', pattern: `^${PERCENT_OR_PX}(\\s+${PERCENT_OR_PX}){3}$` },
    parse: parseRoi,
  },
  shadow: {
    name: 'shadow',
    key: 'shadow',
    part: 'field',
    carriers: ALL,
    maxLength: 16,
    values: "none, drop (the subject's shadow moved down and right, blurred), contact (a soft shadow on the ground under the subject's base: an approximation)",
    default: 'none',
    description: 'A black shadow under the subject, between it and the background; clipped at the edge of the result, which keeps its size.',
    example: 'drop',
    code: 'validation_error',
    schema: { type: 'string', enum: [...SHADOWS], default: 'none' },
    choices: SHADOWS,
    parse: oneOf('shadow', SHADOWS),
  },
  shadowOpacity: {
    name: 'shadow_opacity',
    key: 'shadowOpacity',
    part: 'field',
    carriers: ALL,
    maxLength: 16,
    values: '0% to 100%, or a fraction 0..1; only with shadow drop or contact',
    default: '50%',
    description: "The shadow's opacity.",
    example: '60%',
    code: 'validation_error',
    schema: { type: 'string', pattern: OPACITY_PATTERN.source, default: '50%' },
    parse: parseShadowOpacity,
  },
  // The outline under the subject (native/outline.h).
  outlineColor: {
    name: 'outline_color',
    key: 'outlineColor',
    part: 'field',
    carriers: ALL,
    maxLength: 256,
    values: 'a colour in the forms of bg_color; not with channels=alpha',
    default: '',
    description: 'A sticker outline of this colour under the subject: the subject dilated by outline_width, between it and the background.',
    example: '#ffffff',
    code: 'validation_error',
    schema: { type: 'string', maxLength: 256 },
    parse: parseOutlineColor,
  },
  outlineWidth: {
    name: 'outline_width',
    key: 'outlineWidth',
    part: 'field',
    carriers: ALL,
    maxLength: 16,
    values: "a fraction 0..0.1 of the result's larger side; only with outline_color",
    default: '0.03',
    description: "The outline's width, from the subject's edge to its own; its corners round.",
    example: '0.05',
    code: 'validation_error',
    schema: { type: 'string', pattern: FRACTION_PATTERN.source, default: '0.03' },
    parse: parseShare('outline_width', 0, 0.1),
  },
  outlineBlur: {
    name: 'outline_blur',
    key: 'outlineBlur',
    part: 'field',
    carriers: ALL,
    maxLength: 16,
    values: "a fraction 0..0.025 of the result's larger side; only with outline_color",
    default: '0',
    description: "The blur of the outline's outer edge (a Gaussian's standard deviation); 0: a crisp edge, antialiased.",
    example: '0.005',
    code: 'validation_error',
    schema: { type: 'string', pattern: FRACTION_PATTERN.source, default: '0' },
    parse: parseShare('outline_blur', 0, 0.025),
  },
  semitransparency: {
    name: 'semitransparency',
    key: 'semitransparency',
    part: 'field',
    carriers: ALL,
    maxLength: 8,
    values: 'true, false (what is semi-transparent inside the subject, such as glass, made opaque)',
    default: 'true',
    description: "Whether semi-transparent parts inside the subject (a car's windows, glass) stay semi-transparent; the outer edge stays soft either way.",
    example: 'false',
    code: 'validation_error',
    schema: { type: 'string', enum: ['true', 'false'], default: 'true' },
    choices: ['true', 'false'],
    parse: parseFlag('semitransparency'),
  },
  despill: {
    name: 'despill',
    key: 'despill',
    part: 'field',
    carriers: ALL,
    maxLength: 8,
    values: 'false, true',
    default: 'false',
    description: "Takes a green or blue screen's colour spill off the subject's edges; nothing changes on other backgrounds.",
    example: 'true',
    code: 'validation_error',
    schema: { type: 'string', enum: ['false', 'true'], default: 'false' },
    choices: ['false', 'true'],
    parse: parseFlag('despill'),
  },
  refine: {
    name: 'refine',
    key: 'refine',
    part: 'field',
    carriers: ['library'],
    maxLength: 8,
    values: 'true, false',
    default: 'true',
    description: 'Edge-aware matte refinement and foreground colour estimation.',
    example: 'false',
    code: 'validation_error',
    schema: { type: 'boolean', default: true },
    parse: parseBoolean('refine'),
  },
  model: {
    name: 'model',
    key: 'model',
    part: 'field',
    carriers: ALL,
    maxLength: 64,
    values: 'an installed model the server allows (BGONE_MODELS_ALLOWED)',
    default: "the server's default model",
    description: 'The model that runs; X-Model on the answer names it.',
    example: 'medium',
    code: 'model_unavailable',
    schema: { type: 'string' },
    parse: parseModel,
  },
} as const satisfies Record<string, OptionRow>;

export type OptionKey = keyof typeof OPTIONS;
export type OptionName = (typeof OPTIONS)[OptionKey]['name'];
/** Each option's parsed value (undefined: left out). */
export type ParsedOptions = { [K in OptionKey]: ReturnType<(typeof OPTIONS)[K]['parse']> };

export const OPTION_TABLE: readonly OptionRow[] = Object.values(OPTIONS);

/** The rows a carrier takes. */
export function optionsFor(carrier: Carrier): OptionRow[] {
  return OPTION_TABLE.filter((row) => row.carriers.includes(carrier));
}

/** The row of an API name, if any. */
export function optionByName(name: string): OptionRow | undefined {
  return OPTION_TABLE.find((row) => row.name === name);
}

/** The CLI's flag of a row: its API name with dashes. */
export function cliFlag(row: OptionRow): string {
  return row.name.replaceAll('_', '-');
}

/** The source rows: exactly one of them carries the image. */
export const SOURCE_KEYS = ['imageFile', 'imageUrl', 'imageFileB64'] as const satisfies readonly OptionKey[];
/** The background rows: at most one of them. */
export const BACKGROUND_KEYS = ['bgColor', 'bgImageFile', 'bgImageUrl'] as const satisfies readonly OptionKey[];

/**
 * Parses every option of `input` (library keys) by its row; a key that is no row's is a
 * validation_error naming it. Cross-option rules are the caller's.
 */
export function parseOptions(input: Record<string, unknown>): ParsedOptions {
  const parsed: Record<string, unknown> = {};
  for (const key of Object.keys(input)) {
    if (!Object.hasOwn(OPTIONS, key)) {
      const allowed = optionsFor('library').map((row) => row.key);
      throw new BgoneError('validation_error', `${key} is not an option (${allowed.join(', ')}).`, { field: key, allowed });
    }
  }
  for (const [key, row] of Object.entries(OPTIONS) as Array<[OptionKey, OptionRow]>) parsed[key] = row.parse(input[key]);
  return parsed as ParsedOptions;
}

/** Library options from API-named values (a form, a JSON body, a batch's stored options). */
export function optionsFromNames(values: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const options: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(values)) {
    const row = optionByName(name);
    options[row ? row.key : name] = value;
  }
  return options;
}
