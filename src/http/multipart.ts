/**
 * Streaming multipart/form-data parsing with busboy, fed chunk by chunk by the exchange's readForm
 * (routes use that, not this module). Every limit is set (busboy's defaults are unlimited): the
 * caller's shape of the form (its text fields and the longest value of each, its file parts' names,
 * how many files of what size), bounded part count and header sizes. The files stay in memory only.
 */
import busboy from 'busboy';
import { type HttpError, httpError } from './errors.js';

/** What a form may hold, as its route declares it. */
export interface FormShape<F extends string = string> {
  /** The text fields allowed, each at most once, with the longest value of each in bytes. */
  fields: Readonly<Record<F, number>>;
  /** The file parts allowed, by name, with how many parts of that name. */
  files: Readonly<Record<string, number>>;
  /** Each file part at most maxFileBytes, all of them together at most maxTotalBytes. */
  maxFileBytes: number;
  maxTotalBytes: number;
  /**
   * Text fields that carry an image as base64, with the most bytes each may decode to: a text body
   * (text-form.ts) decodes them as they arrive; in a multipart body they are text fields like any.
   */
  base64?: Readonly<Record<string, number>> | undefined;
  /**
   * The refusal of a name outside the shape, where the route words it itself (a dialect that names
   * what a parameter is and why it is refused); undefined, or none given: "Unknown field".
   */
  unknown?: ((name: string) => HttpError | undefined) | undefined;
}

export interface UploadedImage {
  /** The part's filename as sent (at most 255 characters kept), '' when none. */
  filename: string;
  data: Buffer;
}

export interface ParsedForm<F extends string = string> {
  /** The file parts by name, each name's in order. */
  files: Partial<Record<string, UploadedImage[]>>;
  fields: Partial<Record<F, string>>;
  /** The `base64` fields of a text body, decoded (a field sent blank is in `fields` as ''). */
  decoded?: Partial<Record<string, Buffer>> | undefined;
}

export class MultipartParser<F extends string = string> {
  readonly done: Promise<ParsedForm<F>>;
  private parser: busboy.Busboy | undefined;
  private settled = false;
  private resolve!: (form: ParsedForm<F>) => void;
  private reject!: (err: HttpError) => void;
  private totalBytes = 0;
  private readonly files: Record<string, UploadedImage[]> = {};
  private readonly fields: Partial<Record<F, string>> = {};
  /** File parts announced whose stream has not ended yet. */
  private pendingFiles = 0;
  /** File parts announced so far, by name: each one's place in `files[name]`. */
  private readonly announced: Record<string, number> = {};
  private parserClosed = false;

  constructor(contentType: string, shape: FormShape<F>) {
    const fieldNames = Object.keys(shape.fields) as F[];
    const fileNames = Object.keys(shape.files);
    const maxFiles = fileNames.reduce((sum, name) => sum + shape.files[name]!, 0);
    const allowed = [...fieldNames, ...fileNames];
    const longest = Math.max(256, ...fieldNames.map((name) => shape.fields[name]));
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
      // limit, hence one more than what is allowed: a file of exactly maxFileBytes, the longest
      // field's longest value, the files with every field.
      this.parser = busboy({
        headers: { 'content-type': contentType },
        limits: {
          fileSize: shape.maxFileBytes + 1,
          // One file more than allowed reaches the 'file' handler, which names the part refused.
          files: maxFiles + 1,
          fields: fieldNames.length,
          parts: fieldNames.length + maxFiles + 2,
          fieldSize: longest + 1,
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
      const most = Object.hasOwn(shape.files, name) ? shape.files[name]! : 0;
      if (most === 0) {
        stream.resume();
        const own = fieldNames.includes(name as F) ? undefined : shape.unknown?.(name);
        if (own) return this.fail(own);
        const where = fieldNames.includes(name as F) ? `${name} is a text field, not a file part.` : `Unknown file part "${name}".`;
        this.fail(httpError('validation_error', `${where} The file parts are ${fileNames.join(', ')}.`, { field: name, allowed }));
        return;
      }
      const position = this.announced[name] ?? 0;
      if (position >= most) {
        stream.resume();
        this.fail(
          httpError('validation_error', most === 1 ? `Only one ${name} part is allowed.` : `At most ${most} ${name} parts are allowed.`, {
            field: name,
            limit: most,
          }),
        );
        return;
      }
      this.announced[name] = position + 1;
      // Per part: busboy may announce the next part before the previous one's stream has ended.
      this.pendingFiles++;
      const chunks: Buffer[] = [];
      let bytes = 0;
      stream.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
        this.totalBytes += chunk.length;
        if (this.totalBytes > shape.maxTotalBytes) {
          this.fail(
            httpError('image_too_large', `The files are larger than ${shape.maxTotalBytes / 1024 / 1024} MB in all.`, {
              field: name,
              limit_bytes: shape.maxTotalBytes,
            }),
          );
          return;
        }
        if (!this.settled) chunks.push(chunk);
      });
      // A body that ends inside the part makes busboy destroy the file stream with an error;
      // unhandled, it would crash the process.
      stream.on('error', () =>
        this.fail(httpError('validation_error', `Malformed multipart/form-data body: the ${name} part is incomplete.`, { field: name })),
      );
      stream.on('limit', () =>
        this.fail(
          httpError('image_too_large', `The ${name} part is larger than ${shape.maxFileBytes / 1024 / 1024} MB.`, {
            field: name,
            limit_bytes: shape.maxFileBytes,
          }),
        ),
      );
      stream.on('end', () => {
        if (this.settled) return;
        const parts = this.files[name] ?? [];
        parts[position] = { filename: (info.filename ?? '').slice(0, 255), data: Buffer.concat(chunks, bytes) };
        this.files[name] = parts;
        this.pendingFiles--;
        this.maybeFinish();
      });
    });
    p.on('field', (name, value, info) => {
      if (!Object.hasOwn(shape.fields, name)) {
        if (Object.hasOwn(shape.files, name)) this.fail(httpError('validation_error', `${name} must be a file part.`, { field: name }));
        else this.fail(shape.unknown?.(name) ?? httpError('validation_error', `Unknown field "${name}".`, { field: name, allowed }));
        return;
      }
      if (info.valueTruncated || Buffer.byteLength(value) > shape.fields[name as F]) {
        this.fail(httpError('validation_error', `Field "${name}" is too long (at most ${shape.fields[name as F]} bytes).`, { field: name }));
        return;
      }
      if (this.fields[name as F] !== undefined) {
        this.fail(httpError('validation_error', `Field "${name}" is given twice.`, { field: name }));
        return;
      }
      this.fields[name as F] = value;
    });
    p.on('filesLimit', () => this.fail(httpError('validation_error', `At most ${maxFiles} file parts are allowed.`, { limit: maxFiles })));
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
    this.dropFiles();
    this.parser?.removeAllListeners();
    this.parser?.on('error', () => {});
  }

  private maybeFinish(): void {
    if (this.settled || !this.parserClosed || this.pendingFiles > 0) return;
    this.settled = true;
    this.resolve({ files: this.files, fields: this.fields });
  }

  private fail(err: HttpError): void {
    if (this.settled) return;
    this.settled = true;
    this.dropFiles();
    this.reject(err);
  }

  private dropFiles(): void {
    for (const name of Object.keys(this.files)) delete this.files[name];
  }
}
