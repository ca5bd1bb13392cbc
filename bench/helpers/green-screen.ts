/**
 * A green-screen photo made from a real photo and its ground-truth matte, and what is left of its
 * spill on a cut-out: despill's measure (test/lib/effects.test.ts on a test photo, npm run
 * bench:quality -- --despill on the dev set).
 *
 * The photo is composed on chroma green by its matte, with a simulated spill: the subject's border
 * tinted towards the green, by SPILL_STRENGTH at its edge and less and less inward, to nothing at
 * SPILL_DEPTH of the subject's larger side (as a screen's light wraps round a subject). The measure
 * is the mean green excess, max(0, g - max(r, b)), over the subject's edge band (its pixels within
 * SPILL_DEPTH of the background), weighted by the cut-out's alpha: the spill one sees.
 */
import sharp from 'sharp';

export const CHROMA_GREEN = [0, 177, 64] as const;
/** The spill's depth, and the edge band's: a share of the subject's larger side. */
export const SPILL_DEPTH = 0.03;
/** How far the spill moves a colour towards the green at the subject's edge (0..1). */
export const SPILL_STRENGTH = 0.5;

export interface GreenScreen {
  /** The photo on green with its spill, as a PNG. */
  png: Buffer;
  width: number;
  height: number;
  /** 1 where a pixel is on the subject's edge band (the ground truth's subject, within SPILL_DEPTH of its background). */
  band: Uint8Array;
}

/**
 * Each pixel's distance (in pixels, chamfer 1 and √2) to the nearest pixel where `outside` is 1; 0
 * on those.
 */
function distanceTo(outside: Uint8Array, width: number, height: number): Float32Array {
  const d = new Float32Array(width * height).map((_, i) => (outside[i] ? 0 : Number.POSITIVE_INFINITY));
  const diagonal = Math.SQRT2;
  const relax = (i: number, j: number, step: number) => {
    if (d[j]! + step < d[i]!) d[i] = d[j]! + step;
  };
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const i = y * width + x;
      if (x > 0) relax(i, i - 1, 1);
      if (y > 0) {
        relax(i, i - width, 1);
        if (x > 0) relax(i, i - width - 1, diagonal);
        if (x < width - 1) relax(i, i - width + 1, diagonal);
      }
    }
  }
  for (let y = height - 1; y >= 0; y--) {
    for (let x = width - 1; x >= 0; x--) {
      const i = y * width + x;
      if (x < width - 1) relax(i, i + 1, 1);
      if (y < height - 1) {
        relax(i, i + width, 1);
        if (x < width - 1) relax(i, i + width + 1, diagonal);
        if (x > 0) relax(i, i + width - 1, diagonal);
      }
    }
  }
  return d;
}

/** `photo` (JPEG, PNG or WebP bytes, or a path) on chroma green by its ground-truth matte `gt` (one channel, the photo's size). */
export async function greenScreen(photo: Buffer | string, gt: Buffer | string): Promise<GreenScreen> {
  const image = await sharp(photo).removeAlpha().raw().toBuffer({ resolveWithObject: true });
  const { width, height } = image.info;
  const matte = await sharp(gt).extractChannel(0).resize(width, height, { fit: 'fill' }).raw().toBuffer();
  const n = width * height;
  const outside = new Uint8Array(n);
  let x0 = width;
  let x1 = -1;
  let y0 = height;
  let y1 = -1;
  for (let i = 0; i < n; i++) {
    if (matte[i] === 0) {
      outside[i] = 1;
      continue;
    }
    const x = i % width;
    const y = (i - x) / width;
    x0 = Math.min(x0, x);
    x1 = Math.max(x1, x);
    y0 = Math.min(y0, y);
    y1 = Math.max(y1, y);
  }
  if (x1 < 0) throw new Error('the ground truth holds no subject');
  const depth = SPILL_DEPTH * Math.max(x1 - x0 + 1, y1 - y0 + 1);
  const distance = distanceTo(outside, width, height);
  const band = new Uint8Array(n);
  const out = Buffer.alloc(n * 3);
  for (let i = 0; i < n; i++) {
    const alpha = matte[i]! / 255;
    const tint = outside[i] ? 0 : SPILL_STRENGTH * Math.max(0, 1 - distance[i]! / depth);
    if (!outside[i] && distance[i]! <= depth) band[i] = 1;
    for (let c = 0; c < 3; c++) {
      const own = image.data[i * 3 + c]!;
      const tinted = own + tint * (CHROMA_GREEN[c]! - own);
      out[i * 3 + c] = Math.round(alpha * tinted + (1 - alpha) * CHROMA_GREEN[c]!);
    }
  }
  const png = await sharp(out, { raw: { width, height, channels: 3 } })
    .png({ compressionLevel: 1 })
    .toBuffer();
  return { png, width, height, band };
}

/** The mean green excess, max(0, g - max(r, b)), of an RGBA cut-out (raw, 4 channels) over `band`, weighted by its alpha; in 0..255. */
export function greenExcess(rgba: Uint8Array, band: Uint8Array): number {
  let sum = 0;
  let weight = 0;
  for (let i = 0; i < band.length; i++) {
    if (!band[i]) continue;
    const a = rgba[i * 4 + 3]! / 255;
    const [r, g, b] = [rgba[i * 4]!, rgba[i * 4 + 1]!, rgba[i * 4 + 2]!];
    sum += a * Math.max(0, g - Math.max(r, b));
    weight += a;
  }
  return weight > 0 ? sum / weight : 0;
}
