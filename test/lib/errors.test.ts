/**
 * Hostile and broken inputs, and broken model files: each must settle with the documented error
 * code (or, for damage a decoder may tolerate, a result), never crash or hang the process. Each
 * input is tried several times to smoke out crashes that depend on state left behind by an earlier
 * failure; the file ends by checking that a normal call still gives exactly the same bytes as before
 * all of them.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectBgoneError } from '../helpers/assert.js';
import {
  BgoneError,
  configure,
  DEFAULT_SETTINGS,
  MAX_FILE_BYTES,
  type Manifest,
  preloadModel,
  type RemoveBackgroundResult,
  removeBackground,
} from '../helpers/bgone.js';
import { PHOTOS } from '../helpers/constants.js';
import {
  jpegCutAfterScan,
  jpegCutInScan,
  jpegMarkers,
  jpegWithBytesBeforeMarkers,
  jpegWithMoreRows,
  jpegWithoutHuffmanTables,
} from '../helpers/http-images.js';
import { photoPath, REPO_ROOT, readFixture, readPhoto } from '../helpers/paths.js';

const REPEAT = 3;
const teddy = readPhoto(PHOTOS.teddy);
let before: RemoveBackgroundResult;

beforeAll(async () => {
  // Loads the model and gives the baseline the last test compares with.
  before = await removeBackground(teddy);
});

async function repeatedly(input: Buffer | Uint8Array, code: string, times = REPEAT): Promise<BgoneError[]> {
  const errors: BgoneError[] = [];
  for (let i = 0; i < times; i++) errors.push(await expectBgoneError(removeBackground(input), code));
  return errors;
}

describe('not a JPEG, PNG or WebP: unsupported_media_type', () => {
  it.each(['random.bin', 'text.txt', 'image.gif', 'image.bmp', 'image.tiff', 'animated.gif'])('%s', async (name) => {
    await repeatedly(readFixture(name), 'unsupported_media_type');
  });

  it('a one-byte and a two-byte file', async () => {
    await repeatedly(Buffer.from([0xff]), 'unsupported_media_type');
    await repeatedly(Buffer.from([0xff, 0xd8]), 'unsupported_media_type');
  });
});

describe('a JPEG, PNG or WebP that cannot be decoded: invalid_image', () => {
  it.each(['truncated.jpg', 'truncated.png', 'truncated.webp'])('%s (cut at half)', async (name) => {
    await repeatedly(readFixture(name), 'invalid_image');
  });

  it.each([0.1, 0.5, 0.9])('a 5 MP JPEG cut at %s of its length: its decode fails while the model input is resampled behind it', async (share) => {
    const whole = readFixture('swan-big.jpg');
    await repeatedly(whole.subarray(0, Math.floor(whole.length * share)), 'invalid_image');
  });

  it.each([0.5, 0.9])('a 12 MP JPEG cut at %s of its length: its two decodes (the shrunk one and the full one, at once) both fail', async (share) => {
    const whole = readFixture('swan-12mp.jpg');
    await repeatedly(whole.subarray(0, Math.floor(whole.length * share)), 'invalid_image');
  });

  it.each(['jpeg-magic-garbage.bin', 'png-magic-garbage.bin', 'webp-magic-garbage.bin'])('%s (a signature followed by garbage)', async (name) => {
    await repeatedly(readFixture(name), 'invalid_image');
  });

  it('just the three bytes of a JPEG signature', async () => {
    await repeatedly(Buffer.from([0xff, 0xd8, 0xff]), 'invalid_image');
  });

  it.each(['corrupt-scan.jpg', 'corrupt-markers.jpg'])(
    '%s (garbage in the middle of the scan data): a result or invalid_image, never a crash',
    async (name) => {
      const input = readFixture(name);
      for (let i = 0; i < 2; i++) {
        const outcome = await removeBackground(input).then(
          (result) => ({ ok: true as const, result }),
          (error: unknown) => ({ ok: false as const, error }),
        );
        if (outcome.ok) {
          expect({ width: outcome.result.width, height: outcome.result.height }).toEqual({ width: 284, height: 398 });
          expect(outcome.result.data.length).toBeGreaterThan(0);
        } else {
          expect(outcome.error).toBeInstanceOf(BgoneError);
          expect((outcome.error as BgoneError).code).toBe('invalid_image');
        }
      }
    },
  );
});

describe('a JPEG whose scan data end before its last block: invalid_image, never a result', () => {
  // libjpeg only warns when a scan's data run out (then fills the rest with grey): a JPEG cut short
  // and closed with an end marker, or whose frame header claims more rows than its data hold.
  const baseline = { teddy, llama: readPhoto(PHOTOS.llama) };
  const progressive = readFixture('progressive.jpg'); // the llama, progressive: 10 scans

  it.each([0.1, 0.5, 0.9, 0.995])('the teddy and the llama (baseline) cut at %s of their scan data, closed with EOI', async (share) => {
    for (const photo of Object.values(baseline)) await repeatedly(jpegCutInScan(photo, share), 'invalid_image');
  });

  it('the progressive llama cut inside its first, a middle and its last scan, closed with EOI', async () => {
    const scans = jpegMarkers(progressive).filter((m) => m.scan).length;
    for (const scan of [0, scans >> 1, scans - 1]) await repeatedly(jpegCutInScan(progressive, 0.5, scan), 'invalid_image');
  });

  it('the progressive llama cut between two scans, closed with EOI (every scan whole, but some coefficients never coded)', async () => {
    await repeatedly(jpegCutAfterScan(progressive, 1), 'invalid_image');
  });

  it.each([16, 200])('a frame header claiming %s more rows than the scans hold, a whole MCU row or more (baseline and progressive)', async (rows) => {
    for (const photo of [teddy, progressive]) await repeatedly(jpegWithMoreRows(photo, rows), 'invalid_image');
  });

  it('a JPEG without Huffman tables (the standard ones apply) cut inside its scan data: invalid_image; whole, it decodes', async () => {
    const standard = await sharp(photoPath(PHOTOS.teddy)).jpeg({ quality: 90, optimiseCoding: false }).toBuffer();
    const withoutTables = jpegWithoutHuffmanTables(standard);
    expect(jpegMarkers(withoutTables).some((m) => m.marker === 0xc4)).toBe(false);
    await repeatedly(jpegCutInScan(withoutTables, 0.5), 'invalid_image');
    expect((await removeBackground(withoutTables, { size: 'preview' })).width).toBe(284);
  });

  it('(control) bytes before markers, which libjpeg skips with a warning, still decode: the same bytes as the file without them', async () => {
    for (const photo of [teddy, progressive]) {
      const odd = jpegWithBytesBeforeMarkers(photo);
      expect(odd.length).toBeGreaterThan(photo.length);
      const [clean, skipped] = [await removeBackground(photo, { size: 'preview' }), await removeBackground(odd, { size: 'preview' })];
      expect(skipped.data.equals(clean.data)).toBe(true);
    }
  });
});

describe('missing input: missing_image', () => {
  it('an empty buffer', async () => {
    await repeatedly(Buffer.alloc(0), 'missing_image');
    await repeatedly(new Uint8Array(0), 'missing_image');
  });

  it.each([undefined, null, 'a string', 42, {}, [0xff, 0xd8, 0xff], new ArrayBuffer(8)])('not bytes: %j', async (input) => {
    await expectBgoneError(removeBackground(input as never), 'missing_image');
  });
});

describe('limits: image_too_large', () => {
  it('a file of 20 MB + 1 byte (checked before anything else)', async () => {
    const big = Buffer.alloc(MAX_FILE_BYTES + 1);
    readFixture('orient-1.jpg').copy(big); // a real JPEG at the start: only the size is wrong
    await repeatedly(big, 'image_too_large');
  });

  it('a file of exactly 20 MB is not too large (here it is garbage after a JPEG signature)', async () => {
    const big = Buffer.alloc(MAX_FILE_BYTES);
    big.set([0xff, 0xd8, 0xff]);
    await expectBgoneError(removeBackground(big), 'invalid_image');
  });

  it('a PNG header claiming 100000 x 100000 px: rejected from the header, without allocating the pixels', async () => {
    const input = readFixture('huge-header.png');
    expect(input.length).toBeLessThan(200);
    const rssBefore = process.memoryUsage().rss;
    const errors = await repeatedly(input, 'image_too_large');
    const grown = process.memoryUsage().rss - rssBefore;
    expect(grown, `RSS grew by ${Math.round(grown / 2 ** 20)} MB`).toBeLessThan(200 * 2 ** 20);
    expect(errors[0]!.detail ?? '').not.toMatch(/out of memory/i);
  });

  it('a JPEG whose frame header claims 60000 x 60000 px', async () => {
    const rssBefore = process.memoryUsage().rss;
    await repeatedly(readFixture('huge-sof.jpg'), 'image_too_large');
    expect(process.memoryUsage().rss - rssBefore).toBeLessThan(200 * 2 ** 20);
  });

  it.each(['wide-6001x10.png', 'tall-10x6001.png'])('%s: one side over 6000 px', async (name) => {
    await repeatedly(readFixture(name), 'image_too_large');
  });

  it('6000 px is still allowed (6000 x 10, uniform grey: no subject, but not too large)', async () => {
    await expectBgoneError(removeBackground(readFixture('wide-6000x10.png')), 'foreground_not_found');
  });
});

describe('nothing to cut out', () => {
  it('a uniform grey 512 x 512 image: foreground_not_found', async () => {
    // Checked with the real model: it finds no subject at all in a flat image.
    await repeatedly(readFixture('grey-512.png'), 'foreground_not_found', 2);
  });
});

describe('a model file ONNX Runtime cannot load: internal_error naming the model, never a crash', () => {
  // A copy of the shipped manifest in a temporary models folder, with one extra model per broken file.
  const shipped = JSON.parse(readFileSync(join(REPO_ROOT, 'models', 'manifest.json'), 'utf8')) as Manifest;
  const dir = mkdtempSync(join(tmpdir(), 'bgone-broken-models-'));
  const small = shipped.models.small!;
  const broken: Record<string, Buffer> = {
    garbage: randomBytes(64 * 1024),
    empty: Buffer.alloc(0),
    // An interrupted download: the first MiB of a real model.
    truncated: readFileSync(join(REPO_ROOT, 'models', small.file)).subarray(0, 1 << 20),
    text: Buffer.from('version https://git-lfs.github.com/spec/v1\noid sha256:0000\nsize 88188479\n'),
  };
  const manifest: Manifest = { default: 'garbage', models: {} };
  for (const [name, bytes] of Object.entries(broken)) {
    writeFileSync(join(dir, `${name}.onnx`), bytes);
    manifest.models[name] = { ...small, file: `${name}.onnx` };
  }
  // A real model (fixed at 1024²) declared with a family of another side (320²): it loads, and the run fails.
  symlinkSync(join(REPO_ROOT, 'models', small.file), join(dir, small.file));
  manifest.models.misfit = { ...small, family: 'u2net' };
  writeFileSync(join(dir, 'manifest.json'), JSON.stringify(manifest));

  beforeAll(() => {
    configure({ modelsDir: dir });
  });
  afterAll(() => {
    configure({ modelsDir: DEFAULT_SETTINGS.modelsDir });
    rmSync(dir, { recursive: true });
  });

  it.each(Object.keys(broken))('%s: preloadModel and removeBackground reject, every time (a failed load is not cached)', async (model) => {
    const path = join(dir, `${model}.onnx`);
    for (let i = 0; i < REPEAT; i++) {
      const error = await expectBgoneError(preloadModel(model), 'internal_error');
      expect(error.message).toBe(
        `Model ${model} could not be loaded from ${path}: ONNX Runtime refused it (a corrupt or incomplete file, or not an ONNX model).`,
      );
      expect(error.details).toEqual({ component: 'models', model, path });
      expect(error.detail).toMatch(/CreateSession/);
      await expectBgoneError(removeBackground(teddy, { model }), 'internal_error');
    }
  });

  it('the default model of the folder, when broken, fails a call without options the same way', async () => {
    const error = await expectBgoneError(removeBackground(teddy), 'internal_error');
    expect(error.details?.model).toBe('garbage');
  });

  it("a model that loads but does not take its family's input size: internal_error from the run", async () => {
    await preloadModel('misfit');
    const error = await expectBgoneError(removeBackground(teddy, { model: 'misfit' }), 'internal_error');
    expect(error.detail).toMatch(/^Run: .*invalid dimensions/i);
  });
});

describe('afterwards (runs last: tests in a file run in order)', () => {
  it('the process is alive and unaffected: the same input still gives the same bytes', async () => {
    const after = await removeBackground(teddy);
    expect(after.data.equals(before.data)).toBe(true);
  });
});
