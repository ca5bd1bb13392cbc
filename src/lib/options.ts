/**
 * Validation and normalisation of the processing options, shared by the library API, the HTTP
 * service and the CLI. The service's form fields arrive as strings; the library also accepts
 * booleans and numbers. Every value outside the spec is a validation_error naming the field and its
 * allowed values: nothing is silently ignored. The result is the one flat object the addon reads,
 * with every field set: the defaults live here (DEFAULTS, TUNING), and the C++ side has none.
 */
import { COLOR_FORMS, parseColor, type Rgba } from './colors.js';
import { BgoneError } from './errors.js';

export { parseColor } from './colors.js';

export const FORMATS = ['png', 'jpg', 'webp'] as const;
export const CHANNELS = ['rgba', 'alpha'] as const;
export const SIZES = ['preview', 'medium', 'hd', 'full'] as const;
export type OutputFormat = (typeof FORMATS)[number];
/** What the native core is asked for: a format, or auto (PNG where the output has transparency, else JPG). */
export type NativeFormat = OutputFormat | 'auto';
export type Channels = (typeof CHANNELS)[number];
export type SizePreset = (typeof SIZES)[number];

/** Pixel budget of each size preset (docs/contract.md): the output is scaled down to fit, never up. */
export const SIZE_PIXELS: Record<SizePreset, number> = {
  preview: 250_000,
  medium: 1_500_000,
  hd: 4_000_000,
  full: 16_000_000,
};

export const MAX_FILE_BYTES = 20 * 1024 * 1024;
export const MAX_SIDE = 6000;

/** What each public option means when it is left out (undefined, null or ''). */
const DEFAULTS = {
  format: 'png',
  channels: 'rgba',
  size: 'full',
  /** A share of the subject width, on each side, when cropping. */
  padding: 0.1,
  refine: true,
} as const satisfies { format: OutputFormat; channels: Channels; size: SizePreset; padding: number; refine: boolean };

/**
 * Internal knobs of the native pipeline, not options of the API. The refinement values were chosen
 * with bench/quality (which can override them); the others are output and detection settings.
 */
export const TUNING = {
  /** Guided filter radius at a 1024² inference (scaled with the inference size, inference-size.ts). */
  guidedRadius: 6,
  guidedEps: 1e-3,
  /** Refined alpha below levelsLow becomes 0, above levelsHigh 1, linear between: removes faint haze. */
  levelsLow: 0.1,
  levelsHigh: 0.9,
  /** Share of the mask that must be subject, else foreground_not_found. */
  minSubject: 1e-4,
  /**
   * Test-time augmentation: the matte becomes the average of the model's answers for the image and its
   * mirror (twice the inference). Off: on the dev set it lost 0.009 IoU and 0.015 boundary F with the
   * int8 model (better on davis_ and gc_, worse on the soft am_ mattes); bench/quality variant "flip".
   */
  flipAverage: false,
  /** Side of the model's square input; removeBackground lowers it for small outputs (inference-size.ts). */
  inferenceSize: 1024,
  /** JPEG and WebP quality. */
  quality: 90,
  /**
   * PNG deflate level (0-9): 1 is bgone's own fast encoder (native/png_deflate.cc), the others zlib's
   * levels; rows are written with the "up" filter (native/png_writer.cc).
   */
  pngCompression: 1,
};

export interface RemoveBackgroundOptions {
  /** png (default), jpg or webp. */
  format?: OutputFormat | string;
  /** rgba (default): the cut-out; alpha: a one-channel greyscale mask. */
  channels?: Channels | string;
  /** #RGB, #RRGGBB, #RRGGBBAA (with or without #), rgb(r, g, b), or a CSS colour name. */
  bgColor?: string | null;
  /** preview (0.25 MP), medium (1.5 MP), hd (4 MP), full (default, up to 16 MP). */
  size?: SizePreset | string;
  /** false (default), true (crop to the subject), or an aspect ratio "W:H" centred on the subject. */
  crop?: boolean | string;
  /** Margin around the cropped subject as a share of its width: "10%", "0.1" or 0.1. Default 10 %. */
  padding?: string | number;
  /** Model name from models/manifest.json; default: the manifest's default. */
  model?: string;
  /** Edge-aware matte refinement and foreground colour estimation (default true). */
  refine?: boolean;
}

/**
 * What crosses into C++: every field is required, and native/addon.cc read_options reads each one
 * (a missing, mistyped or extra field is a TypeError there, never a default).
 */
export interface NativeOptions extends Readonly<typeof TUNING> {
  /** auto: PNG where any pixel of the output has alpha below 255 (always for channels=alpha), else JPG. */
  format: NativeFormat;
  channels: Channels;
  /** bg_color as RGBA, or null: transparent (or white for JPEG). Always null for channels=alpha. */
  background: Rgba | null;
  maxPixels: number;
  crop: 'none' | 'subject' | 'aspect';
  /** The W:H of crop=aspect; 1:1 otherwise (unused then, but always valid). */
  aspectWidth: number;
  aspectHeight: number;
  /** The crop's margin per side [top, right, bottom, left]: round(share × subject width) + px (source pixels). */
  paddingShare: [number, number, number, number];
  paddingPx: [number, number, number, number];
  /** 0: the subject keeps its size; else 0.1..1, its box's larger share of the canvas (width or height). */
  scale: number;
  /** null: "original"; else [x, y] in 0..1: the placed thing's left at x × (room left), top at y × (room left). */
  position: [number, number] | null;
  /** 0, 0: not set; else the exact output size (the size preset does not apply). */
  canvasWidth: number;
  canvasHeight: number;
  /** The region the subject is looked for in, [x0, y0, x1, y1] image pixels (x1, y1 exclusive); outside it alpha is 0. */
  roi: [number, number, number, number] | null;
  maxSide: number;
  refine: boolean;
}

function invalid(field: string, message: string, allowed?: unknown): never {
  throw new BgoneError('validation_error', message, allowed === undefined ? { field } : { field, allowed });
}

function oneOf<T extends string>(field: string, value: unknown, allowed: readonly T[], fallback: T): T {
  if (value === undefined || value === null || value === '') return fallback;
  if (typeof value === 'string' && (allowed as readonly string[]).includes(value.trim().toLowerCase())) {
    return value.trim().toLowerCase() as T;
  }
  invalid(field, `${field} must be one of ${allowed.join(', ')}.`, allowed);
}

function parseCrop(value: unknown): Pick<NativeOptions, 'crop' | 'aspectWidth' | 'aspectHeight'> {
  const none = { crop: 'none' as const, aspectWidth: 1, aspectHeight: 1 };
  if (value === undefined || value === null || value === false || value === '') return none;
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
 * Every padding text accepted: a percentage from 0% to 100% (up to 3 digits before the point), or a
 * fraction from 0 to 1. The OpenAPI document publishes this very pattern.
 */
export const PADDING_PATTERN = /^(?:(\d{1,2}(?:\.\d+)?|0\d{2}(?:\.\d+)?|100(?:\.0+)?)%|0(?:\.\d+)?|1(?:\.0+)?|\.\d+)$/;

function parsePadding(value: unknown): number | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  let fraction = NaN;
  if (typeof value === 'number') fraction = value;
  else if (typeof value === 'string') {
    const v = value.trim();
    const match = PADDING_PATTERN.exec(v);
    if (match) fraction = match[1] === undefined ? Number(v) : Number(match[1]) / 100;
  }
  if (!Number.isFinite(fraction) || fraction < 0 || fraction > 1) {
    invalid('padding', 'padding must be a percentage between 0% and 100% (e.g. 10%) or a fraction between 0 and 1 (e.g. 0.1).', ['<n>%', '0.<n>']);
  }
  return fraction;
}

export interface NormalisedOptions {
  native: NativeOptions;
  model: string | undefined;
}

/**
 * Every object normaliseOptions returned: prepareJob takes one of these as it is, so that a batch's
 * options are validated once for all its images. A look-alike built by hand is not in it, and is
 * validated as public options.
 */
const normalisedResults = new WeakSet<object>();

/** Whether `options` came from normaliseOptions (and need no validation again). */
export function isNormalised(options: unknown): options is NormalisedOptions {
  return typeof options === 'object' && options !== null && normalisedResults.has(options);
}

/** Validates public options; throws BgoneError('validation_error') naming the field. */
export function normaliseOptions(options: RemoveBackgroundOptions = {}): NormalisedOptions {
  if (options === null || typeof options !== 'object') invalid('options', 'options must be an object.');
  const format = oneOf('format', options.format, FORMATS, DEFAULTS.format);
  const channels = oneOf('channels', options.channels, CHANNELS, DEFAULTS.channels);
  const size = oneOf('size', options.size, SIZES, DEFAULTS.size);
  const crop = parseCrop(options.crop);
  const padding = parsePadding(options.padding);
  const bg = options.bgColor;
  if (bg !== undefined && bg !== null && typeof bg !== 'string') invalid('bg_color', 'bg_color must be a string.', COLOR_FORMS);
  const background = typeof bg === 'string' && bg.trim() !== '' ? parseColor(bg) : undefined;
  if (options.refine !== undefined && typeof options.refine !== 'boolean') invalid('refine', 'refine must be a boolean.');
  if (options.model !== undefined && typeof options.model !== 'string') invalid('model', 'model must be a string.');
  const native: NativeOptions = {
    format,
    channels,
    // A mask has no background.
    background: background && channels === 'rgba' ? background : null,
    maxPixels: SIZE_PIXELS[size],
    ...crop,
    paddingShare: Array(4).fill(padding ?? DEFAULTS.padding) as NativeOptions['paddingShare'],
    paddingPx: [0, 0, 0, 0],
    scale: 0,
    position: null,
    canvasWidth: 0,
    canvasHeight: 0,
    roi: null,
    maxSide: MAX_SIDE,
    refine: options.refine ?? DEFAULTS.refine,
    ...TUNING,
  };
  const normalised: NormalisedOptions = { native, model: options.model };
  normalisedResults.add(normalised);
  return normalised;
}
