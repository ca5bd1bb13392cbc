/**
 * Validation and normalisation of the processing options, shared by the library API, the HTTP
 * service and the CLI. The service's form fields arrive as strings; the library also accepts
 * booleans and numbers. Every value outside the spec is a validation_error naming the field and its
 * allowed values: nothing is silently ignored. The result is the one flat object the addon reads.
 */
import { BgoneError } from './errors.js';
import { CSS_COLORS } from './css-colors.js';

export const FORMATS = ['png', 'jpg', 'webp'] as const;
export const CHANNELS = ['rgba', 'alpha'] as const;
export const SIZES = ['preview', 'medium', 'hd', 'full'] as const;
export type OutputFormat = (typeof FORMATS)[number];
export type Channels = (typeof CHANNELS)[number];
export type SizePreset = (typeof SIZES)[number];

/** Pixel budget of each size preset (api-contract.md): the output is scaled down to fit, never up. */
export const SIZE_PIXELS: Record<SizePreset, number> = {
  preview: 250_000,
  medium: 1_500_000,
  hd: 4_000_000,
  full: 16_000_000,
};

export const MAX_FILE_BYTES = 20 * 1024 * 1024;
export const MAX_SIDE = 6000;

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

/** What crosses into C++ (read by native/addon.cc read_options). */
export interface NativeOptions {
  format: OutputFormat;
  channels: Channels;
  background?: [number, number, number, number];
  maxPixels: number;
  crop: 'none' | 'subject' | 'aspect';
  aspectWidth: number;
  aspectHeight: number;
  padding: number;
  maxSide: number;
  refine: boolean;
  // Internal tuning knobs (bench/quality); the addon has defaults for each.
  guidedRadius?: number;
  guidedEps?: number;
  minSubject?: number;
  quality?: number;
  pngCompression?: number;
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

const COLOR_FORMS = ['#RGB', '#RRGGBB', '#RRGGBBAA', 'rgb(r, g, b)', 'a CSS colour name'];

/** Parses a bg_color value into RGBA bytes. */
export function parseColor(input: string): [number, number, number, number] {
  const value = input.trim().toLowerCase();
  const named = CSS_COLORS.get(value);
  if (named !== undefined) return [(named >> 16) & 255, (named >> 8) & 255, named & 255, 255];
  const hex = /^#?([0-9a-f]{3}|[0-9a-f]{6}|[0-9a-f]{8})$/.exec(value);
  if (hex) {
    let digits = hex[1]!;
    if (digits.length === 3) digits = [...digits].map((d) => d + d).join('');
    const bytes = [0, 2, 4, 6].map((i) => (i < digits.length ? parseInt(digits.slice(i, i + 2), 16) : 255));
    return bytes as [number, number, number, number];
  }
  const rgb = /^rgb\(\s*(\d{1,3})\s*,\s*(\d{1,3})\s*,\s*(\d{1,3})\s*\)$/.exec(value);
  if (rgb) {
    const channels = rgb.slice(1, 4).map(Number);
    if (channels.every((c) => c <= 255)) return [channels[0]!, channels[1]!, channels[2]!, 255];
  }
  invalid('bg_color', `bg_color must be ${COLOR_FORMS.join(', ')}.`, COLOR_FORMS);
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

function parsePadding(value: unknown): number | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  let fraction = NaN;
  if (typeof value === 'number') fraction = value;
  else if (typeof value === 'string') {
    const v = value.trim();
    const percent = /^(\d{1,3}(?:\.\d+)?)%$/.exec(v);
    if (percent) fraction = Number(percent[1]) / 100;
    else if (/^(?:0(?:\.\d+)?|1(?:\.0+)?|\.\d+)$/.test(v)) fraction = Number(v);
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

/** Validates public options; throws BgoneError('validation_error') naming the field. */
export function normaliseOptions(options: RemoveBackgroundOptions = {}): NormalisedOptions {
  if (options === null || typeof options !== 'object') invalid('options', 'options must be an object.');
  const format = oneOf('format', options.format, FORMATS, 'png');
  const channels = oneOf('channels', options.channels, CHANNELS, 'rgba');
  const size = oneOf('size', options.size, SIZES, 'full');
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
    maxPixels: SIZE_PIXELS[size],
    ...crop,
    padding: padding ?? 0.1,
    maxSide: MAX_SIDE,
    refine: options.refine ?? true,
  };
  if (background && channels === 'rgba') native.background = background;
  return { native, model: options.model };
}
