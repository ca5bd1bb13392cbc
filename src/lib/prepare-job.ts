/**
 * Every check a job passes before a pixel is decoded, in one step that each path runs once: the
 * library's removeBackground, /remove (before a credit is reserved), a batch image (on arrival,
 * kept for the run). The order: the options, the image's source, type and size, a broken
 * installation (the addon, the manifest and the model's file; the model itself is not loaded), the
 * header, the background image's header, the region of interest, the crop caps; then the job's
 * plan (job-plan.ts): what the model's family decides for this image, and the job's memory
 * estimate. URLs are downloaded before this step, and a background's data checked after it, by the
 * request's preparation (prepare-request.ts).
 */
import { markAsUntransferable } from 'node:worker_threads';
import { checkCropBox } from './crop-cap.js';
import { BgoneError } from './errors.js';
import { planJob } from './job-plan.js';
import { modelContract, providerInUse, resolveModel } from './models.js';
import { native } from './native.js';
import {
  isNormalised,
  MAX_FILE_BYTES,
  type NativeOptions,
  type NormalisedOptions,
  normaliseOptions,
  type RemoveBackgroundOptions,
  type RequestedOptions,
  resolveRoi,
} from './options.js';
import { asBuffer, type ImageProbe, probeImage } from './probe.js';

/** A job that passed every check: removeBackground(job) runs it as it is. */
export interface PreparedJob {
  readonly input: Buffer;
  /** What the native core reads, the job's plan and the roi for this image included. */
  readonly options: Readonly<NativeOptions>;
  /** The model's name (undefined: the manifest's default). */
  readonly model: string | undefined;
  readonly probe: Readonly<ImageProbe>;
  /** The background image's bytes (bg_image_file or a downloaded bg_image_url), null when none. */
  readonly background: Buffer | null;
  readonly backgroundProbe: Readonly<ImageProbe> | null;
  /** The bytes the job holds at its peak, by its plan (job-memory.ts): what the service's memory gate admits it by. */
  readonly memoryBytes: number;
}

/** Jobs made here: removeBackground refuses a look-alike, whose options no check has seen. */
const prepared = new WeakSet<PreparedJob>();

/** Whether `value` is a job prepareJob returned. */
export function isPreparedJob(value: unknown): value is PreparedJob {
  return typeof value === 'object' && value !== null && prepared.has(value as PreparedJob);
}

/**
 * Checks a job and returns it ready to run, or throws the BgoneError removeBackground would.
 * `input` is the image's bytes, or undefined when the options carry it (imageFile, imageFileB64;
 * imageUrl and bgImageUrl must be downloaded first: removeBackground does). `options` are public
 * options, or the result of normaliseOptions (taken as they are: a batch validates its options once
 * for all its images). The job holds a copy of its bytes: the native core reads them on other
 * threads until the job ends, whatever the caller does with its own memory meanwhile (transfers its
 * ArrayBuffer to a worker, say, which frees it here).
 */
export function prepareJob(input: Buffer | Uint8Array | undefined, options: RemoveBackgroundOptions | NormalisedOptions = {}): PreparedJob {
  return prepare(input, options, true);
}

/**
 * prepareJob for bytes the service already owns (an upload it read, a file): taken as they are,
 * without a copy. Only for memory that nothing transfers or frees while the job runs; not exported
 * from the package.
 */
export function prepareOwnedJob(input: Buffer | Uint8Array | undefined, options: RemoveBackgroundOptions | NormalisedOptions = {}): PreparedJob {
  return prepare(input, options, false);
}

/** A copy of `input` in memory of its own, which no transfer can take away (the job's `input` is public). */
function ownCopy(input: Uint8Array): Buffer {
  const copy = Buffer.allocUnsafeSlow(input.length);
  copy.set(input);
  markAsUntransferable(copy.buffer);
  return copy;
}

/**
 * The one image of the job: from the first argument or from exactly one source option (a URL not
 * yet downloaded is its text). None is missing_image; two are a validation_error naming both.
 */
export function imageSource(input: unknown, { sources }: NormalisedOptions): Uint8Array | string {
  if (input !== undefined && !(input instanceof Uint8Array)) throw new BgoneError('missing_image', 'input must be a Buffer or Uint8Array.');
  const given: Array<[string, Uint8Array | string]> = [];
  if (input !== undefined) given.push(['image_file', input]);
  if (sources.imageFile !== undefined) given.push(['image_file', sources.imageFile]);
  if (sources.imageFileB64 !== undefined) given.push(['image_file_b64', sources.imageFileB64]);
  if (sources.imageUrl !== undefined) given.push(['image_url', sources.imageUrl]);
  if (given.length > 1) {
    const fields = given.map(([name]) => name);
    throw new BgoneError('validation_error', `${fields.join(' and ')} were both given: give exactly one source of the image.`, {
      field: fields[0],
      fields,
    });
  }
  const [source] = given;
  if (!source) {
    throw new BgoneError('missing_image', 'No image was provided: give one of image_file, image_url and image_file_b64.', {
      field: 'image_file',
      fields: ['image_file', 'image_url', 'image_file_b64'],
    });
  }
  return source[1];
}

/** Checks the background image's header (its errors naming bg_image_file), once for a batch's images. */
export function checkBackground(normalised: NormalisedOptions): void {
  probeBackground(normalised);
}

/** The background image's probe, its errors naming bg_image_file. */
function probeBackground(normalised: NormalisedOptions): { bytes: Buffer; probe: ImageProbe } | null {
  const { bgImageFile, bgImageUrl } = normalised.sources;
  if (bgImageUrl !== undefined) {
    throw new BgoneError('validation_error', 'bg_image_url is downloaded by removeBackground; prepareJob takes bytes.', { field: 'bg_image_url' });
  }
  if (bgImageFile === undefined) return null;
  try {
    return { bytes: asBuffer(bgImageFile), probe: probeImage(bgImageFile) };
  } catch (err) {
    if (!(err instanceof BgoneError) || err.code === 'internal_error') throw err;
    const message = err.code === 'missing_image' ? 'The background image is empty.' : `The background image: ${err.message}`;
    throw new BgoneError(err.code === 'missing_image' ? 'validation_error' : err.code, message, { ...err.details, field: 'bg_image_file' }, err.detail);
  }
}

function prepare(input: Buffer | Uint8Array | undefined, options: RemoveBackgroundOptions | NormalisedOptions, copy: boolean): PreparedJob {
  const normalised = isNormalised(options) ? options : normaliseOptions(options);
  const image = imageSource(input, normalised);
  if (typeof image === 'string') {
    throw new BgoneError('validation_error', 'image_url is downloaded by removeBackground; prepareJob takes bytes.', { field: 'image_url' });
  }
  if (image.length === 0) throw new BgoneError('missing_image', 'The image is empty (0 bytes).', { field: 'image_file' });
  if (image.length > MAX_FILE_BYTES) throw new BgoneError('image_too_large');
  native();
  const contract = modelContract(resolveModel(normalised.model).entry);
  const probe = probeImage(image);
  const background = probeBackground(normalised);
  const applied: RequestedOptions = { ...normalised.native, roi: resolveRoi(normalised.roiSpec, probe.width, probe.height) };
  checkCropBox(probe, applied);
  const plan = planJob(
    applied,
    { bytes: image, width: probe.width, height: probe.height },
    contract,
    normalised.effort,
    providerInUse()?.choice.provider ?? 'cpu',
    background?.probe,
  );
  const job: PreparedJob = Object.freeze({
    input: copy ? ownCopy(image) : asBuffer(image),
    options: Object.freeze(plan.options),
    model: normalised.model,
    probe: Object.freeze(probe),
    background: background ? (copy ? ownCopy(background.bytes) : background.bytes) : null,
    backgroundProbe: background ? Object.freeze(background.probe) : null,
    memoryBytes: plan.memoryBytes,
  });
  prepared.add(job);
  return job;
}
