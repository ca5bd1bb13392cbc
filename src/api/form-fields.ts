/**
 * The forms of POST /api/v1/remove and POST /api/v1/batches, derived from the option table
 * (src/lib/option-table.ts): the text fields with their longest values, the file parts, and how
 * many images of what size each takes. The HTTP layer's readers (multipart, JSON, urlencoded)
 * accept exactly these shapes.
 */
import type { FormShape } from '../http/exchange.js';
import { MAX_BASE64_LENGTH, MAX_FILE_BYTES, type OptionRow, optionByName, optionsFor } from '../lib/option-table.js';

/** The fields (by name, with the option each carries) whose option takes base64, with the most bytes each decodes to. */
export function base64Fields(fields: ReadonlyArray<readonly [string, string | null | undefined]>): Record<string, number> {
  const rows = fields.filter(([, option]) => !!option && optionByName(option)?.schema.contentEncoding === 'base64');
  return Object.fromEntries(rows.map(([name]) => [name, MAX_FILE_BYTES]));
}

/**
 * The most bytes a form takes in an option's field. A URL's length is its option's own check
 * (invalid_image_url, in UTF-16 units): the form takes the bytes of its longest text in UTF-8, at
 * most three per unit.
 */
export function formFieldBytes(row: OptionRow): number {
  return row.code === 'invalid_image_url' ? 3 * row.maxLength : row.maxLength;
}

function shapeOf(rows: readonly OptionRow[], files: Record<string, number>, maxTotalBytes: number): FormShape {
  const fields: Record<string, number> = {};
  for (const row of rows) {
    if (row.part === 'field') fields[row.name] = formFieldBytes(row);
    else files[row.name] ??= 1;
  }
  return {
    fields,
    files,
    maxFileBytes: MAX_FILE_BYTES,
    maxTotalBytes,
    base64: base64Fields(rows.filter((row) => row.part === 'field').map((row) => [row.name, row.name])),
  };
}

/** The name of the image parts. */
export const IMAGE_FIELD = 'image_file';
/** The name of the background image's part. */
export const BG_IMAGE_FIELD = 'bg_image_file';

/** Every option a form may carry: the image (one source) and a background image, 20 MB each. */
export const REMOVE_FORM: FormShape = shapeOf(optionsFor('form'), {}, 2 * MAX_FILE_BYTES);

/**
 * The largest body of a removal: the image in its longest form (base64), a background file, and
 * 64 KiB for the other fields and the framing.
 */
export const REMOVE_FORM_MAX_BYTES = MAX_BASE64_LENGTH + MAX_FILE_BYTES + 64 * 1024;

/** The batch options (rows carried by batches) beside up to `maxImages` images of at most 20 MB each and `maxTotalBytes` in all. */
export function batchForm(maxImages: number, maxTotalBytes: number): FormShape {
  return shapeOf(optionsFor('batch'), { [IMAGE_FIELD]: maxImages }, maxTotalBytes);
}
