/**
 * What the options mean together, shared by the library API, the HTTP service, batches and the CLI:
 * each option is parsed by its row of the option table (option-table.ts); here are the rules
 * between them (one source of the image, one background, the default position), the defaults
 * (DEFAULTS, TUNING) and what the request gives of the one flat object the addon reads, with every field set (the C++ side has
 * no defaults). Every value outside the table is an error naming the field: nothing is silently
 * ignored, an unknown option included.
 */
import type { Rgba } from './colors.js';
import { BgoneError } from './errors.js';
import {
  type Channels,
  type ColorSpace,
  type Effort,
  MAX_SIDE,
  type MetadataMode,
  OPTIONS,
  type OptionKey,
  type OutputFormat,
  type Padding,
  type ParsedOptions,
  parseOptions,
  type RoiValue,
  type Shadow,
  type SizePreset,
} from './option-table.js';

export { parseColor } from './colors.js';
export {
  CHANNELS,
  type Channels,
  type EncodedFormat,
  FORMATS,
  MAX_FILE_BYTES,
  MAX_SIDE,
  MEDIA_TYPES,
  type OutputFormat,
  PADDING_PATTERN,
  SHADOWS,
  type Shadow,
  SIZES,
  type SizePreset,
} from './option-table.js';

/** Pixel budget of each size preset (docs/contract.md): the output is scaled down to fit, never up. */
export const SIZE_PIXELS: Record<SizePreset, number> = {
  preview: 250_000,
  medium: 1_500_000,
  hd: 4_000_000,
  full: 16_000_000,
};

/** What each public option means when it is left out (undefined, null or ''). */
const DEFAULTS = {
  format: 'png',
  channels: 'rgba',
  size: 'full',
  /** A share of the subject width, on each side, when cropping. */
  padding: 0.1,
  refine: true,
  shadow: 'none',
  /** A share: 50 %. */
  shadowOpacity: 0.5,
  semitransparency: true,
  despill: false,
  /** The outline's width and blur, shares of the result's larger side; the background blur's kernel and the background image's fit. */
  outlineWidth: 0.03,
  outlineBlur: 0,
  bgBlurMode: 'gaussian',
  bgFit: 'cover',
} as const satisfies {
  format: OutputFormat;
  channels: Channels;
  size: SizePreset;
  padding: number;
  refine: boolean;
  shadow: Shadow;
  shadowOpacity: number;
  semitransparency: boolean;
  despill: boolean;
  outlineWidth: number;
  outlineBlur: number;
  bgBlurMode: 'gaussian' | 'bokeh';
  bgFit: 'cover' | 'contain';
};

/** The JPEG quality of a zip's color.jpg when it holds the mask (channels=alpha): high, for little ringing at the mask's edges. */
const ZIP_MASK_QUALITY = 100;

/**
 * Internal knobs of the native pipeline that no model decides, not options of the API: output and
 * detection settings. What a model's family decides (the side, the refinement, effort=best's runs)
 * is set per job by the job plan (PlannedOptions, job-plan.ts).
 */
export const TUNING = {
  /** Share of the mask that must be subject, else foreground_not_found. */
  minSubject: 1e-4,
  /**
   * shadow=drop (native/shadow.h): the matte moved right and down by these shares of the subject's
   * larger side on the result, blurred by a Gaussian-like blur whose standard deviation is
   * shadowBlur of it. shadow=contact: in each column, the subject's matte over the contactBand
   * above the line it stands on (the lower hull of its lowest points), spread into a band
   * contactHeight high centred on that line, blurred by contactBlur (docs/contract.md, "Effects").
   * Chosen by eye on photos of the dev set: a shadow that reads as cast by the subject, offset and
   * soft, not a dark halo round it.
   */
  shadowOffsetX: 0.03,
  shadowOffsetY: 0.04,
  shadowBlur: 0.025,
  contactBand: 0.12,
  contactHeight: 0.06,
  contactBlur: 0.015,
  /**
   * semitransparency=false (native/interior.h): a clear hole is at most interiorMin; the soft edges
   * kept are interiorInset of the mask's larger side wide (6 px at 1024²).
   */
  interiorMin: 0.05,
  interiorInset: 0.006,
  /**
   * despill (native/despill.h): the band near the background where the spill is taken off, a share of
   * the subject's larger side; a background is a green or blue screen when that channel of its mean
   * colour exceeds the larger other by despillKeyMargin (in 0..1).
   */
  despillBand: 0.04,
  despillKeyMargin: 0.1,
  /** JPEG, WebP and AVIF quality when the quality option is left out (it sets its own per job). */
  quality: 90,
  /**
   * PNG deflate level (0-9): 1 is bgone's own fast encoder (native/png_deflate.cc), the others zlib's
   * levels; rows are written with the "up" filter (native/png_writer.cc).
   */
  pngCompression: 1,
};

/**
 * The library's options: every row of the option table (src/lib/option-table.ts) that the library
 * takes, by its key. Any other key is a validation_error naming it.
 */
export interface RemoveBackgroundOptions {
  /** The image's bytes, when the first argument of removeBackground is this object. */
  imageFile?: Buffer | Uint8Array;
  /** The image, downloaded from an http or https URL (removeBackground only: prepareJob does not download). */
  imageUrl?: string;
  /** The image as base64 text, with or without a data: prefix. */
  imageFileB64?: string;
  /** png (default), jpg, webp, avif, zip (color.jpg and alpha.png in a ZIP file), or auto: PNG when the result has any transparency, else JPG. */
  format?: OutputFormat | string;
  /** rgba (default): the cut-out; alpha: a one-channel greyscale mask. */
  channels?: Channels | string;
  /** #RGB, #RRGGBB, #RRGGBBAA (with or without #), rgb(r, g, b), or a CSS colour name. */
  bgColor?: string | null;
  /** An image behind the subject (JPG, PNG or WebP bytes), scaled to cover the result. */
  bgImageFile?: Buffer | Uint8Array;
  /** An image behind the subject, downloaded from an http or https URL (removeBackground only). */
  bgImageUrl?: string;
  /** preview (0.25 MP), medium (1.5 MP), hd (4 MP), full (default, up to 16 MP). */
  size?: SizePreset | string;
  /** standard (default) or best: more inference for a better matte, about twice the time (EFFORT_TUNING). */
  effort?: Effort | string;
  /** false (default), true (crop to the subject), or an aspect ratio "W:H" centred on the subject. */
  crop?: boolean | string;
  /**
   * Margins around the cropped subject: one, two or four values (CSS order), each a percentage of
   * the subject's width ("10%"), pixels ("20px") or a fraction (0.1). Default 10 %.
   */
  padding?: string | number;
  /** "10%".."100%" (or 0.1..1): the subject's larger side ratio to the result; "original" (default). */
  scale?: string | number;
  /** "original", "center", "x%" or "x% y%": where the subject (or the cut-out) sits in the result. */
  position?: string;
  /** "WxH": the exact size of the result; "original" or "subject": a canvas the image's or the subject's box's size (placement). */
  outputSize?: string;
  /** Pixels: the most the result is wide or high, its canvas shrunk keeping its ratio (with outputSize original or subject). */
  maxWidth?: string | number;
  maxHeight?: string | number;
  /** Placement: the result's empty border, one, two or four values (CSS order), each a fraction up to 0.49, "n%" or "npx" of the side. */
  margin?: string | number;
  /** Placement: the space inside the margins around the area the subject is fitted in (the same forms, of the side less the margins). */
  areaPadding?: string | number;
  /** Placement: contain (default) or cover: the reference box fitted inside the area, or covering it. */
  fit?: string;
  /** Placement: none (default), both, horizontal or vertical: the axes on which a side cut by the photo's edge sits on the margin. */
  snap?: string;
  /** Placement: subject (default) or image: what is fitted into the area. */
  referenceBox?: string;
  /** "x1 y1 x2 y2", each px or %: the subject is looked for only inside this box. */
  roi?: string;
  /** 1..100: the quality of jpg, webp, avif (and a zip's color.jpg, auto's JPEG); default 90. Not with png. */
  quality?: string | number;
  /** 72..1200: the pixel density written into the file (PNG pHYs, JPEG JFIF, WebP and AVIF EXIF). */
  dpi?: string | number;
  /** false: no model runs; the photo itself (its own alpha, else opaque) is the subject, laid out and exported (default true). */
  removeBackground?: boolean | string;
  /** never (default) or auto: an image with an alpha below 255 anywhere is its own matte, and no model runs. */
  keepAlpha?: string;
  /** none (default), xmp, exif_subset or exif_subset_xmp: the input's metadata kept in the output. */
  metadata?: string;
  /** srgb (default) or original: the input's ICC profile kept (a plain cutout to PNG only). */
  colorSpace?: string;
  /** Model name from models/manifest.json; default: the manifest's default. */
  model?: string;
  /** Edge-aware matte refinement and foreground colour estimation (default true). */
  refine?: boolean;
  /** none (default), drop (the subject's shadow moved down and right, blurred) or contact (a soft ground shadow at its base). */
  shadow?: Shadow | string;
  /** The shadow's opacity: "0%".."100%" or a fraction 0..1 (default 50 %); only with a shadow. */
  shadowOpacity?: string | number;
  /** false: what is semi-transparent inside the subject (glass, a car's windows) made opaque (default true). */
  semitransparency?: boolean;
  /** true: a green or blue screen's colour spill taken off the subject's edges (default false). */
  despill?: boolean;
  /** A sticker outline of this colour under the subject (the forms of bgColor); not with channels alpha. */
  outlineColor?: string;
  /** The outline's width, a fraction 0..0.1 of the result's larger side (default 0.03); only with outlineColor. */
  outlineWidth?: string | number;
  /** The blur of the outline's outer edge, a fraction 0..0.025 of the result's larger side (default 0); only with outlineColor. */
  outlineBlur?: string | number;
  /** The original photo blurred behind the subject: a fraction above 0, at most 0.05, of the result's larger side. */
  bgBlur?: string | number;
  /** gaussian (default) or bokeh (a flat disc); only with bgBlur. */
  bgBlurMode?: string;
  /** cover (default) or contain: how the background image is scaled to the result; only with bgImageFile or bgImageUrl. */
  bgFit?: string;
}

/**
 * What the job plan sets for each job (job-plan.ts), from the model's family, the image, the output
 * and the effort: nothing of it is a default of the generic options.
 */
export interface PlannedOptions {
  /** Side of the model's square input (a fixed graph's own; a symbolic graph's from its family). */
  inferenceSize: number;
  /** The guided filter's radius in pixels at the inference side, and its regularisation. */
  guidedRadius: number;
  guidedEps: number;
  /** Refined alpha below levelsLow becomes 0, above levelsHigh 1, linear between: removes faint haze. */
  levelsLow: number;
  levelsHigh: number;
  /**
   * More inference for a better matte (effort=best). mirrorWeight: the weight of the model's answer
   * for the mirrored image in the mean of the two answers (0: no mirrored run); mirrorUnion moves
   * that mean towards the larger of the two answers (0: the mean, 1: the maximum). secondSide: an
   * answer at a second square side, mixed in with secondWeight (0: none; symbolic graphs only).
   */
  mirrorWeight: number;
  mirrorUnion: number;
  secondSide: number;
  secondWeight: number;
}

/**
 * What crosses into C++: every field is required, and native/addon.cc read_options reads each one
 * (a missing, mistyped or extra field is a TypeError there, never a default).
 */
export interface NativeOptions extends Readonly<typeof TUNING>, PlannedOptions {
  /** auto: the native core picks PNG when the result has any transparency (always for channels=alpha), else JPG. zip is jpg with `zip`. */
  format: Exclude<OutputFormat, 'zip'>;
  channels: Channels;
  /**
   * format=zip: the colours as the JPEG (the foreground colours; on the background where there is
   * one; with channels=alpha the mask as grey) and the alpha as a one-band PNG, returned beside them
   * (NativeResult.alpha: the cut-out's alpha with its shadow; opaque with channels=alpha).
   */
  zip: boolean;
  /** bg_color as RGBA, or null: transparent (or white for JPEG). Always null for channels=alpha. */
  background: Rgba | null;
  maxPixels: number;
  crop: 'none' | 'subject' | 'aspect';
  /** The W:H of crop=aspect; 1:1 otherwise (unused then, but always valid). */
  aspectWidth: number;
  aspectHeight: number;
  /** The crop's margins, top, right, bottom, left: each round(share x the subject's width) + px. */
  paddingShare: [number, number, number, number];
  paddingPx: [number, number, number, number];
  /** 0: the subject keeps its size; else 0.1..1, the larger of its box's side ratios to the canvas. */
  scale: number;
  /** null: original; else where the placed box sits, as shares of the free space (0.5, 0.5: centred). */
  position: [number, number] | null;
  /** The exact canvas (output_size); 0 x 0 when not set. */
  canvasWidth: number;
  canvasHeight: number;
  /**
   * The placement layout (native/pipeline.cc place()): none, or its canvas: the exact canvas, the
   * image's size (after the roi) or the subject's box's size, shrunk to maxCanvas (0: no bound).
   */
  placement: 'none' | 'canvas' | 'original' | 'subject';
  maxCanvas: [number, number];
  /** The margins (top, right, bottom, left), each share × the canvas's side + px; then the area padding, of the margin box's side. */
  marginShare: [number, number, number, number];
  marginPx: [number, number, number, number];
  areaShare: [number, number, number, number];
  areaPx: [number, number, number, number];
  /** fit=cover. */
  cover: boolean;
  snap: 'none' | 'both' | 'horizontal' | 'vertical';
  referenceBox: 'subject' | 'image';
  /** The region of interest in image pixels (after EXIF orientation), x1 and y1 exclusive; null: the whole image. */
  roi: [number, number, number, number] | null;
  maxSide: number;
  refine: boolean;
  /** The shadow under the subject; always none for channels=alpha (a mask is the subject's alone). */
  shadow: Shadow;
  /** The shadow's opacity, 0..1 (read whatever the shadow). */
  shadowOpacity: number;
  /** semitransparency=false: the matte opaque where the subject encloses it (native/interior.h). */
  opaqueInterior: boolean;
  /** The screen's spill taken off the subject's edges; always false for channels=alpha (no colours). */
  despill: boolean;
  /** Export and cutout (exportAndCutoutOf): the density written into the file, 0: none given; 72..1200 dpi. */
  dpi: number;
  /** false (remove_background=false): no model runs, the image's own alpha (or opaque) is the matte; the model handle is null. */
  inference: boolean;
  /** keep_alpha=auto: an image whose alpha is below 255 anywhere is its own matte (no inference); always false without inference. */
  keepAlpha: boolean;
  /** metadata (native/metadata.h): none, xmp, exif_subset or exif_subset_xmp. */
  metadata: MetadataMode;
  /** color_space: srgb, or original (the input's RGB ICC profile written into the PNG). */
  colorSpace: ColorSpace;
  /**
   * The effects of the outline and the background (native/outline.h, bg_blur.h): the outline's
   * colour (null: none), its width and its edge's blur as shares of the result's larger side; the
   * blurred original behind the subject (none, or its kernel) and its radius (0 with none); the
   * background image's fit.
   */
  outline: Rgba | null;
  outlineWidth: number;
  outlineBlur: number;
  bgBlur: 'none' | 'gaussian' | 'bokeh';
  bgBlurRadius: number;
  bgFit: 'cover' | 'contain';
}

/** The native options a request decides, before the job plan adds what the model decides. */
export type RequestedOptions = Omit<NativeOptions, keyof PlannedOptions>;

/** The image and background sources of a job, as given (downloads not yet done). */
export interface JobSources {
  imageFile: Buffer | undefined;
  imageUrl: string | undefined;
  imageFileB64: Buffer | undefined;
  bgImageFile: Buffer | undefined;
  bgImageUrl: string | undefined;
}

/** The roi as given: resolved to pixels against the image's size (resolveRoi) once it is known. */
export type RoiSpec = [RoiValue, RoiValue, RoiValue, RoiValue];

export interface NormalisedOptions {
  /** The native options the request decides; `roi` is null here, and set from `roiSpec` for each image by prepareJob. */
  native: RequestedOptions;
  model: string | undefined;
  /** The effort asked for: the job plan sets what the model's family runs for it. */
  effort: Effort;
  roiSpec: RoiSpec | undefined;
  sources: JobSources;
}

function invalid(field: string, message: string, details: Record<string, unknown> = {}): never {
  throw new BgoneError('validation_error', message, { field, ...details });
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

/** At most one of `keys` given; two are a validation_error naming both (their API names). */
function atMostOne(parsed: ParsedOptions, keys: ReadonlyArray<keyof ParsedOptions>, names: readonly string[], what: string): void {
  const given = keys.flatMap((key, i) => (parsed[key] === undefined ? [] : [names[i]!]));
  if (given.length > 1) invalid(given[0]!, `${given.join(' and ')} were both given: ${what}.`, { fields: given });
}

/** The rows that make the placement layout (with output_size original or subject). */
const PLACEMENT_KEYS = ['margin', 'areaPadding', 'fit', 'snap', 'referenceBox'] as const;

/** A side's measures as the native core reads them: shares and pixels, top, right, bottom, left. */
function measureArrays(box: Padding | undefined): { share: NativeOptions['marginShare']; px: NativeOptions['marginPx'] } {
  if (!box) return { share: [0, 0, 0, 0], px: [0, 0, 0, 0] };
  return { share: box.map((m) => m.share) as NativeOptions['marginShare'], px: box.map((m) => m.px) as NativeOptions['marginPx'] };
}

/**
 * The placement layout's native fields: on when a placement row is given or output_size is original
 * or subject; without output_size its canvas is the image's size (output_size=original). It frames
 * the subject itself, so crop and scale are refused beside it; max_width and max_height bound a
 * canvas it makes, so they need output_size original or subject.
 */
function placementOf(
  parsed: ParsedOptions,
  cropped: boolean,
  scaled: boolean,
): Pick<NativeOptions, 'placement' | 'maxCanvas' | 'marginShare' | 'marginPx' | 'areaShare' | 'areaPx' | 'cover' | 'snap' | 'referenceBox'> {
  const size = parsed.outputSize;
  const derived = size === 'original' || size === 'subject';
  const given = PLACEMENT_KEYS.filter((key) => parsed[key] !== undefined);
  const names = given.map((key) => OPTIONS[key].name);
  if (!derived) {
    for (const key of ['maxWidth', 'maxHeight'] as const) {
      if (parsed[key] !== undefined)
        invalid(OPTIONS[key].name, `${OPTIONS[key].name} bounds a canvas made from the image or the subject: give it with output_size=original or subject.`);
    }
  }
  const on = derived || given.length > 0;
  if (on && cropped)
    invalid('crop', `crop frames the subject one way, ${derived ? 'output_size' : names[0]} another: give one of them.`, { fields: ['crop', ...names] });
  if (on && scaled)
    invalid('scale', `scale sizes the subject one way, ${derived ? 'output_size' : names[0]} another: give one of them.`, { fields: ['scale', ...names] });
  const margin = measureArrays(parsed.margin);
  const area = measureArrays(parsed.areaPadding);
  return {
    placement: !on ? 'none' : derived ? size : Array.isArray(size) ? 'canvas' : 'original',
    maxCanvas: [parsed.maxWidth ?? 0, parsed.maxHeight ?? 0],
    marginShare: margin.share,
    marginPx: margin.px,
    areaShare: area.share,
    areaPx: area.px,
    cover: parsed.fit === 'cover',
    snap: parsed.snap ?? 'none',
    referenceBox: parsed.referenceBox ?? 'subject',
  };
}

/** Formats that take a quality (zip: its color.jpg; auto: when it gives a JPEG). */
const QUALITY_FORMATS: readonly OutputFormat[] = ['jpg', 'webp', 'avif', 'zip', 'auto'];

/**
 * Export and cutout: quality (not with png, which is lossless), dpi, remove_background and
 * keep_alpha. Without inference there is no model's matte: the options that work on it (shadow,
 * despill, semitransparency=false, refine, effort=best) are refused naming them, as despill and
 * semitransparency=false with keep_alpha=auto (an image that is its own matte has none either).
 */
function exportAndCutoutOf(
  parsed: ParsedOptions,
  format: OutputFormat,
): Pick<NativeOptions, 'dpi' | 'inference' | 'keepAlpha' | 'metadata' | 'colorSpace'> & { quality?: number } {
  if (parsed.quality !== undefined && !QUALITY_FORMATS.includes(format)) {
    invalid('quality', `quality is the quality of the lossy formats (${QUALITY_FORMATS.join(', ')}): format ${format} is lossless.`, { format });
  }
  const inference = parsed.removeBackground ?? true;
  const keepAlpha = parsed.keepAlpha === 'auto';
  const needsMatte: Array<[string, boolean]> = [
    ['shadow', parsed.shadow !== undefined && parsed.shadow !== 'none'],
    ['despill', parsed.despill === true],
    ['semitransparency', parsed.semitransparency === false],
    ['refine', parsed.refine === true],
    ['effort', parsed.effort === 'best'],
  ];
  for (const [name, asked] of needsMatte) {
    if (!asked) continue;
    if (!inference) invalid(name, `${name} works on the model's matte, and remove_background=false runs no model.`, { fields: [name, 'remove_background'] });
    if (keepAlpha && (name === 'despill' || name === 'semitransparency')) {
      invalid(name, `${name} works on the model's matte, which an image kept by keep_alpha=auto does not have.`, { fields: [name, 'keep_alpha'] });
    }
  }
  const colorSpace = parsed.colorSpace ?? 'srgb';
  if (colorSpace === 'original') originalColorSpace(parsed, format);
  return {
    dpi: parsed.dpi ?? 0,
    inference,
    keepAlpha: inference && keepAlpha,
    metadata: parsed.metadata ?? 'none',
    colorSpace,
    ...(parsed.quality !== undefined ? { quality: parsed.quality } : {}),
  };
}

/**
 * color_space=original is a plain cutout to PNG (Photoroom's rule): the input's profile describes
 * its own pixels, and only those, unchanged but for the matte, may carry it. Every other operation
 * beside it is refused, naming the first option that conflicts.
 */
function originalColorSpace(parsed: ParsedOptions, format: OutputFormat): void {
  const conflicts: Array<[OptionKey, boolean]> = [
    ['format', format !== 'png'],
    ['channels', parsed.channels === 'alpha'],
    ['removeBackground', parsed.removeBackground === false],
    ['keepAlpha', parsed.keepAlpha === 'auto'],
    ['dpi', parsed.dpi !== undefined],
    ['metadata', parsed.metadata === 'exif_subset' || parsed.metadata === 'exif_subset_xmp'],
    ['size', parsed.size !== undefined && parsed.size !== 'full'],
    ['bgColor', parsed.bgColor !== undefined],
    ['bgImageFile', parsed.bgImageFile !== undefined],
    ['bgImageUrl', parsed.bgImageUrl !== undefined],
    ['bgBlur', parsed.bgBlur !== undefined],
    ['shadow', parsed.shadow !== undefined && parsed.shadow !== 'none'],
    ['outlineColor', parsed.outlineColor !== undefined],
    ['despill', parsed.despill === true],
    ['crop', parsed.crop !== undefined && parsed.crop.crop !== 'none'],
    ...GEOMETRY_KEYS.map((key): [OptionKey, boolean] => [key, parsed[key] !== undefined]),
  ];
  const found = conflicts.find(([, given]) => given);
  if (!found) return;
  const name = OPTIONS[found[0]].name;
  invalid(name, `color_space=original keeps the input's colour profile on a plain cutout to PNG: ${name} cannot be given with it.`, {
    fields: [name, 'color_space'],
  });
}

/** The geometry's options: any of them changes the image's layout. */
const GEOMETRY_KEYS = [
  'padding',
  'scale',
  'position',
  'outputSize',
  'maxWidth',
  'maxHeight',
  'margin',
  'areaPadding',
  'fit',
  'snap',
  'referenceBox',
  'roi',
] as const satisfies readonly OptionKey[];

/**
 * The outline's and the background's effects (native/outline.h, bg_blur.h): each only with what it
 * modifies (outline_width and outline_blur with outline_color, bg_blur_mode with bg_blur, bg_fit
 * with a background image), the blurred original a background of its own (not beside another), and
 * neither in a mask (channels=alpha is the subject's alone): refused, naming the field, never ignored.
 */
function effectsOf(
  parsed: ParsedOptions,
  alphaOnly: boolean,
): Pick<NativeOptions, 'outline' | 'outlineWidth' | 'outlineBlur' | 'bgBlur' | 'bgBlurRadius' | 'bgFit'> {
  for (const key of ['outlineWidth', 'outlineBlur'] as const) {
    if (parsed[key] !== undefined && parsed.outlineColor === undefined)
      invalid(OPTIONS[key].name, `${OPTIONS[key].name} shapes an outline: give it with outline_color.`);
  }
  if (parsed.outlineColor !== undefined && alphaOnly)
    invalid('outline_color', "outline_color draws an outline under the subject, and channels=alpha is the subject's mask alone: give one of them.", {
      fields: ['outline_color', 'channels'],
    });
  if (parsed.bgBlurMode !== undefined && parsed.bgBlur === undefined) invalid('bg_blur_mode', 'bg_blur_mode is the kernel of a blur: give it with bg_blur.');
  if (parsed.bgBlur !== undefined) {
    if (alphaOnly)
      invalid('bg_blur', "bg_blur puts the blurred photo behind the subject, and channels=alpha is the subject's mask alone: give one of them.", {
        fields: ['bg_blur', 'channels'],
      });
    const other = (['bgColor', 'bgImageFile', 'bgImageUrl'] as const).find((key) => parsed[key] !== undefined);
    if (other) {
      const name = OPTIONS[other].name;
      invalid('bg_blur', `bg_blur and ${name} were both given: give at most one background.`, { fields: ['bg_blur', name] });
    }
  }
  if (parsed.bgFit !== undefined && parsed.bgImageFile === undefined && parsed.bgImageUrl === undefined)
    invalid('bg_fit', 'bg_fit scales a background image: give it with bg_image_file or bg_image_url.');
  return {
    outline: parsed.outlineColor ?? null,
    outlineWidth: parsed.outlineWidth ?? DEFAULTS.outlineWidth,
    outlineBlur: parsed.outlineBlur ?? DEFAULTS.outlineBlur,
    bgBlur: parsed.bgBlur === undefined ? 'none' : (parsed.bgBlurMode ?? DEFAULTS.bgBlurMode),
    bgBlurRadius: parsed.bgBlur ?? 0,
    bgFit: parsed.bgFit ?? DEFAULTS.bgFit,
  };
}

function paddingArrays(padding: Padding | undefined): Pick<NativeOptions, 'paddingShare' | 'paddingPx'> {
  if (!padding) return { paddingShare: [DEFAULTS.padding, DEFAULTS.padding, DEFAULTS.padding, DEFAULTS.padding], paddingPx: [0, 0, 0, 0] };
  return {
    paddingShare: padding.map((m) => m.share) as NativeOptions['paddingShare'],
    paddingPx: padding.map((m) => m.px) as NativeOptions['paddingPx'],
  };
}

/**
 * Validates public options by the option table; throws BgoneError naming the field (its API name).
 * Sources are checked against each other (at most one), not for presence: the image may come as
 * removeBackground's first argument.
 */
export function normaliseOptions(options: RemoveBackgroundOptions = {}): NormalisedOptions {
  if (options === null || typeof options !== 'object' || Array.isArray(options) || options instanceof Uint8Array) {
    invalid('options', 'options must be an object.');
  }
  const parsed = parseOptions(options as Record<string, unknown>);
  atMostOne(parsed, ['imageFile', 'imageUrl', 'imageFileB64'], ['image_file', 'image_url', 'image_file_b64'], 'give exactly one source of the image');
  atMostOne(parsed, ['bgColor', 'bgImageFile', 'bgImageUrl'], ['bg_color', 'bg_image_file', 'bg_image_url'], 'give at most one background');
  const channels = parsed.channels ?? DEFAULTS.channels;
  const crop = parsed.crop ?? { crop: 'none' as const, aspectWidth: 1, aspectHeight: 1 };
  const outputSize = parsed.outputSize;
  const [canvasWidth, canvasHeight] = Array.isArray(outputSize) ? outputSize : [0, 0];
  const scale = parsed.scale ?? null;
  const placement = placementOf(parsed, crop.crop !== 'none', scale !== null);
  // The default position: centred once something is placed, else where it was.
  const position = parsed.position !== undefined ? parsed.position : scale !== null || canvasWidth > 0 ? ([0.5, 0.5] as [number, number]) : null;
  const alphaOnly = channels === 'alpha';
  const format = parsed.format ?? DEFAULTS.format;
  const effort = parsed.effort ?? 'standard';
  const zip = format === 'zip';
  const shadow = parsed.shadow ?? DEFAULTS.shadow;
  if (parsed.shadowOpacity !== undefined && shadow === 'none') {
    invalid('shadow_opacity', 'shadow_opacity is the opacity of a shadow: give it with shadow=drop or shadow=contact.', { shadow });
  }
  const native: RequestedOptions = {
    format: zip ? 'jpg' : format,
    channels,
    zip,
    // A mask has no background.
    background: parsed.bgColor && !alphaOnly ? parsed.bgColor : null,
    maxPixels: SIZE_PIXELS[parsed.size ?? DEFAULTS.size],
    ...crop,
    ...paddingArrays(parsed.padding),
    scale: scale ?? 0,
    position,
    canvasWidth,
    canvasHeight,
    ...placement,
    roi: null,
    maxSide: MAX_SIDE,
    refine: parsed.refine ?? DEFAULTS.refine,
    // A mask is the subject's alone, and has no colours to despill.
    shadow: alphaOnly ? 'none' : shadow,
    shadowOpacity: parsed.shadowOpacity ?? DEFAULTS.shadowOpacity,
    opaqueInterior: !(parsed.semitransparency ?? DEFAULTS.semitransparency),
    despill: !alphaOnly && (parsed.despill ?? DEFAULTS.despill),
    ...effectsOf(parsed, alphaOnly),
    ...TUNING,
    // format=zip with channels=alpha: color.jpg holds the mask (its alpha.png is opaque).
    ...(zip && alphaOnly ? { quality: ZIP_MASK_QUALITY } : {}),
    // Export and cutout; a quality given wins over both of the above.
    ...exportAndCutoutOf(parsed, format),
  };
  const normalised: NormalisedOptions = {
    native,
    model: parsed.model,
    effort,
    roiSpec: parsed.roi,
    sources: {
      imageFile: parsed.imageFile,
      imageUrl: parsed.imageUrl,
      imageFileB64: parsed.imageFileB64,
      bgImageFile: alphaOnly ? undefined : parsed.bgImageFile,
      bgImageUrl: alphaOnly ? undefined : parsed.bgImageUrl,
    },
  };
  normalisedResults.add(normalised);
  return normalised;
}

/** The same options with other sources (downloaded bytes in place of URLs), registered as normalised. */
export function withSources(normalised: NormalisedOptions, sources: JobSources): NormalisedOptions {
  const next: NormalisedOptions = { ...normalised, sources };
  normalisedResults.add(next);
  return next;
}

/**
 * The roi in image pixels for an image of width x height (after EXIF orientation): each corner
 * rounded to the nearest pixel. A box outside the image, or empty, is invalid_roi.
 */
export function resolveRoi(spec: RoiSpec | undefined, width: number, height: number): NativeOptions['roi'] {
  if (!spec) return null;
  const sides = [width, height, width, height];
  const [x1, y1, x2, y2] = spec.map((v, i) => Math.round(v.share * sides[i]! + v.px)) as [number, number, number, number];
  if (x2 > width || y2 > height) {
    throw new BgoneError('invalid_roi', `The region of interest reaches outside the image (${width}x${height} px).`, {
      field: 'roi',
      image: { width, height },
    });
  }
  if (x2 <= x1 || y2 <= y1) {
    throw new BgoneError('invalid_roi', 'The region of interest is empty: x2 must be right of x1 and y2 below y1.', { field: 'roi' });
  }
  return [x1, y1, x2, y2];
}
