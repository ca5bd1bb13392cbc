/**
 * bgone's library API: removeBackground(bytes, options) turns an uploaded JPEG, PNG or WebP into the
 * finished cut-out in one native call that runs off the JavaScript thread. Every failure is a
 * BgoneError. The library reads no environment variable: the process-wide settings come from
 * configure() (defaults in settings.ts).
 */
import { checkCropBox } from './crop-cap.js';
import { BgoneError, fromNativeError } from './errors.js';
import { checkClaimedSize } from './header-size.js';
import { withInferenceSize } from './inference-size.js';
import { Limiter } from './limiter.js';
import { forgetModels, getModel, resolveModel } from './models.js';
import { defaultOnnxRuntimeLibrary, type NativeTimings, native, onnxRuntimeLibraryInUse } from './native.js';
import { MAX_FILE_BYTES, MAX_SIDE, normaliseOptions, type OutputFormat, type RemoveBackgroundOptions } from './options.js';
import { DEFAULT_SETTINGS, type LibrarySettings, librarySettings, mergeSettings, parseExecutionProvider, replaceSettings } from './settings.js';

export { type CropBounds, type CropOptions, checkCropBox, cropBounds, MAX_CROP_AREA_RATIO, MAX_WEBP_SIDE } from './crop-cap.js';
export { BgoneError, ERROR_CODES, type ErrorCode } from './errors.js';
export { type Manifest, type ModelEntry, modelNames, readManifest } from './models.js';
export { nativeVersions } from './native.js';
export {
  CHANNELS,
  type Channels,
  FORMATS,
  MAX_FILE_BYTES,
  MAX_SIDE,
  normaliseOptions,
  type OutputFormat,
  parseColor,
  type RemoveBackgroundOptions,
  SIZE_PIXELS,
  SIZES,
  type SizePreset,
} from './options.js';
export { DEFAULT_SETTINGS, type ExecutionProvider, type LibrarySettings, librarySettings } from './settings.js';

export type Timings = NativeTimings;

export interface RemoveBackgroundResult {
  /** The encoded image. */
  data: Buffer;
  width: number;
  height: number;
  format: OutputFormat;
  /** 1 (alpha mask), 3 (opaque) or 4 (with transparency). */
  channels: number;
  /** Milliseconds per stage, measured in the native core. */
  timings: Timings;
}

export const MEDIA_TYPES: Record<OutputFormat, string> = { png: 'image/png', jpg: 'image/jpeg', webp: 'image/webp' };

/** Background jobs (batch work) wait this long after a normal job ends before they go in. */
const BACKGROUND_GRACE_MS = 250;

const limiter = new Limiter(DEFAULT_SETTINGS.nativeConcurrency, BACKGROUND_GRACE_MS);

/**
 * Sets the library's process-wide settings (see LibrarySettings for each and its default); fields
 * left out keep their current value. Call it at start, before the first job: a new models folder or
 * thread count makes the next job load its model again, a new concurrency applies to jobs not yet
 * started. A bad value or an unknown field is a BgoneError('validation_error') naming the field, and
 * then nothing changes. Returns the settings in effect.
 */
export function configure(settings: Partial<LibrarySettings>): Readonly<LibrarySettings> {
  const previous = librarySettings();
  const next = mergeSettings(settings);
  const inUse = onnxRuntimeLibraryInUse();
  if (inUse !== undefined && (next.onnxRuntimeLibrary ?? defaultOnnxRuntimeLibrary()) !== inUse) {
    throw new BgoneError('validation_error', `onnxRuntimeLibrary cannot change once the native core has started (it uses ${inUse}).`, {
      field: 'onnxRuntimeLibrary',
    });
  }
  replaceSettings(next);
  if (
    next.modelsDir !== previous.modelsDir ||
    next.inferenceThreads !== previous.inferenceThreads ||
    next.executionProvider !== previous.executionProvider ||
    next.cudaMemLimitMb !== previous.cudaMemLimitMb
  )
    forgetModels();
  limiter.concurrency = next.nativeConcurrency;
  return librarySettings();
}

/** Sets how many jobs may be inside the native core at once: configure({ nativeConcurrency }). */
export function setConcurrency(concurrency: number): void {
  configure({ nativeConcurrency: concurrency });
}

/** Jobs running or waiting in this process. */
export function queueSize(): number {
  return limiter.size;
}

/** Where inference runs: the configured execution provider and what the loaded ONNX Runtime offers. */
export interface InferenceProviders {
  /** The configured provider ('cpu' or 'cuda'), as the executionProvider setting says. */
  provider: 'cpu' | 'cuda';
  /** With cuda: the GPU's index; null with cpu. */
  deviceId: number | null;
  /**
   * The execution providers the loaded ONNX Runtime was built with, e.g. ['CPUExecutionProvider'].
   * A provider listed may still be unusable (its libraries, CUDA or cuDNN missing): onnxruntime-node's
   * Linux build lists CUDAExecutionProvider without shipping its libraries.
   */
  available: string[];
}

/** The execution provider in effect and the runtime's providers; starts the native core (BgoneError if it cannot). */
export function inferenceProviders(): InferenceProviders {
  const { provider, deviceId } = parseExecutionProvider(librarySettings().executionProvider)!;
  let available: string[];
  try {
    available = native().availableProviders();
  } catch (err) {
    throw fromNativeError(err);
  }
  return { provider, deviceId: provider === 'cuda' ? deviceId : null, available };
}

/** Loads a model ahead of the first request (otherwise it loads on first use). */
export async function preloadModel(name?: string): Promise<void> {
  await getModel(name);
}

/** How a job queues for the native core: 'background' jobs go in only when no normal job waits. */
export interface RunOptions {
  priority?: 'normal' | 'background';
  /**
   * Drops the job while it still waits for a place in the native core (e.g. its HTTP client went
   * away): its promise then rejects with the signal's reason (an `AbortError` DOMException unless
   * abort() was given another), not with a BgoneError. A job already inside the native core runs
   * to its end: a native call cannot be stopped halfway.
   */
  signal?: AbortSignal;
}

/** What probeImage tells without decoding a pixel. */
export interface ImageProbe {
  format: OutputFormat;
  width: number;
  height: number;
}

/**
 * Checks an upload the way removeBackground starts: by its bytes (JPEG, PNG or WebP) and its header
 * (a side over 6000 px is image_too_large), without decoding a pixel. Throws a BgoneError. The size
 * is the one the pipeline works with, after EXIF orientation.
 */
export function probeImage(input: Buffer | Uint8Array): ImageProbe {
  if (!(input instanceof Uint8Array) || input.length === 0) throw new BgoneError('missing_image');
  if (input.length > MAX_FILE_BYTES) throw new BgoneError('image_too_large');
  // The claimed size first, in TypeScript: libvips cannot read sizes past its own limits, nor a
  // header followed by garbage, and would call those invalid_image (header-size.ts).
  checkClaimedSize(input, MAX_SIDE);
  const buffer = Buffer.isBuffer(input) ? input : Buffer.from(input.buffer, input.byteOffset, input.byteLength);
  try {
    return native().probe(buffer, MAX_SIDE);
  } catch (err) {
    throw fromNativeError(err);
  }
}

export async function removeBackground(
  input: Buffer | Uint8Array,
  options: RemoveBackgroundOptions = {},
  run: RunOptions = {},
): Promise<RemoveBackgroundResult> {
  if (!(input instanceof Uint8Array)) throw new BgoneError('missing_image', 'input must be a Buffer or Uint8Array.');
  if (input.length === 0) throw new BgoneError('missing_image');
  if (input.length > MAX_FILE_BYTES) throw new BgoneError('image_too_large');
  const { native: normalised, model } = normaliseOptions(options);
  // A broken installation first (the addon, the manifest and the model's file; the model itself is
  // not loaded yet), then the header and the crop caps, before any pixel is decoded.
  native();
  resolveModel(model);
  const probe = probeImage(input);
  checkCropBox(probe, normalised);
  const nativeOptions = withInferenceSize(normalised, probe.width, probe.height);
  const handle = await getModel(model);
  const buffer = Buffer.isBuffer(input) ? input : Buffer.from(input.buffer, input.byteOffset, input.byteLength);
  try {
    const result = await limiter.run(() => native().removeBackground(buffer, nativeOptions, handle), run.priority ?? 'normal', run.signal);
    return { ...result, format: nativeOptions.format };
  } catch (err) {
    if (run.signal?.aborted && err === run.signal.reason) throw err; // dropped while waiting: the caller's own reason
    throw fromNativeError(err);
  }
}
