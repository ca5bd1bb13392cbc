/**
 * Streaming multipart/form-data parsing with busboy, fed chunk by chunk by the exchange's readForm
 * (routes use that, not this module). Every limit is set (busboy's defaults are unlimited): the
 * caller's shape of the form (its text fields, its file parts' name, how many files of what size),
 * small text fields, bounded part count and header sizes. The images stay in memory only.
 */
import busboy from 'busboy';
import { type HttpError, httpError } from './errors.js';

/** What a form may hold, as its route declares it. */
export interface FormShape<F extends string = string> {
  /** The text fields allowed, each at most once. */
  fields: readonly F[];
  /** The name of the file parts (the images). */
  file: string;
  /** How many file parts, each of at most maxFileBytes, all of them together at most maxTotalBytes. */
  maxImages: number;
  maxFileBytes: number;
  maxTotalBytes: number;
}

export interface UploadedImage {
  /** The part's filename as sent (at most 255 characters kept), '' when none. */
  filename: string;
  data: Buffer;
}

export interface ParsedForm<F extends string = string> {
  /** The first file part. */
  image: Buffer | undefined;
  /** Every file part, in order. */
  images: UploadedImage[];
  fields: Partial<Record<F, string>>;
}

export class MultipartParser<F extends string = string> {
  readonly done: Promise<ParsedForm<F>>;
  private parser: busboy.Busboy | undefined;
  private settled = false;
  private resolve!: (form: ParsedForm<F>) => void;
  private reject!: (err: HttpError) => void;
  private totalBytes = 0;
  private readonly images: UploadedImage[] = [];
  private readonly fields: Partial<Record<F, string>> = {};
  /** File parts announced whose stream has not ended yet. */
  private pendingFiles = 0;
  /** File parts announced so far: each one's place in `images`. */
  private announced = 0;
  private parserClosed = false;

  constructor(contentType: string, shape: FormShape<F>) {
    const limits = shape;
    const file = shape.file;
    const allowed = [...shape.fields, file];
    this.done = new Promise<ParsedForm<F>>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    this.done.catch(() => {}); // observed by the route; avoid unhandled rejections in between
    if (!/^multipart\/form-data\b/i.test(contentType)) {
      this.fail(httpError('validation_error', 'The request body must be multipart/form-data.', { field: 'Content-Type' }));
      return;
    }
    try {
      // busboy reports fileSize, fieldSize and parts as exceeded as soon as a count *reaches* its
      // limit, hence one more than what is allowed: an image of exactly maxFileBytes, a field of 256
      // bytes, the images with every field.
      this.parser = busboy({
        headers: { 'content-type': contentType },
        limits: {
          fileSize: shape.maxFileBytes + 1,
          files: limits.maxImages,
          fields: shape.fields.length,
          parts: shape.fields.length + limits.maxImages + 1,
          fieldSize: 257,
          fieldNameSize: 64,
          headerPairs: 8,
        },
      });
    } catch {
      // busboy throws synchronously on a missing or malformed boundary.
      this.fail(httpError('validation_error', 'Malformed multipart/form-data: missing or invalid boundary.', { field: 'Content-Type' }));
      return;
    }
    const p = this.parser;
    p.on('file', (name, stream, info) => {
      stream.on('error', () => {}); // see below: every file stream needs an error listener
      if (name !== file) {
        stream.resume();
        this.fail(httpError('validation_error', `Unknown file part "${name}": the image goes in ${file}.`, { field: name }));
        return;
      }
      if (limits.maxImages === 1 && this.announced >= 1) {
        stream.resume();
        this.fail(httpError('validation_error', `Only one ${file} part is allowed.`, { field: file }));
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
        if (this.totalBytes > limits.maxTotalBytes) {
          this.fail(
            httpError('image_too_large', `The images are larger than ${limits.maxTotalBytes / 1024 / 1024} MB in all.`, {
              field: file,
              limit_bytes: limits.maxTotalBytes,
            }),
          );
          return;
        }
        if (!this.settled) chunks.push(chunk);
      });
      // A body that ends inside the part makes busboy destroy the file stream with an error;
      // unhandled, it would crash the process.
      stream.on('error', () => this.fail(httpError('validation_error', 'Malformed multipart/form-data body: the image part is incomplete.', { field: file })));
      stream.on('limit', () =>
        this.fail(
          httpError('image_too_large', `The image is larger than ${shape.maxFileBytes / 1024 / 1024} MB.`, {
            field: file,
            limit_bytes: shape.maxFileBytes,
          }),
        ),
      );
      stream.on('end', () => {
        if (this.settled) return;
        this.images[position] = { filename: (info.filename ?? '').slice(0, 255), data: Buffer.concat(chunks, bytes) };
        this.pendingFiles--;
        this.maybeFinish();
      });
    });
    p.on('field', (name, value, info) => {
      if (!(shape.fields as readonly string[]).includes(name)) {
        if (name === file) this.fail(httpError('validation_error', `${file} must be a file part.`, { field: file }));
        else this.fail(httpError('validation_error', `Unknown field "${name}".`, { field: name, allowed }));
        return;
      }
      if (info.valueTruncated) {
        this.fail(httpError('validation_error', `Field "${name}" is too long.`, { field: name }));
        return;
      }
      if (this.fields[name as F] !== undefined) {
        this.fail(httpError('validation_error', `Field "${name}" is given twice.`, { field: name }));
        return;
      }
      this.fields[name as F] = value;
    });
    p.on('filesLimit', () =>
      this.fail(
        httpError('validation_error', limits.maxImages === 1 ? `Only one ${file} part is allowed.` : `At most ${limits.maxImages} ${file} parts are allowed.`, {
          field: file,
          limit: limits.maxImages,
        }),
      ),
    );
    p.on('fieldsLimit', () => this.fail(httpError('validation_error', 'Too many fields.', { allowed })));
    p.on('partsLimit', () => this.fail(httpError('validation_error', 'Too many parts.', { allowed })));
    p.on('error', () => this.fail(httpError('validation_error', 'Malformed multipart/form-data body.')));
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
      this.fail(httpError('validation_error', 'Malformed multipart/form-data body.'));
    }
  }

  end(): void {
    if (this.settled || !this.parser) return;
    try {
      this.parser.end();
    } catch {
      this.fail(httpError('validation_error', 'Malformed multipart/form-data body.'));
    }
    // busboy stays silent on a body that ends before its closing boundary: treat it as malformed.
    setImmediate(() => {
      if (!this.settled && !this.parserClosed) this.fail(httpError('validation_error', 'Malformed multipart/form-data body: it ends early.'));
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
