/**
 * The PNG writer on its own (native/png_writer.cc, native/png_deflate.cc), on pixels made here: the
 * built-in encoder of pngCompression 1 and zlib's levels must give files that a strict decoder reads
 * back to exactly the pixels given, whatever the content: long runs (matches at both distances,
 * lengths up to 258), noise (stored blocks, which Huffman codes would only enlarge), a mix of both
 * within one block, every band count, sizes that split into many segments, and the smallest image.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { inflateSync } from 'node:zlib';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { native } from '../../src/lib/native.js';

/** A small deterministic generator, so that a failure can be reproduced. */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s >>> 24;
  };
}

type Content = 'zeros' | 'noise' | 'mixed' | 'gradient' | 'stripes';

function pixels(content: Content, width: number, height: number, bands: number, seed = 1): Buffer {
  const out = Buffer.alloc(width * height * bands);
  const next = random(seed);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const i = (y * width + x) * bands;
      for (let c = 0; c < bands; c++) {
        let v = 0;
        if (content === 'noise') v = next();
        else if (content === 'gradient') v = (x * (c + 1) + y) & 255;
        else if (content === 'stripes') v = (Math.floor(x / 7) + c) % 3 === 0 ? 255 : 17 * c;
        else if (content === 'mixed') v = ((x >> 6) + (y >> 4)) % 3 === 0 ? next() : (x >> 5) % 2 === 0 ? 0 : 200 + c;
        out[i + c] = v;
      }
    }
  }
  return out;
}

async function decoded(png: Buffer, bands: number): Promise<Buffer> {
  const image = sharp(png, { failOn: 'error' });
  if (bands === 1) image.toColourspace('b-w'); // sharp would give grey as three bands
  const { data, info } = await image.raw().toBuffer({ resolveWithObject: true });
  expect(info.channels).toBe(bands);
  return data;
}

/** The zlib stream of the IDAT chunks, inflated by Node's zlib (which checks the Adler-32 sum). */
function inflatedIdat(png: Buffer): Buffer {
  const parts: Buffer[] = [];
  for (let at = 8; at < png.length; ) {
    const length = png.readUInt32BE(at);
    if (png.toString('latin1', at + 4, at + 8) === 'IDAT') parts.push(png.subarray(at + 8, at + 8 + length));
    at += 12 + length;
  }
  return inflateSync(Buffer.concat(parts));
}

const encodePng = (raw: Buffer, width: number, height: number, bands: number, level: number): Buffer => native().encodePng(raw, width, height, bands, level);

describe('PNG writer', () => {
  const contents: Content[] = ['zeros', 'noise', 'mixed', 'gradient', 'stripes'];
  for (const level of [1, 6]) {
    for (const bands of [1, 3, 4]) {
      it(`level ${level}, ${bands} band(s): every kind of content reads back exactly`, async () => {
        for (const content of contents) {
          const width = 613;
          const height = 211;
          const raw = pixels(content, width, height, bands);
          const png = encodePng(raw, width, height, bands, level);
          expect((await decoded(png, bands)).equals(raw), content).toBe(true);
          expect(inflatedIdat(png).length).toBe((width * bands + 1) * height);
        }
      });
    }
  }

  it('noise is stored, not expanded: the file stays within a few bytes per 64 KiB of the raw size', () => {
    const width = 1024;
    const height = 300;
    const raw = pixels('noise', width, height, 4, 7);
    const png = encodePng(raw, width, height, 4, 1);
    const filtered = (width * 4 + 1) * height;
    expect(png.length).toBeLessThan(filtered + 5 * Math.ceil(filtered / 65535) + 1024);
  });

  it('runs shrink to next to nothing, at either distance and across the 258-byte match limit', async () => {
    const width = 4000;
    const height = 600;
    for (const bands of [1, 3, 4]) {
      const raw = pixels('zeros', width, height, bands);
      for (let y = 0; y < height; y += 50) raw.fill(9, y * width * bands, y * width * bands + 1000); // runs of another byte
      const png = encodePng(raw, width, height, bands, 1);
      expect((await decoded(png, bands)).equals(raw)).toBe(true);
      expect(png.length).toBeLessThan(raw.length / 200);
    }
  });

  it('an image of many segments (12 MP RGBA) and the smallest one (1x1) read back exactly', async () => {
    const big = pixels('mixed', 4000, 3000, 4, 3);
    expect((await decoded(encodePng(big, 4000, 3000, 4, 1), 4)).equals(big)).toBe(true);
    for (const bands of [1, 3, 4]) {
      const one = Buffer.from([200, 100, 50, 25].slice(0, bands));
      expect((await decoded(encodePng(one, 1, 1, bands, 1), bands)).equals(one)).toBe(true);
    }
  });

  it('the same pixels give the same bytes, run after run', () => {
    const raw = pixels('mixed', 1633, 1225, 4, 5);
    const first = encodePng(raw, 1633, 1225, 4, 1);
    for (let i = 0; i < 3; i++) expect(encodePng(raw, 1633, 1225, 4, 1).equals(first)).toBe(true);
  });

  it('outputs from 256 KiB up live in mappings of their own: they read back exactly and are unmapped once JavaScript lets them go', async () => {
    // A garbage collection on demand, for this test only.
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const settle = async (): Promise<void> => {
      for (let i = 0; i < 3; i++) {
        gc();
        await new Promise((resolve) => setImmediate(resolve)); // finalizers of external buffers run after the collection
      }
    };
    // Noise is stored: a 2.4 MB file, past a huge page and not a whole number of them.
    const raw = pixels('noise', 800, 750, 4, 11);
    const first = encodePng(raw, 800, 750, 4, 1);
    expect(first.length).toBeGreaterThan(2 << 20);
    expect((await decoded(first, 4)).equals(raw)).toBe(true);
    const small = pixels('noise', 100, 100, 4, 12); // 40 KB: from malloc
    expect((await decoded(encodePng(small, 100, 100, 4, 1), 4)).equals(small)).toBe(true);
    await settle();
    const before = process.memoryUsage().rss;
    for (let i = 0; i < 60; i++) expect(encodePng(raw, 800, 750, 4, 1).length).toBe(first.length); // 144 MB if none were freed
    await settle();
    expect(process.memoryUsage().rss - before).toBeLessThan(40 << 20);
  });

  it('refuses pixels that do not match the sizes given', () => {
    expect(() => encodePng(Buffer.alloc(10), 3, 3, 1, 1)).toThrow(RangeError);
    expect(() => encodePng(Buffer.alloc(9), 3, 3, 1, 10)).toThrow(RangeError);
  });
});
