/**
 * A form sent as text: `application/json` (one object of strings, numbers, booleans and nulls) or
 * `application/x-www-form-urlencoded`, parsed as it streams in and checked against the same shape
 * as a multipart form: known fields only, each at most once (a JSON key given twice too) and within
 * its length. A text body carries no file parts.
 *
 * A field the shape names in `base64` (an image as base64 text) is decoded as its text arrives,
 * into one buffer sized from the declared body length: such a body costs its decoded bytes and
 * nothing of its text, like the same image in a multipart file part. Its text may carry a `data:`
 * prefix, line breaks and spaces (a JSON `\n` or `\r\n`, an urlencoded `%0A`), JSON's `\/`, and
 * both base64 alphabets; anything else, a padding `=` before the end, or a length of 4n+1 is
 * `validation_error` naming the field, and more than the field's decoded bytes `image_too_large`.
 */
import { HttpError, httpError } from './errors.js';
import type { FormShape, ParsedForm } from './multipart.js';

/** The text encodings readForm takes besides multipart/form-data. */
export function textFormKind(contentType: string): 'json' | 'urlencoded' | undefined {
  if (/^application\/json\s*(?:;|$)/i.test(contentType)) return 'json';
  if (/^application\/x-www-form-urlencoded\s*(?:;|$)/i.test(contentType)) return 'urlencoded';
  return undefined;
}

/** A field name's longest raw text (past it the name is unknown in any case). */
const MAX_NAME_BYTES = 256;
/** A number or literal's longest text in JSON. */
const MAX_LITERAL_BYTES = 64;
/** The longest data: prefix read before the base64 itself. */
const MAX_DATA_PREFIX = 256;
const DATA_PREFIX = /^data:[a-z0-9.+/-]*(?:;[a-z0-9=.+-]+)*;base64,$/i;

// Byte classes of base64 text: the letters of both alphabets, the padding, the whitespace skipped.
const B64_LETTER = 1;
const B64_PAD = 2;
const B64_SPACE = 3;
const B64_CLASS = new Uint8Array(256);
for (const c of 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_') B64_CLASS[c.charCodeAt(0)] = B64_LETTER;
B64_CLASS[0x3d] = B64_PAD;
for (const c of ' \t\n\r') B64_CLASS[c.charCodeAt(0)] = B64_SPACE;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const AMP = 0x26;
const EQUALS = 0x3d;
const PERCENT = 0x25;
const PLUS = 0x2b;
const isJsonSpace = (c: number) => c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;

function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  const lower = c | 0x20;
  if (lower >= 0x61 && lower <= 0x66) return lower - 0x61 + 10;
  return -1;
}

/** Bytes collected up to a bound (a name, a short text value, a literal). */
class Bytes {
  private buf: Buffer;
  length = 0;
  constructor(
    readonly limit: number,
    initial = Math.min(limit, 256),
  ) {
    this.buf = Buffer.allocUnsafe(Math.max(16, initial));
  }
  /** Appends one byte; false past the limit. */
  push(c: number): boolean {
    if (this.length >= this.limit) return false;
    if (this.length === this.buf.length) {
      const bigger = Buffer.allocUnsafe(Math.min(this.limit, this.buf.length * 2));
      this.buf.copy(bigger, 0, 0, this.length);
      this.buf = bigger;
    }
    this.buf[this.length++] = c;
    return true;
  }
  text(encoding: 'utf8' | 'latin1'): string {
    return this.buf.toString(encoding, 0, this.length);
  }
}

/**
 * Base64 text decoded as it arrives. Each piece of text is first classified byte by byte (letters
 * gathered into a scratch buffer, whitespace skipped, anything else refused), then decoded in whole
 * quads by Node's decoder straight into the output buffer.
 */
class Base64Decoder {
  private out: Buffer;
  private written = 0;
  /** Letters and padding seen (whitespace not counted). */
  private chars = 0;
  private pads = 0;
  private carry = '';
  private scratch = Buffer.allocUnsafe(64 * 1024);
  private inScratch = 0;
  /** The data: prefix while it is being read: its bytes, or null once past it. */
  private prefix: Bytes | null = new Bytes(MAX_DATA_PREFIX);
  private leading = true;

  constructor(
    readonly field: string,
    private readonly maxBytes: number,
    expectedBytes: number,
  ) {
    this.out = Buffer.allocUnsafe(Math.max(1, Math.min(maxBytes, expectedBytes) + 3));
  }

  /** Takes one byte of the text (already unescaped); an error ends the value. */
  byte(c: number): HttpError | undefined {
    if (this.prefix) {
      if (this.leading && B64_CLASS[c] === B64_SPACE) return undefined;
      this.leading = false;
      const p = this.prefix;
      // A data: URL is told by its fifth byte (':' is no base64); until then the bytes may be either.
      if (!p.push(c)) return this.notBase64();
      const head = p.text('latin1');
      if (/^data:/i.test(head)) {
        if (c !== 0x2c) return undefined;
        if (!DATA_PREFIX.test(head)) return this.notBase64();
        this.prefix = null;
        return undefined;
      }
      if ('data:'.startsWith(head.toLowerCase())) return undefined;
      this.prefix = null;
      for (let i = 0; i < p.length; i++) {
        const refused = this.letter(head.charCodeAt(i));
        if (refused) return refused;
      }
      return undefined;
    }
    return this.letter(c);
  }

  private letter(c: number): HttpError | undefined {
    const kind = B64_CLASS[c];
    if (kind === B64_SPACE) return undefined;
    if (kind === B64_LETTER) {
      if (this.pads > 0) return this.notBase64();
    } else if (kind === B64_PAD) {
      if (++this.pads > 2) return this.notBase64();
    } else {
      return this.notBase64();
    }
    this.chars++;
    this.scratch[this.inScratch++] = c;
    return this.inScratch === this.scratch.length ? this.flush() : undefined;
  }

  /** Decodes the whole quads gathered so far. */
  private flush(): HttpError | undefined {
    if (this.inScratch === 0) return undefined;
    const text = this.carry + this.scratch.toString('latin1', 0, this.inScratch);
    this.inScratch = 0;
    const whole = text.length - (text.length % 4);
    this.carry = text.slice(whole);
    return whole > 0 ? this.decode(text.slice(0, whole)) : undefined;
  }

  private decode(text: string): HttpError | undefined {
    const most = (text.length / 4) * 3;
    if (this.written + most > this.out.length) {
      if (this.written + Buffer.byteLength(text, 'base64') > this.maxBytes) return this.tooLarge();
      const bigger = Buffer.allocUnsafe(Math.min(this.maxBytes + 3, Math.max(this.out.length * 2, this.written + most)));
      this.out.copy(bigger, 0, 0, this.written);
      this.out = bigger;
    }
    this.written += this.out.write(text, this.written, 'base64');
    return this.written > this.maxBytes ? this.tooLarge() : undefined;
  }

  /** The decoded bytes (null: the text was empty or blank), or the error of a text that ends wrong. */
  end(): Buffer | null | HttpError {
    if (this.prefix) {
      const p = this.prefix;
      this.prefix = null;
      if (p.length > 0 && /^data:/i.test(p.text('latin1'))) return this.notBase64();
      const head = p.text('latin1');
      for (let i = 0; i < p.length; i++) {
        const refused = this.letter(head.charCodeAt(i));
        if (refused) return refused;
      }
    }
    if (this.chars === 0) return null;
    if (this.chars % 4 === 1) return this.notBase64();
    const refused = this.flush() ?? (this.carry ? this.decode(this.carry) : undefined);
    if (refused) return refused;
    return this.out.subarray(0, this.written);
  }

  private notBase64(): HttpError {
    return httpError('validation_error', `${this.field} is not base64 text.`, { field: this.field });
  }

  private tooLarge(): HttpError {
    return httpError('image_too_large', `${this.field} holds more than ${this.maxBytes / 1024 / 1024} MB.`, { field: this.field, limit_bytes: this.maxBytes });
  }
}

/** Where one field's value goes: a short text collected whole, or base64 decoded as it arrives. */
type Sink = { kind: 'text'; name: string; bytes: Bytes } | { kind: 'base64'; name: string; decoder: Base64Decoder };

/** The JSON tokenizer's states. */
enum J {
  Start,
  KeyOrEnd,
  Key,
  KeyEscape,
  Colon,
  Value,
  Text,
  TextEscape,
  B64,
  B64Escape,
  B64Unicode,
  Literal,
  AfterValue,
  Key2,
  End,
}

/** The urlencoded tokenizer's states. */
enum U {
  Name,
  Value,
}

/**
 * The streaming parser of a text form: write() each chunk (read at once, never kept), then end();
 * `done` resolves with the form or rejects with the HttpError of the first fault.
 */
export class TextFormParser<F extends string = string> {
  readonly done: Promise<ParsedForm<F>>;
  private resolve!: (form: ParsedForm<F>) => void;
  private reject!: (err: HttpError) => void;
  private settled = false;
  private readonly fields: Partial<Record<F, string>> = {};
  private readonly decoded: Partial<Record<string, Buffer>> = {};
  private readonly seen = new Set<string>();
  private readonly allowed: string[];
  private sink: Sink | undefined;
  private name = new Bytes(MAX_NAME_BYTES);
  private literal = new Bytes(MAX_LITERAL_BYTES);
  private json = J.Start;
  /** The JSON key whose value comes next. */
  private keyName = '';
  private url = U.Name;
  /** A urlencoded %XX split across chunks: the digits so far. */
  private percent = -1;
  private percentHigh = 0;
  /** A JSON \uXXXX inside base64: digits read, and the value. */
  private unicodeDigits = 0;
  private unicodeValue = 0;

  constructor(
    private readonly kind: 'json' | 'urlencoded',
    private readonly shape: FormShape<F>,
    /** The body's declared length (0: unknown): the base64 decoder's buffer is sized from it. */
    private readonly declaredLength = 0,
  ) {
    this.allowed = [...Object.keys(shape.fields), ...Object.keys(shape.files)];
    this.done = new Promise<ParsedForm<F>>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    this.done.catch(() => {}); // observed by the route; avoid unhandled rejections in between
  }

  write(chunk: Uint8Array): void {
    if (this.settled) return;
    const err = this.kind === 'json' ? this.writeJson(chunk) : this.writeUrlencoded(chunk);
    if (err) this.fail(err);
  }

  end(): void {
    if (this.settled) return;
    const err = this.kind === 'json' ? this.endJson() : this.endUrlencoded();
    if (err) {
      this.fail(err);
      return;
    }
    this.settled = true;
    this.resolve(Object.keys(this.decoded).length > 0 ? { files: {}, fields: this.fields, decoded: this.decoded } : { files: {}, fields: this.fields });
  }

  /** Stops parsing (an answer was decided elsewhere, or the client left). */
  abort(): void {
    this.settled = true;
    this.sink = undefined;
  }

  private fail(err: HttpError): void {
    if (this.settled) return;
    this.settled = true;
    this.sink = undefined;
    this.reject(err);
  }

  /** Opens the value of field `name`: refused when unknown, a file part, or given before. */
  private open(name: string): HttpError | undefined {
    const { shape } = this;
    if (!Object.hasOwn(shape.fields, name)) {
      if (Object.hasOwn(shape.files, name)) return httpError('validation_error', `${name} is a file: send it in a multipart/form-data body.`, { field: name });
      return httpError('validation_error', `Unknown field "${name.slice(0, 64)}".`, { field: name.slice(0, 64), allowed: this.allowed });
    }
    if (this.seen.has(name)) return httpError('validation_error', `Field "${name}" is given twice.`, { field: name });
    this.seen.add(name);
    const most = shape.base64?.[name];
    if (most !== undefined) {
      // A text body's base64 decodes to at most 3/4 of its length.
      const expected = this.declaredLength > 0 ? Math.ceil((this.declaredLength * 3) / 4) : 64 * 1024;
      this.sink = { kind: 'base64', name, decoder: new Base64Decoder(name, most, expected) };
    } else {
      // Room for every escape a value of the longest length may need (JSON's \uXXXX, a %XX).
      const max = shape.fields[name as F];
      this.sink = { kind: 'text', name, bytes: new Bytes(max * 6 + 16) };
    }
    return undefined;
  }

  private tooLong(name: string): HttpError {
    return httpError('validation_error', `Field "${name}" is too long (at most ${this.shape.fields[name as F]} bytes).`, { field: name });
  }

  /** Stores a text value, checked against its field's length. */
  private store(name: string, value: string): HttpError | undefined {
    if (Buffer.byteLength(value) > this.shape.fields[name as F]) return this.tooLong(name);
    this.fields[name as F] = value;
    return undefined;
  }

  /** Ends a base64 value: its bytes, or '' for a blank one (not given, as any blank field). */
  private closeBase64(name: string, decoder: Base64Decoder): HttpError | undefined {
    const result = decoder.end();
    if (result instanceof HttpError) return result;
    if (result === null) this.fields[name as F] = '';
    else this.decoded[name] = result;
    return undefined;
  }

  // JSON

  private malformed(): HttpError {
    return httpError('validation_error', 'Malformed JSON body.', { field: 'body' });
  }

  private writeJson(chunk: Uint8Array): HttpError | undefined {
    const n = chunk.length;
    let i = 0;
    while (i < n) {
      const c = chunk[i]!;
      switch (this.json) {
        case J.B64: {
          // The hot loop: the image's text, byte by byte until its closing quote.
          const { decoder } = this.sink as Extract<Sink, { kind: 'base64' }>;
          while (i < n) {
            const b = chunk[i]!;
            if (b === QUOTE || b === BACKSLASH) break;
            if (b < 0x20) return this.malformed();
            const refused = decoder.byte(b);
            if (refused) return refused;
            i++;
          }
          if (i === n) return undefined;
          if (chunk[i] === BACKSLASH) {
            this.json = J.B64Escape;
          } else {
            const sink = this.sink as Extract<Sink, { kind: 'base64' }>;
            this.sink = undefined;
            const refused = this.closeBase64(sink.name, sink.decoder);
            if (refused) return refused;
            this.json = J.AfterValue;
          }
          i++;
          continue;
        }
        case J.B64Escape: {
          const { decoder } = this.sink as Extract<Sink, { kind: 'base64' }>;
          this.json = J.B64;
          let refused: HttpError | undefined;
          if (c === 0x2f) refused = decoder.byte(0x2f);
          else if (c === 0x6e || c === 0x72 || c === 0x74)
            refused = undefined; // \n \r \t: line breaks
          else if (c === 0x75) {
            this.json = J.B64Unicode;
            this.unicodeDigits = 0;
            this.unicodeValue = 0;
          } else if (c === QUOTE || c === BACKSLASH || c === 0x62 || c === 0x66)
            refused = decoder.byte(0); // no base64 letter
          else return this.malformed();
          if (refused) return refused;
          i++;
          continue;
        }
        case J.B64Unicode: {
          const h = hexValue(c);
          if (h < 0) return this.malformed();
          this.unicodeValue = this.unicodeValue * 16 + h;
          if (++this.unicodeDigits === 4) {
            this.json = J.B64;
            const { decoder } = this.sink as Extract<Sink, { kind: 'base64' }>;
            const refused = decoder.byte(this.unicodeValue < 0x80 ? this.unicodeValue : 0);
            if (refused) return refused;
          }
          i++;
          continue;
        }
        case J.Text: {
          const { bytes, name } = this.sink as Extract<Sink, { kind: 'text' }>;
          if (c === QUOTE) {
            this.sink = undefined;
            let value: unknown;
            try {
              value = JSON.parse(`"${bytes.text('utf8')}"`);
            } catch {
              return this.malformed();
            }
            const refused = this.store(name, value as string);
            if (refused) return refused;
            this.json = J.AfterValue;
          } else {
            if (c < 0x20) return this.malformed();
            if (!bytes.push(c)) return this.tooLong(name);
            if (c === BACKSLASH) this.json = J.TextEscape;
          }
          i++;
          continue;
        }
        case J.TextEscape: {
          const { bytes, name } = this.sink as Extract<Sink, { kind: 'text' }>;
          if (!bytes.push(c)) return this.tooLong(name);
          this.json = J.Text;
          i++;
          continue;
        }
        case J.Key: {
          if (c === QUOTE) {
            let name: unknown;
            try {
              name = JSON.parse(`"${this.name.text('utf8')}"`);
            } catch {
              return this.malformed();
            }
            this.keyName = name as string;
            this.json = J.Colon;
          } else {
            if (c < 0x20) return this.malformed();
            if (!this.name.push(c)) return this.open(this.name.text('utf8')) ?? this.malformed();
            if (c === BACKSLASH) this.json = J.KeyEscape;
          }
          i++;
          continue;
        }
        case J.KeyEscape: {
          if (!this.name.push(c)) return this.malformed();
          this.json = J.Key;
          i++;
          continue;
        }
        case J.Literal: {
          if (isJsonSpace(c) || c === 0x2c || c === 0x7d) {
            const refused = this.closeLiteral();
            if (refused) return refused;
            this.json = J.AfterValue;
            continue; // the terminator is read by AfterValue
          }
          if (!this.literal.push(c)) return this.malformed();
          i++;
          continue;
        }
        default:
          break;
      }
      // The structural states, one byte each; whitespace between tokens is skipped.
      i++;
      if (isJsonSpace(c)) continue;
      switch (this.json) {
        case J.Start:
          if (c !== 0x7b)
            return c === 0x5b || c === QUOTE || c === 0x2d || (c >= 0x30 && c <= 0x39) || c === 0x74 || c === 0x66 || c === 0x6e
              ? this.notAnObject()
              : this.malformed();
          this.json = J.KeyOrEnd;
          break;
        case J.KeyOrEnd:
        case J.Key2:
          if (c === 0x7d && this.json === J.KeyOrEnd) {
            this.json = J.End;
          } else if (c === QUOTE) {
            this.name = new Bytes(MAX_NAME_BYTES);
            this.json = J.Key;
          } else return this.malformed();
          break;
        case J.Colon:
          if (c !== 0x3a) return this.malformed();
          this.json = J.Value;
          break;
        case J.Value: {
          const name = this.keyName;
          if (c === QUOTE) {
            const refused = this.open(name);
            if (refused) return refused;
            this.json = this.sink?.kind === 'base64' ? J.B64 : J.Text;
          } else if (c === 0x7b || c === 0x5b) {
            return this.open(name) ?? httpError('validation_error', `Field "${name}" must be a string, a number or a boolean.`, { field: name });
          } else if (c === 0x2d || (c >= 0x30 && c <= 0x39) || c === 0x74 || c === 0x66 || c === 0x6e) {
            this.literal = new Bytes(MAX_LITERAL_BYTES);
            this.literal.push(c);
            this.json = J.Literal;
          } else return this.malformed();
          break;
        }
        case J.AfterValue:
          if (c === 0x2c) this.json = J.Key2;
          else if (c === 0x7d) this.json = J.End;
          else return this.malformed();
          break;
        case J.End:
          return this.malformed();
        default:
          return this.malformed();
      }
    }
    return undefined;
  }

  private notAnObject(): HttpError {
    return httpError('validation_error', 'The JSON body must be an object.', { field: 'body' });
  }

  /** A number, true, false or null: a field's text (its JSON form, as JSON.parse reads it), or none for null. */
  private closeLiteral(): HttpError | undefined {
    let value: unknown;
    try {
      value = JSON.parse(this.literal.text('latin1'));
    } catch {
      return this.malformed();
    }
    const name = this.keyName;
    if (value === null) {
      // A null is a field left out; the key still counts once.
      if (this.seen.has(name)) return httpError('validation_error', `Field "${name}" is given twice.`, { field: name });
      if (!Object.hasOwn(this.shape.fields, name)) return this.open(name);
      this.seen.add(name);
      return undefined;
    }
    const refused = this.open(name);
    if (refused) return refused;
    const sink = this.sink!;
    this.sink = undefined;
    if (sink.kind === 'base64') return httpError('validation_error', `${name} must be a string.`, { field: name });
    return this.store(name, String(value));
  }

  private endJson(): HttpError | undefined {
    if (this.json === J.Literal) {
      const refused = this.closeLiteral();
      if (refused) return refused;
      this.json = J.AfterValue;
    }
    if (this.json === J.Start) return this.malformed();
    return this.json === J.End ? undefined : this.malformed();
  }

  // urlencoded

  private writeUrlencoded(chunk: Uint8Array): HttpError | undefined {
    for (let i = 0; i < chunk.length; i++) {
      const c = chunk[i]!;
      if (c === AMP) {
        const refused = this.url === U.Name ? this.closeName(true) : this.closeValue();
        if (refused) return refused;
        this.url = U.Name;
        this.name = new Bytes(MAX_NAME_BYTES * 3);
        continue;
      }
      if (this.url === U.Name) {
        if (c === EQUALS) {
          const refused = this.closeName(false);
          if (refused) return refused;
          this.url = U.Value;
        } else if (!this.name.push(c)) {
          return this.open(this.decodeName()) ?? this.open('');
        }
        continue;
      }
      const sink = this.sink;
      if (!sink) continue; // an empty pair
      if (sink.kind === 'text') {
        if (!sink.bytes.push(c)) return this.tooLong(sink.name);
        continue;
      }
      // base64: %XX and '+' (a space) undone here, byte by byte.
      let b = c;
      if (this.percent >= 0) {
        const h = hexValue(c);
        if (h < 0) return sink.decoder.byte(PERCENT) ?? sink.decoder.byte(c);
        if (this.percent === 0) {
          this.percentHigh = h;
          this.percent = 1;
          continue;
        }
        this.percent = -1;
        b = this.percentHigh * 16 + h;
      } else if (c === PERCENT) {
        this.percent = 0;
        continue;
      } else if (c === PLUS) {
        b = 0x20;
      }
      const refused = sink.decoder.byte(b);
      if (refused) return refused;
    }
    return undefined;
  }

  private decodeName(): string {
    const [first] = new URLSearchParams(`${this.name.text('latin1')}=`);
    return first?.[0] ?? '';
  }

  /** The end of a name: with `=` its value follows; at `&` or the end it is a field without a value. */
  private closeName(valueless: boolean): HttpError | undefined {
    if (this.name.length === 0) {
      this.sink = undefined;
      // An empty pair ("&&", a trailing "&") is skipped, as URLSearchParams does; "=x" names no field.
      return valueless ? undefined : this.open('');
    }
    const name = this.decodeName();
    const refused = this.open(name);
    if (refused) return refused;
    if (valueless) return this.closeValue();
    return undefined;
  }

  private closeValue(): HttpError | undefined {
    const sink = this.sink;
    this.sink = undefined;
    if (!sink) return undefined;
    if (sink.kind === 'base64') {
      if (this.percent >= 0) {
        this.percent = -1;
        return sink.decoder.byte(PERCENT) ?? this.closeBase64(sink.name, sink.decoder);
      }
      return this.closeBase64(sink.name, sink.decoder);
    }
    const [pair] = new URLSearchParams(`v=${sink.bytes.text('latin1')}`);
    return this.store(sink.name, pair?.[1] ?? '');
  }

  private endUrlencoded(): HttpError | undefined {
    return this.url === U.Name ? this.closeName(true) : this.closeValue();
  }
}
