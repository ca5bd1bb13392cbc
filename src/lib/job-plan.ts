/**
 * The job plan: once the image is probed and the model resolved, what the model's family decides
 * for the job, in one place. The inference side: a fixed graph's own; a symbolic graph's family
 * side, or, on the CPU, a smaller side from the family's table for a small output or region of
 * interest (work proportional to the output; on a GPU provider every job of a model runs at one
 * shape, which the provider plans once). The guided filter's radius scaled to that side, the
 * family's matting levels for the effort, and so the native options the job runs with; the job's
 * memory estimate is taken from these planned options (prepare-job.ts).
 */
import type { SmallerSide } from './model-families.js';
import type { ModelContract } from './models.js';
import type { Effort } from './option-table.js';
import { levelsForEffort, type NativeOptions, TUNING } from './options.js';

/** The presets whose outputs are small enough for a smaller side: preview (0.25 MP) and medium (1.5 MP). */
const SMALL_PRESET_PIXELS = 1_500_000;
/** The side TUNING's guided filter radius is given for. */
const RADIUS_SIDE = 1024;

/** The side every job of a model runs at when nothing asks for less: a fixed graph's, or its family's for a symbolic one. */
export function fullSide(contract: ModelContract): number {
  return contract.dynamic ? contract.family.input.dynamicSide : contract.width;
}

/**
 * The side from a family's table for a job of `width` × `height` (after EXIF rotation), at most
 * `full`: the first row whose bound holds the output's pixels (an exact canvas counts its own; a
 * preview or medium job its output's, at most the preset's), or the region of interest's pixels
 * (all the model sees, whatever the preset), whichever is smaller. hd and full jobs without a roi,
 * and families without a table, run at `full`.
 */
export function sideForOutput(table: readonly SmallerSide[], full: number, options: NativeOptions, width: number, height: number): number {
  const roi = options.roi;
  const roiPixels = roi ? (roi[2] - roi[0]) * (roi[3] - roi[1]) : Number.POSITIVE_INFINITY;
  const smallPreset = options.maxPixels <= SMALL_PRESET_PIXELS;
  if (table.length === 0 || (!smallPreset && !roi)) return full;
  const output = !smallPreset
    ? Number.POSITIVE_INFINITY
    : options.canvasWidth > 0
      ? options.canvasWidth * options.canvasHeight
      : Math.min(width * height, options.maxPixels);
  const pixels = Math.min(output, roiPixels);
  return Math.min(full, table.find((row) => pixels <= row.maxOutputPixels)?.side ?? full);
}

/** The side a job runs at: its model's full side, or on the CPU a smaller one of its family's table (sideForOutput). */
export function planSide(contract: ModelContract, options: NativeOptions, width: number, height: number, provider: string): number {
  const full = fullSide(contract);
  if (!contract.dynamic || provider !== 'cpu') return full;
  return sideForOutput(contract.family.input.smallerSides, full, options, width, height);
}

/** The options at an inference side, the guided filter's radius scaled with it (the same share of the image). */
export function atInferenceSide(options: NativeOptions, side: number): NativeOptions {
  return { ...options, inferenceSize: side, guidedRadius: Math.max(1, Math.round((TUNING.guidedRadius * side) / RADIUS_SIDE)) };
}

/** The native options a job runs with: its side, the radius for it, its family's levels for the effort. */
export function planJob(
  options: NativeOptions,
  image: { width: number; height: number },
  contract: ModelContract,
  effort: Effort,
  provider: string,
): NativeOptions {
  const side = planSide(contract, options, image.width, image.height, provider);
  return { ...atInferenceSide(options, side), ...levelsForEffort(contract.family.matting, effort) };
}
