/**
 * The job memory gate, admission by estimated memory (not to be confused with the batch memory
 * budget, batches/batch-memory-budget.ts, which counts the bytes batches hold while they wait and
 * after they ran; this gate counts what a job needs while it runs, /remove's and batch images'
 * alike). Requests count in admitted places (admission.ts), but a 6000² 16-bit PNG needs hundreds
 * of MB where a 0.3 MP JPEG needs a few, so after its header is read each job also takes its
 * estimated bytes from one budget (BGONE_MEMORY_BUDGET_MB) before it is reserved a credit and run.
 * A job that does not fit waits; one that waits longer than `maxWaitMs` is refused (503, nothing
 * charged). Waiters are served in order, but a small job may pass a large one that does not fit
 * yet — only a few times, so the large one is never starved: once passed `maxPasses` times it holds
 * the line and everything behind it waits.
 *
 * An estimate larger than the whole budget is taken as the whole budget: such a job (a valid image
 * within the contract's limits) runs alone rather than being refused.
 */

import { bitsPerSample } from '../lib/header-size.js';
import { type CropOptions, cropBounds } from '../lib/index.js';
import type { NativeOptions } from '../lib/options.js';

/** Why acquire() refused. */
export class JobMemoryGateTimeout extends Error {
  constructor(readonly waitedMs: number) {
    super(`no memory for this job after ${waitedMs} ms`);
    this.name = 'JobMemoryGateTimeout';
  }
}

export interface JobMemoryGateOptions {
  budgetBytes: number;
  /** How long a job may wait for memory before it is refused. */
  maxWaitMs: number;
  /** How often a waiting job may be passed by later, smaller ones (default 4). */
  maxPasses?: number | undefined;
}

interface Waiter {
  bytes: number;
  passes: number;
  grant: (release: () => void) => void;
  timer: NodeJS.Timeout;
}

export class JobMemoryGate {
  readonly #budget: number;
  readonly #maxWaitMs: number;
  readonly #maxPasses: number;
  #used = 0;
  readonly #waiting: Waiter[] = [];

  constructor(options: JobMemoryGateOptions) {
    if (!(options.budgetBytes > 0)) throw new RangeError('budgetBytes must be positive');
    this.#budget = options.budgetBytes;
    this.#maxWaitMs = options.maxWaitMs;
    this.#maxPasses = options.maxPasses ?? 4;
  }

  get used(): number {
    return this.#used;
  }

  get waiting(): number {
    return this.#waiting.length;
  }

  get budget(): number {
    return this.#budget;
  }

  /**
   * Takes `bytes` (capped at the budget); resolves with the function that gives them back (call it
   * once, when the job's memory is gone), or rejects with JobMemoryGateTimeout. An aborted `signal`
   * (the client went away) withdraws a waiting request: it rejects with the signal's reason.
   */
  acquire(bytes: number, signal?: AbortSignal): Promise<() => void> {
    const need = Math.min(Math.max(0, Math.ceil(bytes)), this.#budget);
    if (this.#waiting.length === 0 && this.#used + need <= this.#budget) return Promise.resolve(this.#take(need));
    if (this.#waiting.length > 0 && this.#used + need <= this.#budget && this.#mayPass()) {
      for (const w of this.#waiting) w.passes++;
      return Promise.resolve(this.#take(need));
    }
    return new Promise((resolve, reject) => {
      const started = performance.now();
      const waiter: Waiter = {
        bytes: need,
        passes: 0,
        grant: resolve,
        timer: setTimeout(() => {
          this.#remove(waiter);
          reject(new JobMemoryGateTimeout(Math.round(performance.now() - started)));
        }, this.#maxWaitMs),
      };
      waiter.timer.unref?.();
      signal?.addEventListener(
        'abort',
        () => {
          if (!this.#remove(waiter)) return;
          clearTimeout(waiter.timer);
          reject(signal.reason);
        },
        { once: true },
      );
      this.#waiting.push(waiter);
    });
  }

  /** Whether a newcomer may go ahead of the jobs waiting: none of them has been passed too often. */
  #mayPass(): boolean {
    return this.#waiting.every((w) => w.passes < this.#maxPasses);
  }

  #take(bytes: number): () => void {
    this.#used += bytes;
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      this.#used -= bytes;
      this.#wake();
    };
  }

  #remove(waiter: Waiter): boolean {
    const i = this.#waiting.indexOf(waiter);
    if (i < 0) return false;
    this.#waiting.splice(i, 1);
    this.#wake(); // a large waiter that left may unblock smaller ones behind it
    return true;
  }

  /** Grants waiters in order while they fit; one that does not fit is passed, or holds the line once passed too often. */
  #wake(): void {
    for (let i = 0; i < this.#waiting.length; ) {
      const w = this.#waiting[i]!;
      if (this.#used + w.bytes <= this.#budget) {
        this.#waiting.splice(i, 1);
        clearTimeout(w.timer);
        w.grant(this.#take(w.bytes));
        continue;
      }
      if (w.passes >= this.#maxPasses) return;
      i++;
    }
    // Those still waiting were passed by whoever went ahead of them in this round.
  }
}

/**
 * The bytes of the work at the model's resolution, per pixel of the inference side's square: the
 * float input tensor and output, the resampled input and the matting's planes at that side (48 MiB
 * at 1024², measured on ISNet's jobs).
 */
const BYTES_PER_INFERENCE_PIXEL = 48;
/** The side a job runs at when none is given (estimateJobBytes' callers that plan none). */
const DEFAULT_INFERENCE_SIDE = 1024;

/**
 * The bytes one job holds at its peak, from its header and options: the full-resolution decode (4
 * bands, 2 bytes a sample for 16-bit inputs), the alpha matte, the composited output and its
 * encoding (up to `outputScale` × the input's pixels, e.g. a crop box that extends the canvas), and
 * the work at the inference side the job plan chose (src/lib/job-plan.ts: a 2048² model's jobs
 * count four times a 1024² one's). ONNX Runtime's own working memory is not counted: at most two
 * inferences run at once, whatever the number of jobs (native/model.cc), so it is bounded apart
 * from the jobs.
 */
export function estimateJobBytes(
  width: number,
  height: number,
  options: { bitsPerSample?: number; outputScale?: number; inferenceSide?: number } = {},
): number {
  const pixels = width * height;
  const sampleBytes = (options.bitsPerSample ?? 8) > 8 ? 2 : 1;
  const outputPixels = pixels * Math.max(1, options.outputScale ?? 1);
  const side = options.inferenceSide ?? DEFAULT_INFERENCE_SIDE;
  return BYTES_PER_INFERENCE_PIXEL * side * side + pixels * (4 * sampleBytes + 1) + outputPixels * (4 + 4);
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

/** The most the coarse grids of a shadow or of despill take (native/shadow.h, despill.h): a few planes of under a million floats. */
const EFFECT_GRID_BYTES = 8 * 1024 * 1024;

/**
 * The working memory of the effects: semitransparency=false marks the background and what stays
 * transparent at the inference side and keeps what it filled (native/interior.h: a byte and two
 * float planes a pixel); a shadow and despill each work on a coarse grid (EFFECT_GRID_BYTES).
 */
export function effectBytes(options: Pick<NativeOptions, 'opaqueInterior' | 'shadow' | 'despill' | 'inferenceSize'>): number {
  const interior = options.opaqueInterior ? 9 * options.inferenceSize ** 2 : 0;
  return interior + (options.shadow !== 'none' ? EFFECT_GRID_BYTES : 0) + (options.despill ? EFFECT_GRID_BYTES : 0);
}

/**
 * estimateJobBytes for an upload, from its bytes (16-bit PNG), its probed size and the options: a
 * crop box larger than the image (canvas extension) scales the output part up to the worst case, an
 * exact canvas counts its own pixels. With a background image (its probed size): its decode and the
 * canvas-sized RGBA it becomes. The decode shrinks on load to at most twice the covering size per
 * side (JPEG; WebP scales exactly; libvips streams a PNG through the resize), 4 bands of up to 2
 * bytes each: an upper bound whatever the format. Extra inference runs add extraInferenceBytes, the
 * effects effectBytes.
 */
export function jobMemoryEstimate(
  bytes: Uint8Array,
  size: { width: number; height: number },
  options: CropOptions & Pick<NativeOptions, 'mirrorWeight' | 'secondSide' | 'inferenceSize' | 'opaqueInterior' | 'shadow' | 'despill'>,
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
    inferenceSide: options.inferenceSize,
  });
  bytesNeeded += extraInferenceBytes(options) + effectBytes(options);
  if (background) {
    const { output } = cropBounds(size, options);
    const canvasPixels = output.width * output.height;
    const cover = Math.max(output.width / background.width, output.height / background.height);
    const decoded = background.width * background.height * Math.min(1, 4 * cover * cover);
    bytesNeeded += decoded * 4 * 2 + canvasPixels * 4;
  }
  return bytesNeeded;
}
