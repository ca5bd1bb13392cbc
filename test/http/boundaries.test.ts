/**
 * docs/contract.md, "Boundaries, exactly" and the crop caps of "Abuse limits", through real HTTP:
 * a file of exactly 20 MiB is processed and one byte more is not; headers claiming sides past 6000
 * px are image_too_large whatever follows them (also past the decoders' own integer limits);
 * structurally broken files are invalid_image, never a 200 or foreground_not_found; crop boxes that
 * could pass 4x the image's area, or a WebP result that could pass 16383 px, are validation_error.
 * Every refusal charges nothing and leaves nothing reserved; those decided from the header (all but
 * a corrupt IDAT) are made before a credit is even reserved.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { PHOTOS } from '../helpers/constants.js';
import { expectConforms, expectError, openApi, trackUncaught } from '../helpers/http-assert.js';
import {
  imageInfo,
  jpegClaiming,
  jpegCutInScan,
  jpegWithoutScanData,
  padPng,
  pngClaiming,
  pngWithBadIhdrCrc,
  webpExtendedClaiming,
  webpLosslessClaiming,
  webpLossyClaiming,
} from '../helpers/http-images.js';
import type { OpenApiDocument } from '../helpers/http-openapi.js';
import { readFixture, readPhoto } from '../helpers/paths.js';
import { blob, credits, type HttpResult, postImage, startTestServer, type TestServer, toResult } from '../helpers/server.js';

const REMOVE = '/api/v1/remove';
const BATCHES = '/api/v1/batches';
const MIB = 1024 * 1024;
const teddy = readPhoto(PHOTOS.teddy);
/** The llama (513x371) as an RGBA PNG: a real PNG photo with a subject. */
const llamaPng = readFixture('alpha.png');
const garbage = Buffer.alloc(4096, 0x5a);
const png = (data: Buffer, filename = 'photo.png') => ({ data, filename, type: 'image/png' });
const webp = (data: Buffer) => ({ data, filename: 'photo.webp', type: 'image/webp' });

let ts: TestServer;
let doc: OpenApiDocument;
const uncaught = trackUncaught();

beforeAll(async () => {
  ts = await startTestServer();
  doc = await openApi(ts.url);
});

afterAll(async () => {
  await ts?.close();
});

afterEach(async () => {
  vi.restoreAllMocks();
  await uncaught.check();
});

/**
 * Runs a request that must be refused with `status`/`code`: nothing charged, nothing left reserved,
 * and (unless `reserves`) no reservation even attempted. Returns the error body.
 */
async function expectRefused(status: number, code: string, request: () => Promise<HttpResult>, reserves = false) {
  const reserve = vi.spyOn(ts.store.credits, 'reserve');
  const before = await credits(ts);
  const res = await request();
  const body = expectError(res, status, code);
  expectConforms(doc, 'POST', REMOVE, res);
  expect(await credits(ts), 'credits after the refusal').toEqual(before);
  if (!reserves) expect(reserve, 'credits.reserve calls').not.toHaveBeenCalled();
  return body;
}

/** The PNG with the CRC of its first IDAT chunk broken (the data itself intact). */
function pngWithBadIdatCrc(bytes: Buffer): Buffer {
  const out = Buffer.from(bytes);
  for (let at = 8; at + 8 <= out.length; at += 12 + out.readUInt32BE(at)) {
    if (out.toString('latin1', at + 4, at + 8) !== 'IDAT') continue;
    const crcAt = at + 8 + out.readUInt32BE(at);
    out[crcAt] = out[crcAt]! ^ 0x01;
    return out;
  }
  throw new Error('PNG without IDAT');
}

describe('20 MB means 20 MiB = 20,971,520 bytes', () => {
  it('a PNG of exactly 20,971,520 bytes (padded by an ancillary chunk) is processed and charged once', async () => {
    const exact = padPng(llamaPng, 20 * MIB);
    expect(exact.length).toBe(20_971_520);
    const before = await credits(ts);
    const res = await postImage(ts.url, ts.key, { size: 'preview' }, png(exact));
    expect({ status: res.status, code: res.json?.code }).toEqual({ status: 200, code: undefined });
    expect(imageInfo(res.body)).toMatchObject({ format: 'png' });
    expect(res.headers.get('x-credits-charged')).toBe('1');
    expect(await credits(ts)).toEqual({ used: before.used + 1, reserved: 0, remaining: before.remaining - 1 });
  });

  it('the same PNG one byte longer (20,971,521 bytes): 400 image_too_large', async () => {
    const over = padPng(llamaPng, 20 * MIB + 1);
    expect(over.length).toBe(20_971_521);
    const body = await expectRefused(400, 'image_too_large', () => postImage(ts.url, ts.key, { size: 'preview' }, png(over)));
    expect(body.details).toMatchObject({ field: 'image_file' });
  });
});

describe('a header claiming a side over 6000 px: 400 image_too_large, whatever follows', () => {
  const header = (bytes: Buffer, length: number) => Buffer.concat([bytes.subarray(0, length), garbage]);
  it.each([
    ['a PNG IHDR of 2147483647 x 2147483647', png(header(pngClaiming(2147483647, 2147483647), 33))],
    ['a PNG IHDR of 6001 x 1', png(header(pngClaiming(6001, 1), 33))],
    ['a JPEG SOF0 of 65535 x 65535', { data: jpegClaiming(65535, 65535, garbage) }],
    ['a JPEG SOF0 of 1 x 6001', { data: jpegClaiming(1, 6001, garbage) }],
    ['a WebP VP8L of 16384 x 16384', webp(webpLosslessClaiming(16384, 16384, garbage))],
    ['a WebP VP8 key frame of 16383 x 16383', webp(webpLossyClaiming(16383, 16383, garbage))],
    ['a WebP VP8X canvas of 16384 x 16384', webp(webpExtendedClaiming(16384, 16384, garbage))],
    ['a WebP VP8X canvas of 16777216 x 16777216', webp(webpExtendedClaiming(1 << 24, 1 << 24, garbage))],
  ])('%s', async (_name, image) => {
    await expectRefused(400, 'image_too_large', () => postImage(ts.url, ts.key, {}, image));
  });
});

describe('a broken structure: 422 invalid_image, never a 200 or foreground_not_found', () => {
  it('(control) the same PNG and JPEG photos unbroken are processed', async () => {
    for (const image of [png(llamaPng), { data: teddy }]) expect((await postImage(ts.url, ts.key, { size: 'preview' }, image)).status).toBe(200);
  });

  it('a PNG photo whose IHDR fails its CRC', async () => {
    await expectRefused(422, 'invalid_image', () => postImage(ts.url, ts.key, {}, png(pngWithBadIhdrCrc(llamaPng))));
  });

  it('a PNG photo whose IDAT fails its CRC (found while decoding: reserved, then released)', async () => {
    await expectRefused(422, 'invalid_image', () => postImage(ts.url, ts.key, {}, png(pngWithBadIdatCrc(llamaPng))), true);
  });

  it('a JPEG photo with no scan data (its headers, SOS, then EOI)', async () => {
    await expectRefused(422, 'invalid_image', () => postImage(ts.url, ts.key, {}, jpegWithoutScanData(teddy)));
  });

  it('a JPEG photo cut inside its scan data and closed with EOI (found by the native core: reserved, then released)', async () => {
    await expectRefused(422, 'invalid_image', () => postImage(ts.url, ts.key, {}, { data: jpegCutInScan(teddy, 0.5) }), true);
  });
});

describe('crop box caps: 400 validation_error before any credit is reserved or any pixel decoded', () => {
  it('crop=100:1 on a 284x398 photo: the box could reach 45400x454, 180x the image area', async () => {
    const body = await expectRefused(400, 'validation_error', () => postImage(ts.url, ts.key, { crop: '100:1' }, teddy));
    expect(body.details).toMatchObject({ field: 'crop', max_area_ratio: 4, worst_case: { width: 45400, height: 454 } });
  });

  it('crop=true with 100 % padding on a square image (9x its area), decided without decoding its (missing) pixels', async () => {
    const body = await expectRefused(400, 'validation_error', () => postImage(ts.url, ts.key, { crop: 'true', padding: '100%' }, png(pngClaiming(3000, 3000))));
    expect(body.details).toMatchObject({ field: 'crop' });
  });

  it('format=webp, crop=20:1 on a 6000x1000 image: the result could be 17900 px wide (libwebp stops at 16383)', async () => {
    const panorama = png(pngClaiming(6000, 1000));
    const body = await expectRefused(400, 'validation_error', () => postImage(ts.url, ts.key, { format: 'webp', crop: '20:1', padding: '0' }, panorama));
    expect(body.details).toMatchObject({ field: 'format', max_side: 16383 });
    // With size=hd the same box scales down under the limit: the check passes, and the pixels (a
    // tiny IDAT for 6000x1000) are what fail, when decoded after the reservation.
    await expectRefused(422, 'invalid_image', () => postImage(ts.url, ts.key, { format: 'webp', crop: '20:1', padding: '0', size: 'hd' }, panorama), true);
  });

  it('sensible crops still run: crop=1:1 with 10 % padding as WebP', async () => {
    const res = await postImage(ts.url, ts.key, { crop: '1:1', padding: '10%', format: 'webp' }, teddy);
    expect(res.status).toBe(200);
    const info = imageInfo(res.body);
    expect({ format: info.format, square: info.width === info.height }).toEqual({ format: 'webp', square: true });
  });

  it('a batch lists such images as failed at submission (and the header checks too), reserving nothing', async () => {
    const form = new FormData();
    form.append('crop', '100:1');
    form.append('image_file', blob(teddy, 'image/jpeg'), 'teddy.jpg');
    form.append('image_file', blob(jpegClaiming(65535, 65535, garbage), 'image/jpeg'), 'huge.jpg');
    form.append('image_file', blob(pngWithBadIhdrCrc(llamaPng), 'image/png'), 'crc.png');
    form.append('image_file', blob(jpegWithoutScanData(teddy), 'image/jpeg'), 'noscan.jpg');
    const before = await credits(ts);
    const res = await toResult(await fetch(`${ts.url}${BATCHES}`, { method: 'POST', headers: { authorization: `Bearer ${ts.key}` }, body: form }));
    expect(res.status).toBe(202);
    expectConforms(doc, 'POST', BATCHES, res);
    expect(res.json.images.map((i: any) => [i.filename, i.status, i.error?.code])).toEqual([
      ['teddy.jpg', 'failed', 'validation_error'],
      ['huge.jpg', 'failed', 'image_too_large'],
      ['crc.png', 'failed', 'invalid_image'],
      ['noscan.jpg', 'failed', 'invalid_image'],
    ]);
    expect(res.json.status).toBe('completed');
    expect(await credits(ts)).toEqual(before);
  });
});
