/**
 * The form of POST /api/v1/remove and of POST /api/v1/batches: the option fields beside the image
 * parts, and how many images of what size each takes. The HTTP layer's multipart reader accepts
 * exactly this shape.
 */
import type { FormShape } from '../http/exchange.js';
import { MAX_FILE_BYTES } from '../lib/options.js';

/** The form fields besides the images. */
export const OPTION_FIELDS = ['format', 'channels', 'bg_color', 'size', 'crop', 'padding'] as const;
export type OptionField = (typeof OPTION_FIELDS)[number];

/** The name of the image parts. */
export const IMAGE_FIELD = 'image_file';

/** One image of at most 20 MB. */
export const REMOVE_FORM: FormShape<OptionField> = {
  fields: OPTION_FIELDS,
  file: IMAGE_FIELD,
  maxImages: 1,
  maxFileBytes: MAX_FILE_BYTES,
  maxTotalBytes: MAX_FILE_BYTES,
};

/** Up to `maxImages` images of at most 20 MB each and `maxTotalBytes` in all. */
export function batchForm(maxImages: number, maxTotalBytes: number): FormShape<OptionField> {
  return { ...REMOVE_FORM, maxImages, maxTotalBytes };
}
