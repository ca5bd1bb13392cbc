/**
 * Performance benchmark of the whole pipeline (npm run bench).
 *
 * For each input size (JPEG photos of about 0.5, 2 and 12 MP, made in memory from a real photo of
 * the dev dataset) and each output format (png, jpg, webp), tinybench times end-to-end
 * removeBackground() calls (full size, rgba, default options). Next to it:
 *  - the mean of each stage the native core reports in result.timings;
 *  - pure model inference: the same ONNX model run by onnxruntime-node on a fixed tensor, in a child
 *    process (bench/helpers/ort-inference.ts), one run right before each measured call so that both
 *    share the machine's conditions;
 *  - the ratios end-to-end / pure inference and end-to-end / in-core inference (timings.inference),
 *    with the targets (<= 1.10 for 2 MP -> png, <= 1.25 for 12 MP -> png);
 *  - peak RSS of this process and of the child.
 * Then a throughput section: 4 x 2 MP -> png submitted at once, images/s against 1 / pure inference.
 *
 * Results are printed and written to bench/results/pipeline.json. BENCH_QUICK=1: 2 MP -> png only,
 * 2 iterations (smoke run). BENCH_IMAGE=<file in datasets/dev/images> picks another photo.
 *
 * Absolute times are noisy on a small shared machine; the ratios come from one run and interleaved
 * measurements, which is what they are for.
 */

import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Bench, type HookMode } from 'tinybench';
import { loadLibraryConfig } from '../src/config/config.js';
import {
  configure,
  nativeVersions,
  type OutputFormat,
  preloadModel,
  type RemoveBackgroundResult,
  readManifest,
  removeBackground,
  type Timings,
} from '../src/lib/index.js';
import type { GeneratedInputs } from './helpers/make-inputs.js';
import { fmt, gitCommit, log, machineInfo, mean, printTable, runToCompletion } from './helpers/report.js';

// ---------------------------------------------------------------------------------------------
// Configuration

const HERE = path.dirname(fileURLToPath(import.meta.url)); // dist/bench
const REPO_ROOT = path.resolve(HERE, '..', '..');
const DATASET_DIR = path.resolve(REPO_ROOT, '..', 'shared', 'datasets', 'dev');
const RESULTS_FILE = path.join(REPO_ROOT, 'bench', 'results', 'pipeline.json');
const ORT_CHILD = path.join(HERE, 'helpers', 'ort-inference.js');
const INPUTS_CHILD = path.join(HERE, 'helpers', 'make-inputs.js');

const QUICK = /^(1|true|yes)$/i.test(process.env.BENCH_QUICK ?? '');
const PHOTO = process.env.BENCH_IMAGE ?? 'gc_person1.jpg';
const JPEG_QUALITY = 90;
const SIZES_MP = QUICK ? [2] : [0.5, 2, 12];
const FORMATS: OutputFormat[] = QUICK ? ['png'] : ['png', 'jpg', 'webp'];
const ITERATIONS = QUICK ? 2 : 3;
const WARMUP_ITERATIONS = 1;
const ORT_CHILD_WARMUP = 1;
const THROUGHPUT_JOBS = 4;
const THROUGHPUT_ROUNDS = 1;
const THROUGHPUT_MP = 2;

/** Targets for end-to-end / inference, by `${megapixels}:${format}`. */
const TARGETS: Record<string, number> = { '2:png': 1.1, '12:png': 1.25 };

const STAGES = ['decode', 'preprocess', 'inference', 'queue', 'resize', 'matting', 'encode', 'total'] as const;
type Stage = (typeof STAGES)[number];

// ---------------------------------------------------------------------------------------------
// Small helpers

const mb = (kb: number): number => kb / 1024;
const peakRssMB = (): number => mb(process.resourceUsage().maxRSS);

// ---------------------------------------------------------------------------------------------
// Pure inference in a child process

interface OrtReady {
  type: 'ready';
  model: string;
  file: string;
  intraOpNumThreads: number;
  onnxruntime: string;
  loadMs: number;
  warmupMs: number[];
  maxRssMB: number;
}

interface OrtResult {
  type: 'result';
  times: number[];
  maxRssMB: number;
}

class PureInference {
  private readonly queue: unknown[] = [];
  private readonly waiters: Array<{ resolve: (m: unknown) => void; reject: (e: Error) => void }> = [];
  private failure: Error | undefined;
  private closing = false;
  ready!: OrtReady;
  /** Peak RSS of the child at its last answer (MB). */
  maxRssMB = 0;

  private constructor(private readonly child: ChildProcessWithoutNullStreams) {
    createInterface({ input: child.stdout, crlfDelay: Infinity }).on('line', (line) => {
      let message: unknown;
      try {
        message = JSON.parse(line);
      } catch {
        process.stderr.write(`[ort-inference] ${line}\n`);
        return;
      }
      const waiter = this.waiters.shift();
      if (waiter) waiter.resolve(message);
      else this.queue.push(message);
    });
    child.stderr.on('data', (c: Buffer) => process.stderr.write(c));
    child.on('error', (err) => this.fail(err));
    child.on('exit', (code, signal) => {
      if (!this.closing) this.fail(new Error(`ort-inference child exited with ${code ?? signal}`));
    });
  }

  static async start(model: string | undefined): Promise<PureInference> {
    const args = [ORT_CHILD, '--serve', '--warmup', String(ORT_CHILD_WARMUP), ...(model ? ['--model', model] : [])];
    const pure = new PureInference(spawn(process.execPath, args, { stdio: ['pipe', 'pipe', 'pipe'] }));
    const first = await pure.next();
    if ((first as { type?: string }).type !== 'ready') throw new Error(`ort-inference did not start: ${JSON.stringify(first)}`);
    pure.ready = first as OrtReady;
    pure.maxRssMB = pure.ready.maxRssMB;
    return pure;
  }

  private fail(err: Error): void {
    this.failure ??= err;
    for (const w of this.waiters.splice(0)) w.reject(err);
  }

  private next(): Promise<unknown> {
    if (this.queue.length > 0) return Promise.resolve(this.queue.shift());
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }

  /** Times `n` inferences in the child (ms each). */
  async run(n = 1): Promise<number[]> {
    if (this.failure) throw this.failure;
    this.child.stdin.write(`${JSON.stringify({ cmd: 'run', n })}\n`);
    const answer = (await this.next()) as OrtResult | { type: 'error'; message: string };
    if (answer.type !== 'result') throw new Error(`ort-inference: ${answer.message}`);
    this.maxRssMB = answer.maxRssMB;
    return answer.times;
  }

  async close(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.closing = true;
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    this.child.stdin.end(`${JSON.stringify({ cmd: 'exit' })}\n`);
    const timer = setTimeout(() => this.child.kill(), 10_000);
    await exited;
    clearTimeout(timer);
  }

  kill(): void {
    this.closing = true;
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill();
  }
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
  format: OutputFormat;
  iterations: number;
  warmupIterations: number;
  /** Wall clock of removeBackground() as tinybench measured it (ms). */
  endToEnd: { mean: number; min: number; max: number; rme: number; samples: number[] };
  /** Means of result.timings over the measured calls (ms). */
  stages: Record<Stage, number>;
  stageSamples: Timings[];
  /** onnxruntime-node session.run, one right before each measured call (ms). */
  pureInference: { mean: number; times: number[] };
  ratioToPureInference: number;
  ratioToCoreInference: number;
  target: number | null;
  pureInferenceTargetMet: boolean | null;
  coreInferenceTargetMet: boolean | null;
  output: { width: number; height: number; channels: number; bytes: number };
  peakRssMB: number;
  childPeakRssMB: number;
}

async function makeInputs(): Promise<{ source: GeneratedInputs['source']; images: InputImage[] }> {
  const photo = path.join(DATASET_DIR, 'images', PHOTO);
  if (!existsSync(photo)) throw new Error(`photo not found: ${photo}`);
  const out = JSON.parse((await runToCompletion(INPUTS_CHILD, [photo, SIZES_MP.join(','), String(JPEG_QUALITY)])).toString('utf8')) as GeneratedInputs;
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

async function benchCase(image: InputImage, format: OutputFormat, pure: PureInference): Promise<CaseResult> {
  const name = `${image.label} -> ${format}`;
  let mode: HookMode = 'warmup';
  const stageSamples: Timings[] = [];
  const pureTimes: number[] = [];
  let last: RemoveBackgroundResult | undefined;

  const bench = new Bench({
    name,
    iterations: ITERATIONS,
    warmupIterations: WARMUP_ITERATIONS,
    time: 0,
    warmupTime: 0,
    retainSamples: true,
    throws: true,
  });
  bench.add(
    name,
    async () => {
      const result = await removeBackground(image.data, { format });
      if (mode === 'run') stageSamples.push(result.timings);
      last = result;
    },
    {
      async: true, // no extra detection call
      // Hooks are outside tinybench's timed window: the reference inference runs right before
      // each measured call.
      beforeEach: async (m?: HookMode) => {
        mode = m ?? 'run';
        if (mode === 'run') pureTimes.push(...(await pure.run(1)));
      },
    },
  );
  await bench.run();

  const task = bench.getTask(name);
  const result = task?.result;
  if (!result || (result.state !== 'completed' && result.state !== 'aborted-with-statistics')) {
    throw new Error(`${name}: tinybench ${result?.state ?? 'no task'}${result?.state === 'errored' ? `: ${result.error.message}` : ''}`);
  }
  if (!last) throw new Error(`${name}: no result`);

  const stages = Object.fromEntries(STAGES.map((s) => [s, mean(stageSamples.map((t) => t[s]))])) as Record<Stage, number>;
  const e2e = result.latency.mean;
  const pureMean = mean(pureTimes);
  const target = TARGETS[`${image.megapixels}:${format}`] ?? null;
  const ratioToPureInference = e2e / pureMean;
  const ratioToCoreInference = e2e / stages.inference;
  return {
    name,
    input: { label: image.label, megapixels: image.megapixels, width: image.width, height: image.height, bytes: image.bytes },
    format,
    iterations: ITERATIONS,
    warmupIterations: WARMUP_ITERATIONS,
    endToEnd: {
      mean: e2e,
      min: result.latency.min,
      max: result.latency.max,
      rme: result.latency.rme,
      samples: [...(result.latency.samples ?? [])],
    },
    stages,
    stageSamples,
    pureInference: { mean: pureMean, times: pureTimes },
    ratioToPureInference,
    ratioToCoreInference,
    target,
    pureInferenceTargetMet: target === null ? null : ratioToPureInference <= target,
    coreInferenceTargetMet: target === null ? null : ratioToCoreInference <= target,
    output: { width: last.width, height: last.height, channels: last.channels, bytes: last.data.length },
    peakRssMB: peakRssMB(),
    childPeakRssMB: pure.maxRssMB,
  };
}

interface ThroughputResult {
  jobs: number;
  rounds: number;
  input: string;
  format: OutputFormat;
  nativeConcurrency: string;
  wallMs: number[];
  imagesPerSecond: number;
  pureInference: { mean: number; times: number[] };
  /** 1 / pure inference time: what a pipeline bound only by inference would reach. */
  inferenceBoundImagesPerSecond: number;
  /** imagesPerSecond / inferenceBoundImagesPerSecond (1.0 = fully inference-bound). */
  throughputRatio: number;
  /** 1000 / end-to-end mean of the sequential 2 MP -> png case, if it ran. */
  sequentialImagesPerSecond: number | null;
  stages: Record<Stage, number>;
  peakRssMB: number;
  childPeakRssMB: number;
}

async function benchThroughput(image: InputImage, pure: PureInference, sequentialE2eMs: number | undefined): Promise<ThroughputResult> {
  const wallMs: number[] = [];
  const pureTimes: number[] = [];
  const timings: Timings[] = [];
  for (let round = 0; round < THROUGHPUT_ROUNDS; round++) {
    pureTimes.push(...(await pure.run(1)));
    const start = performance.now();
    const results = await Promise.all(Array.from({ length: THROUGHPUT_JOBS }, () => removeBackground(image.data, { format: 'png' })));
    wallMs.push(performance.now() - start);
    timings.push(...results.map((r) => r.timings));
  }
  pureTimes.push(...(await pure.run(1)));
  const imagesPerSecond = (THROUGHPUT_JOBS * THROUGHPUT_ROUNDS) / (wallMs.reduce((a, b) => a + b, 0) / 1000);
  const pureMean = mean(pureTimes);
  const inferenceBound = 1000 / pureMean;
  return {
    jobs: THROUGHPUT_JOBS,
    rounds: THROUGHPUT_ROUNDS,
    input: image.label,
    format: 'png',
    nativeConcurrency: process.env.BGONE_NATIVE_CONCURRENCY ?? '2 (default)',
    wallMs,
    imagesPerSecond,
    pureInference: { mean: pureMean, times: pureTimes },
    inferenceBoundImagesPerSecond: inferenceBound,
    throughputRatio: imagesPerSecond / inferenceBound,
    sequentialImagesPerSecond: sequentialE2eMs === undefined ? null : 1000 / sequentialE2eMs,
    stages: Object.fromEntries(STAGES.map((s) => [s, mean(timings.map((t) => t[s]))])) as Record<Stage, number>,
    peakRssMB: peakRssMB(),
    childPeakRssMB: pure.maxRssMB,
  };
}

function report(cases: CaseResult[], throughput: ThroughputResult | undefined): void {
  printTable(
    `Per-stage means (ms) reported by the native core in result.timings, ${ITERATIONS} measured calls per case`,
    ['case', 'input', 'in KB', 'decode*', 'preproc', 'inference', 'queue', 'resize', 'matting', 'encode', 'core total', 'out KB'],
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
    ]),
    2,
  );
  console.log('* decode includes the full-resolution decode, which runs beside the inference (overlapped, not additive).');

  const mark = (met: boolean | null): string => (met === null ? '' : met ? 'PASS' : 'MISS');
  printTable(
    'End-to-end vs inference (ms; e2e = tinybench wall-clock mean of removeBackground; pure = onnxruntime-node session.run, interleaved)',
    ['case', 'e2e mean', '±rme', 'pure inf', 'e2e/pure', 'core inf', 'e2e/core', 'target', 'vs pure', 'vs core', 'RSS MB', 'child RSS MB'],
    cases.map((c) => [
      c.name,
      fmt(c.endToEnd.mean),
      `${fmt(c.endToEnd.rme, 1)}%`,
      fmt(c.pureInference.mean),
      fmt(c.ratioToPureInference, 3),
      fmt(c.stages.inference),
      fmt(c.ratioToCoreInference, 3),
      c.target === null ? '' : `<= ${c.target.toFixed(2)}`,
      mark(c.pureInferenceTargetMet),
      mark(c.coreInferenceTargetMet),
      fmt(c.peakRssMB),
      fmt(c.childPeakRssMB),
    ]),
  );
  console.log('RSS = peak RSS (maxRSS) of this process so far / of the onnxruntime-node child so far.');

  if (throughput) {
    printTable(
      `Throughput: ${throughput.jobs} x ${throughput.input} JPEG -> png submitted at once (Promise.all), ${throughput.rounds} round(s), native concurrency ${throughput.nativeConcurrency}`,
      ['wall ms/round', 'images/s', 'pure inf ms', '1/pure img/s', 'throughput ratio', 'sequential img/s', 'mean queue', 'mean inference', 'RSS MB'],
      [
        [
          throughput.wallMs.map((w) => fmt(w)).join(', '),
          fmt(throughput.imagesPerSecond, 3),
          fmt(throughput.pureInference.mean),
          fmt(throughput.inferenceBoundImagesPerSecond, 3),
          fmt(throughput.throughputRatio, 3),
          fmt(throughput.sequentialImagesPerSecond ?? undefined, 3),
          fmt(throughput.stages.queue),
          fmt(throughput.stages.inference),
          fmt(throughput.peakRssMB),
        ],
      ],
      1,
    );
    console.log('throughput ratio = images/s / (1 / pure inference time); 1.0 means the pipeline is purely inference-bound.');
  }
}

async function main(): Promise<void> {
  configure(loadLibraryConfig()); // the service's own reading of BGONE_INFERENCE_THREADS, BGONE_NATIVE_CONCURRENCY, BGONE_MODELS_DIR
  const started = performance.now();
  const loadStart = os.loadavg();
  const manifest = readManifest();
  log(
    `${QUICK ? 'QUICK mode: ' : ''}sizes ${SIZES_MP.join(', ')} MP x formats ${FORMATS.join(', ')}, ${ITERATIONS} iterations (+${WARMUP_ITERATIONS} warmup) per case`,
  );

  // Both children start at once: the inputs are made while the reference session loads.
  log(`making inputs from ${PHOTO} (child process, sharp); starting the onnxruntime-node child (load + warmup)`);
  const starting = PureInference.start(undefined);
  starting.catch(() => undefined); // awaited below; this only keeps an early failure from being unhandled
  let pure: PureInference | undefined;
  try {
    const { source, images } = await makeInputs();
    for (const img of images) log(`  ${img.label}: ${img.width}x${img.height}, ${(img.bytes / 1024).toFixed(0)} KB`);
    pure = await starting;
    log(`  ${pure.ready.model} loaded in ${pure.ready.loadMs.toFixed(0)} ms, warmup ${pure.ready.warmupMs.map((t) => t.toFixed(0)).join(', ')} ms`);

    log('loading the model in the native core');
    const modelLoadStart = performance.now();
    await preloadModel();
    const modelLoadMs = performance.now() - modelLoadStart;
    const versions = nativeVersions();

    const cases: CaseResult[] = [];
    for (const image of images) {
      for (const format of FORMATS) {
        log(`case ${image.label} -> ${format}`);
        const c = await benchCase(image, format, pure);
        log(
          `  e2e ${c.endToEnd.mean.toFixed(0)} ms, pure ${c.pureInference.mean.toFixed(0)} ms, core inference ${c.stages.inference.toFixed(0)} ms, ratio ${c.ratioToPureInference.toFixed(3)}`,
        );
        cases.push(c);
      }
    }

    const throughputImage = images.find((i) => i.megapixels === THROUGHPUT_MP);
    let throughput: ThroughputResult | undefined;
    if (throughputImage) {
      log(`throughput: ${THROUGHPUT_JOBS} x ${throughputImage.label} -> png at once, ${THROUGHPUT_ROUNDS} round(s)`);
      const sequential = cases.find((c) => c.input.megapixels === THROUGHPUT_MP && c.format === 'png');
      throughput = await benchThroughput(throughputImage, pure, sequential?.endToEnd.mean);
    }
    await pure.close();

    const elapsedS = (performance.now() - started) / 1000;
    const machine = machineInfo(loadStart);

    console.log(`\nbgone pipeline benchmark${QUICK ? ' (BENCH_QUICK)' : ''}`);
    console.log(
      `${machine.cpus} x ${machine.cpuModel}, ${machine.totalMemGB} GB, ${machine.platform}, node ${machine.node}, libvips ${versions.vips}, onnxruntime ${pure.ready.onnxruntime}`,
    );
    console.log(
      `model ${pure.ready.model} (${pure.ready.file}), input ${source.file} ${source.width}x${source.height} resized, JPEG q${JPEG_QUALITY}; load average ${machine.loadAverageAtStart.join(' ')} -> ${machine.loadAverageAtEnd.join(' ')}`,
    );
    report(cases, throughput);
    console.log(`\npeak RSS: this process ${fmt(peakRssMB())} MB, onnxruntime-node child ${fmt(pure.maxRssMB)} MB; run took ${elapsedS.toFixed(0)} s`);

    const json = {
      benchmark: 'pipeline',
      quick: QUICK,
      commit: gitCommit(REPO_ROOT),
      machine,
      versions: { vips: versions.vips, onnxruntime: pure.ready.onnxruntime, tinybench: '6.2.3' },
      env: {
        BGONE_INFERENCE_THREADS: process.env.BGONE_INFERENCE_THREADS ?? null,
        BGONE_NATIVE_CONCURRENCY: process.env.BGONE_NATIVE_CONCURRENCY ?? null,
        UV_THREADPOOL_SIZE: process.env.UV_THREADPOOL_SIZE ?? null,
      },
      settings: {
        photo: source,
        jpegQuality: JPEG_QUALITY,
        sizesMP: SIZES_MP,
        formats: FORMATS,
        options: 'full size, rgba, defaults',
        iterations: ITERATIONS,
        warmupIterations: WARMUP_ITERATIONS,
        targets: TARGETS,
        model: { name: pure.ready.model ?? manifest.default, file: pure.ready.file },
      },
      pureInferenceChild: {
        loadMs: pure.ready.loadMs,
        warmupMs: pure.ready.warmupMs,
        intraOpNumThreads: pure.ready.intraOpNumThreads,
        peakRssMB: pure.maxRssMB,
      },
      nativeModelLoadMs: modelLoadMs,
      cases,
      throughput: throughput ?? null,
      peakRssMB: peakRssMB(),
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
