/**
 * Streaming multipart/form-data parsing with busboy, fed chunk by chunk from uWebSockets.js.
 * Every limit is set (busboy's defaults are unlimited): one image_file part of at most 20 MB, a few
 * small text fields, bounded part count and header sizes. The image stays in memory only.
 */
import busboy from 'busboy';
import { MAX_FILE_BYTES } from '../lib/options.js';
import { HttpError } from './errors.js';

/** The form fields of POST /api/v1/remove besides image_file. */
export const OPTION_FIELDS = ['format', 'channels', 'bg_color', 'size', 'crop', 'padding'] as const;
export type OptionField = (typeof OPTION_FIELDS)[number];

export interface ParsedForm {
  image: Buffer | undefined;
  fields: Partial<Record<OptionField, string>>;
}

export class MultipartParser {
  readonly done: Promise<ParsedForm>;
  private parser: busboy.Busboy | undefined;
  private settled = false;
  private resolve!: (form: ParsedForm) => void;
  private reject!: (err: HttpError) => void;
  private readonly chunks: Buffer[] = [];
  private imageBytes = 0;
  private imageSeen = false;
  private readonly fields: Partial<Record<OptionField, string>> = {};
  private pendingFile = false;
  private parserClosed = false;

  constructor(contentType: string) {
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
          files: 1,
          fields: OPTION_FIELDS.length,
          parts: OPTION_FIELDS.length + 2,
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
      if (this.imageSeen) {
        stream.resume();
        this.fail(new HttpError('validation_error', 'Only one image_file part is allowed.', { field: 'image_file' }));
        return;
      }
      this.imageSeen = true;
      this.pendingFile = true;
      void info;
      stream.on('data', (chunk: Buffer) => {
        this.imageBytes += chunk.length;
        if (!this.settled) this.chunks.push(chunk);
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
        this.pendingFile = false;
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
    p.on('filesLimit', () => this.fail(new HttpError('validation_error', 'Only one image_file part is allowed.', { field: 'image_file' })));
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
    this.chunks.length = 0;
    this.parser?.removeAllListeners();
    this.parser?.on('error', () => {});
  }

  private maybeFinish(): void {
    if (this.settled || !this.parserClosed || this.pendingFile) return;
    this.settled = true;
    const image = this.imageSeen ? Buffer.concat(this.chunks, this.imageBytes) : undefined;
    this.chunks.length = 0;
    this.resolve({ image, fields: this.fields });
  }

  private fail(err: HttpError): void {
    if (this.settled) return;
    this.settled = true;
    this.chunks.length = 0;
    this.reject(err);
  }
}
