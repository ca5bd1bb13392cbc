/**
 * The crop box caps of docs/contract.md ("Abuse limits"): a crop box is at most 4x the image's area
 * (or the image with 500 px on every side, where that is more), and a WebP result at most 16383 px
 * per side (libwebp's limit). Both are refused as
 * validation_error before any credit is reserved or any pixel decoded, so they are checked from
 * the header's size and the options alone. The real box depends on the subject the model finds;
 * this takes the largest box any subject could give, following native/pipeline.cc crop_box step by
 * step (the same double arithmetic), then the size preset exactly as the pipeline applies it.
 *
 * Why that worst case is an upper bound: the subject's box lies inside the image (crop_box clamps
 * it), so its width sw <= W and height sh <= H; each side's margin is round(share * sw) + px;
 * for W:H the box is max(bw, ceil(bh * r)) by max(bh, ceil(bw / r)) of the padded bw x bh. Every
 * one of these grows with sw and sh, so the largest box is that of a subject filling the image.
 * With an exact canvas (canvasWidth x canvasHeight), the output is that canvas, whatever the box.
 */
import { BgoneError } from './errors.js';
import type { NativeOptions } from './options.js';

/** A crop box may cover at most this many times the image's area... */
export const MAX_CROP_AREA_RATIO = 4;
/**
 * ...or, where that is more (an image under about 1000 px a side), the image with this many pixels
 * on every side: margins in pixels up to remove.bg's largest crop_margin fit any image.
 */
export const MAX_CROP_MARGIN_PX = 500;

/** The largest area a crop box may cover for an image of width x height. */
export function maxCropArea(image: { width: number; height: number }): number {
  const margins = (image.width + 2 * MAX_CROP_MARGIN_PX) * (image.height + 2 * MAX_CROP_MARGIN_PX);
  return Math.max(MAX_CROP_AREA_RATIO * image.width * image.height, margins);
}
/** libwebp's largest side. */
export const MAX_WEBP_SIDE = 16383;

export type CropOptions = Pick<
  NativeOptions,
  'format' | 'crop' | 'aspectWidth' | 'aspectHeight' | 'paddingShare' | 'paddingPx' | 'maxPixels' | 'canvasWidth' | 'canvasHeight'
>;

export interface CropBounds {
  /** The largest crop box (before the size preset). */
  box: { width: number; height: number };
  /** Upper bounds of the result's sides, after the size preset. */
  output: { width: number; height: number };
}

/** What the size preset makes of a box of w x h (pipeline.cc run_job: scaled down to fit, never up). */
function presetSide(side: number, w: number, h: number, maxPixels: number): number {
  const scale = Math.min(1, Math.sqrt(maxPixels / (w * h)));
  return Math.max(1, Math.floor(side * scale + 1e-9));
}

/** The padded box of a subject sw x sh (pipeline.cc crop_box), before any aspect ratio. */
function padded(o: CropOptions, sw: number, sh: number): { bw: number; bh: number } {
  const [top, right, bottom, left] = o.paddingShare.map((share, i) => Math.round(share * sw) + o.paddingPx[i]!) as [number, number, number, number];
  return { bw: sw + left + right, bh: sh + top + bottom };
}

/**
 * Upper bounds of the crop box and of the result's sides for an image of width x height (as the
 * pipeline sees it: after EXIF orientation), whatever subject the model finds.
 */
export function cropBounds(image: { width: number; height: number }, o: CropOptions): CropBounds {
  const bounds = presetBounds(image, o);
  if (o.canvasWidth > 0) return { box: bounds.box, output: { width: o.canvasWidth, height: o.canvasHeight } };
  return bounds;
}

/** cropBounds when the output is the box scaled by the size preset (no exact canvas). */
function presetBounds(image: { width: number; height: number }, o: CropOptions): CropBounds {
  const W = image.width;
  const H = image.height;
  const M = o.maxPixels;
  if (o.crop === 'none') return { box: { width: W, height: H }, output: { width: presetSide(W, W, H, M), height: presetSide(H, W, H, M) } };
  const { bw, bh } = padded(o, W, H);
  if (o.crop === 'aspect') {
    const r = o.aspectWidth / o.aspectHeight;
    const w = Math.max(bw, Math.ceil(bh * r));
    const h = Math.max(bh, Math.ceil(bw / r));
    // After the preset, a box of ratio about r has sides of about sqrt(M * r) by sqrt(M / r): its
    // w <= h * r + 1 (one side is the other times r, rounded up) bounds them by those plus one.
    return {
      box: { width: w, height: h },
      output: { width: Math.min(w, Math.floor(Math.sqrt(M * r) + 1)), height: Math.min(h, Math.floor(Math.sqrt(M / r) + 1)) },
    };
  }
  // crop=true: the box's proportions follow the subject's. A side after the preset is at most the
  // side itself, and at most sqrt(M * side / other side); the widest box has a one-pixel-high
  // subject, the tallest a one-pixel-wide one.
  let wide = 0;
  let tall = 0;
  for (let sw = 1; sw <= W; sw++) {
    const thin = padded(o, sw, 1);
    wide = Math.max(wide, thin.bw / thin.bh);
    const narrow = padded(o, sw, H);
    tall = Math.max(tall, narrow.bh / narrow.bw);
  }
  return {
    box: { width: bw, height: bh },
    output: { width: Math.min(bw, Math.floor(Math.sqrt(M * wide) + 1e-9)), height: Math.min(bh, Math.floor(Math.sqrt(M * tall) + 1e-9)) },
  };
}

/**
 * Refuses (BgoneError validation_error) options whose crop box could pass the caps for an image of
 * this size. `image` is the probe's size (probeImage: after EXIF orientation); `o` the normalised
 * options. Options that crop nothing always pass.
 */
export function checkCropBox(image: { width: number; height: number }, o: CropOptions): void {
  const { box, output } = cropBounds(image, o);
  const worst = { width: box.width, height: box.height };
  const maxArea = maxCropArea(image);
  if (box.width * box.height > maxArea) {
    throw new BgoneError(
      'validation_error',
      `With these crop and padding values the crop box could reach ${box.width}x${box.height} px, more than ${MAX_CROP_AREA_RATIO} times the area of this ${image.width}x${image.height} image (or the image with ${MAX_CROP_MARGIN_PX} px on every side): use less padding or an aspect ratio closer to the image's.`,
      { field: 'crop', max_area_ratio: MAX_CROP_AREA_RATIO, max_area: maxArea, worst_case: worst },
    );
  }
  if (o.format === 'webp' && (output.width > MAX_WEBP_SIDE || output.height > MAX_WEBP_SIDE)) {
    throw new BgoneError(
      'validation_error',
      `A WebP result is at most ${MAX_WEBP_SIDE} px per side, and with these crop and size values it could reach ${output.width}x${output.height} px: use png or jpg, a smaller size, or an aspect ratio closer to the image's.`,
      { field: 'format', max_side: MAX_WEBP_SIDE, worst_case: { width: output.width, height: output.height } },
    );
  }
}
