/**
 * Export and cutout options with the real addon, the real model and real photos: format=avif,
 * quality, dpi (read back from the files), remove_background=false and keep_alpha=auto (no model
 * run where the image is its own matte: the native core's count of inference stages proves it).
 */
import sharp from 'sharp';
import { beforeAll, describe, expect, it } from 'vitest';
import { MEDIA_TYPES, nativeMemoryStats, removeBackground } from '../helpers/bgone.js';
import { PHOTOS } from '../helpers/constants.js';
import { alphaOf, decode, MAGIC, pixel, type Raw } from '../helpers/image.js';
import { readFixture, readPhoto } from '../helpers/paths.js';
import { unzipStored } from '../helpers/zip.js';

const teddy = readPhoto(PHOTOS.teddy); // 284x398, background in all four corners
const TEDDY = { width: 284, height: 398 };
const TEDDY_INSIDE = { x: 145, y: 190 };

/** Jobs that reached the native core's inference stage so far. */
const inferenceStages = () => nativeMemoryStats().inferenceStages;

/** The teddy as an RGBA PNG with a soft transparent hole (a radial ramp 0..255) and a fully transparent band at the top. */
async function holedTeddy(): Promise<{ png: Buffer; alpha: Uint8Array }> {
  const { data, info } = await sharp(teddy).ensureAlpha().raw().toBuffer({ resolveWithObject: true });
  const alpha = new Uint8Array(info.width * info.height);
  for (let y = 0; y < info.height; y++) {
    for (let x = 0; x < info.width; x++) {
      const d = Math.hypot(x - 140, y - 200);
      const a = y < 20 ? 0 : Math.min(255, Math.round(Math.max(0, d - 30) * 4));
      alpha[y * info.width + x] = a;
      data[(y * info.width + x) * 4 + 3] = a;
    }
  }
  const png = await sharp(data, { raw: { width: info.width, height: info.height, channels: 4 } })
    .png()
    .toBuffer();
  return { png, alpha };
}

/**
 * The XResolution and YResolution (as numbers) and ResolutionUnit of an EXIF blob (sharp's
 * metadata().exif: "Exif\0\0" then a TIFF header and IFD0).
 */
function exifResolution(exif: Buffer): { x: number; y: number; unit: number } {
  const tiff = exif.subarray(exif.toString('latin1', 0, 4) === 'Exif' ? 6 : 0);
  const le = tiff.toString('latin1', 0, 2) === 'II';
  const u16 = (o: number) => (le ? tiff.readUInt16LE(o) : tiff.readUInt16BE(o));
  const u32 = (o: number) => (le ? tiff.readUInt32LE(o) : tiff.readUInt32BE(o));
  const ifd = u32(4);
  const out = { x: Number.NaN, y: Number.NaN, unit: Number.NaN };
  for (let i = 0; i < u16(ifd); i++) {
    const entry = ifd + 2 + i * 12;
    const tag = u16(entry);
    const rational = () => u32(u32(entry + 8)) / u32(u32(entry + 8) + 4);
    if (tag === 0x011a) out.x = rational();
    if (tag === 0x011b) out.y = rational();
    if (tag === 0x0128) out.unit = u16(entry + 8);
  }
  return out;
}

describe('format=avif', () => {
  it('AV1 in HEIF (image/avif): decodes back with its alpha, transparent background, opaque subject', async () => {
    expect(MEDIA_TYPES.avif).toBe('image/avif');
    const result = await removeBackground(teddy, { format: 'avif' });
    expect(result).toMatchObject({ format: 'avif', width: TEDDY.width, height: TEDDY.height, channels: 4 });
    expect(result.data.toString('latin1', 4, 12)).toBe('ftypavif');
    const meta = await sharp(result.data).metadata();
    expect(meta).toMatchObject({ format: 'heif', compression: 'av1', hasAlpha: true, width: TEDDY.width, height: TEDDY.height });
    const image = await decode(result.data);
    expect(image.channels).toBe(4);
    expect(pixel(image, 0, 0)[3]).toBeLessThanOrEqual(3);
    expect(pixel(image, TEDDY.width - 1, TEDDY.height - 1)[3]).toBeLessThanOrEqual(3);
    expect(pixel(image, TEDDY_INSIDE.x, TEDDY_INSIDE.y)[3]).toBeGreaterThanOrEqual(252);
  });

  it('channels=alpha: the mask as a grey AVIF', async () => {
    const result = await removeBackground(teddy, { format: 'avif', channels: 'alpha' });
    const meta = await sharp(result.data).metadata();
    expect(meta).toMatchObject({ format: 'heif', hasAlpha: false, width: TEDDY.width, height: TEDDY.height });
    const image = await decode(result.data);
    expect(pixel(image, 0, 0)[0]).toBeLessThanOrEqual(3);
    expect(pixel(image, TEDDY_INSIDE.x, TEDDY_INSIDE.y)[0]).toBeGreaterThanOrEqual(252);
  });
});

describe('quality', () => {
  it('a higher quality makes a larger JPEG, WebP and AVIF, monotonically', async () => {
    for (const format of ['jpg', 'webp', 'avif'] as const) {
      const sizes: number[] = [];
      for (const quality of [10, 40, 70, 95]) sizes.push((await removeBackground(teddy, { format, quality, removeBackground: false })).data.length);
      for (let i = 1; i < sizes.length; i++) expect(sizes[i], `${format}: ${sizes.join(' < ')}`).toBeGreaterThan(sizes[i - 1]!);
    }
  });

  it('left out, the quality is 90: the same bytes as quality=90', async () => {
    const a = await removeBackground(teddy, { format: 'jpg', removeBackground: false });
    const b = await removeBackground(teddy, { format: 'jpg', removeBackground: false, quality: 90 });
    expect(a.data.equals(b.data)).toBe(true);
  });
});

describe('dpi', () => {
  it('png: a pHYs chunk of round(dpi / 0.0254) pixels per metre, read back as the density', async () => {
    const result = await removeBackground(teddy, { format: 'png', dpi: 300, size: 'preview' });
    expect((await sharp(result.data).metadata()).density).toBe(300);
    const at = result.data.indexOf('pHYs', 0, 'latin1');
    expect(at).toBeGreaterThan(0);
    expect(at).toBeLessThan(result.data.indexOf('IDAT', 0, 'latin1'));
    expect([result.data.readUInt32BE(at + 4), result.data.readUInt32BE(at + 8), result.data[at + 12]]).toEqual([11811, 11811, 1]);
    // Without dpi, no pHYs.
    const plain = await removeBackground(teddy, { format: 'png', size: 'preview' });
    expect(plain.data.indexOf('pHYs', 0, 'latin1')).toBe(-1);
  });

  it("jpg: a JFIF header in dots per inch, read back as the density (also auto's JPEG, a zip's color.jpg and alpha.png)", async () => {
    for (const dpi of [72, 300, 1200]) {
      const result = await removeBackground(teddy, { format: 'jpg', dpi, size: 'preview' });
      expect(MAGIC.jpg(result.data)).toBe(true);
      expect(result.data.toString('latin1', 6, 11)).toBe('JFIF\0');
      expect((await sharp(result.data).metadata()).density, String(dpi)).toBe(dpi);
      await decode(result.data); // and it still decodes
    }
    const auto = await removeBackground(teddy, { format: 'auto', bgColor: 'white', dpi: 150, size: 'preview' });
    expect(auto.format).toBe('jpg');
    expect((await sharp(auto.data).metadata()).density).toBe(150);
    const zip = unzipStored((await removeBackground(teddy, { format: 'zip', dpi: 240, size: 'preview' })).data);
    const entry = (name: string) => zip.find((e) => e.name === name)!.data;
    expect((await sharp(entry('color.jpg')).metadata()).density).toBe(240);
    expect((await sharp(entry('alpha.png')).metadata()).density).toBe(240);
  });

  it('webp and avif: the EXIF resolution (the only metadata written), in inches', async () => {
    for (const format of ['webp', 'avif'] as const) {
      const result = await removeBackground(teddy, { format, dpi: 300, size: 'preview' });
      const meta = await sharp(result.data).metadata();
      expect(meta.exif, format).toBeInstanceOf(Buffer);
      expect(exifResolution(meta.exif!), format).toEqual({ x: 300, y: 300, unit: 2 });
      expect(meta.icc, format).toBeUndefined();
      expect(meta.xmp, format).toBeUndefined();
      // Without dpi, no metadata at all.
      expect((await sharp((await removeBackground(teddy, { format, size: 'preview' })).data).metadata()).exif, format).toBeUndefined();
    }
  });
});

describe('remove_background=false', () => {
  let opaque: Raw;
  let stagesBefore = 0;
  let stagesAfter = 0;
  let result: Awaited<ReturnType<typeof removeBackground>>;

  beforeAll(async () => {
    stagesBefore = inferenceStages();
    result = await removeBackground(teddy, { removeBackground: false });
    stagesAfter = inferenceStages();
    opaque = await decode(result.data);
  });

  it("an opaque JPEG: alpha 255 everywhere, the photo's own colours, the whole photo as the subject, uncertainty 0, no inference", async () => {
    expect(stagesAfter).toBe(stagesBefore);
    expect(result).toMatchObject({ format: 'png', width: TEDDY.width, height: TEDDY.height, channels: 4, uncertainty: 0 });
    expect(result.foreground).toEqual({ top: 0, left: 0, width: TEDDY.width, height: TEDDY.height });
    expect(alphaOf(opaque).every((a) => a === 255)).toBe(true);
    const photo = await decode(teddy);
    let worst = 0;
    for (let i = 0; i < photo.width * photo.height; i++) {
      for (let c = 0; c < 3; c++) worst = Math.max(worst, Math.abs(photo.data[i * 3 + c]! - opaque.data[i * 4 + c]!));
    }
    expect(worst).toBeLessThanOrEqual(1);
  });

  it('a PNG with transparency: its own alpha, byte for byte', async () => {
    const { png, alpha } = await holedTeddy();
    const before = inferenceStages();
    const out = await removeBackground(png, { removeBackground: false });
    expect(inferenceStages()).toBe(before);
    expect(Buffer.from(alphaOf(await decode(out.data))).equals(Buffer.from(alpha))).toBe(true);
    // The subject's box: where the alpha is at least 128 (below the transparent band).
    expect(out.foreground).toEqual({ top: 20, left: 0, width: TEDDY.width, height: TEDDY.height - 20 });
  });

  it('laid out: an exact canvas fits the photo inside, transparent around it; crop=true is the photo and its padding', async () => {
    const before = inferenceStages();
    const placed = await decode((await removeBackground(teddy, { removeBackground: false, outputSize: '500x500' })).data);
    expect([placed.width, placed.height]).toEqual([500, 500]);
    const fitted = Math.round((TEDDY.width * 500) / TEDDY.height); // 357 px wide, centred
    const left = Math.floor((500 - fitted) / 2);
    expect(pixel(placed, left - 3, 250)[3]).toBe(0);
    expect(pixel(placed, left + 3, 250)[3]).toBe(255);
    expect(pixel(placed, 250, 250)[3]).toBe(255);
    expect(pixel(placed, 500 - left + 3, 250)[3]).toBe(0);
    const cropped = await removeBackground(teddy, { removeBackground: false, crop: true });
    const pad = Math.round(0.1 * TEDDY.width);
    expect([cropped.width, cropped.height]).toEqual([TEDDY.width + 2 * pad, TEDDY.height + 2 * pad]);
    const image = await decode(cropped.data);
    expect(pixel(image, pad - 1, 100)[3]).toBe(0);
    expect(pixel(image, pad, 100)[3]).toBe(255);
    // Placement: output_size=subject is the photo itself; on a background colour, opaque.
    const subject = await removeBackground(teddy, { removeBackground: false, outputSize: 'subject', margin: '10%', bgColor: '#0000ff', format: 'jpg' });
    expect([subject.width, subject.height]).toEqual([TEDDY.width, TEDDY.height]);
    const blue = await decode(subject.data);
    expect(pixel(blue, 2, TEDDY.height / 2)[2]).toBeGreaterThan(200);
    expect(inferenceStages()).toBe(before);
  });

  it('roi: the photo inside it, transparent outside; channels=alpha: the matte itself', async () => {
    const roi = await decode((await removeBackground(teddy, { removeBackground: false, roi: '0px 0px 100px 398px' })).data);
    expect(pixel(roi, 99, 200)[3]).toBe(255);
    expect(pixel(roi, 100, 200)[3]).toBe(0);
    const mask = await decode((await removeBackground(teddy, { removeBackground: false, channels: 'alpha' })).data);
    expect(mask.channels).toBe(1);
    expect(alphaOf(mask).every((a) => a === 255)).toBe(true);
  });

  it('bytes that do not decode: invalid_image on the own-matte road too (remove_background=false, keep_alpha=auto), no inference', async () => {
    const before = inferenceStages();
    for (const options of [{ removeBackground: false }, { keepAlpha: 'auto' }]) {
      await expect(removeBackground(readFixture('truncated.png'), options)).rejects.toMatchObject({ code: 'invalid_image' });
      await expect(removeBackground(teddy.subarray(0, teddy.length >> 1), options)).rejects.toMatchObject({ code: 'invalid_image' });
    }
    expect(inferenceStages()).toBe(before);
  });

  it('an image with no opaque pixel: foreground_not_found, as when the model finds no subject', async () => {
    const clear = await sharp({ create: { width: 64, height: 64, channels: 4, background: { r: 10, g: 20, b: 30, alpha: 0 } } })
      .png()
      .toBuffer();
    await expect(removeBackground(clear, { removeBackground: false })).rejects.toMatchObject({ code: 'foreground_not_found' });
  });
});

describe('keep_alpha=auto', () => {
  it('a PNG with a transparent hole: exactly its alpha as the matte, and no inference', async () => {
    const { png, alpha } = await holedTeddy();
    const before = inferenceStages();
    const out = await removeBackground(png, { keepAlpha: 'auto' });
    expect(inferenceStages()).toBe(before);
    expect(out.uncertainty).toBe(0);
    expect(Buffer.from(alphaOf(await decode(out.data))).equals(Buffer.from(alpha))).toBe(true);
    // A WebP with the same transparency (lossless) too.
    const webp = await sharp(png).webp({ lossless: true }).toBuffer();
    const fromWebp = await removeBackground(webp, { keepAlpha: 'auto' });
    expect(inferenceStages()).toBe(before);
    expect(Buffer.from(alphaOf(await decode(fromWebp.data))).equals(Buffer.from(alpha))).toBe(true);
  });

  it('an opaque JPEG, or a PNG whose alpha is 255 everywhere: the model runs, as without keep_alpha', async () => {
    const before = inferenceStages();
    const jpeg = await removeBackground(teddy, { keepAlpha: 'auto', size: 'preview' });
    expect(inferenceStages()).toBe(before + 1);
    expect(pixel(await decode(jpeg.data), 0, 0)[3]).toBe(0); // the background is cut away
    const opaquePng = await sharp(teddy).ensureAlpha(1).png().toBuffer();
    expect((await sharp(opaquePng).metadata()).hasAlpha).toBe(true);
    const png = await removeBackground(opaquePng, { keepAlpha: 'auto', size: 'preview' });
    expect(inferenceStages()).toBe(before + 2);
    const image = await decode(png.data);
    expect(pixel(image, 0, 0)[3]).toBe(0);
    expect(pixel(image, TEDDY_INSIDE.x, TEDDY_INSIDE.y)[3]).toBe(255);
  });

  it('keep_alpha=never (the default): a PNG with transparency is cut out by the model', async () => {
    const { png } = await holedTeddy();
    const before = inferenceStages();
    await removeBackground(png, { size: 'preview' });
    expect(inferenceStages()).toBe(before + 1);
  });
});
