/**
 * The proving run of `bgone models add` (src/cli/models.ts), in a process of its own, which is all it
 * may take down: `node prove-model.js REQUEST_JSON`, the request a ProveRequest. Its memory is
 * limited (RLIMIT_DATA) before the model loads, and its parent kills it past its time. It loads the
 * file as the family says and, on each test image, takes the model's matte (modelMatte: finite
 * everywhere, and not one value on an image with something in it), then runs one whole job on the
 * image's PNG. It writes one line of JSON: { ok: true, ms, runBytesPerPixel } or { ok: false,
 * problem }: runBytesPerPixel is ONNX Runtime's working memory for one run, its input and output
 * included, per pixel of the side's square: the most the memory grew during one of the model's
 * runs, the larger of the process's resident size's growth (Linux: VmHWM, reset through
 * /proc/self/clear_refs before each run) and the native core's blocks' (memoryGrowth). The process
 * runs nothing else.
 */
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { configure, removeBackground } from '../lib/index.js';
import { fullSide } from '../lib/job-plan.js';
import type { FamilyName } from '../lib/model-families.js';
import { acquireModel, modelContract } from '../lib/models.js';
import { native } from '../lib/native.js';

export interface ProveRequest {
  /** The ONNX file (the copy that will be installed). */
  path: string;
  family: FamilyName;
  dynamic: boolean;
  /** A fixed graph's side (its input's), as its manifest entry will record it. */
  side?: number;
  /** Its external data file (the copy that will be installed) and the name the graph reads it by. */
  data?: { path: string; file: string };
  /** RLIMIT_DATA for the process, in bytes. */
  memoryBytes: number;
  /** Seconds one run may take (the inferenceTimeout setting). */
  inferenceTimeout: number;
}

/** One test image: RGB pixels, side², and whether it has anything in it (a matte of one value there is refused). */
interface TestImage {
  name: string;
  rgb: Buffer;
  varied: boolean;
}

/** A small deterministic generator (xorshift32), so every proving run sees the same noise. */
function noise(seed: number): () => number {
  let x = seed;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
}

/**
 * The test images at `side`²: a photo-like scene (a shaded disc on a graded, grainy ground), the
 * same scene pale on white (a bright image with a subject), plain white, plain black, and noise.
 */
export function testImages(side: number): TestImage[] {
  const n = side * side;
  const scene = (bright: boolean) => {
    const rgb = Buffer.alloc(n * 3);
    const grain = noise(7);
    for (let y = 0; y < side; y++) {
      for (let x = 0; x < side; x++) {
        const dx = x / side - 0.5;
        const dy = y / side - 0.55;
        const inside = dx * dx + dy * dy < 0.3 * 0.3;
        const g = (grain() - 0.5) * 12;
        const i = (y * side + x) * 3;
        if (bright) {
          const v = inside ? 232 - 20 * (dx + 0.3) : 255;
          rgb[i] = rgb[i + 1] = rgb[i + 2] = Math.max(0, Math.min(255, Math.round(v + (inside ? g : 0))));
        } else {
          const ground = 150 + 80 * (y / side);
          rgb[i] = Math.max(0, Math.min(255, Math.round(inside ? 170 - 90 * (dx + 0.3) + g : ground + g)));
          rgb[i + 1] = Math.max(0, Math.min(255, Math.round(inside ? 60 + g : ground - 10 + g)));
          rgb[i + 2] = Math.max(0, Math.min(255, Math.round(inside ? 50 + g : ground - 30 + g)));
        }
      }
    }
    return rgb;
  };
  const random = noise(11);
  return [
    { name: 'a photo', rgb: scene(false), varied: true },
    { name: 'a bright photo', rgb: scene(true), varied: true },
    { name: 'white', rgb: Buffer.alloc(n * 3, 255), varied: false },
    { name: 'black', rgb: Buffer.alloc(n * 3, 0), varied: false },
    { name: 'noise', rgb: Buffer.from(Array.from({ length: n * 3 }, () => Math.floor(random() * 256))), varied: true },
  ];
}

/** What is wrong with one test image's matte, if anything. */
function matteProblem(matte: Float32Array, image: TestImage): string | undefined {
  let lo = Number.POSITIVE_INFINITY;
  let hi = Number.NEGATIVE_INFINITY;
  for (const v of matte) {
    if (!Number.isFinite(v)) return `its matte on ${image.name} has values that are not finite numbers`;
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  if (image.varied && !(hi - lo > 1e-3)) return `its matte on ${image.name} is ${lo} everywhere: it does not depend on the image`;
  return undefined;
}

/** The process's peak resident size from now on (Linux), or the native core's blocks' (elsewhere). */
const PROC_STATUS = '/proc/self/status';
function residentKb(field: 'VmRSS' | 'VmHWM'): number | undefined {
  try {
    const match = new RegExp(`${field}:\\s+(\\d+)`).exec(readFileSync(PROC_STATUS, 'utf8'));
    return match ? Number(match[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** A mark to measure the memory a run takes from: the native core's blocks in use, and the resident size with its peak reset (Linux). */
function memoryMark(): { blocks: number; rss: number | undefined } {
  const blocks = native().memoryStats().inUse;
  try {
    writeFileSync('/proc/self/clear_refs', '5');
    return { blocks, rss: residentKb('VmRSS') };
  } catch {
    return { blocks, rss: undefined }; // not Linux
  }
}

/**
 * How much the memory grew at its most since the mark: the larger of the resident size's growth
 * (what ONNX Runtime allocates outside the native core's blocks included) and the blocks' (which
 * hold the run's large buffers, counted whether or not their pages were already resident).
 */
function memoryGrowth(mark: { blocks: number; rss: number | undefined }): number {
  const blocks = native().memoryStats().peak - mark.blocks;
  const rss = mark.rss === undefined ? 0 : (residentKb('VmHWM') ?? mark.rss) - mark.rss;
  return Math.max(blocks, rss);
}

async function prove(request: ProveRequest): Promise<{ ok: true; ms: number; runBytesPerPixel: number } | { ok: false; problem: string }> {
  native().limitMemory(request.memoryBytes);
  // A models folder of its own, listing the file alone: the job below runs it as a served model is run.
  const dir = mkdtempSync(join(tmpdir(), 'bgone-prove-'));
  try {
    symlinkSync(request.path, join(dir, 'proving.onnx'));
    // ONNX Runtime reads external data beside the path it opens: the link's folder.
    if (request.data) symlinkSync(request.data.path, join(dir, request.data.file));
    const entry = {
      file: 'proving.onnx',
      sha256: '',
      bytes: 0,
      license: '',
      family: request.family,
      ...(request.dynamic ? { dynamic: true } : { side: request.side }),
    };
    writeFileSync(join(dir, 'manifest.json'), JSON.stringify({ default: 'proving', models: { proving: entry } }));
    configure({ modelsDir: dir, inferenceTimeout: request.inferenceTimeout });
    const contract = modelContract(entry);
    const side = fullSide(contract);
    const lease = await acquireModel('proving');
    let ms = 0;
    let runBytes = 0;
    try {
      for (const image of testImages(side)) {
        let matte: Float32Array;
        try {
          const before = memoryMark();
          matte = native().modelMatte(lease.handle, image.rgb, side, side);
          runBytes = Math.max(runBytes, memoryGrowth(before));
        } catch (err) {
          return { ok: false, problem: `it failed on ${image.name}: ${(err as Error).message}` };
        }
        const problem = matteProblem(matte, image);
        if (problem) return { ok: false, problem };
        try {
          const result = await removeBackground(native().encodePng(image.rgb, side, side, 3, 1), { model: 'proving', channels: 'alpha' });
          ms = Math.max(ms, result.timings.inference);
        } catch (err) {
          const e = err as { code?: string; message: string; detail?: string };
          if (e.code !== 'foreground_not_found')
            return { ok: false, problem: `a job on ${image.name} failed: ${e.message}${e.detail ? ` (${e.detail})` : ''}` };
        }
      }
    } finally {
      lease.release();
    }
    return { ok: true, ms, runBytesPerPixel: Math.ceil(runBytes / (side * side)) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const arg = process.argv[2];
if (arg !== undefined) {
  prove(JSON.parse(arg) as ProveRequest).then(
    (answer) => {
      process.stdout.write(`${JSON.stringify(answer)}\n`);
      process.exit(0);
    },
    (err: unknown) => {
      process.stdout.write(`${JSON.stringify({ ok: false, problem: (err as Error).message ?? String(err) })}\n`);
      process.exit(0);
    },
  );
}
