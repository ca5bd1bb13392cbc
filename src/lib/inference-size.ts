/**
 * Work proportional to the output: a job whose output is small (size=preview or medium, or a small
 * upload) does not need a 1024² inference. The side used for each output size is the smallest whose
 * dev-set quality, scored at the output's resolution, stays within 0.005 IoU of 1024²
 * (bench/quality.ts --sweep-sizes; figures in the README). Only models whose input size is dynamic
 * (manifest input.dynamic) use it; the native pipeline ignores it for the others.
 */
import type { NativeOptions } from './options.js';

/** Ascending by output pixels: the first row whose bound holds the output gives the side. */
export const INFERENCE_SIDES: ReadonlyArray<{ maxOutputPixels: number; side: number }> = [{ maxOutputPixels: Number.POSITIVE_INFINITY, side: 1024 }];

/** The inference side for an output of `outputPixels` pixels. */
export function inferenceSide(outputPixels: number): number {
  return INFERENCE_SIDES.find((row) => outputPixels <= row.maxOutputPixels)!.side;
}

/**
 * The job's options with the inference size for its image (width × height after EXIF rotation) and
 * the guided filter's radius scaled with it, so that the filter covers the same share of the image.
 */
export function withInferenceSize(options: NativeOptions, width: number, height: number): NativeOptions {
  const side = Math.min(options.inferenceSize, inferenceSide(Math.min(width * height, options.maxPixels)));
  if (side === options.inferenceSize) return options;
  const guidedRadius = Math.max(1, Math.round((options.guidedRadius * side) / options.inferenceSize));
  return { ...options, inferenceSize: side, guidedRadius };
}
