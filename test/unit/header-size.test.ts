/**
 * The claimed-size reader (src/lib/header-size.ts) and the crop caps (src/lib/crop-cap.ts): pure
 * TypeScript (the last group loads the addon for probeImage, but no model). Headers are crafted
 * byte by byte, and cut at every length to check that a header cut short is invalid_image (or, once
 * the size was read, image_too_large), never a crash or a read past the buffer.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkClaimedSize, sniffFormat } from '../../src/lib/header-size.js';
import { expectBgoneError, expectThrowsBgone } from '../helpers/assert.js';
import { checkCropBox, cropBounds, MAX_SIDE, normaliseOptions, probeImage, removeBackground } from '../helpers/bgone.js';
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

describe('crop caps', () => {
  const options = (o: Record<string, unknown>) => normaliseOptions(o as never).native;
  const refuse = (image: { width: number; height: number }, o: Record<string, unknown>, field: string) => {
    const error = expectThrowsBgone(() => checkCropBox(image, options(o)), 'validation_error');
    expect(error.details?.field).toBe(field);
    return error;
  };

  it('no crop: the image itself, scaled by the size preset', () => {
    expect(cropBounds({ width: 6000, height: 6000 }, options({}))).toEqual({ box: { width: 6000, height: 6000 }, output: { width: 4000, height: 4000 } });
    expect(cropBounds({ width: 300, height: 200 }, options({ size: 'preview' }))).toEqual({
      box: { width: 300, height: 200 },
      output: { width: 300, height: 200 },
    });
  });

  it('crop=true: a subject filling the image plus its padding (a share of the width) on every side', () => {
    expect(cropBounds({ width: 1000, height: 500 }, options({ crop: 'true', padding: '10%' })).box).toEqual({ width: 1200, height: 700 });
    expect(cropBounds({ width: 1000, height: 500 }, options({ crop: 'true', padding: '0' })).box).toEqual({ width: 1000, height: 500 });
  });

  it('crop=W:H: the padded box widened or heightened to W:H, rounded up', () => {
    expect(cropBounds({ width: 1000, height: 500 }, options({ crop: '1:1', padding: '10%' })).box).toEqual({ width: 1200, height: 1200 });
    expect(cropBounds({ width: 1000, height: 500 }, options({ crop: '3:1', padding: '0' })).box).toEqual({ width: 1500, height: 500 });
  });

  it('sensible requests pass: crop=true, 1:1, 4:3, 3:2 or 16:9 with 10 % padding on usual photos, 16:9 and 9:16 either way', () => {
    for (const image of [
      { width: 6000, height: 4000 },
      { width: 4000, height: 6000 },
      { width: 6000, height: 6000 },
      { width: 6000, height: 3375 },
      { width: 3375, height: 6000 },
      { width: 284, height: 398 },
    ]) {
      for (const crop of ['true', '1:1', '4:3', '3:2', '16:9']) {
        for (const format of ['png', 'jpg', 'webp']) expect(() => checkCropBox(image, options({ crop, padding: '10%', format }))).not.toThrow();
      }
    }
    // A 6:1 panorama: crop=true is fine; a square around a subject as wide as the panorama is not.
    expect(() => checkCropBox({ width: 6000, height: 1000 }, options({ crop: 'true', format: 'webp' }))).not.toThrow();
    expect(() => checkCropBox({ width: 3000, height: 2000 }, options({ crop: '9:16', format: 'webp' }))).not.toThrow();
    expect(() => checkCropBox({ width: 2000, height: 3000 }, options({ crop: '16:9', format: 'webp' }))).not.toThrow();
    // 50 % padding on a square: 2W x 2H, exactly 4 times the area.
    expect(() => checkCropBox({ width: 6000, height: 6000 }, options({ crop: 'true', padding: '50%' }))).not.toThrow();
  });

  it('a box that could pass 4x the image area: validation_error naming crop, with the worst case', () => {
    const error = refuse({ width: 284, height: 398 }, { crop: '100:1' }, 'crop');
    expect(error.details).toMatchObject({ max_area_ratio: 4, worst_case: { width: 45400, height: 454 } });
    refuse({ width: 6000, height: 6000 }, { crop: 'true', padding: '100%' }, 'crop');
    refuse({ width: 6000, height: 6000 }, { crop: 'true', padding: '51%' }, 'crop');
  });

  it('a WebP result that could pass 16383 px after the size preset: validation_error naming format', () => {
    // 6000 x 1000 at 20:1: a 20020 x 1001 box (3.3x the area), 17900 px wide at the full preset.
    const error = refuse({ width: 6000, height: 1000 }, { crop: '20:1', padding: '0', format: 'webp' }, 'format');
    expect(error.details).toMatchObject({ max_side: 16383 });
    // The same box is fine as PNG or JPG, or as WebP once a smaller preset scales it down.
    for (const o of [{ format: 'png' }, { format: 'jpg' }, { format: 'webp', size: 'hd' }]) {
      expect(() => checkCropBox({ width: 6000, height: 1000 }, options({ crop: '20:1', padding: '0', ...o }))).not.toThrow();
    }
  });

  it('the output bound holds for every subject (brute force over subject boxes, the pipeline arithmetic)', () => {
    // pipeline.cc crop_box and the preset, for a subject of sw x sh in an image of W x H.
    const pipeline = (o: ReturnType<typeof options>, sw: number, sh: number, M: number) => {
      const pad = Math.round(o.padding * sw);
      let w = sw + 2 * pad;
      let h = sh + 2 * pad;
      if (o.crop === 'aspect') {
        const ratio = o.aspectWidth / o.aspectHeight;
        if (w / h < ratio) w = Math.ceil(h * ratio);
        else h = Math.ceil(w / ratio);
      }
      const scale = Math.min(1, Math.sqrt(M / (w * h)));
      return { w, h, ow: Math.max(1, Math.floor(w * scale + 1e-9)), oh: Math.max(1, Math.floor(h * scale + 1e-9)) };
    };
    const image = { width: 90, height: 40 };
    for (const crop of ['true', '1:1', '7:2', '1:5']) {
      for (const padding of ['0', '0.1', '0.35', '1']) {
        for (const size of ['preview', 'full']) {
          const o = options({ crop, padding, size });
          const M = o.maxPixels / 100; // scaled down with the image, so that the preset bites
          const bounds = cropBounds(image, { ...o, maxPixels: M });
          const worst = { w: 0, h: 0, ow: 0, oh: 0 };
          for (let sw = 1; sw <= image.width; sw++) {
            for (let sh = 1; sh <= image.height; sh++) {
              const r = pipeline(o, sw, sh, M);
              worst.w = Math.max(worst.w, r.w);
              worst.h = Math.max(worst.h, r.h);
              worst.ow = Math.max(worst.ow, r.ow);
              worst.oh = Math.max(worst.oh, r.oh);
            }
          }
          const where = `crop=${crop} padding=${padding} size=${size}`;
          // The box bound is exact (a subject filling the image); the output bound may exceed by a pixel or so.
          expect({ w: worst.w, h: worst.h }, where).toEqual({ w: bounds.box.width, h: bounds.box.height });
          expect(worst.ow, where).toBeLessThanOrEqual(bounds.output.width);
          expect(worst.oh, where).toBeLessThanOrEqual(bounds.output.height);
        }
      }
    }
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
