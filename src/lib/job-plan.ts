/**
 * The job plan: once the image is probed and the model resolved, what the model's family decides
 * for the job, in one place (PlannedOptions). The inference side: a fixed graph's own; a symbolic
 * graph's family side, or, on the CPU, a smaller side from the family's table for a small output or
 * region of interest (work proportional to the output; on a GPU provider every job of a model runs
 * at one shape, which the provider plans once). The family's refinement, the guided filter's radius
 * scaled to that side; the family's runs and levels for the effort; and the job's memory estimate
 * from all of it and the model's working memory (job-memory.ts).
 */
import { jobMemoryEstimate } from './job-memory.js';
import type { BestEffort, Matting, SmallerSide } from './model-families.js';
import type { ModelContract } from './models.js';
import type { Effort } from './option-table.js';
import type { NativeOptions, PlannedOptions, RequestedOptions } from './options.js';

/** The presets whose outputs are small enough for a smaller side: preview (0.25 MP) and medium (1.5 MP). */
const SMALL_PRESET_PIXELS = 1_500_000;

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
export function sideForOutput(table: readonly SmallerSide[], full: number, options: RequestedOptions, width: number, height: number): number {
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
export function planSide(contract: ModelContract, options: RequestedOptions, width: number, height: number, provider: string): number {
  const full = fullSide(contract);
  if (!contract.dynamic || provider !== 'cpu') return full;
  return sideForOutput(contract.family.input.smallerSides, full, options, width, height);
}

/** The guided filter's radius in pixels at an inference side: the family's share of it, at least 1. */
export function radiusAt(matting: Matting, side: number): number {
  return Math.max(1, Math.round(matting.guidedRadius * side));
}

/** The options at another inference side, the radius for it (bench/quality's fixed sides). */
export function atInferenceSide(options: NativeOptions, matting: Matting, side: number): NativeOptions {
  return { ...options, inferenceSize: side, guidedRadius: radiusAt(matting, side) };
}

/** What effort=best runs for a family, and its levels: the family's, or best's own. */
export function effortRuns(
  matting: Matting,
  best: BestEffort,
  effort: Effort,
): Pick<PlannedOptions, 'levelsLow' | 'levelsHigh' | 'mirrorWeight' | 'mirrorUnion'> {
  if (effort === 'standard') return { levelsLow: matting.levelsLow, levelsHigh: matting.levelsHigh, mirrorWeight: 0, mirrorUnion: 0 };
  const levels = best.levels === 'kept' ? matting : best.levels;
  return { levelsLow: levels.levelsLow, levelsHigh: levels.levelsHigh, mirrorWeight: best.mirrorWeight, mirrorUnion: best.mirrorUnion };
}

/** What the family decides for a job at `side` (PlannedOptions): its refinement at that side and its runs for the effort. */
export function plannedAt(contract: ModelContract, side: number, effort: Effort): PlannedOptions {
  const { matting, best } = contract.family;
  return {
    inferenceSize: side,
    guidedRadius: radiusAt(matting, side),
    guidedEps: matting.guidedEps,
    ...effortRuns(matting, best, effort),
    secondSide: 0,
    secondWeight: 0,
  };
}

/** A job's plan: the native options it runs with, and the bytes it holds at its peak. */
export interface JobPlan {
  options: NativeOptions;
  memoryBytes: number;
}

/**
 * The job's plan from the request's options (the roi resolved for the image), the image's bytes
 * and probed size, the background's probed size, the model's contract, the effort and the provider.
 * A job without inference (remove_background=false) is planned alike, its model's fields read but
 * unused by the native core, and its memory counts no model (job-memory.ts).
 */
export function planJob(
  requested: RequestedOptions,
  image: { bytes: Uint8Array; width: number; height: number },
  contract: ModelContract,
  effort: Effort,
  provider: string,
  background?: { width: number; height: number },
): JobPlan {
  const side = planSide(contract, requested, image.width, image.height, provider);
  const options: NativeOptions = { ...requested, ...plannedAt(contract, side, effort) };
  return { options, memoryBytes: jobMemoryEstimate(image.bytes, image, options, contract.runBytesPerPixel, background) };
}
