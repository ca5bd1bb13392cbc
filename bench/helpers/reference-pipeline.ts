/**
 * The reference pipeline of bench/pipeline.ts: what @imgly/background-removal-node 1.4.5 does with
 * one JPEG, rewritten by us from its described behaviour, in its own process so that its peak RSS
 * (maxRSS) is its own. Our code, not theirs:
 *  - an onnxruntime-node session on the published model (`medium-fp16`), created from the model's
 *    bytes in memory as they do (they load it as a blob), with { graphOptimizationLevel: 'all',
 *    executionMode: 'parallel' } and otherwise onnxruntime-node's defaults;
 *  - sharp decodes the JPEG to raw RGBA;
 *  - a plain JS bilinear resample stretches it to 1024x1024 (aspect ratio ignored), normalised
 *    (v - 128) / 256 into planar float32 NCHW;
 *  - session.run(feeds) with no fetch list: all 12 outputs come back;
 *  - 'output' x 255 to uint8, bilinear-resized in JS back to the image's size, written into the
 *    alpha channel of the RGBA image, which sharp encodes as PNG.
 * Times are from the JPEG's bytes to the PNG's bytes (the session is made once, before).
 *
 *   node dist/bench/helpers/reference-pipeline.js [--model medium-fp16] [--runs 2] [--warmup 1] < photo.jpg
 *     prints one JSON object on stdout: load time, idle RSS after load, warmup and run times (ms),
 *     output size, peak RSS.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import * as ort from 'onnxruntime-node';
import sharp from 'sharp';
import { loadLibraryConfig } from '../../src/config/config.js';
import { modelContract, readManifest } from '../../src/lib/models.js';
import { librarySettings, mergeSettings, replaceSettings } from '../../src/lib/settings.js';
import { ORIGINAL_MODEL } from './report.js';

const rssMB = (): number => process.memoryUsage().rss / 2 ** 20;
const maxRssMB = (): number => process.resourceUsage().maxRSS / 1024;

function parseArgs(argv: string[]): { model: string; runs: number; warmup: number } {
  const args = { model: ORIGINAL_MODEL, runs: 2, warmup: 1 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = argv[++i];
    if (v === undefined) throw new Error(`${a} needs a value`);
    if (a === '--model') args.model = v;
    else if (a === '--runs') args.runs = Number(v);
    else if (a === '--warmup') args.warmup = Number(v);
    else throw new Error(`unknown argument ${a}`);
  }
  if (!Number.isInteger(args.runs) || args.runs < 1) throw new Error('--runs must be a positive integer');
  if (!Number.isInteger(args.warmup) || args.warmup < 0) throw new Error('--warmup must be a non-negative integer');
  return args;
}

async function readStdin(): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/**
 * Bilinear resample of an interleaved uint8 image (pixel centres aligned, edges clamped), rounded
 * back to uint8.
 */
function resizeBilinear(src: Uint8Array, sw: number, sh: number, channels: number, dw: number, dh: number): Uint8Array {
  const dst = new Uint8Array(dw * dh * channels);
  const scaleX = sw / dw;
  const scaleY = sh / dh;
  const x0s = new Int32Array(dw);
  const x1s = new Int32Array(dw);
  const wxs = new Float32Array(dw);
  for (let x = 0; x < dw; x++) {
    const fx = Math.min(Math.max((x + 0.5) * scaleX - 0.5, 0), sw - 1);
    const x0 = Math.floor(fx);
    x0s[x] = x0 * channels;
    x1s[x] = Math.min(x0 + 1, sw - 1) * channels;
    wxs[x] = fx - x0;
  }
  for (let y = 0; y < dh; y++) {
    const fy = Math.min(Math.max((y + 0.5) * scaleY - 0.5, 0), sh - 1);
    const y0 = Math.floor(fy);
    const wy = fy - y0;
    const row0 = y0 * sw * channels;
    const row1 = Math.min(y0 + 1, sh - 1) * sw * channels;
    let o = y * dw * channels;
    for (let x = 0; x < dw; x++) {
      const wx = wxs[x]!;
      const a = row0 + x0s[x]!;
      const b = row0 + x1s[x]!;
      const c = row1 + x0s[x]!;
      const d = row1 + x1s[x]!;
      for (let ch = 0; ch < channels; ch++) {
        const top = src[a + ch]! + (src[b + ch]! - src[a + ch]!) * wx;
        const bottom = src[c + ch]! + (src[d + ch]! - src[c + ch]!) * wx;
        dst[o++] = Math.round(top + (bottom - top) * wy);
      }
    }
  }
  return dst;
}

/** The reference pipeline on one model: a session made from the model's bytes, and its removeBackground. */
export async function createReferencePipeline(model: string): Promise<{
  removeBackground: (input: Buffer) => Promise<{ png: Buffer; width: number; height: number }>;
  release: () => Promise<void>;
}> {
  const entry = readManifest().models[model];
  if (!entry) throw new Error(`unknown model ${model}`);
  const modelBytes = new Uint8Array(readFileSync(join(librarySettings().modelsDir, entry.file)));
  const session = await ort.InferenceSession.create(modelBytes, { graphOptimizationLevel: 'all', executionMode: 'parallel' });
  const contract = modelContract(entry);
  const side = { width: contract.width, height: contract.height };
  const [meanR, meanG, meanB] = contract.mean;
  const [stdR, stdG, stdB] = contract.std;
  const inputName = session.inputNames[0]!;
  const outputName = session.outputNames[contract.outputIndex]!;

  const removeBackground = async (input: Buffer): Promise<{ png: Buffer; width: number; height: number }> => {
    const { data: rgba, info } = await sharp(input).ensureAlpha().raw().toBuffer({ resolveWithObject: true });
    const { width, height } = info;
    const small = resizeBilinear(rgba, width, height, 4, side.width, side.height);
    const plane = side.width * side.height;
    const tensor = new Float32Array(3 * plane);
    for (let i = 0; i < plane; i++) {
      tensor[i] = (small[4 * i]! - meanR) / stdR;
      tensor[plane + i] = (small[4 * i + 1]! - meanG) / stdG;
      tensor[2 * plane + i] = (small[4 * i + 2]! - meanB) / stdB;
    }
    const outputs = await session.run({ [inputName]: new ort.Tensor('float32', tensor, [1, 3, side.height, side.width]) });
    const matte = outputs[outputName];
    if (!matte) throw new Error(`no output ${outputName}`);
    const values = matte.data as Float32Array;
    const mask = new Uint8Array(plane);
    for (let i = 0; i < plane; i++) mask[i] = Math.min(255, Math.max(0, Math.round(values[i]! * 255)));
    for (const value of Object.values(outputs)) value.dispose();
    const alpha = resizeBilinear(mask, side.width, side.height, 1, width, height);
    for (let i = 0, n = width * height; i < n; i++) rgba[4 * i + 3] = alpha[i]!;
    const png = await sharp(rgba, { raw: { width, height, channels: 4 } })
      .png()
      .toBuffer();
    return { png, width, height };
  };

  return { removeBackground, release: () => session.release() };
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  replaceSettings(mergeSettings(loadLibraryConfig())); // BGONE_MODELS_DIR, as the other children read it
  const jpeg = await readStdin();
  if (jpeg.length === 0) throw new Error('no JPEG on stdin');

  const loadStart = performance.now();
  const { removeBackground, release } = await createReferencePipeline(args.model);
  const loadMs = performance.now() - loadStart;
  await sleep(500);
  const idleRssMB = rssMB();
  const entry = readManifest().models[args.model]!;

  const timed = async (): Promise<{ ms: number; bytes: number; width: number; height: number }> => {
    const start = performance.now();
    const out = await removeBackground(jpeg);
    return { ms: performance.now() - start, bytes: out.png.length, width: out.width, height: out.height };
  };
  const warmupMs: number[] = [];
  for (let i = 0; i < args.warmup; i++) warmupMs.push((await timed()).ms);
  const times: number[] = [];
  let last: Awaited<ReturnType<typeof timed>> | undefined;
  for (let i = 0; i < args.runs; i++) {
    last = await timed();
    times.push(last.ms);
  }
  process.stdout.write(
    JSON.stringify({
      model: args.model,
      file: entry.file,
      onnxruntime: ort.env.versions.common,
      sharp: { sharp: sharp.versions.sharp, vips: sharp.versions.vips },
      loadMs,
      idleRssMB,
      warmupMs,
      times,
      output: last ? { width: last.width, height: last.height, bytes: last.bytes } : null,
      maxRssMB: maxRssMB(),
    }),
  );
  await release();
}

// Run as a child of bench/pipeline.ts; bench/quality.ts imports createReferencePipeline.
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().catch((err: unknown) => {
    process.stderr.write(`reference-pipeline: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  });
}
