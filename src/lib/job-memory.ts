/**
 * The bytes a job holds at its peak, as its plan decides them (job-plan.ts): the full-resolution
 * decode and output, the work at the planned inference side, and the model's own working memory
 * for one run at that side (ModelContract.runBytesPerPixel). The service's memory gate
 * (src/service/job-memory-gate.ts) admits jobs by this figure.
 */
import { type CropOptions, cropBounds } from './crop-cap.js';
import { bitsPerSample } from './header-size.js';
import type { NativeOptions } from './options.js';

/**
 * The pipeline's bytes per pixel of the inference side's square while it refines the matte: the
 * model's answer, the resampled input and the matting's planes at that side.
 */
const MATTING_BYTES_PER_PIXEL = 48;

/**
 * The bytes one job holds at its peak, from its header and plan: the full-resolution decode (4
 * bands, 2 bytes a sample for 16-bit inputs), the alpha matte, the composited output and its
 * encoding (up to `outputScale` × the input's pixels, e.g. a crop box that extends the canvas), and
 * the larger of the two phases at the inference side: the model's run (`runBytesPerPixel` of the
 * side's square, its tensor and answer included) and the matting after it, which begins once the
 * run's memory is given back. A 2048² model's jobs count four times a 1024² one's.
 */
export function estimateJobBytes(
  width: number,
  height: number,
  options: { inferenceSide: number; runBytesPerPixel: number; bitsPerSample?: number; outputScale?: number },
): number {
  const pixels = width * height;
  const sampleBytes = (options.bitsPerSample ?? 8) > 8 ? 2 : 1;
  const outputPixels = pixels * Math.max(1, options.outputScale ?? 1);
  const side = options.inferenceSide;
  return Math.max(MATTING_BYTES_PER_PIXEL, options.runBytesPerPixel) * side * side + pixels * (4 * sampleBytes + 1) + outputPixels * (4 + 4);
}

/**
 * The working memory of a job's extra inference runs (effort=best, native/pipeline.cc
 * inference_stage): the mirrored answer, a float plane at the inference side; a second side's input
 * (RGB), tensor (3 floats a pixel) and answer (a float), and the answer resampled to the inference side.
 */
export function extraInferenceBytes(options: Pick<NativeOptions, 'mirrorWeight' | 'secondSide' | 'inferenceSize'>): number {
  const plane = 4 * options.inferenceSize ** 2;
  const mirror = options.mirrorWeight > 0 ? plane : 0;
  const second = options.secondSide > 0 ? (3 + 12 + 4) * options.secondSide ** 2 + plane : 0;
  return mirror + second;
}

/**
 * format=avif: libaom's AV1 encoder holds the frame as planes of its own (YUV, with its lookahead
 * and reference buffers) while it encodes: bytes per output pixel, an upper bound of what a 12 MP
 * encode at bgone's effort added to the process here (about 25 bytes a pixel).
 */
const AVIF_BYTES_PER_PIXEL = 32;

/** The most the coarse grids of a shadow or of despill take (native/shadow.h, despill.h): a few planes of under a million floats. */
const EFFECT_GRID_BYTES = 8 * 1024 * 1024;

/**
 * The most cells of the outline's and the blurred background's grids (native/outline.cc,
 * bg_blur.cc: at most 1024 cells along the larger side, one more for a partial cell), or the
 * canvas's pixels where they are fewer (a cell is at least a pixel).
 */
const EFFECT_MAX_CELLS = 1025 * 1025;
/** The outline's grid: the subject as squared distances and the distances, a float each per cell. */
const OUTLINE_BYTES_PER_CELL = 8;
/**
 * The blurred background's grid: the photo shrunk to one to four pixels a cell (RGB, at most 12
 * bytes a cell), the grid (3 floats) and its blur's second buffer (3 floats for the Gaussian; the
 * bokeh's running sums, 3 doubles, and its output, 3 floats).
 */
const BG_BLUR_BYTES_PER_CELL = 12 + 12 + 24 + 12;

/**
 * The working memory of the effects, for a result of `canvasPixels`: semitransparency=false marks
 * the background and what stays transparent at the inference side and keeps what it filled
 * (native/interior.h: a byte and two float planes a pixel); a shadow and despill each work on a
 * coarse grid (EFFECT_GRID_BYTES); the outline on its grid; the blurred background on its grid,
 * then sampled to the canvas as RGB (3 bytes a pixel, composed as a background image).
 */
export function effectBytes(
  options: Pick<NativeOptions, 'opaqueInterior' | 'shadow' | 'despill' | 'inferenceSize' | 'outline' | 'outlineWidth' | 'bgBlur'>,
  canvasPixels = 0,
): number {
  const interior = options.opaqueInterior ? 9 * options.inferenceSize ** 2 : 0;
  const cells = Math.min(canvasPixels, EFFECT_MAX_CELLS);
  const outline = options.outline !== null && options.outlineWidth > 0 ? OUTLINE_BYTES_PER_CELL * cells : 0;
  const blurred = options.bgBlur !== 'none' ? BG_BLUR_BYTES_PER_CELL * cells + 3 * canvasPixels : 0;
  return interior + (options.shadow !== 'none' ? EFFECT_GRID_BYTES : 0) + (options.despill ? EFFECT_GRID_BYTES : 0) + outline + blurred;
}

/**
 * estimateJobBytes for an upload, from its bytes (16-bit PNG), its probed size, its planned options
 * and the model's working memory per pixel: a crop box larger than the image (canvas extension)
 * scales the output part up to the worst case, an exact canvas counts its own pixels. With a
 * background image (its probed size): its decode and the canvas-sized RGBA it becomes. The decode
 * shrinks on load to at most twice the covering size per side (JPEG; WebP scales exactly; libvips
 * streams a PNG through the resize), 4 bands of up to 2 bytes each: an upper bound whatever the
 * format. Extra inference runs add extraInferenceBytes, the effects effectBytes (at the result's
 * largest size), an AVIF encode its encoder's planes. A job without inference
 * (remove_background=false) counts no model.
 */
export function jobMemoryEstimate(
  bytes: Uint8Array,
  size: { width: number; height: number },
  options: CropOptions &
    Pick<
      NativeOptions,
      | 'mirrorWeight'
      | 'secondSide'
      | 'inferenceSize'
      | 'opaqueInterior'
      | 'shadow'
      | 'despill'
      | 'format'
      | 'inference'
      | 'outline'
      | 'outlineWidth'
      | 'bgBlur'
      | 'bgFit'
    >,
  runBytesPerPixel: number,
  background?: { width: number; height: number },
): number {
  const pixels = size.width * size.height;
  const exact = options.canvasWidth > 0;
  const canvas = exact ? options.canvasWidth * options.canvasHeight : 0;
  const box = options.crop !== 'none' ? cropBounds(size, options).box : size;
  const outputPixels = exact ? Math.max(canvas, pixels) : box.width * box.height;
  let bytesNeeded = estimateJobBytes(size.width, size.height, {
    bitsPerSample: bitsPerSample(bytes),
    outputScale: outputPixels / pixels,
    // remove_background=false: no model's run and no matting at its side (keep_alpha=auto may run the model: counted).
    inferenceSide: options.inference ? options.inferenceSize : 0,
    runBytesPerPixel,
  });
  const { output } = cropBounds(size, options);
  const canvasPixels = output.width * output.height;
  bytesNeeded += extraInferenceBytes(options) + effectBytes(options, canvasPixels);
  if (options.format === 'avif') bytesNeeded += AVIF_BYTES_PER_PIXEL * outputPixels;
  if (background) {
    // bg_fit=contain scales it less than cover does, and fits it into a canvas-sized RGBA of its own.
    const cover = Math.max(output.width / background.width, output.height / background.height);
    const decoded = background.width * background.height * Math.min(1, 4 * cover * cover);
    bytesNeeded += decoded * 4 * 2 + canvasPixels * 4 + (options.bgFit === 'contain' ? canvasPixels * 4 : 0);
  }
  return bytesNeeded;
}
