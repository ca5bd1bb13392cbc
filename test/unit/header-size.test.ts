/**
 * The claimed-size reader (src/lib/header-size.ts): pure TypeScript (the last group loads the addon
 * for probeImage and the library's early checks, but no model). Headers are crafted
 * byte by byte, and cut at every length to check that a header cut short is invalid_image (or, once
 * the size was read, image_too_large), never a crash or a read past the buffer.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkClaimedSize, sniffFormat } from '../../src/lib/header-size.js';
import { expectBgoneError, expectThrowsBgone } from '../helpers/assert.js';
import { MAX_SIDE, probeImage, removeBackground } from '../helpers/bgone.js';
import { PHOTOS } from '../helpers/constants.js';
import {
  jpegClaiming,
  jpegScanStart,
  jpegWithoutScanData,
  pngClaiming,
  pngWithBadIhdrCrc,
  webpExtendedClaiming,
  webpLosslessClaiming,
  webpLossyClaiming,
} from '../helpers/http-images.js';
import { PHOTOS_DIR, photoPath } from '../helpers/paths.js';

const teddy = readFileSync(photoPath(PHOTOS.teddy));
const claim = (bytes: Uint8Array) => checkClaimedSize(bytes, MAX_SIDE);
const tooLarge = (bytes: Uint8Array) => expectThrowsBgone(() => claim(bytes), 'image_too_large');
const invalid = (bytes: Uint8Array) => expectThrowsBgone(() => claim(bytes), 'invalid_image');

/** A JPEG made of segments: SOI, then each [marker, payload] with its length, then `tail`. */
function jpeg(segments: Array<[number, number[]]>, tail: number[] = []): Buffer {
  const parts = [Buffer.from([0xff, 0xd8])];
  for (const [marker, payload] of segments) parts.push(Buffer.from([0xff, marker, (payload.length + 2) >> 8, (payload.length + 2) & 0xff, ...payload]));
  parts.push(Buffer.from(tail));
  return Buffer.concat(parts);
}
const sof = (width: number, height: number) => [8, height >> 8, height & 0xff, width >> 8, width & 0xff, 1, 1, 0x11, 0];
const SOS = [1, 1, 0, 0, 63, 0];

describe('sniff', () => {
  it('JPEG, PNG and WebP by their first bytes; anything else is unsupported_media_type', () => {
    expect(sniffFormat(teddy)).toBe('jpg');
    expect(sniffFormat(pngClaiming(10, 10))).toBe('png');
    expect(sniffFormat(webpLosslessClaiming(10, 10))).toBe('webp');
    for (const bytes of [
      Buffer.from([0xff]),
      Buffer.from([0xff, 0xd8]),
      Buffer.from('GIF89a....'),
      pngClaiming(1, 1).subarray(0, 7),
      Buffer.from('RIFF\0\0\0\0WEBX'),
    ]) {
      expectThrowsBgone(() => claim(bytes), 'unsupported_media_type');
    }
  });
});

describe('PNG', () => {
  it('reads IHDR: 6000 passes, 6001 on either side is image_too_large', () => {
    expect(claim(pngClaiming(6000, 10))).toEqual({ format: 'png', width: 6000, height: 10 });
    expect(tooLarge(pngClaiming(6001, 10)).details).toEqual({ width: 6001, height: 10, max_side: 6000 });
    tooLarge(pngClaiming(10, 6001));
  });

  it('2147483647 x 2147483647 and 2^32-1 (past every decoder integer): image_too_large', () => {
    tooLarge(pngClaiming(2147483647, 2147483647));
    tooLarge(pngClaiming(0xffffffff, 1));
  });

  it('a claim over 6000 wins over a broken IHDR CRC or a cut right after the size', () => {
    tooLarge(pngWithBadIhdrCrc(pngClaiming(100000, 10)));
    tooLarge(pngClaiming(100000, 10).subarray(0, 24));
  });

  it('a bad IHDR CRC, a zero side, IHDR not first or of another length: invalid_image', () => {
    invalid(pngWithBadIhdrCrc(pngClaiming(100, 100)));
    invalid(pngClaiming(0, 100));
    const notFirst = Buffer.from(pngClaiming(100, 100));
    notFirst.write('tEXt', 12, 'latin1');
    invalid(notFirst);
    const longer = Buffer.from(pngClaiming(100, 100));
    longer.writeUInt32BE(14, 8);
    invalid(longer);
  });

  it('cut at every length inside the header: invalid_image', () => {
    const png = pngClaiming(100, 100);
    for (let n = 8; n < 33; n++) invalid(png.subarray(0, n));
    expect(claim(png.subarray(0, 33))).toEqual({ format: 'png', width: 100, height: 100 });
  });
});

describe('JPEG', () => {
  it('a real photo: its frame size, and its scan has data', () => {
    expect(claim(teddy)).toEqual({ format: 'jpg', width: 284, height: 398 });
  });

  it('65535 x 65535 (past libjpeg 65500) and 6001 x 1, followed by garbage: image_too_large', () => {
    expect(tooLarge(jpegClaiming(65535, 65535)).details).toEqual({ width: 65535, height: 65535, max_side: 6000 });
    tooLarge(jpegClaiming(6001, 1));
    tooLarge(jpegClaiming(1, 6001, Buffer.alloc(0)));
  });

  it('APPn, COM, DQT segments and 0xFF fill bytes before the SOF are skipped', () => {
    const app = [0x45, 0x78, 0x69, 0x66, 0, 0, ...Array(300).fill(7)];
    const bytes = jpeg([
      [0xe0, [0x4a, 0x46, 0x49, 0x46, 0]],
      [0xe1, app],
      [0xfe, [1, 2, 3]],
      [0xdb, Array(65).fill(1)],
    ]);
    const filled = Buffer.concat([bytes, Buffer.from([0xff, 0xff, 0xff]), jpeg([[0xc0, sof(6001, 20)]]).subarray(2)]);
    tooLarge(filled);
    expect(
      claim(
        Buffer.concat([
          bytes,
          jpeg(
            [
              [0xc0, sof(320, 240)],
              [0xc4, [0, 1, 2]],
              [0xda, SOS],
            ],
            [0x12, 0x34, 0xff, 0xd9],
          ).subarray(2),
        ]),
      ),
    ).toEqual({
      format: 'jpg',
      width: 320,
      height: 240,
    });
  });

  it('progressive (SOF2), extended (SOF1) and lossless (SOF3) frame headers count too; DHT, DAC and JPG do not', () => {
    for (const marker of [0xc1, 0xc2, 0xc3, 0xc9, 0xca]) tooLarge(jpeg([[marker, sof(7000, 7000)]]));
    expect(
      claim(
        jpeg(
          [
            [0xc4, sof(7000, 7000)],
            [0xcc, [1, 2]],
            [0xc2, sof(640, 480)],
            [0xda, SOS],
          ],
          [0x55, 0xff, 0xd9],
        ),
      ),
    ).toEqual({
      format: 'jpg',
      width: 640,
      height: 480,
    });
  });

  it('no scan data (SOS then EOI, SOS at the end, SOF then EOI) is invalid_image; a stuffed 0xFF 0x00 first is data', () => {
    invalid(jpegWithoutScanData(teddy));
    invalid(teddy.subarray(0, jpegScanStart(teddy).data));
    invalid(Buffer.concat([teddy.subarray(0, jpegScanStart(teddy).sos), Buffer.from([0xff, 0xd9])]));
    invalid(
      jpeg(
        [
          [0xc0, sof(10, 10)],
          [0xda, SOS],
        ],
        [0xff, 0xc4, 0, 2],
      ),
    );
    expect(
      claim(
        jpeg(
          [
            [0xc0, sof(10, 10)],
            [0xda, SOS],
          ],
          [0xff, 0x00, 0xff, 0xd9],
        ),
      ),
    ).toEqual({ format: 'jpg', width: 10, height: 10 });
  });

  it('EOI or SOS before any SOF, a second SOI or SOF, a zero side, a length under 2: invalid_image', () => {
    invalid(jpeg([[0xe0, [1]]], [0xff, 0xd9]));
    invalid(jpeg([[0xda, SOS]], [1, 2, 3]));
    invalid(jpeg([], [0xff, 0xd8, 0xff, 0xd9]));
    invalid(
      jpeg([
        [0xc0, sof(10, 10)],
        [0xc2, sof(10, 10)],
      ]),
    );
    invalid(jpeg([[0xc0, sof(10, 0)]]));
    invalid(Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 1, 0, 0]));
  });

  it('cut at every length before its scan data: invalid_image, except past the frame size when it is too large', () => {
    const bytes = teddy.subarray(0, jpegScanStart(teddy).data + 1);
    for (let n = 3; n < bytes.length - 1; n++) invalid(bytes.subarray(0, n));
    const huge = jpegClaiming(7000, 7000, Buffer.alloc(0));
    const sizeEnd = 2 + 2 + 7; // SOI, marker, length, precision, height, width
    for (let n = 3; n < sizeEnd; n++) invalid(huge.subarray(0, n));
    for (let n = sizeEnd; n <= huge.length; n++) tooLarge(huge.subarray(0, n));
  });

  it('bytes between segments (which libjpeg skips with a warning) or a stuffed zero there: left to the decoder', () => {
    expect(claim(jpeg([[0xe0, [1, 2]]], [0x00, 0x00, 0xff, 0xc0]))).toBeUndefined();
    expect(claim(jpeg([[0xe0, [1, 2]]], [0xff, 0x00, 0xff, 0xc0]))).toBeUndefined();
    // ...but a size read before them stands.
    tooLarge(jpeg([[0xc0, sof(9000, 10)]], [0x00, 0x01]));
  });
});

describe('WebP', () => {
  it('VP8L (lossless): 16384 x 16384 is image_too_large, 6000 x 6000 passes', () => {
    expect(tooLarge(webpLosslessClaiming(16384, 16384)).details).toEqual({ width: 16384, height: 16384, max_side: 6000 });
    expect(claim(webpLosslessClaiming(6000, 6000))).toEqual({ format: 'webp', width: 6000, height: 6000 });
    tooLarge(webpLosslessClaiming(6001, 1));
  });

  it('VP8 (lossy key frame): 16383 x 16383 is image_too_large, 6000 x 1 passes', () => {
    tooLarge(webpLossyClaiming(16383, 16383));
    expect(claim(webpLossyClaiming(6000, 1))).toEqual({ format: 'webp', width: 6000, height: 1 });
  });

  it('VP8X (extended): a 2^24 canvas is image_too_large, 6000 x 4000 passes', () => {
    tooLarge(webpExtendedClaiming(1 << 24, 1 << 24));
    tooLarge(webpExtendedClaiming(1, 6001));
    expect(claim(webpExtendedClaiming(6000, 4000))).toEqual({ format: 'webp', width: 6000, height: 4000 });
  });

  it('a lossy frame without its start code, a lossless one without its signature, a zero side: invalid_image', () => {
    const lossy = webpLossyClaiming(100, 100);
    lossy[24] = 0;
    invalid(lossy);
    const lossless = webpLosslessClaiming(100, 100);
    lossless[20] = 0;
    invalid(lossless);
    invalid(webpLossyClaiming(0, 100));
  });

  it('cut at every length inside the header: invalid_image', () => {
    for (const [bytes, end] of [
      [webpLossyClaiming(100, 100), 30],
      [webpLosslessClaiming(100, 100), 25],
      [webpExtendedClaiming(100, 100), 30],
    ] as const) {
      for (let n = 12; n < end; n++) invalid(bytes.subarray(0, n));
      expect(claim(bytes.subarray(0, end))).toEqual({ format: 'webp', width: 100, height: 100 });
    }
  });

  it('another first chunk: left to the decoder', () => {
    const other = webpExtendedClaiming(100, 100);
    other.write('ALPH', 12, 'latin1');
    expect(claim(other)).toBeUndefined();
  });
});

describe('the library checks them before any work', () => {
  it('removeBackground: before loading the model', async () => {
    const model = undefined; // the default: its file is there, but it is not loaded for these
    expect((await expectBgoneError(removeBackground(teddy, { crop: '100:1', model }), 'validation_error')).details?.field).toBe('crop');
    await expectBgoneError(removeBackground(webpLosslessClaiming(16384, 16384), { model }), 'image_too_large');
    await expectBgoneError(removeBackground(jpegClaiming(65535, 65535), { model }), 'image_too_large');
    await expectBgoneError(removeBackground(pngWithBadIhdrCrc(pngClaiming(100, 100)), { model }), 'invalid_image');
    await expectBgoneError(removeBackground(jpegWithoutScanData(teddy), { model }), 'invalid_image');
  });

  it('every test photo: the claimed size is the one libvips reads (none has EXIF rotation)', () => {
    const names = readdirSync(join(PHOTOS_DIR, 'images')).filter((n) => /\.(jpg|png)$/.test(n));
    expect(names.length).toBe(6);
    for (const name of names) {
      const bytes = readFileSync(photoPath(name));
      expect(claim(bytes), name).toEqual(probeImage(bytes));
    }
  });

  it('probeImage: the header checks, then the size libvips reads', () => {
    expect(probeImage(teddy)).toEqual({ format: 'jpg', width: 284, height: 398 });
    expectThrowsBgone(() => probeImage(pngClaiming(2147483647, 2147483647)), 'image_too_large');
    expectThrowsBgone(() => probeImage(webpExtendedClaiming(16384, 16384)), 'image_too_large');
    expectThrowsBgone(() => probeImage(pngWithBadIhdrCrc(pngClaiming(100, 100))), 'invalid_image');
    expectThrowsBgone(() => probeImage(jpegWithoutScanData(teddy)), 'invalid_image');
  });
});
