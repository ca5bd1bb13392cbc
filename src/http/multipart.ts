/**
 * Streaming multipart/form-data parsing with busboy, fed chunk by chunk by the exchange's readForm
 * (routes use that, not this module). Every limit is set (busboy's defaults are unlimited): one
 * image_file part of at most 20 MB by default, a few small text fields, bounded part count and
 * header sizes. The image stays in memory only.
 */
import busboy from 'busboy';
import { MAX_FILE_BYTES } from '../lib/options.js';
import { HttpError } from '../service/errors.js';

/** The form fields of POST /api/v1/remove besides image_file. */
export const OPTION_FIELDS = ['format', 'channels', 'bg_color', 'size', 'crop', 'padding'] as const;
export type OptionField = (typeof OPTION_FIELDS)[number];

export interface UploadedImage {
  /** The part's filename as sent (at most 255 characters kept), '' when none. */
  filename: string;
  data: Buffer;
}

export interface ParsedForm {
  /** The first image_file part (the only one /remove allows). */
  image: Buffer | undefined;
  /** Every image_file part, in order. */
  images: UploadedImage[];
  fields: Partial<Record<OptionField, string>>;
}

/** How many image_file parts a form may hold, and how many bytes of images in all. */
export interface ImageLimits {
  maxImages: number;
  maxTotalBytes: number;
}

const ONE_IMAGE: ImageLimits = { maxImages: 1, maxTotalBytes: MAX_FILE_BYTES };

export class MultipartParser {
  readonly done: Promise<ParsedForm>;
  private parser: busboy.Busboy | undefined;
  private settled = false;
  private resolve!: (form: ParsedForm) => void;
  private reject!: (err: HttpError) => void;
  private totalBytes = 0;
  private readonly images: UploadedImage[] = [];
  private readonly fields: Partial<Record<OptionField, string>> = {};
  /** File parts announced whose stream has not ended yet. */
  private pendingFiles = 0;
  /** File parts announced so far: each one's place in `images`. */
  private announced = 0;
  private parserClosed = false;

  constructor(
    contentType: string,
    private readonly limits: ImageLimits = ONE_IMAGE,
  ) {
    this.done = new Promise<ParsedForm>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    this.done.catch(() => {}); // observed by the route; avoid unhandled rejections in between
    if (!/^multipart\/form-data\b/i.test(contentType)) {
      this.fail(new HttpError('validation_error', 'The request body must be multipart/form-data.', { field: 'Content-Type' }));
      return;
    }
    try {
      // busboy reports fileSize, fieldSize and parts as exceeded as soon as a count *reaches* its
      // limit, hence one more than what is allowed: an image of exactly MAX_FILE_BYTES (accepted by
      // the contract), a field of 256 bytes, the image with all six fields.
      this.parser = busboy({
        headers: { 'content-type': contentType },
        limits: {
          fileSize: MAX_FILE_BYTES + 1,
          files: limits.maxImages,
          fields: OPTION_FIELDS.length,
          parts: OPTION_FIELDS.length + limits.maxImages + 1,
          fieldSize: 257,
          fieldNameSize: 64,
          headerPairs: 8,
        },
      });
    } catch {
      // busboy throws synchronously on a missing or malformed boundary.
      this.fail(new HttpError('validation_error', 'Malformed multipart/form-data: missing or invalid boundary.', { field: 'Content-Type' }));
      return;
    }
    const p = this.parser;
    p.on('file', (name, stream, info) => {
      stream.on('error', () => {}); // see below: every file stream needs an error listener
      if (name !== 'image_file') {
        stream.resume();
        this.fail(new HttpError('validation_error', `Unknown file part "${name}": the image goes in image_file.`, { field: name }));
        return;
      }
      if (this.limits.maxImages === 1 && this.announced >= 1) {
        stream.resume();
        this.fail(new HttpError('validation_error', 'Only one image_file part is allowed.', { field: 'image_file' }));
        return;
      }
      // Per part: busboy may announce the next part before the previous one's stream has ended.
      this.pendingFiles++;
      const position = this.announced++;
      const chunks: Buffer[] = [];
      let bytes = 0;
      stream.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
        this.totalBytes += chunk.length;
        if (this.totalBytes > this.limits.maxTotalBytes) {
          this.fail(
            new HttpError('image_too_large', `The images are larger than ${this.limits.maxTotalBytes / 1024 / 1024} MB in all.`, {
              field: 'image_file',
              limit_bytes: this.limits.maxTotalBytes,
            }),
          );
          return;
        }
        if (!this.settled) chunks.push(chunk);
      });
      // A body that ends inside the part makes busboy destroy the file stream with an error;
      // unhandled, it would crash the process.
      stream.on('error', () =>
        this.fail(new HttpError('validation_error', 'Malformed multipart/form-data body: the image part is incomplete.', { field: 'image_file' })),
      );
      stream.on('limit', () =>
        this.fail(new HttpError('image_too_large', 'The image is larger than 20 MB.', { field: 'image_file', limit_bytes: MAX_FILE_BYTES })),
      );
      stream.on('end', () => {
        if (this.settled) return;
        this.images[position] = { filename: (info.filename ?? '').slice(0, 255), data: Buffer.concat(chunks, bytes) };
        this.pendingFiles--;
        this.maybeFinish();
      });
    });
    p.on('field', (name, value, info) => {
      if (!(OPTION_FIELDS as readonly string[]).includes(name)) {
        if (name === 'image_file') this.fail(new HttpError('validation_error', 'image_file must be a file part.', { field: 'image_file' }));
        else this.fail(new HttpError('validation_error', `Unknown field "${name}".`, { field: name, allowed: [...OPTION_FIELDS, 'image_file'] }));
        return;
      }
      if (info.valueTruncated) {
        this.fail(new HttpError('validation_error', `Field "${name}" is too long.`, { field: name }));
        return;
      }
      if (this.fields[name as OptionField] !== undefined) {
        this.fail(new HttpError('validation_error', `Field "${name}" is given twice.`, { field: name }));
        return;
      }
      this.fields[name as OptionField] = value;
    });
    p.on('filesLimit', () =>
      this.fail(
        new HttpError(
          'validation_error',
          limits.maxImages === 1 ? 'Only one image_file part is allowed.' : `At most ${limits.maxImages} image_file parts are allowed.`,
          { field: 'image_file', limit: limits.maxImages },
        ),
      ),
    );
    p.on('fieldsLimit', () => this.fail(new HttpError('validation_error', 'Too many fields.', { allowed: [...OPTION_FIELDS, 'image_file'] })));
    p.on('partsLimit', () => this.fail(new HttpError('validation_error', 'Too many parts.', { allowed: [...OPTION_FIELDS, 'image_file'] })));
    p.on('error', () => this.fail(new HttpError('validation_error', 'Malformed multipart/form-data body.')));
    p.on('close', () => {
      this.parserClosed = true;
      this.maybeFinish();
    });
  }

  /** Feeds one chunk (copied: uWS reuses its buffer after the callback). */
  write(chunk: Buffer): void {
    if (this.settled || !this.parser) return;
    try {
      this.parser.write(chunk);
    } catch {
      this.fail(new HttpError('validation_error', 'Malformed multipart/form-data body.'));
    }
  }

  end(): void {
    if (this.settled || !this.parser) return;
    try {
      this.parser.end();
    } catch {
      this.fail(new HttpError('validation_error', 'Malformed multipart/form-data body.'));
    }
    // busboy stays silent on a body that ends before its closing boundary: treat it as malformed.
    setImmediate(() => {
      if (!this.settled && !this.parserClosed) this.fail(new HttpError('validation_error', 'Malformed multipart/form-data body: it ends early.'));
    });
  }

  /** Stops parsing after an answer was already decided (or the client went away). */
  abort(): void {
    this.settled = true;
    this.images.length = 0;
    this.parser?.removeAllListeners();
    this.parser?.on('error', () => {});
  }

  private maybeFinish(): void {
    if (this.settled || !this.parserClosed || this.pendingFiles > 0) return;
    this.settled = true;
    this.resolve({ image: this.images[0]?.data, images: this.images, fields: this.fields });
  }

  private fail(err: HttpError): void {
    if (this.settled) return;
    this.settled = true;
    this.images.length = 0;
    this.reject(err);
  }
}
