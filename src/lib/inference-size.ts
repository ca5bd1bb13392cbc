/**
 * Work proportional to the output: a size=preview or size=medium job whose output is small does not
 * need a 1024² inference. The side for each output size is the smallest whose dev-set quality, scored
 * at the output's resolution, stays within 0.005 IoU of 1024² (bench/quality.ts --size and
 * --inference-size; the sweep is in docs/quality.md). hd and full jobs always use 1024². Only models whose
 * input size is dynamic (manifest input.dynamic) use this; the native core ignores it for the others.
 */
import type { NativeOptions } from './options.js';

/** The presets this applies to: preview (0.25 MP) and medium (1.5 MP). */
const SMALL_PRESET_PIXELS = 1_500_000;

/**
 * Ascending by output pixels: the first row whose bound holds the output gives the side. Measured on
 * outputs up to 0.57 MP (the dev photos): 896 lost 0.0036 IoU (and 0.02 boundary F), 768 lost 0.033.
 * Larger outputs were not measured and keep 1024.
 */
export const INFERENCE_SIDES: ReadonlyArray<{ maxOutputPixels: number; side: number }> = [
  { maxOutputPixels: 600_000, side: 896 },
  { maxOutputPixels: Number.POSITIVE_INFINITY, side: 1024 },
];

/** The inference side for an output of `outputPixels` pixels of a preview or medium job. */
export function inferenceSide(outputPixels: number): number {
  return INFERENCE_SIDES.find((row) => outputPixels <= row.maxOutputPixels)!.side;
}

/**
 * The options at another inference side, with the guided filter's radius scaled with it, so that the
 * filter covers the same share of the image.
 */
export function atInferenceSide(options: NativeOptions, side: number): NativeOptions {
  if (side === options.inferenceSize) return options;
  const guidedRadius = Math.max(1, Math.round((options.guidedRadius * side) / options.inferenceSize));
  return { ...options, inferenceSize: side, guidedRadius };
}

/**
 * The job's options with the inference size for its image (width × height after EXIF rotation). An
 * exact canvas is the output's size whatever the preset: its pixels decide. A region of interest is
 * all the model sees, so its pixels bound the detail the matte can have, whatever the preset: a roi
 * of up to 0.6 MP gets the side of an output of its size (the same sweep: its matte is scored at its
 * own resolution there).
 */
export function withInferenceSize(options: NativeOptions, width: number, height: number): NativeOptions {
  const roi = options.roi;
  const roiPixels = roi ? (roi[2] - roi[0]) * (roi[3] - roi[1]) : Number.POSITIVE_INFINITY;
  const smallPreset = options.maxPixels <= SMALL_PRESET_PIXELS;
  if (!smallPreset && !roi) return options;
  const output = !smallPreset
    ? Number.POSITIVE_INFINITY
    : options.canvasWidth > 0
      ? options.canvasWidth * options.canvasHeight
      : Math.min(width * height, options.maxPixels);
  return atInferenceSide(options, Math.min(options.inferenceSize, inferenceSide(Math.min(output, roiPixels))));
}
