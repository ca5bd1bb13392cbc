/**
 * bgone's library API: removeBackground(bytes, options) turns an uploaded JPEG, PNG or WebP into the
 * finished cut-out in one native call that runs off the JavaScript thread.
 */
import { BgoneError, fromNativeError } from './errors.js';
import { Limiter } from './limiter.js';
import { getModel } from './models.js';
import { native, type NativeTimings } from './native.js';
import { MAX_FILE_BYTES, normaliseOptions, type OutputFormat, type RemoveBackgroundOptions } from './options.js';

export { BgoneError, ERROR_CODES, type ErrorCode } from './errors.js';
export { readManifest, modelNames, type Manifest, type ModelEntry } from './models.js';
export { nativeVersions } from './native.js';
export {
  normaliseOptions,
  parseColor,
  FORMATS,
  CHANNELS,
  SIZES,
  SIZE_PIXELS,
  MAX_FILE_BYTES,
  MAX_SIDE,
  type RemoveBackgroundOptions,
  type OutputFormat,
  type Channels,
  type SizePreset,
} from './options.js';

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

const DEFAULT_CONCURRENCY = 2;
let limiter = new Limiter(Number(process.env.BGONE_NATIVE_CONCURRENCY) || DEFAULT_CONCURRENCY);

/** Sets how many jobs may be inside the native core at once (default 2). */
export function setConcurrency(concurrency: number): void {
  limiter = new Limiter(concurrency);
}

/** Jobs running or waiting in this process. */
export function queueSize(): number {
  return limiter.size;
}

/** Loads a model ahead of the first request (otherwise it loads on first use). */
export async function preloadModel(name?: string): Promise<void> {
  await getModel(name);
}

export async function removeBackground(input: Buffer | Uint8Array, options: RemoveBackgroundOptions = {}): Promise<RemoveBackgroundResult> {
  if (!(input instanceof Uint8Array)) throw new BgoneError('missing_image', 'input must be a Buffer or Uint8Array.');
  if (input.length === 0) throw new BgoneError('missing_image');
  if (input.length > MAX_FILE_BYTES) throw new BgoneError('image_too_large');
  const { native: nativeOptions, model } = normaliseOptions(options);
  const handle = await getModel(model);
  const buffer = Buffer.isBuffer(input) ? input : Buffer.from(input.buffer, input.byteOffset, input.byteLength);
  try {
    const result = await limiter.run(() => native().removeBackground(buffer, nativeOptions, handle));
    return { ...result, format: nativeOptions.format };
  } catch (err) {
    throw fromNativeError(err);
  }
}
