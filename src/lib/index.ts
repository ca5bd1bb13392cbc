/**
 * bgone's library API: removeBackground(bytes, options) turns an uploaded JPEG, PNG or WebP into the
 * finished cut-out in one native call that runs off the JavaScript thread; prepareJob(bytes,
 * options) runs its checks alone, for a caller that needs the probe or the memory estimate first. Every failure is a
 * BgoneError. The library reads no environment variable: the process-wide settings come from
 * configure() (defaults in settings.ts).
 */
import { BgoneError, fromNativeError } from './errors.js';
import { Limiter } from './limiter.js';
import { acquireModel, forgetModels, type ModelLease, providerInUse } from './models.js';
import { addonFile, addonFileInUse, defaultOnnxRuntimeLibrary, type ForegroundBox, type NativeTimings, native, onnxRuntimeLibraryInUse } from './native.js';
import type { EncodedFormat, RemoveBackgroundOptions } from './options.js';
import { isPreparedJob, type PreparedJob } from './prepare-job.js';
import { prepareRequest } from './prepare-request.js';
import {
  DEFAULT_SETTINGS,
  type LibrarySettings,
  librarySettings,
  mergeSettings,
  nativeConcurrencyFor,
  type ProviderName,
  replaceSettings,
} from './settings.js';
import { zipStored } from './zip.js';

export { type CropBounds, type CropOptions, checkCropBox, cropBounds, MAX_CROP_AREA_RATIO, MAX_WEBP_SIDE } from './crop-cap.js';
export { BgoneError, ERROR_CODES, ERROR_STATUS, type ErrorCode } from './errors.js';
export { FAMILY_NAMES, type FamilyName, MODEL_FAMILIES, type ModelFamily } from './model-families.js';
export { isLocalModel, LOCAL_MANIFEST, loadedModels, type Manifest, type ModelEntry, modelNames, readManifest, resolveModel } from './models.js';
export { addonFileInUse, type ForegroundBox, type NativeMemoryStats, nativeMemoryStats, nativeVersions } from './native.js';
export { type Carrier, cliFlag, OPTION_TABLE, OPTIONS, type OptionRow, optionsFor } from './option-table.js';
export {
  CHANNELS,
  type Channels,
  type EncodedFormat,
  FORMATS,
  MAX_FILE_BYTES,
  MAX_SIDE,
  MEDIA_TYPES,
  type NormalisedOptions,
  normaliseOptions,
  type OutputFormat,
  parseColor,
  type RemoveBackgroundOptions,
  SHADOWS,
  type Shadow,
  SIZE_PIXELS,
  SIZES,
  type SizePreset,
} from './options.js';
export { isPreparedJob, type PreparedJob, prepareJob } from './prepare-job.js';
export { type ImageProbe, probeImage } from './probe.js';
export { type AddonBuild, DEFAULT_SETTINGS, type ExecutionProvider, type LibrarySettings, librarySettings, type ProviderName } from './settings.js';
export {
  DEFAULT_FETCH_TIMEOUT_MS,
  DEFAULT_MAX_REDIRECTS,
  type DownloadFailedReason,
  type FetchImageOptions,
  fetchImageUrl,
  type InvalidUrlReason,
  toBgoneError,
  UrlFetchError,
} from './url-fetch.js';

export type Timings = NativeTimings;

export interface RemoveBackgroundResult {
  /** The encoded image. */
  data: Buffer;
  width: number;
  height: number;
  /** What the data is (format=auto becomes png or jpg; zip: color.jpg and alpha.png in a ZIP file). */
  format: EncodedFormat;
  /** 1 (alpha mask), 3 (opaque) or 4 (with transparency; zip: the colours and the alpha). */
  channels: number;
  /** The subject's box in the result's pixels (clipped to it; all 0 when it falls outside). */
  foreground: ForegroundBox;
  /**
   * How unsure the model is of its mask, from 0 to 1 (docs/contract.md, "Uncertainty"): the faint
   * pixels of the model's mask against the subject's; higher where the cut-out is more likely wrong.
   */
  uncertainty: number;
  /** Milliseconds per stage, measured in the native core. */
  timings: Timings;
}

/** Background jobs (batch work) wait this long after a normal job ends before they go in. */
const BACKGROUND_GRACE_MS = 250;

const limiter = new Limiter(nativeConcurrencyFor(DEFAULT_SETTINGS, undefined), BACKGROUND_GRACE_MS);

/** Bounds the jobs inside the native core for the settings and the provider in use (known once a model has loaded). */
function syncConcurrency(): void {
  const bound = nativeConcurrencyFor(librarySettings(), providerInUse()?.choice.provider);
  if (limiter.concurrency !== bound) limiter.concurrency = bound;
}

/** A lease on the model (acquireModel); its load may have decided the provider, and so the bound. */
async function leaseModel(name: string | undefined, pin = false): Promise<ModelLease> {
  const lease = await acquireModel(name, pin);
  syncConcurrency();
  return lease;
}

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
  const fileInUse = addonFileInUse();
  if (fileInUse !== undefined && next.addonBuild !== previous.addonBuild && addonFile(next.addonBuild) !== fileInUse) {
    throw new BgoneError('validation_error', `addonBuild cannot change once the native core has started (it uses ${fileInUse}).`, {
      field: 'addonBuild',
    });
  }
  replaceSettings(next);
  if (
    next.modelsDir !== previous.modelsDir ||
    next.inferenceThreads !== previous.inferenceThreads ||
    next.executionProvider !== previous.executionProvider ||
    next.cudaMemLimitMb !== previous.cudaMemLimitMb ||
    next.tensorrtCacheDir !== previous.tensorrtCacheDir ||
    next.webgpuCpuAdapter !== previous.webgpuCpuAdapter ||
    next.inferenceTimeout !== previous.inferenceTimeout
  )
    forgetModels();
  syncConcurrency();
  return librarySettings();
}

/** Sets how many jobs may be inside the native core at once: configure({ nativeConcurrency }). */
export function setConcurrency(concurrency: number): void {
  configure({ nativeConcurrency: concurrency });
}

/**
 * The jobs let inside the native core at once now: the nativeConcurrency setting, or with 0 the
 * choice for the provider in use (2 on the CPU, one per core from 4 to 16 on a GPU; the CPU's until
 * a model has loaded).
 */
export function concurrencyInUse(): number {
  syncConcurrency();
  return limiter.concurrency;
}

/** Jobs running or waiting in this process. */
export function queueSize(): number {
  return limiter.size;
}

/** Where inference runs: the execution provider in use and what the loaded ONNX Runtime offers. */
export interface InferenceProviders {
  /**
   * The provider in use ('cpu', 'cuda', 'tensorrt' or 'webgpu'): the setting's one provider, or the
   * entry of its fall-back list that a model loaded with; null while a list has not been tried yet
   * (no model loaded).
   */
  provider: ProviderName | null;
  /** With cuda and tensorrt: the GPU's index; null otherwise. */
  deviceId: number | null;
  /**
   * With webgpu: the Vulkan device it runs on, as the loader names it (e.g. 'NVIDIA H100 80GB HBM3',
   * or 'SwiftShader Device (Subzero)' where webgpuCpuAdapter allows a CPU one); null otherwise.
   */
  device: string | null;
  /** The executionProvider setting, e.g. 'webgpu,cpu'. */
  configured: string;
  /** The providers of the fall-back list that could not start, in order, with ONNX Runtime's reason. */
  skipped: Array<{ provider: string; reason: string }>;
  /**
   * The execution providers the loaded ONNX Runtime was built with, e.g. ['CPUExecutionProvider'].
   * A provider listed may still be unusable (its libraries, CUDA or cuDNN missing; no GPU adapter):
   * onnxruntime-node's Linux build lists CUDAExecutionProvider without shipping its libraries.
   */
  available: string[];
}

/** The execution provider in use and the runtime's providers; starts the native core (BgoneError if it cannot). */
export function inferenceProviders(): InferenceProviders {
  const state = providerInUse();
  let available: string[];
  try {
    available = native().availableProviders();
  } catch (err) {
    throw fromNativeError(err);
  }
  const choice = state?.choice;
  return {
    provider: choice?.provider ?? null,
    deviceId: choice && (choice.provider === 'cuda' || choice.provider === 'tensorrt') ? choice.deviceId : null,
    device: choice?.provider === 'webgpu' ? native().webgpuDevice() : null,
    configured: librarySettings().executionProvider,
    skipped: state?.skipped.map((s) => ({ ...s })) ?? [],
    available,
  };
}

/**
 * Loads a model ahead of the first request (otherwise it loads on first use), and warms it
 * (WARM_UP_RUNS in models.ts). Resolves to the model loaded: the one named, or the default (on a GPU
 * provider its float variant, models.ts floatVariant).
 */
export async function preloadModel(name?: string): Promise<string> {
  const lease = await leaseModel(name, true);
  lease.release();
  return lease.key;
}

type RunPriority = 'normal' | 'background';
const PRIORITIES: readonly RunPriority[] = ['normal', 'background'];

/** How a job queues for the native core: 'background' jobs go in only when no normal job waits. */
export interface RunOptions {
  priority?: RunPriority;
  /**
   * Drops the job while it still waits for a place in the native core (e.g. its HTTP client went
   * away): its promise then rejects with the signal's reason (an `AbortError` DOMException unless
   * abort() was given another), not with a BgoneError. A job already inside the native core runs
   * to its end: a native call cannot be stopped halfway.
   */
  signal?: AbortSignal;
}

/** Validates run options as normaliseOptions does options: a BgoneError('validation_error') naming the field. */
function checkRunOptions(run: unknown): { priority: RunPriority; signal: AbortSignal | undefined } {
  if (run === undefined) return { priority: 'normal', signal: undefined };
  if (run === null || typeof run !== 'object') throw new BgoneError('validation_error', 'run must be an object.', { field: 'run' });
  const { priority, signal, ...unknown } = run as Record<string, unknown>;
  const extra = Object.keys(unknown)[0];
  if (extra !== undefined) {
    throw new BgoneError('validation_error', `${extra} is not a run option (priority, signal).`, { field: extra, allowed: ['priority', 'signal'] });
  }
  if (priority !== undefined && !PRIORITIES.includes(priority as RunPriority)) {
    throw new BgoneError('validation_error', `priority must be one of ${PRIORITIES.join(', ')}.`, { field: 'priority', allowed: PRIORITIES });
  }
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw new BgoneError('validation_error', 'signal must be an AbortSignal.', { field: 'signal' });
  }
  return { priority: (priority as RunPriority | undefined) ?? 'normal', signal };
}

/**
 * Runs a job: `input` and `options` (checked by prepareJob first), options that carry the image
 * themselves (imageFile, imageUrl or imageFileB64), or a job prepareJob already checked, which is
 * not checked again. URLs are downloaded first (the fetchAllow and fetchAllowPrivate settings say
 * which private addresses may be reached), and a background image's data are checked before the
 * model runs (prepare-request.ts; a job prepareJob checked has had its background's header checked
 * only). Queues for the native core as `run` says.
 */
export async function removeBackground(input: Buffer | Uint8Array, options?: RemoveBackgroundOptions, run?: RunOptions): Promise<RemoveBackgroundResult>;
export async function removeBackground(options: RemoveBackgroundOptions, run?: RunOptions): Promise<RemoveBackgroundResult>;
export async function removeBackground(job: PreparedJob, run?: RunOptions): Promise<RemoveBackgroundResult>;
export async function removeBackground(
  input: Buffer | Uint8Array | PreparedJob | RemoveBackgroundOptions,
  second?: RemoveBackgroundOptions | RunOptions,
  third?: RunOptions,
): Promise<RemoveBackgroundResult> {
  let job: PreparedJob;
  let run: ReturnType<typeof checkRunOptions>;
  if (isPreparedJob(input)) {
    job = input;
    run = checkRunOptions(second);
  } else {
    // The image as the first argument, or inside the options (null stays null: a validation_error).
    const bytes = input instanceof Uint8Array ? input : undefined;
    if (bytes === undefined && Object.prototype.toString.call(input) !== '[object Object]') {
      throw new BgoneError('missing_image', 'input must be a Buffer or Uint8Array, or options holding the image.');
    }
    const options = (bytes ? second : input) as RemoveBackgroundOptions | undefined;
    run = checkRunOptions(bytes ? third : second);
    job = await prepareRequest(bytes, options, { signal: run.signal });
  }
  // A job without inference (remove_background=false) neither loads nor runs a model: its handle is null.
  const lease = job.options.inference ? await leaseModel(job.model) : undefined;
  try {
    const { alpha, ...result } = await limiter.run(
      () => native().removeBackground(job.input, job.options, lease?.handle ?? null, job.background),
      run.priority,
      run.signal,
    );
    if (alpha === null) return result;
    // format=zip: the colours (JPEG) and the alpha (PNG) of the one native call, as remove.bg names them.
    const data = zipStored([
      { name: 'color.jpg', data: result.data },
      { name: 'alpha.png', data: alpha },
    ]);
    return { ...result, data, format: 'zip', channels: 4 };
  } catch (err) {
    if (run.signal?.aborted && err === run.signal.reason) throw err; // dropped while waiting: the caller's own reason
    throw fromNativeError(err);
  } finally {
    lease?.release();
  }
}
