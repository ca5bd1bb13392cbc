/**
 * metadata and color_space with the real addon: inputs carrying XMP, EXIF and an ICC profile
 * (written by hand, or by sharp), the outputs parsed back chunk by chunk and segment by segment.
 */
import sharp from 'sharp';
import { beforeAll, describe, expect, it } from 'vitest';
import { removeBackground } from '../helpers/bgone.js';
import { PHOTOS } from '../helpers/constants.js';
import { exifBlock, jpegExif, jpegSegments, jpegWith, jpegXmp, pngChunks, pngIcc, pngXmp, readTiff, webpChunks, xmpPacket } from '../helpers/metadata.js';
import { readPhoto } from '../helpers/paths.js';

const teddy = readPhoto(PHOTOS.teddy);
const XMP = xmpPacket('from-the-input');
const COPYRIGHT = '(c) 2024 Teddy & Co <studio>';
const COMMENT = 'shot on a table';
/** No model: the photo is the subject; what is tested is the export. */
const PLAIN = { removeBackground: false, size: 'preview' } as const;
let tagged: Buffer;
let icc: Buffer;
let withIcc: Buffer;

beforeAll(async () => {
  const jpeg = await sharp(teddy).jpeg().toBuffer();
  tagged = jpegWith(jpeg, { exif: exifBlock({ copyright: COPYRIGHT, comment: COMMENT }), xmp: XMP });
  withIcc = await sharp(teddy).withIccProfile('p3').jpeg().toBuffer();
  icc = (await sharp(withIcc).metadata()).icc!;
});

const tags = (entries: Array<{ tag: number }>) => entries.map((e) => e.tag);
const text = (b: Buffer) => b.toString('latin1').replace(/\0+$/, '');

describe('metadata', () => {
  it('none (the default): no XMP, EXIF or ICC of the input in PNG, JPEG or WebP', async () => {
    const input = jpegWith(withIcc, { exif: exifBlock({ copyright: COPYRIGHT, comment: COMMENT }), xmp: XMP });
    for (const options of [{}, { metadata: 'none' }]) {
      const png = (await removeBackground(input, { ...PLAIN, ...options })).data;
      expect(pngChunks(png).map((c) => c.type)).toEqual(['IHDR', 'IDAT', 'IEND']);
      const jpg = (await removeBackground(input, { ...PLAIN, ...options, format: 'jpg' })).data;
      expect(jpegSegments(jpg).filter((s) => s.marker >= 0xe1 && s.marker <= 0xef)).toEqual([]);
      const webp = (await removeBackground(input, { ...PLAIN, ...options, format: 'webp' })).data;
      expect(webpChunks(webp).map((c) => c.type)).not.toContain('EXIF');
      expect(webpChunks(webp).map((c) => c.type)).not.toContain('XMP ');
      expect(webpChunks(webp).map((c) => c.type)).not.toContain('ICCP');
    }
  });

  it("xmp: the input's packet byte for byte, in PNG's iTXt, JPEG's APP1, WebP's XMP chunk; no EXIF", async () => {
    const png = (await removeBackground(tagged, { ...PLAIN, metadata: 'xmp' })).data;
    expect(pngXmp(png)).toBe(XMP);
    expect(pngChunks(png).map((c) => c.type)).toEqual(['IHDR', 'iTXt', 'IDAT', 'IEND']);
    const jpg = (await removeBackground(tagged, { ...PLAIN, metadata: 'xmp', format: 'jpg', dpi: 300 })).data;
    expect(jpegXmp(jpg)).toBe(XMP);
    expect(jpegExif(jpg)).toBeUndefined();
    expect((await sharp(jpg).metadata()).density).toBe(300);
    const webp = (await removeBackground(tagged, { ...PLAIN, metadata: 'xmp', format: 'webp' })).data;
    expect(
      webpChunks(webp)
        .find((c) => c.type === 'XMP ')
        ?.data.toString('utf8'),
    ).toBe(XMP);
    expect(webpChunks(webp).map((c) => c.type)).not.toContain('EXIF');
  });

  it('xmp on an input without XMP: nothing written, no error', async () => {
    const png = (await removeBackground(teddy, { ...PLAIN, metadata: 'xmp' })).data;
    expect(pngChunks(png).map((c) => c.type)).toEqual(['IHDR', 'IDAT', 'IEND']);
  });

  it("xmp and exif_subset from a PNG (libvips' zTXt, eXIf) and a WebP (XMP, EXIF chunks): the input's packet byte for byte, and its two tags", async () => {
    for (const format of ['png', 'webp'] as const) {
      const input = await sharp(tagged).keepExif().keepXmp().toFormat(format).toBuffer();
      const carried = format === 'png' ? pngChunks(input).map((c) => c.type) : webpChunks(input).map((c) => c.type);
      expect(carried, format).toEqual(expect.arrayContaining(format === 'png' ? ['zTXt', 'eXIf'] : ['XMP ', 'EXIF']));
      expect(pngXmp((await removeBackground(input, { ...PLAIN, metadata: 'xmp' })).data), format).toBe(XMP);
      const png = (await removeBackground(input, { ...PLAIN, metadata: 'exif_subset' })).data;
      const read = readTiff(pngChunks(png).find((c) => c.type === 'eXIf')!.data);
      expect(tags(read.ifd0), format).toEqual([0x0112, 0x8298, 0x8769]);
      expect(text(read.ifd0[1]!.value), format).toBe(COPYRIGHT);
      expect(read.exif[0]!.value.subarray(8).toString('latin1'), format).toBe(COMMENT);
      expect(pngXmp(png), format).toBeUndefined();
    }
  });

  it('exif_subset: Copyright and UserComment only, with Orientation 1, in PNG eXIf and JPEG APP1; no XMP', async () => {
    const png = (await removeBackground(tagged, { ...PLAIN, metadata: 'exif_subset' })).data;
    const exif = pngChunks(png).find((c) => c.type === 'eXIf')!.data;
    const read = readTiff(exif);
    expect(tags(read.ifd0)).toEqual([0x0112, 0x8298, 0x8769]);
    expect(read.ifd0[0]!.value.readUInt16LE(0)).toBe(1);
    expect(text(read.ifd0[1]!.value)).toBe(COPYRIGHT);
    expect(tags(read.exif)).toEqual([0x9286]);
    expect(read.exif[0]!.value.toString('latin1')).toBe(`ASCII\0\0\0${COMMENT}`);
    expect(exif.includes(Buffer.from('LeakCo'))).toBe(false);
    expect(pngXmp(png)).toBeUndefined();
    const jpg = (await removeBackground(tagged, { ...PLAIN, metadata: 'exif_subset', format: 'jpg' })).data;
    expect(jpegExif(jpg)).toEqual(exif);
    expect(jpegXmp(jpg)).toBeUndefined();
  });

  it("exif_subset with dpi: WebP's and AVIF's one EXIF block holds the resolution beside the two tags", async () => {
    for (const format of ['webp', 'avif'] as const) {
      const out = (await removeBackground(tagged, { ...PLAIN, metadata: 'exif_subset', format, dpi: 300 })).data;
      const read = readTiff((await sharp(out).metadata()).exif!);
      const ifd0 = new Map(read.ifd0.map((e) => [e.tag, e]));
      const le = (await sharp(out).metadata()).exif!.toString('latin1', 6, 8) === 'II';
      const rational = (tag: number) => {
        const v = ifd0.get(tag)!.value;
        return le ? v.readUInt32LE(0) / v.readUInt32LE(4) : v.readUInt32BE(0) / v.readUInt32BE(4);
      };
      expect([rational(0x011a), rational(0x011b)], format).toEqual([300, 300]);
      expect(text(ifd0.get(0x8298)!.value), format).toBe(COPYRIGHT);
      expect(ifd0.has(0x010f), format).toBe(false);
      expect(
        read.exif
          .find((e) => e.tag === 0x9286)
          ?.value.subarray(8)
          .toString('latin1'),
        format,
      ).toBe(COMMENT);
    }
  });

  it('exif_subset_xmp: the two tags also as a minimal XMP packet (dc:rights, exif:UserComment), escaped', async () => {
    const png = (await removeBackground(tagged, { ...PLAIN, metadata: 'exif_subset_xmp' })).data;
    const xmp = pngXmp(png)!;
    expect(xmp).toContain('<dc:rights><rdf:Alt><rdf:li xml:lang="x-default">(c) 2024 Teddy &amp; Co &lt;studio&gt;</rdf:li></rdf:Alt></dc:rights>');
    expect(xmp).toContain(`<exif:UserComment><rdf:Alt><rdf:li xml:lang="x-default">${COMMENT}</rdf:li></rdf:Alt></exif:UserComment>`);
    expect(xmp).not.toContain('from-the-input');
    expect(pngChunks(png).find((c) => c.type === 'eXIf')).toBeDefined();
    // A big-endian block with a UNICODE comment: the same text.
    const be = jpegWith(await sharp(teddy).jpeg().toBuffer(), { exif: exifBlock({ copyright: 'Ünï', unicodeComment: 'Grüße €', bigEndian: true }) });
    const out = (await removeBackground(be, { ...PLAIN, metadata: 'exif_subset_xmp', format: 'jpg' })).data;
    expect(jpegXmp(out)).toContain('>Grüße €</rdf:li></rdf:Alt></exif:UserComment>');
    const read = readTiff(jpegExif(out)!);
    expect(read.exif[0]!.value.subarray(8).toString('utf16le')).toBe('Grüße €');
  });

  it('a broken EXIF keeps nothing and does not fail the job', async () => {
    const good = exifBlock({ copyright: COPYRIGHT, comment: COMMENT });
    const outside = Buffer.from(good);
    outside.writeUInt32LE(0xfffffff0, 4); // IFD0 past the end
    const count = Buffer.from(good);
    count.writeUInt16LE(0xffff, 8); // more entries than bytes
    const pointer = Buffer.from(good);
    const exifAt = readTiffPointer(pointer);
    pointer.writeUInt32LE(pointer.length + 100, exifAt); // the Exif IFD past the end
    const jpeg = await sharp(teddy).jpeg().toBuffer();
    for (const exif of [outside, count, pointer, good.subarray(0, 20), Buffer.from('MM\0\x2a', 'latin1')]) {
      const png = (await removeBackground(jpegWith(jpeg, { exif }), { ...PLAIN, metadata: 'exif_subset_xmp' })).data;
      expect(pngChunks(png).map((c) => c.type)).toEqual(['IHDR', 'IDAT', 'IEND']);
    }
  });

  it('a value outside the list is a validation_error naming metadata', async () => {
    await expect(removeBackground(teddy, { ...PLAIN, metadata: 'all' })).rejects.toMatchObject({ code: 'validation_error', details: { field: 'metadata' } });
  });
});

/** Where IFD0's Exif IFD pointer holds its offset (exifBlock's little-endian layout). */
function readTiffPointer(block: Buffer): number {
  const ifd = block.readUInt32LE(4);
  for (let i = 0; i < block.readUInt16LE(ifd); i++) if (block.readUInt16LE(ifd + 2 + i * 12) === 0x8769) return ifd + 2 + i * 12 + 8;
  throw new Error('no Exif IFD');
}

describe('color_space', () => {
  it("original: the input's ICC profile in an iCCP chunk, byte for byte; the pixels as with srgb", async () => {
    const out = (await removeBackground(withIcc, { colorSpace: 'original' })).data;
    const kept = pngIcc(out)!;
    expect(kept.name).toBe('ICC profile');
    expect(kept.profile.equals(icc)).toBe(true);
    const srgb = (await removeBackground(withIcc, {})).data;
    expect(pngIcc(srgb)).toBeUndefined();
    // The same pixels, deflated the same: the IDATs are equal (a decoder would convert by the profile).
    const idat = (png: Buffer) =>
      Buffer.concat(
        pngChunks(png)
          .filter((c) => c.type === 'IDAT')
          .map((c) => c.data),
      );
    expect(idat(out).equals(idat(srgb))).toBe(true);
  });

  it('original on an input without a profile: as srgb, no chunk', async () => {
    const out = (await removeBackground(teddy, { colorSpace: 'original' })).data;
    expect(pngChunks(out).map((c) => c.type)).toEqual(['IHDR', 'IDAT', 'IEND']);
  });

  it('original beside any other operation is a validation_error naming that option', async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ format: 'jpg' }, 'format'],
      [{ format: 'auto' }, 'format'],
      [{ dpi: 300 }, 'dpi'],
      [{ keepAlpha: 'auto' }, 'keep_alpha'],
      [{ metadata: 'exif_subset' }, 'metadata'],
      [{ metadata: 'exif_subset_xmp' }, 'metadata'],
      [{ bgColor: 'white' }, 'bg_color'],
      [{ shadow: 'drop' }, 'shadow'],
      [{ outputSize: '100x100' }, 'output_size'],
      [{ crop: true }, 'crop'],
      [{ removeBackground: false }, 'remove_background'],
      [{ channels: 'alpha' }, 'channels'],
      [{ size: 'preview' }, 'size'],
    ];
    for (const [options, field] of cases) {
      await expect(removeBackground(teddy, { colorSpace: 'original', ...options }), field).rejects.toMatchObject({
        code: 'validation_error',
        details: { field, fields: [field, 'color_space'] },
      });
    }
    await expect(removeBackground(teddy, { colorSpace: 'p3' })).rejects.toMatchObject({ code: 'validation_error', details: { field: 'color_space' } });
  });

  it('original with xmp: both kept', async () => {
    const input = jpegWith(withIcc, { xmp: XMP });
    const out = (await removeBackground(input, { colorSpace: 'original', metadata: 'xmp' })).data;
    expect(pngXmp(out)).toBe(XMP);
    expect(pngIcc(out)!.profile.equals(icc)).toBe(true);
  });
});
