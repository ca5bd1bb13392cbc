/**
 * Makes the JPEG inputs of bench/pipeline.ts in memory: one real photo resized (same aspect ratio)
 * to each requested pixel count and encoded at the requested quality, printed as one JSON object
 * (JPEG bytes in base64) on stdout. Nothing is written to disk.
 *
 * It runs in its own process because loading sharp changes libvips' process-wide settings, which the
 * addon shares: sharp turns libvips' operation cache on (the addon turns it off) and, with glibc's
 * allocator, sets libvips' concurrency to 1. In the benchmark process that would skew decode,
 * resize and encode.
 *
 *   node dist/bench/helpers/make-inputs.js <photo> <megapixels,...> [quality=90]
 */
import { basename } from 'node:path';
import sharp from 'sharp';

export interface GeneratedInput {
  label: string;
  megapixels: number;
  width: number;
  height: number;
  bytes: number;
  jpegBase64: string;
}

export interface GeneratedInputs {
  source: { file: string; width: number; height: number; format: string };
  quality: number;
  images: GeneratedInput[];
}

/** Width and height with the photo's aspect ratio and about `megapixels` million pixels. */
function dimensionsFor(megapixels: number, aspect: number): { width: number; height: number } {
  const width = Math.max(1, Math.round(Math.sqrt(megapixels * 1e6 * aspect)));
  const height = Math.max(1, Math.round(width / aspect));
  return { width, height };
}

async function main(): Promise<void> {
  const [photo, list, qualityArg] = process.argv.slice(2);
  if (!photo || !list) throw new Error('usage: make-inputs.js <photo> <megapixels,...> [quality]');
  const quality = qualityArg === undefined ? 90 : Number(qualityArg);
  const sizes = list.split(',').map(Number);
  if (sizes.some((mp) => !(mp > 0))) throw new Error(`bad megapixel list ${list}`);

  const meta = await sharp(photo).metadata();
  if (!meta.width || !meta.height) throw new Error(`cannot read the size of ${photo}`);
  const aspect = meta.width / meta.height;
  const images: GeneratedInput[] = [];
  for (const mp of sizes) {
    const { width, height } = dimensionsFor(mp, aspect);
    const jpeg = await sharp(photo).resize(width, height, { fit: 'fill' }).jpeg({ quality }).toBuffer();
    images.push({ label: `${mp} MP`, megapixels: mp, width, height, bytes: jpeg.length, jpegBase64: jpeg.toString('base64') });
  }
  const out: GeneratedInputs = {
    source: { file: basename(photo), width: meta.width, height: meta.height, format: meta.format ?? 'unknown' },
    quality,
    images,
  };
  process.stdout.write(JSON.stringify(out));
}

main().catch((err: unknown) => {
  process.stderr.write(`make-inputs: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
