/**
 * A background image whose header reads but whose data cannot be decoded: removeBackground refuses
 * it with invalid_image naming bg_image_file, and no job reaches the inference stage (the native
 * core decodes the background's data before its model runs). The same bytes given as the image
 * itself are refused by the native decode too. Good backgrounds of every kind are composed, and
 * channels=alpha, which ignores the background, does not look at it. The real addon and model.
 */
import { crc32 } from 'node:zlib';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { nativeMemoryStats } from '../../src/lib/native.js';
import { BgoneError, removeBackground } from '../helpers/bgone.js';
import { PHOTOS } from '../helpers/constants.js';
import { jpegCutAfterScan, jpegCutInScan, jpegMarkers, jpegWithBytesBeforeMarkers, jpegWithoutHuffmanTables } from '../helpers/http-images.js';
import { photoPath, readFixture, readPhoto } from '../helpers/paths.js';

const teddy = readPhoto(PHOTOS.teddy); // 284x398
const progressive = readFixture('progressive.jpg');
const teddyPng = await sharp(photoPath(PHOTOS.teddy)).png().toBuffer();

/** The offset of the first IDAT chunk of a PNG, and its data's length. */
function firstIdat(png: Buffer): { at: number; length: number } {
  for (let at = 8; at + 8 <= png.length; at += 12 + png.readUInt32BE(at)) {
    if (png.toString('latin1', at + 4, at + 8) === 'IDAT') return { at, length: png.readUInt32BE(at) };
  }
  throw new Error('no IDAT');
}

/** The PNG with its first IDAT chunk's CRC wrong, its data untouched. */
function pngWithBadIdatCrc(png: Buffer): Buffer {
  const out = Buffer.from(png);
  const { at, length } = firstIdat(out);
  out[at + 8 + length] ^= 0xff;
  return out;
}

/** The PNG with bytes of its first IDAT's data changed and the chunk's CRC made to match them. */
function pngWithCorruptIdat(png: Buffer): Buffer {
  const out = Buffer.from(png);
  const { at, length } = firstIdat(out);
  for (let i = 0; i < 64; i++) out[at + 8 + (length >> 1) + i] ^= 0x5a;
  out.writeUInt32BE(crc32(out.subarray(at + 4, at + 8 + length)), at + 8 + length);
  return out;
}

const BROKEN: Array<[string, () => Buffer]> = [
  ['a baseline JPEG cut inside its scan data, closed with EOI', () => jpegCutInScan(teddy, 0.5)],
  ['a progressive JPEG cut between two scans, closed with EOI', () => jpegCutAfterScan(progressive, 1)],
  ['a JPEG with garbage in its scan data', () => readFixture('corrupt-scan.jpg')],
  ['a JPEG cut at half', () => readFixture('truncated.jpg')],
  ['a PNG cut at half', () => readFixture('truncated.png')],
  ['a PNG whose IDAT fails its CRC', () => pngWithBadIdatCrc(teddyPng)],
  ['a PNG whose image data are corrupt (its CRC matching)', () => pngWithCorruptIdat(teddyPng)],
  ['a WebP cut at half', () => readFixture('truncated.webp')],
];

/** Jobs that reached the native core's inference stage so far. */
const inferenceStages = () => nativeMemoryStats().inferenceStages;

describe('a background that cannot be decoded', () => {
  it.each(BROKEN)('%s: invalid_image naming bg_image_file, and no inference runs', async (_, bytes) => {
    const before = inferenceStages();
    const error = await removeBackground(teddy, { bgImageFile: bytes() }).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(error).toBeInstanceOf(BgoneError);
    expect(error).toMatchObject({ code: 'invalid_image', details: { field: 'bg_image_file' } });
    expect(inferenceStages()).toBe(before);
  });

  it.each(BROKEN)('%s: as the image itself, the native core refuses it too (invalid_image)', async (_, bytes) => {
    const error = await removeBackground(bytes(), { size: 'preview' }).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(error).toMatchObject({ code: 'invalid_image' });
  });

  it('channels=alpha ignores the background: its data are not looked at, the mask comes back', async () => {
    const result = await removeBackground(teddy, { bgImageFile: jpegCutInScan(teddy, 0.5), channels: 'alpha', size: 'preview' });
    expect(result.channels).toBe(1);
  });
});

/** Composes `background` behind teddy; the job reaches the inference stage once. */
async function composes(background: Buffer, what: string): Promise<void> {
  const before = inferenceStages();
  const result = await removeBackground(teddy, { bgImageFile: background, size: 'preview', format: 'png' });
  expect(result.width, what).toBeGreaterThan(0);
  expect(inferenceStages(), what).toBe(before + 1);
}

describe('good backgrounds pass the check', () => {
  it('JPEGs: baseline, progressive, CMYK, grey, every orientation, without Huffman tables, with bytes before markers', async () => {
    const standard = await sharp(photoPath(PHOTOS.teddy)).jpeg({ quality: 90, optimiseCoding: false }).toBuffer();
    const withoutTables = jpegWithoutHuffmanTables(standard);
    expect(jpegMarkers(withoutTables).some((m) => m.marker === 0xc4)).toBe(false);
    const jpegs = [
      teddy,
      readPhoto(PHOTOS.llama),
      readPhoto(PHOTOS.swan),
      progressive,
      readFixture('cmyk.jpg'),
      readFixture('grey.jpg'),
      readFixture('swan-12mp.jpg'),
      ...[1, 2, 3, 4, 5, 6, 7, 8].map((n) => readFixture(`orient-${n}.jpg`)),
      withoutTables,
      jpegWithBytesBeforeMarkers(teddy),
      jpegWithBytesBeforeMarkers(progressive),
      await sharp(photoPath(PHOTOS.teddy)).jpeg({ quality: 80, chromaSubsampling: '4:4:4' }).toBuffer(),
    ];
    for (const [i, jpeg] of jpegs.entries()) await composes(jpeg, `JPEG ${i}`);
  });

  it('PNGs: RGB, palette, grey, 16-bit, with alpha, interlaced; WebP lossy, lossless and with alpha', async () => {
    const images = [
      teddyPng,
      readFixture('palette.png'),
      readFixture('grey.png'),
      readFixture('rgb16.png'),
      readFixture('alpha.png'),
      await sharp(photoPath(PHOTOS.teddy)).png({ progressive: true }).toBuffer(),
      await sharp(photoPath(PHOTOS.teddy)).webp({ quality: 80 }).toBuffer(),
      await sharp(photoPath(PHOTOS.teddy)).webp({ lossless: true }).toBuffer(),
      await sharp(readFixture('alpha.png')).webp({ quality: 80 }).toBuffer(),
    ];
    for (const [i, image] of images.entries()) await composes(image, `image ${i}`);
  });
});
