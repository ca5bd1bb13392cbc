/**
 * The streaming reader of JSON and urlencoded forms (src/http/text-form.ts): the fields it gives,
 * in whatever chunks the body arrives; the image's base64 decoded as it streams in, in every form
 * encoders write it; and each refusal with its code and field.
 */
import { describe, expect, it } from 'vitest';
import { REMOVE_FORM } from '../../src/api/form-fields.js';
import type { HttpError } from '../../src/http/errors.js';
import type { ParsedForm } from '../../src/http/exchange.js';
import { TextFormParser } from '../../src/http/text-form.js';
import { MAX_FILE_BYTES } from '../../src/lib/option-table.js';
import { randomBytes } from '../helpers/prng.js';

type Kind = 'json' | 'urlencoded';

/** Parses `body` fed in pieces of `size` bytes (0: one piece). */
function parse(kind: Kind, body: string | Buffer, size = 0, declared = true): Promise<ParsedForm> {
  const bytes = typeof body === 'string' ? Buffer.from(body) : body;
  const parser = new TextFormParser(kind, REMOVE_FORM, declared ? bytes.length : 0);
  const step = size || bytes.length || 1;
  for (let at = 0; at < bytes.length; at += step) parser.write(bytes.subarray(at, at + step));
  parser.end();
  return parser.done;
}

/** The same body in one piece, byte by byte, and in pieces of 7 and 4096 bytes: every answer must be the same. */
async function parseAllWays(kind: Kind, body: string | Buffer): Promise<ParsedForm> {
  const whole = await parse(kind, body);
  for (const size of [1, 7, 4096]) expect(await parse(kind, body, size), `in pieces of ${size}`).toEqual(whole);
  expect(await parse(kind, body, 3, false), 'without a declared length').toEqual(whole);
  return whole;
}

async function refusal(kind: Kind, body: string | Buffer): Promise<HttpError> {
  const errors: HttpError[] = [];
  for (const size of [0, 1, 5])
    errors.push(
      await parse(kind, body, size).then(
        () => expect.unreachable('parsed'),
        (err: HttpError) => err,
      ),
    );
  expect(errors[1], 'byte by byte').toEqual(errors[0]);
  expect(errors[2], 'in pieces of 5').toEqual(errors[0]);
  return errors[0]!;
}

const bytes = (n: number, seed = 7): Buffer => randomBytes(n, seed);

/** base64 wrapped in lines of `width` characters ended by `eol`. */
function wrapped(b64: string, width: number, eol: string): string {
  const lines: string[] = [];
  for (let at = 0; at < b64.length; at += width) lines.push(b64.slice(at, at + width));
  return lines.join(eol);
}

describe('JSON bodies: the fields', () => {
  it('strings, numbers, booleans; null is a field left out', async () => {
    const form = await parseAllWays('json', ' {"format":"png", "crop" : true,"scale":50,"padding":1.5e1,\n"bg_color":null}\r\n');
    expect(form.fields).toEqual({ format: 'png', crop: 'true', scale: '50', padding: '15' });
  });

  it('escapes and non-ASCII text, as JSON.parse reads them', async () => {
    const value = 'a"b\\c/\u00e9\u4e2d\ud83d\ude00\t';
    const form = await parseAllWays('json', JSON.stringify({ bg_color: value }).replace('\u00e9', '\\u00e9'));
    expect(form.fields.bg_color).toBe(value);
  });

  it('an empty object', async () => {
    expect(await parseAllWays('json', '{}')).toEqual({ files: {}, fields: {} });
  });

  it.each([
    ['a key given twice', '{"format":"png","format":"jpg"}', 'format'],
    ['a key given twice, once as null', '{"format":null,"format":"jpg"}', 'format'],
    ['the image given twice', '{"image_file_b64":"QUJD","image_file_b64":"QUJD"}', 'image_file_b64'],
  ])('refuses %s, naming it', async (_what, body, field) => {
    const err = await refusal('json', body);
    expect(err).toMatchObject({ status: 400, code: 'validation_error', details: { field } });
    expect(err.message).toContain('given twice');
  });

  it.each([
    ['an unknown field', '{"colour":"red"}', 'colour'],
    ['a file part', '{"image_file":"QUJD"}', 'image_file'],
    ['an object as a value', '{"format":{"a":1}}', 'format'],
    ['an array as a value', '{"format":["png"]}', 'format'],
    ['the image as a number', '{"image_file_b64":12}', 'image_file_b64'],
    ['a value over its length', `{"format":"${'p'.repeat(100)}"}`, 'format'],
  ])('refuses %s, naming it', async (_what, body, field) => {
    expect(await refusal('json', body)).toMatchObject({ status: 400, code: 'validation_error', details: { field } });
  });

  it.each([
    ['nothing', ''],
    ['a trailing comma', '{"format":"png",}'],
    ['no colon', '{"format" "png"}'],
    ['an unterminated string', '{"format":"png'],
    ['no closing brace', '{"format":"png"'],
    ['text after the object', '{"format":"png"} x'],
    ['a second object', '{}{}'],
    ['a bad literal', '{"crop":tru}'],
    ['a raw line break in a string', '{"format":"pn\ng"}'],
    ['a bad escape', '{"format":"\\x"}'],
    ['garbage', 'hello'],
  ])('refuses %s as malformed', async (_what, body) => {
    expect(await refusal('json', body)).toMatchObject({ code: 'validation_error', message: 'Malformed JSON body.', details: { field: 'body' } });
  });

  it.each(['[]', '"text"', '12', 'true', 'null'])('refuses %s: not an object', async (body) => {
    expect(await refusal('json', body)).toMatchObject({ code: 'validation_error', message: 'The JSON body must be an object.' });
  });
});

describe('JSON bodies: the image in base64, decoded as it arrives', () => {
  const image = bytes(10_000);
  const b64 = image.toString('base64');

  it.each([
    ['plain', b64],
    ['with a data: prefix', `data:image/png;base64,${b64}`],
    ['in lines of 76 with \\n', wrapped(b64, 76, '\n')],
    ['in lines of 76 with \\r\\n', wrapped(b64, 76, '\r\n')],
    ['in lines of 64 with \\r\\n after a data: prefix', `data:image/jpeg;base64,${wrapped(b64, 64, '\r\n')}\r\n`],
    ['with spaces around', `  ${b64}  `],
    ['in the URL-safe alphabet', image.toString('base64url')],
  ])('%s', async (_what, text) => {
    const form = await parseAllWays('json', JSON.stringify({ image_file_b64: text, format: 'png' }));
    expect(form.decoded?.image_file_b64).toEqual(image);
    expect(form.fields).toEqual({ format: 'png' });
  });

  it("with JSON's \\/ escape (PHP's json_encode) and \\u escapes", async () => {
    const text = JSON.stringify({ image_file_b64: b64 }).replaceAll('/', '\\/').replace('A', '\\u0041');
    expect((await parseAllWays('json', text)).decoded?.image_file_b64).toEqual(image);
  });

  it.each([1, 2, 3, 4, 5, 6])('%i bytes, padded and unpadded', async (n) => {
    const small = bytes(n, n);
    for (const text of [small.toString('base64'), small.toString('base64').replace(/=+$/, '')]) {
      expect((await parseAllWays('json', JSON.stringify({ image_file_b64: text }))).decoded?.image_file_b64).toEqual(small);
    }
  });

  it('a blank value is given as text, which the options read as left out', async () => {
    expect(await parseAllWays('json', '{"image_file_b64":"  "}')).toEqual({ files: {}, fields: { image_file_b64: '' } });
    expect(await parseAllWays('json', '{"image_file_b64":""}')).toEqual({ files: {}, fields: { image_file_b64: '' } });
  });

  it.each([
    ['a letter outside both alphabets', `${b64.slice(0, 100)}*${b64.slice(100)}`],
    ['padding before the end', `QUJD==${b64}`],
    ['three padding characters', 'QQ==='],
    ['4n+1 letters', 'QUJDR'],
    ['a non-ASCII \\u escape', 'QUJ\\u00e9'],
    ['an escaped quote', 'QUJ\\"'],
    ['a data: prefix that is not base64', 'data:image/png,QUJD'],
    ['a data: prefix alone, unended', 'data:image/png;base64'],
  ])('refuses %s, naming the field', async (_what, text) => {
    expect(await refusal('json', `{"image_file_b64":"${text}"}`)).toMatchObject({
      status: 400,
      code: 'validation_error',
      message: 'image_file_b64 is not base64 text.',
      details: { field: 'image_file_b64' },
    });
  });

  it('decodes 20 MiB, line-wrapped, and refuses one byte more as image_too_large', async () => {
    const most = Buffer.alloc(MAX_FILE_BYTES, 0xa5);
    const text = wrapped(most.toString('base64'), 76, '\r\n');
    const form = await parse('json', JSON.stringify({ image_file_b64: text }), 64 * 1024);
    expect(form.decoded?.image_file_b64?.equals(most)).toBe(true);
    // The decoded bytes are all the body keeps: one buffer, sized from the declared length.
    expect(form.decoded?.image_file_b64?.buffer.byteLength).toBeLessThanOrEqual(MAX_FILE_BYTES + 3);
    const over = Buffer.alloc(MAX_FILE_BYTES + 1, 0xa5).toString('base64');
    await expect(parse('json', JSON.stringify({ image_file_b64: over }), 64 * 1024)).rejects.toMatchObject({
      status: 400,
      code: 'image_too_large',
      details: { field: 'image_file_b64', limit_bytes: MAX_FILE_BYTES },
    });
  });
});

describe('urlencoded bodies', () => {
  const image = bytes(3000, 11);
  const b64 = image.toString('base64');

  it('the fields, with + and %XX undone', async () => {
    const form = await parseAllWays('urlencoded', 'format=png&bg_color=dark+red&padding=10%25&&crop=');
    expect(form.fields).toEqual({ format: 'png', bg_color: 'dark red', padding: '10%', crop: '' });
  });

  it('the image with its + / = percent-encoded, line-wrapped as %0D%0A', async () => {
    const text = encodeURIComponent(wrapped(b64, 76, '\r\n'));
    const form = await parseAllWays('urlencoded', `image_file_b64=${text}&format=webp`);
    expect(form.decoded?.image_file_b64).toEqual(image);
    expect(form.fields).toEqual({ format: 'webp' });
  });

  it('the image with a data: prefix, percent-encoded', async () => {
    const form = await parseAllWays('urlencoded', `image_file_b64=${encodeURIComponent(`data:image/png;base64,${b64}`)}`);
    expect(form.decoded?.image_file_b64).toEqual(image);
  });

  it.each([
    ['a field given twice', 'format=png&format=jpg', 'format', 'validation_error'],
    ['an unknown field', 'colour=red', 'colour', 'validation_error'],
    ['a value with no name', '=red', '', 'validation_error'],
    ['a file part', 'image_file=QUJD', 'image_file', 'validation_error'],
    ['base64 with a stray %', 'image_file_b64=QUJD%zz', 'image_file_b64', 'validation_error'],
    ['base64 with a % at the end', 'image_file_b64=QUJD%', 'image_file_b64', 'validation_error'],
  ])('refuses %s, naming it', async (_what, body, field, code) => {
    expect(await refusal('urlencoded', body)).toMatchObject({ status: 400, code, details: { field } });
  });
});
