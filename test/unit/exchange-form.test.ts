/**
 * The exchange's multipart reader (Exchange.readForm in src/http/exchange.ts), the one way routes
 * read a form: the parsed form, the body's own limit, the caller's check as bytes arrive (the batch
 * memory budget), one read per request, and a client that goes away. The parser's own rules are
 * multipart.test.ts's; the deadline and the minimum rate are the HTTP suites'.
 */
import { describe, expect, it } from 'vitest';
import { REMOVE_FORM } from '../../src/api/form-fields.js';
import { ClientGoneError, Exchange } from '../../src/http/exchange.js';
import { ApiError } from '../../src/service/errors.js';
import { memoryRequest, RecordedResponse } from '../helpers/recorded-exchange.js';

const BOUNDARY = 'form-boundary';

/** A multipart body with one image_file part and the given text fields, in `chunks` pieces. */
function form(image: Buffer, fields: Record<string, string> = {}, chunks = 1): { headers: Record<string, string>; body: Uint8Array[] } {
  const parts = Object.entries(fields).map(([name, value]) => `--${BOUNDARY}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`);
  const whole = Buffer.concat([
    Buffer.from(parts.join('')),
    Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="image_file"; filename="a.png"\r\nContent-Type: image/png\r\n\r\n`),
    image,
    Buffer.from(`\r\n--${BOUNDARY}--\r\n`),
  ]);
  const size = Math.ceil(whole.length / chunks);
  const body: Uint8Array[] = [];
  for (let at = 0; at < whole.length; at += size) body.push(whole.subarray(at, at + size));
  return { headers: { 'content-type': `multipart/form-data; boundary=${BOUNDARY}` }, body };
}

function exchange(headers: Record<string, string>, body: Uint8Array[], res = new RecordedResponse()): Exchange {
  return new Exchange(memoryRequest('POST', '/api/v1/remove', headers, body), res, '/api/v1/remove', () => {});
}

const tooLarge = () => new ApiError('image_too_large', 'too large');

describe('Exchange.readForm', () => {
  it('resolves with the image and the fields', async () => {
    const image = Buffer.from('not really a png, the parser does not care');
    const { headers, body } = form(image, { format: 'png', size: 'preview' }, 4);
    const parsed = await exchange(headers, body).readForm({ form: REMOVE_FORM, maxBodyBytes: 1_000_000, tooLarge });
    expect(parsed.files.image_file).toEqual([{ filename: 'a.png', data: image }]);
    expect(parsed.fields).toEqual({ format: 'png', size: 'preview' });
  });

  it('stops past the body limit with the caller’s error', async () => {
    const { headers, body } = form(Buffer.alloc(5000), {}, 5);
    await expect(exchange(headers, body).readForm({ form: REMOVE_FORM, maxBodyBytes: 2000, tooLarge })).rejects.toMatchObject({
      code: 'image_too_large',
      message: 'too large',
    });
  });

  it('asks the check with the bytes so far, and stops with the error it returns', async () => {
    const { headers, body } = form(Buffer.alloc(3000), {}, 3);
    const asked: number[] = [];
    const refusal = new Error('over the budget');
    const reading = exchange(headers, body).readForm({
      form: REMOVE_FORM,
      maxBodyBytes: 1_000_000,
      tooLarge,
      check: (bytes) => {
        asked.push(bytes);
        return bytes > 2500 ? refusal : undefined;
      },
    });
    await expect(reading).rejects.toBe(refusal);
    expect(asked).toHaveLength(3);
    expect(asked[0]).toBe(body[0]!.byteLength);
    expect(asked[1]).toBeLessThanOrEqual(2500);
    expect(asked[2]).toBeGreaterThan(2500);
  });

  it('passes the parser’s refusal on (a body that is not multipart)', async () => {
    await expect(
      exchange({ 'content-type': 'application/json' }, [Buffer.from('{}')]).readForm({ form: REMOVE_FORM, maxBodyBytes: 1000, tooLarge }),
    ).rejects.toMatchObject({
      code: 'validation_error',
    });
  });

  it('reads the body once', async () => {
    const { headers, body } = form(Buffer.alloc(10));
    const ex = exchange(headers, body);
    await ex.readForm({ form: REMOVE_FORM, maxBodyBytes: 1000, tooLarge });
    await expect(ex.readForm({ form: REMOVE_FORM, maxBodyBytes: 1000, tooLarge })).rejects.toThrow('the body was already read');
    await expect(ex.readBody(1000)).rejects.toThrow('the body was already read');
  });

  it('rejects with ClientGoneError when the client went away', async () => {
    const { headers, body } = form(Buffer.alloc(10));
    const res = new RecordedResponse();
    res.abort();
    await expect(exchange(headers, body, res).readForm({ form: REMOVE_FORM, maxBodyBytes: 1000, tooLarge })).rejects.toBeInstanceOf(ClientGoneError);
  });
});
