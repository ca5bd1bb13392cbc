/**
 * Every check a job passes before a pixel is decoded, in one step that each path runs once: the
 * library's removeBackground, /remove (before a credit is reserved), a batch image (on arrival,
 * kept for the run). The order is the one removeBackground has always had: the input's type and
 * size, the options, a broken installation (the addon, the manifest and the model's file; the model
 * itself is not loaded), the header, the crop caps; then the inference size for the image, and the
 * memory estimate when the caller gives an estimator (the service's lives beside its memory gate).
 */
import { markAsUntransferable } from 'node:worker_threads';
import { checkCropBox } from './crop-cap.js';
import { BgoneError } from './errors.js';
import { withInferenceSize } from './inference-size.js';
import { resolveModel } from './models.js';
import { native } from './native.js';
import { isNormalised, MAX_FILE_BYTES, type NativeOptions, type NormalisedOptions, normaliseOptions, type RemoveBackgroundOptions } from './options.js';
import { asBuffer, type ImageProbe, probeImage } from './probe.js';

/** Estimates a job's peak memory from its bytes, its probed size and its normalised options. */
export type MemoryEstimator = (input: Uint8Array, probe: ImageProbe, options: NativeOptions) => number;

/** A job that passed every check: removeBackground(job) runs it as it is. */
export interface PreparedJob {
  readonly input: Buffer;
  /** What the native core reads, the inference size for this image included. */
  readonly options: Readonly<NativeOptions>;
  /** The model's name (undefined: the manifest's default). */
  readonly model: string | undefined;
  readonly probe: Readonly<ImageProbe>;
  /** The estimator's answer in bytes; undefined when none was given. */
  readonly memoryBytes: number | undefined;
}

/** Jobs made here: removeBackground refuses a look-alike, whose options no check has seen. */
const prepared = new WeakSet<PreparedJob>();

/** Whether `value` is a job prepareJob returned. */
export function isPreparedJob(value: unknown): value is PreparedJob {
  return typeof value === 'object' && value !== null && prepared.has(value as PreparedJob);
}

/**
 * Checks a job and returns it ready to run, or throws the BgoneError removeBackground would.
 * `options` are public options, or the result of normaliseOptions (taken as they are: a batch
 * validates its options once for all its images). The job holds a copy of `input`: the native core
 * reads it on other threads until the job ends, whatever the caller does with its own memory
 * meanwhile (transfers its ArrayBuffer to a worker, say, which frees it here).
 */
export function prepareJob(
  input: Buffer | Uint8Array,
  options: RemoveBackgroundOptions | NormalisedOptions = {},
  estimateMemory?: MemoryEstimator,
): PreparedJob {
  return prepare(input, options, estimateMemory, true);
}

/**
 * prepareJob for bytes the service already owns (an upload it read, a file): taken as they are,
 * without a copy. Only for memory that nothing transfers or frees while the job runs; not exported
 * from the package.
 */
export function prepareOwnedJob(
  input: Buffer | Uint8Array,
  options: RemoveBackgroundOptions | NormalisedOptions = {},
  estimateMemory?: MemoryEstimator,
): PreparedJob {
  return prepare(input, options, estimateMemory, false);
}

/** A copy of `input` in memory of its own, which no transfer can take away (the job's `input` is public). */
function ownCopy(input: Uint8Array): Buffer {
  const copy = Buffer.allocUnsafeSlow(input.length);
  copy.set(input);
  markAsUntransferable(copy.buffer);
  return copy;
}

function prepare(
  input: Buffer | Uint8Array,
  options: RemoveBackgroundOptions | NormalisedOptions,
  estimateMemory: MemoryEstimator | undefined,
  copy: boolean,
): PreparedJob {
  if (!(input instanceof Uint8Array)) throw new BgoneError('missing_image', 'input must be a Buffer or Uint8Array.');
  if (input.length === 0) throw new BgoneError('missing_image');
  if (input.length > MAX_FILE_BYTES) throw new BgoneError('image_too_large');
  const { native: normalised, model } = isNormalised(options) ? options : normaliseOptions(options);
  native();
  resolveModel(model);
  const probe = probeImage(input);
  checkCropBox(probe, normalised);
  const job: PreparedJob = Object.freeze({
    input: copy ? ownCopy(input) : asBuffer(input),
    options: Object.freeze({ ...withInferenceSize(normalised, probe.width, probe.height) }),
    model,
    probe: Object.freeze(probe),
    memoryBytes: estimateMemory?.(input, probe, normalised),
  });
  prepared.add(job);
  return job;
}
