/**
 * HTTP load benchmark of the service (npm run bench:http).
 *
 * In one process: a throw-away SQLite store (temporary folder, deleted at the end) with one Mega
 * account whose credits and rate limit never run out, and the server on 127.0.0.1 (ephemeral port,
 * queue limit 64 so that nothing is shed). autocannon sends the same multipart POST /api/v1/remove
 * (a ~2 MP JPEG made in memory from a dev photo, -> png) over loopback at concurrency 1, 4 and 16,
 * each level bounded by a number of requests (max(6, 2 x connections)), not by a duration.
 *
 * For each level: requests/s (2xx answers / wall time from the first request to the last answer),
 * latency p50/p99, non-2xx and errors, and the RSS of this process (server + library + autocannon)
 * sampled every 250 ms. The reference is the native core's own throughput in the same run:
 * removeBackground() called directly on the same JPEG with the same options, with 2 calls in flight
 * (the library's default native concurrency) and, as a second reference, one at a time. The core is
 * measured before the first level, between levels and after the last, and each level is compared to
 * the mean of the two measurements around it, so that both see about the same machine. Target:
 * HTTP req/s / core images/s >= 0.95. Every phase also records how many cores other processes used
 * meanwhile (/proc/stat minus this process), so that a ratio taken while something else competed for
 * the machine is flagged as such.
 *
 * Results are printed and written to bench/results/http-<backend>.json. BENCH_HTTP=uws|node picks the
 * HTTP backend (default: the automatic choice, as `npm start`). BENCH_QUICK=1: concurrency 1 and 4 only,
 * 6 requests, fewer core calls (smoke run). BENCH_IMAGE=<file in datasets/dev/images> picks another photo.
 *
 * Against bare inference: the bare inference of the default model's file at 1024² by onnxruntime-node with
 * its defaults but the core's intra-op thread count (helpers/ort-inference.ts), in a separate process (helpers/ort-inference.ts, one-shot) before the first level
 * and after the last, never beside the service; the p50 at concurrency 1 over it (target <= 1.15),
 * the req/s at concurrency 4 over 1 / it (target >= 0.9), the per-stage times and the CPU outside
 * inference (process CPU per call less the CPU while the model ran) of the core's sequential calls,
 * and the idle and peak RSS.
 *
 * Then the batch case (helpers/http-batch-phase.ts): synchronous requests one at a time on the idle
 * server, then while a 50-image batch runs, against the target p99 <= idle p99 + one inference.
 *
 * Only loopback traffic; every run is bounded in requests, and each level also by a hard time limit.
 */

import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadLibraryConfig } from '../src/config/config.js';
import { configure, nativeVersions, preloadModel, type RemoveBackgroundResult, readManifest, removeBackground } from '../src/lib/index.js';
import { AUTOCANNON_VERSION, type AutocannonResult, type BoundedRun, runBounded } from './helpers/http-autocannon.js';
import { type BatchPhaseResult, batchPhase } from './helpers/http-batch-phase.js';
import { CpuMeter, type CpuShare } from './helpers/http-cpu.js';
import { multipartBody, postOnce, type ServiceFixture, startService } from './helpers/http-fixture.js';
import type { GeneratedInputs } from './helpers/make-inputs.js';
import { fmt, gitCommit, machineInfo, mean, printTable, round, runToCompletion } from './helpers/report.js';

// ---------------------------------------------------------------------------------------------
// Configuration

const HERE = path.dirname(fileURLToPath(import.meta.url)); // dist/bench
const REPO_ROOT = path.resolve(HERE, '..', '..');
const DATASET_DIR = path.resolve(REPO_ROOT, '..', 'shared', 'datasets', 'dev');
const HTTP_CHOICE = ((): 'auto' | 'uws' | 'node' => {
  const raw = process.env.BENCH_HTTP ?? 'auto';
  if (raw === 'auto' || raw === 'uws' || raw === 'node') return raw;
  throw new Error(`BENCH_HTTP must be uws, node or auto (got "${raw}")`);
})();
const INPUTS_CHILD = path.join(HERE, 'helpers', 'make-inputs.js');
const ORT_CHILD = path.join(HERE, 'helpers', 'ort-inference.js');

const QUICK = /^(1|true|yes)$/i.test(process.env.BENCH_QUICK ?? '');
const PHOTO = process.env.BENCH_IMAGE ?? 'gc_person1.jpg';
const MEGAPIXELS = 2;
const JPEG_QUALITY = 90;
const FORMAT = 'png';
const CONCURRENCY_LEVELS = QUICK ? [1, 4] : [1, 4, 16];
const requestsFor = (connections: number): number => (QUICK ? 6 : Math.max(6, 2 * connections));
/** Calls per core measurement with 2 in flight / with 1 in flight. */
const CORE_PARALLEL_CALLS = QUICK ? 4 : 6;
const CORE_SEQUENTIAL_CALLS = QUICK ? 2 : 3;
const CORE_IN_FLIGHT = 2;
const TARGET_RATIO = 0.95;
/** Bare-inference runs (after one warm-up) in each of the two measurements. */
const BARE_RUNS = QUICK ? 2 : 3;
/** Targets: p50 at concurrency 1 <= this x bare inference; req/s at concurrency 4 >= this x 1 / bare. */
const P50_TARGET = 1.15;
const THROUGHPUT_TARGET = 0.9;
const THROUGHPUT_CONNECTIONS = 4;
/** The batch case: a batch of this many copies of the input, and this many synchronous requests during it. */
const BATCH_IMAGES = 50;
const BATCH_SYNC_REQUESTS = 8;
/** Other processes' CPU (cores) above which a phase counts as contended in the report. */
const CONTENDED_CORES = 0.25;
const QUEUE_LIMIT = 64;
const RSS_SAMPLE_MS = 250;
/** autocannon's per-request timeout (s): at concurrency 16 a request waits behind up to 15 others. */
const REQUEST_TIMEOUT_S = 300;
/** Hard limit of one level (ms), far above the expected time; the level fails if it is reached. */
const levelHardLimitMs = (amount: number): number => 120_000 + amount * 15_000;

// ---------------------------------------------------------------------------------------------
// Small helpers

const toMB = (bytes: number): number => bytes / 2 ** 20;
const log = (message: string): void => {
  process.stderr.write(`[bench:http] ${message}\n`);
};

/** Nearest-rank percentile of an unsorted list. */
function percentile(xs: readonly number[], p: number): number {
  if (xs.length === 0) return NaN;
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

/** RSS of this process, sampled on a timer between start() and stop(). */
class RssSampler {
  private samples: number[] = [];
  private timer: NodeJS.Timeout | undefined;

  start(): void {
    this.samples = [process.memoryUsage.rss()];
    this.timer = setInterval(() => this.samples.push(process.memoryUsage.rss()), RSS_SAMPLE_MS);
  }

  stop(): { samples: number; maxMB: number; meanMB: number } {
    clearInterval(this.timer);
    this.timer = undefined;
    this.samples.push(process.memoryUsage.rss());
    return { samples: this.samples.length, maxMB: toMB(Math.max(...this.samples)), meanMB: toMB(mean(this.samples)) };
  }
}

// ---------------------------------------------------------------------------------------------
// Measurements

interface InputImage {
  label: string;
  width: number;
  height: number;
  bytes: number;
  data: Buffer;
}

async function makeInput(): Promise<{ source: GeneratedInputs['source']; image: InputImage }> {
  const photo = path.join(DATASET_DIR, 'images', PHOTO);
  if (!existsSync(photo)) throw new Error(`photo not found: ${photo}`);
  const out = JSON.parse((await runToCompletion(INPUTS_CHILD, [photo, String(MEGAPIXELS), String(JPEG_QUALITY)])).toString('utf8')) as GeneratedInputs;
  const img = out.images[0];
  if (!img) throw new Error('make-inputs returned no image');
  return {
    source: out.source,
    image: { label: img.label, width: img.width, height: img.height, bytes: img.bytes, data: Buffer.from(img.jpegBase64, 'base64') },
  };
}

interface CoreRun {
  inFlight: number;
  calls: number;
  wallMs: number;
  imagesPerSecond: number;
  meanInferenceMs: number;
  meanCoreTotalMs: number;
  /** Mean of each result.timings field (ms). */
  stages: Record<string, number>;
  /** One at a time only: this process's CPU per call less the CPU while the model ran (ms). */
  cpuOutsideInferenceMs: number | null;
  cpu: CpuShare;
}

/** Bare inference of the model's file by onnxruntime-node (its defaults, the core's threads), in its own process (ms per run). */
async function bareInference(model: string): Promise<number[]> {
  const out = JSON.parse((await runToCompletion(ORT_CHILD, ['--model', model, '--runs', String(BARE_RUNS), '--warmup', '1'])).toString('utf8')) as {
    times: number[];
  };
  log(`  bare inference of ${model}: ${out.times.map((t) => t.toFixed(0)).join(', ')} ms`);
  return out.times;
}

/** `calls` direct removeBackground() calls on the image, `inFlight` at a time. */
async function coreRun(image: Buffer, inFlight: number, calls: number): Promise<CoreRun> {
  const results: RemoveBackgroundResult[] = [];
  const outside: number[] = [];
  let next = 0;
  const meter = new CpuMeter();
  const start = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < calls) {
        next++;
        const cpuStart = process.cpuUsage();
        const result = await removeBackground(image, { format: FORMAT });
        const used = process.cpuUsage(cpuStart);
        outside.push((used.user + used.system) / 1000 - result.timings.inferenceCpu);
        results.push(result);
      }
    }),
  );
  const wallMs = performance.now() - start;
  const cpu = meter.stop();
  return {
    inFlight,
    calls,
    wallMs,
    imagesPerSecond: calls / (wallMs / 1000),
    meanInferenceMs: mean(results.map((r) => r.timings.inference)),
    meanCoreTotalMs: mean(results.map((r) => r.timings.total)),
    stages: Object.fromEntries(Object.keys(results[0]!.timings).map((k) => [k, mean(results.map((r) => r.timings[k as keyof typeof r.timings]))])),
    // With several in flight, one call's CPU window holds the others' work too.
    cpuOutsideInferenceMs: inFlight === 1 ? mean(outside) : null,
    cpu,
  };
}

interface CoreBracket {
  /** Where in the run it was measured. */
  position: string;
  parallel: CoreRun;
  sequential: CoreRun;
  loadAverage1m: number;
}

async function coreBracket(image: Buffer, position: string): Promise<CoreBracket> {
  log(`core (${position}): ${CORE_PARALLEL_CALLS} calls with ${CORE_IN_FLIGHT} in flight, then ${CORE_SEQUENTIAL_CALLS} one at a time`);
  const parallel = await coreRun(image, CORE_IN_FLIGHT, CORE_PARALLEL_CALLS);
  const sequential = await coreRun(image, 1, CORE_SEQUENTIAL_CALLS);
  log(
    `  ${parallel.imagesPerSecond.toFixed(3)} img/s with ${CORE_IN_FLIGHT} in flight, ${sequential.imagesPerSecond.toFixed(3)} img/s sequential; ` +
      `other processes ${fmt(parallel.cpu.otherCores, 2)} / ${fmt(sequential.cpu.otherCores, 2)} cores`,
  );
  return { position, parallel, sequential, loadAverage1m: round(os.loadavg()[0]!, 2) };
}

interface LevelResult {
  connections: number;
  requests: number;
  wallMs: number;
  ok: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  statusCodes: Record<string, number>;
  requestErrors: Record<string, number>;
  /** 2xx answers / wall time (s). */
  requestsPerSecond: number;
  /** From autocannon's latency histogram (ms). */
  latency: { p50: number; p90: number; p99: number; mean: number; min: number; max: number };
  /** Nearest-rank percentiles of the exact 2xx response times (ms). */
  latencyExact: { p50: number; p99: number; samples: number[] };
  rss: { samples: number; maxMB: number; meanMB: number };
  cpu: CpuShare;
  /** Core throughput around this level: the mean of the measurements just before and just after. */
  core: { parallelImagesPerSecond: number; sequentialImagesPerSecond: number; brackets: [string, string] };
  ratio: number;
  ratioToSequential: number;
  targetMet: boolean;
  targetMetVsSequential: boolean;
  /** Phases behind the ratio during which other processes used more than CONTENDED_CORES. */
  contendedPhases: string[];
  autocannon: Pick<AutocannonResult, 'duration' | 'latency' | 'requests' | 'statusCodeStats' | 'errors' | 'timeouts' | 'non2xx' | 'resets'>;
}

async function httpLevel(
  fixture: ServiceFixture,
  body: Buffer,
  headers: Record<string, string>,
  connections: number,
): Promise<Omit<LevelResult, 'core' | 'ratio' | 'ratioToSequential' | 'targetMet' | 'targetMetVsSequential' | 'contendedPhases'>> {
  const amount = requestsFor(connections);
  log(`HTTP: ${amount} requests over ${connections} connection(s)`);
  const sampler = new RssSampler();
  sampler.start();
  const meter = new CpuMeter();
  let run: BoundedRun;
  try {
    run = await runBounded(
      { url: fixture.url, method: 'POST', connections, amount, timeout: REQUEST_TIMEOUT_S, body, headers, pipelining: 1, sampleInt: 250 },
      levelHardLimitMs(amount),
    );
  } catch (err) {
    sampler.stop();
    throw err;
  }
  const rss = sampler.stop();
  const cpu = meter.stop();
  const { result } = run;
  const statusCodes = Object.fromEntries(Object.entries(result.statusCodeStats).map(([code, s]) => [code, s.count]));
  const ok = run.statuses.filter((s) => s >= 200 && s < 300).length;
  const level = {
    connections,
    requests: amount,
    wallMs: run.wallMs,
    ok,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    statusCodes,
    requestErrors: run.requestErrors,
    requestsPerSecond: ok / (run.wallMs / 1000),
    latency: {
      p50: result.latency.p50,
      p90: result.latency.p90,
      p99: result.latency.p99,
      mean: result.latency.mean,
      min: result.latency.min,
      max: result.latency.max,
    },
    latencyExact: { p50: percentile(run.latenciesMs, 50), p99: percentile(run.latenciesMs, 99), samples: run.latenciesMs.map((x) => round(x, 1)) },
    rss,
    cpu,
    autocannon: {
      duration: result.duration,
      latency: result.latency,
      requests: result.requests,
      statusCodeStats: result.statusCodeStats,
      errors: result.errors,
      timeouts: result.timeouts,
      non2xx: result.non2xx,
      resets: result.resets,
    },
  };
  log(
    `  ${level.requestsPerSecond.toFixed(3)} req/s, p50 ${level.latency.p50.toFixed(0)} ms, p99 ${level.latency.p99.toFixed(0)} ms, ` +
      `${ok} x 2xx, ${level.non2xx} non-2xx, ${level.errors} errors; RSS max ${rss.maxMB.toFixed(0)} MB; other processes ${fmt(cpu.otherCores, 2)} cores`,
  );
  if (ok !== amount || level.non2xx > 0 || level.errors > 0)
    log(`  WARNING: not every request succeeded: status ${JSON.stringify(statusCodes)}, errors ${JSON.stringify(run.requestErrors)}`);
  return level;
}

// ---------------------------------------------------------------------------------------------
// Report

function report(levels: LevelResult[], brackets: CoreBracket[]): void {
  const mark = (met: boolean): string => (met ? 'PASS' : 'MISS');
  printTable(
    `HTTP load: POST /api/v1/remove, ${FORMAT} output, autocannon over loopback, bounded by request count`,
    ['concurrency', 'requests', '2xx', 'non-2xx', 'errors', 'wall s', 'req/s', 'p50 ms', 'p99 ms', 'RSS max MB', 'RSS mean MB', 'other CPU'],
    levels.map((l) => [
      String(l.connections),
      String(l.requests),
      String(l.ok),
      String(l.non2xx),
      String(l.errors),
      fmt(l.wallMs / 1000, 1),
      fmt(l.requestsPerSecond, 3),
      fmt(l.latency.p50),
      fmt(l.latency.p99),
      fmt(l.rss.maxMB),
      fmt(l.rss.meanMB),
      fmt(l.cpu.otherCores, 2),
    ]),
  );
  console.log(
    `req/s = 2xx answers / wall time from the first request to the last answer; p50/p99 from autocannon's latency histogram; RSS of this process (server, library, autocannon) every ${RSS_SAMPLE_MS} ms;\nother CPU = cores used by other processes meanwhile (machine busy time from /proc/stat minus this process's).`,
  );

  printTable(
    `HTTP throughput / native core throughput (target >= ${TARGET_RATIO}); core = removeBackground() on the same JPEG in this process, mean of the measurements just before and after the level`,
    [
      'concurrency',
      'req/s',
      `core img/s (${CORE_IN_FLIGHT} in flight)`,
      'ratio',
      'target',
      'core img/s (sequential)',
      'ratio vs sequential',
      'vs seq',
      'contended phases',
    ],
    levels.map((l) => [
      String(l.connections),
      fmt(l.requestsPerSecond, 3),
      fmt(l.core.parallelImagesPerSecond, 3),
      fmt(l.ratio, 3),
      mark(l.targetMet),
      fmt(l.core.sequentialImagesPerSecond, 3),
      fmt(l.ratioToSequential, 3),
      mark(l.targetMetVsSequential),
      l.contendedPhases.length === 0 ? 'none' : String(l.contendedPhases.length),
    ]),
    1,
  );
  const noisy = levels.filter((l) => l.contendedPhases.length > 0);
  if (noisy.length > 0) {
    console.log(
      `Contended (other processes > ${CONTENDED_CORES} cores) behind the ratio: ${noisy.map((l) => `c=${l.connections}: ${l.contendedPhases.join(', ')}`).join('; ')}. Those ratios measure the other load as much as the service.`,
    );
  }
  if (levels.some((l) => l.connections === 1)) {
    console.log(
      `At concurrency 1 only one request is ever in the service, so the HTTP path cannot overlap one image's decode/encode with another's inference the way ${CORE_IN_FLIGHT} core calls in flight do: its fair reference is the core's sequential throughput (ratio vs sequential).`,
    );
  }

  printTable(
    'Native core measurements in this run (images/s)',
    ['when', `${CORE_IN_FLIGHT} in flight`, 'calls', 'other CPU', 'sequential', 'calls', 'other CPU', 'mean inference ms', 'load avg 1m'],
    brackets.map((b) => [
      b.position,
      fmt(b.parallel.imagesPerSecond, 3),
      String(b.parallel.calls),
      fmt(b.parallel.cpu.otherCores, 2),
      fmt(b.sequential.imagesPerSecond, 3),
      String(b.sequential.calls),
      fmt(b.sequential.cpu.otherCores, 2),
      fmt(mean([b.parallel.meanInferenceMs, b.sequential.meanInferenceMs])),
      fmt(b.loadAverage1m, 2),
    ]),
  );
}

interface Issue19 {
  bareInferenceMs: number;
  p50AtOne: { ms: number; ratio: number; met: boolean } | null;
  throughputAtFour: { requestsPerSecond: number; ratio: number; met: boolean } | null;
  stages: Record<string, number>;
  cpuOutsideInferenceMs: number;
  gpuFeedImagesPerCore: number;
  idleRssMB: number;
  peakRssMB: number;
}

/** The HTTP path against its targets, printed and returned for the JSON. */
function issue19Figures(levels: LevelResult[], brackets: CoreBracket[], bareTimes: number[], idleRssMB: number, file: string): Issue19 {
  const bare = mean(bareTimes);
  const one = levels.find((l) => l.connections === 1);
  const four = levels.find((l) => l.connections === THROUGHPUT_CONNECTIONS);
  const sequential = brackets.map((b) => b.sequential);
  const stages = Object.fromEntries(Object.keys(sequential[0]!.stages).map((k) => [k, mean(sequential.map((r) => r.stages[k]!))]));
  const cpuOutside = mean(sequential.map((r) => r.cpuOutsideInferenceMs!));
  const figures: Issue19 = {
    bareInferenceMs: bare,
    p50AtOne: one ? { ms: one.latencyExact.p50, ratio: one.latencyExact.p50 / bare, met: one.latencyExact.p50 / bare <= P50_TARGET } : null,
    throughputAtFour: four
      ? {
          requestsPerSecond: four.requestsPerSecond,
          ratio: four.requestsPerSecond * (bare / 1000),
          met: four.requestsPerSecond * (bare / 1000) >= THROUGHPUT_TARGET,
        }
      : null,
    stages,
    cpuOutsideInferenceMs: cpuOutside,
    gpuFeedImagesPerCore: 1000 / cpuOutside,
    idleRssMB,
    peakRssMB: process.resourceUsage().maxRSS / 1024,
  };
  const mark = (met: boolean | undefined): string => (met === undefined ? 'not run' : met ? 'PASS' : 'MISS');
  printTable(
    `Targets: against the bare inference of ${file} (onnxruntime-node defaults, own process, ${bareTimes.length} runs around the levels: ${fmt(bare)} ms)`,
    ['figure', 'measured', 'target', 'met'],
    [
      [
        'p50 at concurrency 1 / bare inference',
        figures.p50AtOne ? `${fmt(figures.p50AtOne.ms)} / ${fmt(bare)} ms = ${fmt(figures.p50AtOne.ratio, 3)}` : 'not run',
        `<= ${P50_TARGET}`,
        mark(figures.p50AtOne?.met),
      ],
      [
        `req/s at concurrency ${THROUGHPUT_CONNECTIONS} / (1 / bare inference)`,
        figures.throughputAtFour
          ? `${fmt(figures.throughputAtFour.requestsPerSecond, 3)} / ${fmt(1000 / bare, 3)} = ${fmt(figures.throughputAtFour.ratio, 3)}`
          : 'not run',
        `>= ${THROUGHPUT_TARGET}`,
        mark(figures.throughputAtFour?.met),
      ],
      [
        'stages of the core, one at a time (ms)',
        ['decode', 'preprocess', 'inference', 'resize', 'matting', 'encode', 'total'].map((k) => `${k} ${fmt(stages[k] ?? NaN)}`).join(', '),
        '',
        '',
      ],
      [
        'CPU outside inference per image (ms)',
        `${fmt(cpuOutside)} (one core feeds a GPU ${fmt(figures.gpuFeedImagesPerCore, 1)} images/s)`,
        '<= 60',
        mark(cpuOutside <= 60),
      ],
      [
        // This process also holds the server, the store and autocannon: the core's own RSS targets are npm run bench's.
        'RSS idle after warm-up / peak of the run, whole process (MB)',
        `${fmt(idleRssMB)} / ${fmt(figures.peakRssMB)}`,
        'see npm run bench',
        '',
      ],
    ],
    1,
  );
  return figures;
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  configure(loadLibraryConfig()); // the service's own reading of BGONE_INFERENCE_THREADS, BGONE_NATIVE_CONCURRENCY, BGONE_MODELS_DIR
  const started = performance.now();
  const loadStart = os.loadavg();
  const manifest = readManifest();
  log(
    `${QUICK ? 'QUICK mode: ' : ''}concurrency ${CONCURRENCY_LEVELS.join(', ')} with ${CONCURRENCY_LEVELS.map(requestsFor).join(', ')} requests; ${MEGAPIXELS} MP JPEG -> ${FORMAT}`,
  );

  log(`making the input from ${PHOTO} (child process, sharp)`);
  const { source, image } = await makeInput();
  log(`  ${image.label}: ${image.width}x${image.height}, ${(image.bytes / 1024).toFixed(0)} KB`);

  log('loading the model in the native core');
  const modelLoadStart = performance.now();
  await preloadModel();
  const modelLoadMs = performance.now() - modelLoadStart;
  const versions = nativeVersions();

  const fixture = await startService({ queueLimit: QUEUE_LIMIT, grant: 1_000_000, rateLimitPerMinute: 1_000_000, http: HTTP_CHOICE });
  const resultsFile = path.join(REPO_ROOT, 'bench', 'results', `http-${fixture.server.backend}.json`);
  const onSignal = (signal: NodeJS.Signals): void => {
    log(`${signal}: closing the server and deleting the temporary store`);
    void fixture.close().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    log(`server on ${fixture.url} (${fixture.server.backend} backend, queue limit ${QUEUE_LIMIT}), store in a temporary folder`);
    const { body, contentType } = multipartBody(image.data, `bench-${MEGAPIXELS}mp.jpg`, { format: FORMAT });
    const headers = { Authorization: `Bearer ${fixture.apiKey}`, 'Content-Type': contentType };

    // Warm-up, and a check that the answer is what the load will measure.
    log('warm-up: one core call, one HTTP request (checked: 200, PNG, input size)');
    const warmCore = await removeBackground(image.data, { format: FORMAT });
    const check = await postOnce(fixture.url, body, headers, REQUEST_TIMEOUT_S * 1000);
    const pngSignature = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
    if (check.status !== 200) throw new Error(`warm-up request answered ${check.status}: ${check.body.toString('utf8').slice(0, 500)}`);
    if (!check.body.subarray(0, 8).equals(pngSignature) || check.headers['content-type'] !== 'image/png')
      throw new Error(`warm-up answer is not a PNG (${String(check.headers['content-type'])})`);
    if (check.headers['x-image-width'] !== String(image.width) || check.headers['x-image-height'] !== String(image.height)) {
      throw new Error(
        `warm-up answer is ${String(check.headers['x-image-width'])}x${String(check.headers['x-image-height'])}, expected ${image.width}x${image.height}`,
      );
    }
    log(
      `  HTTP ${check.ms.toFixed(0)} ms, ${(check.body.length / 1024).toFixed(0)} KB PNG (core: ${(warmCore.data.length / 1024).toFixed(0)} KB); credits left ${String(check.headers['x-credits-remaining'])}`,
    );
    const idleRssMB = toMB(process.memoryUsage.rss());

    log(`bare inference of ${manifest.default} (${manifest.models[manifest.default]!.file}), own process, before the levels`);
    const bareTimes = await bareInference(manifest.default);
    const brackets: CoreBracket[] = [await coreBracket(image.data, `before c=${CONCURRENCY_LEVELS[0]}`)];
    const levels: LevelResult[] = [];
    for (let i = 0; i < CONCURRENCY_LEVELS.length; i++) {
      const connections = CONCURRENCY_LEVELS[i]!;
      const measured = await httpLevel(fixture, body, headers, connections);
      const nextLevel = CONCURRENCY_LEVELS[i + 1];
      brackets.push(await coreBracket(image.data, nextLevel === undefined ? `after c=${connections}` : `between c=${connections} and c=${nextLevel}`));
      const around = [brackets[i]!, brackets[i + 1]!];
      const parallelIps = mean(around.map((b) => b.parallel.imagesPerSecond));
      const sequentialIps = mean(around.map((b) => b.sequential.imagesPerSecond));
      const ratio = measured.requestsPerSecond / parallelIps;
      const ratioToSequential = measured.requestsPerSecond / sequentialIps;
      const contended = (cpu: CpuShare): boolean => cpu.otherCores !== null && cpu.otherCores > CONTENDED_CORES;
      const contendedPhases = [
        ...(contended(measured.cpu) ? ['http'] : []),
        ...around.flatMap((b) => [
          ...(contended(b.parallel.cpu) ? [`core ${b.position} (${CORE_IN_FLIGHT} in flight)`] : []),
          ...(contended(b.sequential.cpu) ? [`core ${b.position} (sequential)`] : []),
        ]),
      ];
      levels.push({
        ...measured,
        core: { parallelImagesPerSecond: parallelIps, sequentialImagesPerSecond: sequentialIps, brackets: [around[0]!.position, around[1]!.position] },
        ratio,
        ratioToSequential,
        targetMet: ratio >= TARGET_RATIO,
        targetMetVsSequential: ratioToSequential >= TARGET_RATIO,
        contendedPhases,
      });
      log(`  ratio ${ratio.toFixed(3)} (vs ${parallelIps.toFixed(3)} img/s), vs sequential ${ratioToSequential.toFixed(3)}`);
    }
    log('bare inference again, after the levels');
    bareTimes.push(...(await bareInference(manifest.default)));
    const batch: BatchPhaseResult = await batchPhase(fixture, image.data, body, headers, {
      batchImages: QUICK ? 10 : BATCH_IMAGES,
      syncRequests: QUICK ? 3 : BATCH_SYNC_REQUESTS,
      // One inference: the in-core inference time of the core measurements of this run.
      inferenceMs: mean(brackets.map((b) => mean([b.parallel.meanInferenceMs, b.sequential.meanInferenceMs]))),
      log,
    });
    const remaining = (await fixture.store.credits.balance(fixture.accountId)).remaining;

    const elapsedS = (performance.now() - started) / 1000;
    const machine = machineInfo(loadStart);

    console.log(`\nbgone HTTP benchmark, ${fixture.server.backend} backend${QUICK ? ' (BENCH_QUICK)' : ''}`);
    console.log(
      `${machine.cpus} x ${machine.cpuModel}, ${machine.totalMemGB} GB, ${machine.platform}, node ${machine.node}, libvips ${versions.vips}, autocannon ${AUTOCANNON_VERSION}`,
    );
    console.log(
      `input ${source.file} resized to ${image.width}x${image.height} JPEG q${JPEG_QUALITY} (${(image.bytes / 1024).toFixed(0)} KB, multipart body ${(body.length / 1024).toFixed(0)} KB) -> ${FORMAT}; ` +
        `model ${manifest.default}; load average ${machine.loadAverageAtStart.join(' ')} -> ${machine.loadAverageAtEnd.join(' ')}`,
    );
    report(levels, brackets);
    const issue19 = issue19Figures(levels, brackets, bareTimes, idleRssMB, manifest.models[manifest.default]!.file);
    printTable(
      `Synchronous requests (one at a time) while a ${batch.batchImages}-image batch runs; target: p99 <= idle p99 + one inference`,
      ['phase', 'requests', 'p50 ms', 'p99 ms', 'target p99 ms', 'target'],
      [
        ['idle', String(batch.syncRequests), fmt(batch.idle.p50), fmt(batch.idle.p99), '', ''],
        [
          'during the batch',
          String(batch.syncRequests),
          fmt(batch.duringBatch.p50),
          fmt(batch.duringBatch.p99),
          fmt(batch.targetP99Ms),
          batch.targetMet ? 'PASS' : 'MISS',
        ],
      ],
    );
    console.log(
      `one inference (the core's mean in this run) ${fmt(batch.inferenceMs)} ms; ${batch.batchImagesEnded} batch images ended during the synchronous requests.`,
    );
    const allOk = levels.every((l) => l.ok === l.requests && l.non2xx === 0 && l.errors === 0);
    console.log(
      `\n${allOk ? 'every request answered 200' : 'WARNING: some requests did not answer 2xx (see non-2xx / errors)'}; RSS idle after warm-up ${fmt(idleRssMB)} MB, peak RSS of the run ${fmt(process.resourceUsage().maxRSS / 1024)} MB; run took ${elapsedS.toFixed(0)} s`,
    );

    const json = {
      benchmark: 'http',
      httpBackend: fixture.server.backend,
      quick: QUICK,
      commit: gitCommit(REPO_ROOT),
      machine,
      versions: { vips: versions.vips, autocannon: AUTOCANNON_VERSION },
      env: {
        BGONE_INFERENCE_THREADS: process.env.BGONE_INFERENCE_THREADS ?? null,
        BGONE_NATIVE_CONCURRENCY: process.env.BGONE_NATIVE_CONCURRENCY ?? null,
        UV_THREADPOOL_SIZE: process.env.UV_THREADPOOL_SIZE ?? null,
      },
      settings: {
        photo: source,
        input: { width: image.width, height: image.height, bytes: image.bytes, jpegQuality: JPEG_QUALITY },
        multipartBytes: body.length,
        format: FORMAT,
        model: manifest.default,
        concurrencyLevels: CONCURRENCY_LEVELS,
        requestsPerLevel: CONCURRENCY_LEVELS.map(requestsFor),
        coreParallelCalls: CORE_PARALLEL_CALLS,
        coreSequentialCalls: CORE_SEQUENTIAL_CALLS,
        coreInFlight: CORE_IN_FLIGHT,
        queueLimit: QUEUE_LIMIT,
        requestTimeoutS: REQUEST_TIMEOUT_S,
        rssSampleMs: RSS_SAMPLE_MS,
        targetRatio: TARGET_RATIO,
        contendedCores: CONTENDED_CORES,
      },
      nativeModelLoadMs: modelLoadMs,
      warmup: { httpMs: check.ms, httpPngBytes: check.body.length, corePngBytes: warmCore.data.length, coreTimings: warmCore.timings },
      idleRssMB,
      bareInferenceMs: bareTimes,
      issue19,
      core: brackets,
      levels,
      batch,
      creditsRemaining: remaining,
      peakRssMB: process.resourceUsage().maxRSS / 1024,
      elapsedSeconds: elapsedS,
    };
    mkdirSync(path.dirname(resultsFile), { recursive: true });
    writeFileSync(resultsFile, `${JSON.stringify(json, null, 2)}\n`);
    console.log(`results written to ${path.relative(process.cwd(), resultsFile) || resultsFile}`);
  } finally {
    await fixture.close();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

main().then(
  // uWebSockets.js 20.30 has no App.close(): a closed listen socket may still leave its loop alive.
  () => process.exit(process.exitCode ?? 0),
  (err: unknown) => {
    console.error(err instanceof Error ? (err.stack ?? err.message) : err);
    process.exit(1);
  },
);
