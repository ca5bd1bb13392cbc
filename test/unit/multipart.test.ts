/**
 * The streaming multipart/form-data parser of POST /api/v1/remove (src/http/multipart.ts), fed the
 * way a backend feeds it: chunk by chunk, some chunks a few bytes long. A good form, then every
 * refusal it makes, each with its exact error code, message and details.
 */
import { describe, expect, it } from 'vitest';
import { batchForm, REMOVE_FORM } from '../../src/api/form-fields.js';
import { HttpError } from '../../src/http/errors.js';
import { MultipartParser, type ParsedForm } from '../../src/http/multipart.js';
import { MAX_FILE_BYTES } from '../../src/lib/options.js';

const BOUNDARY = '----bgone-unit-7f3a';
const CONTENT_TYPE = `multipart/form-data; boundary=${BOUNDARY}`;
const ALLOWED = [...Object.keys(REMOVE_FORM.fields), ...Object.keys(REMOVE_FORM.files)];

type Part = { name: string; value: string } | { name: string; filename: string; data: Buffer };

function partHead(part: Part): string {
  return 'filename' in part
    ? `--${BOUNDARY}\r\nContent-Disposition: form-data; name="${part.name}"; filename="${part.filename}"\r\nContent-Type: application/octet-stream\r\n\r\n`
    : `--${BOUNDARY}\r\nContent-Disposition: form-data; name="${part.name}"\r\n\r\n`;
}

/** A complete body with these parts and the closing boundary. */
function body(parts: Part[]): Buffer {
  const pieces: Buffer[] = [];
  for (const part of parts) {
    pieces.push(Buffer.from(partHead(part)), 'filename' in part ? part.data : Buffer.from(part.value), Buffer.from('\r\n'));
  }
  pieces.push(Buffer.from(`--${BOUNDARY}--\r\n`));
  return Buffer.concat(pieces);
}

/** Feeds `bytes` in chunks of `size` (each a fresh copy, as the backends hand them over), then ends. */
function feed(parser: MultipartParser, bytes: Buffer, size: number): Promise<ParsedForm> {
  for (let at = 0; at < bytes.length; at += size) parser.write(Buffer.from(bytes.subarray(at, at + size)));
  parser.end();
  return parser.done;
}

/** The HttpError the parser rejects with, as a plain object to compare exactly. */
async function refusal(done: Promise<ParsedForm>) {
  const err = await done.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(HttpError);
  const { code, message, details } = err as HttpError;
  return { code, message, details };
}

const IMAGE = Buffer.from(Array.from({ length: 5000 }, (_, i) => (i * 31 + 7) % 256));
const image = (data = IMAGE): Part => ({ name: 'image_file', filename: 'photo.jpg', data });

describe('a good form', () => {
  it.each([1, 7, 64, 100_000])('gives the image bytes and every option field, fed in chunks of %i bytes', async (size) => {
    const fields = { format: 'webp', channels: 'rgba', bg_color: '#ff000080', size: 'preview', crop: '1:1', padding: '10%' };
    const parts: Part[] = [...Object.entries(fields).map(([name, value]) => ({ name, value })), image()];
    const form = await feed(new MultipartParser(CONTENT_TYPE, REMOVE_FORM), body(parts), size);
    expect(form.fields).toEqual(fields);
    expect(form.files.image_file?.[0]?.data.equals(IMAGE)).toBe(true);
  });

  it('keeps bytes that look like a boundary or CRLF inside the image', async () => {
    const tricky = Buffer.concat([Buffer.from(`\r\n--${BOUNDARY.slice(0, -1)}\r\n--\r\n`), IMAGE]);
    const form = await feed(new MultipartParser(CONTENT_TYPE, REMOVE_FORM), body([image(tricky)]), 3);
    expect(form.files.image_file?.[0]?.data.equals(tricky)).toBe(true);
  });

  it('accepts the image part before the fields, and the type parameter in any letter case', async () => {
    const form = await feed(
      new MultipartParser(`Multipart/Form-Data; boundary=${BOUNDARY}`, REMOVE_FORM),
      body([image(), { name: 'size', value: 'full' }]),
      13,
    );
    expect(form.fields).toEqual({ size: 'full' });
    expect(form.files.image_file?.[0]?.data.length).toBe(IMAGE.length);
  });

  it('gives no image for a form without an image_file part (the route answers missing_image)', async () => {
    const form = await feed(new MultipartParser(CONTENT_TYPE, REMOVE_FORM), body([{ name: 'format', value: 'png' }]), 5);
    expect(form).toEqual({ files: {}, fields: { format: 'png' } });
  });

  it('gives an empty image for an empty image_file part', async () => {
    const form = await feed(new MultipartParser(CONTENT_TYPE, REMOVE_FORM), body([image(Buffer.alloc(0))]), 5);
    expect(form.files.image_file?.[0]?.data.length).toBe(0);
  });
});

describe('refusals of the Content-Type', () => {
  it.each(['application/json', 'application/x-www-form-urlencoded', 'text/plain; boundary=x', ''])('refuses %j: not multipart/form-data', async (type) => {
    expect(await refusal(new MultipartParser(type, REMOVE_FORM).done)).toEqual({
      code: 'validation_error',
      message: 'The request body must be multipart/form-data.',
      details: { field: 'Content-Type' },
    });
  });

  it.each(['multipart/form-data', 'multipart/form-data; charset=utf-8', 'multipart/form-data; boundary='])(
    'refuses %j: missing or invalid boundary',
    async (type) => {
      expect(await refusal(new MultipartParser(type, REMOVE_FORM).done)).toEqual({
        code: 'validation_error',
        message: 'Malformed multipart/form-data: missing or invalid boundary.',
        details: { field: 'Content-Type' },
      });
    },
  );
});

describe('refusals of the parts', () => {
  it('refuses a file part with another name than image_file', async () => {
    const done = feed(new MultipartParser(CONTENT_TYPE, REMOVE_FORM), body([{ name: 'photo', filename: 'a.jpg', data: IMAGE }]), 50);
    expect(await refusal(done)).toEqual({
      code: 'validation_error',
      message: 'Unknown file part "photo". The file parts are image_file, bg_image_file.',
      details: { field: 'photo', allowed: ALLOWED },
    });
  });

  it('refuses an unknown text field, listing the allowed ones', async () => {
    const done = feed(new MultipartParser(CONTENT_TYPE, REMOVE_FORM), body([{ name: 'speed', value: 'high' }, image()]), 50);
    expect(await refusal(done)).toEqual({ code: 'validation_error', message: 'Unknown field "speed".', details: { field: 'speed', allowed: ALLOWED } });
  });

  it("a route's own refusal of a name outside the form, for a text field and a file part; the default where it gives none", async () => {
    const shape = {
      ...REMOVE_FORM,
      unknown: (name: string) => (name.startsWith('ai.') ? new HttpError(400, 'validation_error', `${name} is refused.`, { field: name }) : undefined),
    };
    const field = feed(new MultipartParser(CONTENT_TYPE, shape), body([{ name: 'ai.prompt', value: 'a beach' }, image()]), 50);
    expect(await refusal(field)).toEqual({ code: 'validation_error', message: 'ai.prompt is refused.', details: { field: 'ai.prompt' } });
    const file = feed(new MultipartParser(CONTENT_TYPE, shape), body([image(), { name: 'ai.guide', filename: 'g.jpg', data: IMAGE }]), 50);
    expect(await refusal(file)).toEqual({ code: 'validation_error', message: 'ai.guide is refused.', details: { field: 'ai.guide' } });
    const other = feed(new MultipartParser(CONTENT_TYPE, shape), body([{ name: 'speed', value: 'high' }, image()]), 50);
    expect((await refusal(other)).message).toBe('Unknown field "speed".');
  });

  it('refuses image_file sent as a text field', async () => {
    const done = feed(new MultipartParser(CONTENT_TYPE, REMOVE_FORM), body([{ name: 'image_file', value: 'not a file' }]), 50);
    expect(await refusal(done)).toEqual({ code: 'validation_error', message: 'image_file must be a file part.', details: { field: 'image_file' } });
  });

  it('refuses two image_file parts', async () => {
    const done = feed(new MultipartParser(CONTENT_TYPE, REMOVE_FORM), body([image(), image()]), 50);
    expect(await refusal(done)).toEqual({
      code: 'validation_error',
      message: 'Only one image_file part is allowed.',
      details: { field: 'image_file', limit: 1 },
    });
  });

  it('refuses a field given twice', async () => {
    const done = feed(new MultipartParser(CONTENT_TYPE, REMOVE_FORM), body([{ name: 'size', value: 'full' }, { name: 'size', value: 'preview' }, image()]), 50);
    expect(await refusal(done)).toEqual({ code: 'validation_error', message: 'Field "size" is given twice.', details: { field: 'size' } });
  });

  it('accepts a field of 256 bytes and refuses one of 257', async () => {
    const at = await feed(new MultipartParser(CONTENT_TYPE, REMOVE_FORM), body([{ name: 'bg_color', value: 'a'.repeat(256) }]), 50);
    expect(at.fields.bg_color).toBe('a'.repeat(256));
    const over = feed(new MultipartParser(CONTENT_TYPE, REMOVE_FORM), body([{ name: 'bg_color', value: 'a'.repeat(257) }]), 50);
    expect(await refusal(over)).toEqual({
      code: 'validation_error',
      message: 'Field "bg_color" is too long (at most 256 bytes).',
      details: { field: 'bg_color' },
    });
  });
});

describe('refusals of a body that ends early', () => {
  it('refuses a body cut inside the image part', async () => {
    const whole = body([image()]);
    const done = feed(new MultipartParser(CONTENT_TYPE, REMOVE_FORM), whole.subarray(0, whole.length - 1000), 100);
    expect(await refusal(done)).toEqual({
      code: 'validation_error',
      message: 'Malformed multipart/form-data body: the image_file part is incomplete.',
      details: { field: 'image_file' },
    });
  });

  const FIELD_FORM = body([{ name: 'size', value: 'full' }]);
  const CLOSING = `--${BOUNDARY}--\r\n`.length;
  it.each([
    ['empty', 0],
    ['cut inside the first boundary', 5],
    ['cut inside a part header', 30],
    ['cut inside a field value', FIELD_FORM.length - CLOSING - 4],
    ['without its closing boundary', FIELD_FORM.length - CLOSING],
    ['cut inside its closing boundary', FIELD_FORM.length - 4],
  ])('refuses a body %s (%i bytes)', async (_what, length) => {
    const done = feed(new MultipartParser(CONTENT_TYPE, REMOVE_FORM), FIELD_FORM.subarray(0, length), 10);
    expect(await refusal(done)).toEqual({ code: 'validation_error', message: 'Malformed multipart/form-data body.', details: undefined });
  });
});

describe('the 20 MB image limit', () => {
  /**
   * Feeds an image part of `bytes` bytes from one reused 1 MiB chunk: the test allocates ~1 MiB
   * however large the image (what the parser keeps is its own business, at most the limit).
   */
  function feedImageOf(bytes: number): Promise<ParsedForm> {
    const parser = new MultipartParser(CONTENT_TYPE, REMOVE_FORM);
    parser.write(Buffer.from(partHead(image())));
    const chunk = Buffer.alloc(1024 * 1024, 0xab);
    for (let left = bytes; left > 0; left -= chunk.length) parser.write(left >= chunk.length ? chunk : chunk.subarray(0, left));
    parser.write(Buffer.from(`\r\n--${BOUNDARY}--\r\n`));
    parser.end();
    return parser.done;
  }

  it('is 20 MiB', () => {
    expect(MAX_FILE_BYTES).toBe(20 * 1024 * 1024);
  });

  it('refuses an image one byte over the limit with image_too_large', async () => {
    expect(await refusal(feedImageOf(MAX_FILE_BYTES + 1))).toEqual({
      code: 'image_too_large',
      message: 'The image_file part is larger than 20 MB.',
      details: { field: 'image_file', limit_bytes: MAX_FILE_BYTES },
    });
  });

  it('accepts an image of exactly the limit', async () => {
    const form = await feedImageOf(MAX_FILE_BYTES);
    expect(form.files.image_file?.[0]?.data.length).toBe(MAX_FILE_BYTES);
  });
});

describe('abort', () => {
  it('leaves done pending and ignores later chunks once the answer was decided elsewhere', async () => {
    const parser = new MultipartParser(CONTENT_TYPE, REMOVE_FORM);
    const whole = body([image()]);
    parser.write(whole.subarray(0, 100));
    parser.abort();
    parser.write(whole.subarray(100));
    parser.end();
    const outcome = await Promise.race([
      parser.done.then(
        () => 'settled',
        () => 'settled',
      ),
      new Promise((r) => setTimeout(() => r('pending'), 50)),
    ]);
    expect(outcome).toBe('pending');
  });
});

describe('several images (the batch endpoint)', () => {
  const BATCH = batchForm(3, 12_000);
  const distinct = (n: number, size: number) => Buffer.from(Array.from({ length: size }, (_, i) => (i * 7 + n * 13) % 256));

  it.each([1, 5, 4096])('gives every image, each whole and in order with its filename, fed in chunks of %i bytes', async (size) => {
    const images = [distinct(1, 3000), distinct(2, 1), distinct(3, 4000)];
    const parts: Part[] = images.map((data, i) => ({ name: 'image_file', filename: `p${i}.jpg`, data }));
    const form = await feed(new MultipartParser(CONTENT_TYPE, BATCH), body([{ name: 'format', value: 'png' }, ...parts]), size);
    expect(form.files.image_file!.map((i) => i.filename)).toEqual(['p0.jpg', 'p1.jpg', 'p2.jpg']);
    form.files.image_file!.forEach((img, i) => {
      expect(img.data.equals(images[i]!), `image ${i}`).toBe(true);
    });
    expect(form.files.image_file?.[0]?.data.equals(images[0]!)).toBe(true);
    expect(form.fields).toEqual({ format: 'png' });
  });

  it('refuses more images than allowed, and more bytes in all than allowed', async () => {
    const four = [1, 2, 3, 4].map((n): Part => ({ name: 'image_file', filename: `${n}.jpg`, data: distinct(n, 10) }));
    expect(await refusal(feed(new MultipartParser(CONTENT_TYPE, BATCH), body(four), 64))).toEqual({
      code: 'validation_error',
      message: 'At most 3 image_file parts are allowed.',
      details: { field: 'image_file', limit: 3 },
    });
    const big = [1, 2, 3].map((n): Part => ({ name: 'image_file', filename: `${n}.jpg`, data: distinct(n, 5000) }));
    const refused = await refusal(feed(new MultipartParser(CONTENT_TYPE, BATCH), body(big), 512));
    expect(refused).toMatchObject({ code: 'image_too_large', details: { field: 'image_file', limit_bytes: 12_000 } });
  });
});
