/**
 * The header check of an upload, without decoding a pixel: its own file so that prepare-job.ts
 * calls it through an import (a test counts those calls, test/http/prepare-once.test.ts).
 */
import { BgoneError, fromNativeError } from './errors.js';
import { checkClaimedSize } from './header-size.js';
import { native } from './native.js';
import { type EncodedFormat, MAX_FILE_BYTES, MAX_SIDE } from './options.js';

/** What probeImage tells without decoding a pixel. */
export interface ImageProbe {
  format: EncodedFormat;
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
  try {
    return native().probe(asBuffer(input), MAX_SIDE);
  } catch (err) {
    throw fromNativeError(err);
  }
}

/** The same bytes as a Buffer, without a copy. */
export function asBuffer(input: Uint8Array): Buffer {
  return Buffer.isBuffer(input) ? input : Buffer.from(input.buffer, input.byteOffset, input.byteLength);
}
