// The measuring half of scripts/gpu-check.sh (which checks the machine first): the library on a
// 2 MP and a 12 MP image, made in memory from a test photo, on the chosen provider and on the CPU.
// Per image and provider: images/s at 1, 4 and 16 in flight, latency p50, GPU memory of this
// process (nvidia-smi), CPU ms outside inference (one in flight: the process's CPU time of a call
// less its inference's), and against the CPU's alpha with the same model (the GPU's default is the
// float variant): the largest difference, the share of pixels within 2/255, and the IoU of the
// masks at 0.5.
//
//   node scripts/gpu-bench.mjs [--provider webgpu|cuda[:N]|tensorrt[:N]] [--dry-run]
//
// --dry-run: the 2 MP image only, one call on the CPU, and one try of the provider, whose failure
// (no GPU here) is printed with its reason.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { inflateSync } from 'node:zlib';

const ROOT = new URL('..', import.meta.url).pathname;
const { values } = parseArgs({ options: { provider: { type: 'string', default: 'webgpu' }, 'dry-run': { type: 'boolean', default: false } } });
const provider = values.provider;
const dryRun = values['dry-run'];
const lib = await import(join(ROOT, 'dist/src/lib/index.js'));
const { floatVariant } = await import(join(ROOT, 'dist/src/lib/models.js'));
// The library reads no variable: the ONNX Runtime of the cuda route (BGONE_ORT_LIBRARY, set by
// gpu-check.sh) is named here, before the first load.
if (process.env.BGONE_ORT_LIBRARY) lib.configure({ onnxRuntimeLibrary: process.env.BGONE_ORT_LIBRARY });

/** The test photo made into JPEGs of about `megapixels` each (bench/helpers/make-inputs, in its own process). */
function makeInputs(megapixels) {
  const photo = join(ROOT, 'test/photos/images/gc_teddy.jpg');
  const out = execFileSync(process.execPath, [join(ROOT, 'dist/bench/helpers/make-inputs.js'), photo, megapixels.join(','), '90'], {
    maxBuffer: 256 * 2 ** 20,
  });
  return JSON.parse(out.toString()).images.map((i) => ({ label: `${i.megapixels} MP ${i.width}x${i.height}`, jpeg: Buffer.from(i.jpegBase64, 'base64') }));
}

/** The pixels of a one-band 8-bit PNG (the alpha the library writes with channels=alpha). */
function decodeGreyPng(png) {
  let pos = 8;
  let width = 0;
  let height = 0;
  const idat = [];
  while (pos < png.length) {
    const length = png.readUInt32BE(pos);
    const type = png.toString('latin1', pos + 4, pos + 8);
    const data = png.subarray(pos + 8, pos + 8 + length);
    if (type === 'IHDR') {
      width = data.readUInt32BE(0);
      height = data.readUInt32BE(4);
      if (data[8] !== 8 || data[9] !== 0) throw new Error(`expected an 8-bit greyscale PNG (depth ${data[8]}, colour type ${data[9]})`);
    } else if (type === 'IDAT') idat.push(data);
    pos += 12 + length;
  }
  const raw = inflateSync(Buffer.concat(idat));
  const out = Buffer.alloc(width * height);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (width + 1)];
    const row = raw.subarray(y * (width + 1) + 1, (y + 1) * (width + 1));
    for (let x = 0; x < width; x++) {
      const a = x > 0 ? out[y * width + x - 1] : 0;
      const b = y > 0 ? out[(y - 1) * width + x] : 0;
      const c = x > 0 && y > 0 ? out[(y - 1) * width + x - 1] : 0;
      let v = row[x];
      if (filter === 1) v += a;
      else if (filter === 2) v += b;
      else if (filter === 3) v += (a + b) >> 1;
      else if (filter === 4) {
        const p = a + b - c;
        const pa = Math.abs(p - a);
        const pb = Math.abs(p - b);
        const pc = Math.abs(p - c);
        v += pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
      }
      out[y * width + x] = v & 255;
    }
  }
  return { width, height, pixels: out };
}

function compare(alpha, reference) {
  let maxDiff = 0;
  let within = 0;
  let inter = 0;
  let union = 0;
  for (let i = 0; i < alpha.length; i++) {
    const d = Math.abs(alpha[i] - reference[i]);
    if (d > maxDiff) maxDiff = d;
    if (d <= 2) within++;
    const a = alpha[i] >= 128;
    const b = reference[i] >= 128;
    if (a && b) inter++;
    if (a || b) union++;
  }
  return { maxAbsDiff: maxDiff, within2: within / alpha.length, iou: union === 0 ? 1 : inter / union };
}

/** MiB of GPU memory this process holds, per nvidia-smi (null without it). */
function gpuMemoryMiB() {
  const run = spawnSync('nvidia-smi', ['--query-compute-apps=pid,used_memory', '--format=csv,noheader,nounits'], { encoding: 'utf8' });
  if (run.status !== 0) return null;
  for (const line of run.stdout.split('\n')) {
    const [pid, used] = line.split(',').map((s) => s.trim());
    if (Number(pid) === process.pid) return Number(used);
  }
  return 0;
}

const percentile = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];

/** The model the runs use: the one the GPU provider loaded, so that the CPU's reference runs the same graph. */
let runModel;
const opts = (extra) => (runModel === undefined ? extra : { ...extra, model: runModel });

async function measure(image, inFlight, calls) {
  const latencies = [];
  let next = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < calls) {
        next++;
        const t = performance.now();
        await lib.removeBackground(image.jpeg, opts({ format: 'jpg' }));
        latencies.push(performance.now() - t);
      }
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  return { imagesPerSecond: calls / seconds, p50: percentile(latencies, 50) };
}

/** One call alone: the process's CPU ms outside its inference, and the inference's ms. */
async function cpuOutside(image) {
  const before = process.cpuUsage();
  const result = await lib.removeBackground(image.jpeg, opts({ format: 'jpg' }));
  const used = process.cpuUsage(before);
  return { outside: (used.user + used.system) / 1000 - result.timings.inferenceCpu, inference: result.timings.inference };
}

async function alphaOf(image) {
  const result = await lib.removeBackground(image.jpeg, opts({ channels: 'alpha', format: 'png' }));
  return decodeGreyPng(result.data).pixels;
}

async function onProvider(name, images, counts) {
  lib.configure({ executionProvider: name });
  const t = performance.now();
  let model;
  try {
    model = await lib.preloadModel(runModel);
    runModel = model;
  } catch (err) {
    console.log(`\n== ${name}: cannot start\n${err.message}`);
    // The CPU's runs then use the graph the GPU provider would have run: the default's float variant.
    if (runModel === undefined && name !== 'cpu') runModel = floatVariant(lib.readManifest().default);
    return undefined;
  }
  const where = lib.inferenceProviders();
  console.log(
    `\n== ${name}: provider in use ${where.provider}${where.deviceId === null ? '' : `:${where.deviceId}`}${where.device === null ? '' : ` (${where.device})`}, model ${model}, loaded in ${Math.round(performance.now() - t)} ms, ${lib.concurrencyInUse()} jobs inside the native core at once`,
  );
  const rows = [];
  for (const image of images) {
    await lib.removeBackground(image.jpeg, opts({ format: 'jpg' })); // this size's first run
    const alone = await cpuOutside(image);
    const row = { image: image.label, 'inference ms': Math.round(alone.inference), 'CPU ms outside inference': Math.round(alone.outside) };
    for (const n of counts) {
      const m = await measure(image, n, Math.max(2 * n, dryRun ? 1 : 8));
      row[`img/s @${n}`] = m.imagesPerSecond.toFixed(2);
      row[`p50 ms @${n}`] = Math.round(m.p50);
    }
    row['GPU MiB'] = gpuMemoryMiB();
    row.alpha = await alphaOf(image);
    rows.push(row);
  }
  for (const row of rows) console.log(JSON.stringify({ ...row, alpha: undefined }));
  return rows;
}

const images = makeInputs(dryRun ? [2] : [2, 12]);
const counts = dryRun ? [1] : [1, 4, 16];
console.log(
  `node ${process.version}, provider ${provider}${dryRun ? ', dry run' : ''}, ONNX Runtime ${lib.librarySettings().onnxRuntimeLibrary ?? '(the default)'}; images: ${images.map((i) => i.label).join(', ')}`,
);
const gpu = await onProvider(provider, images, counts);
const cpu = await onProvider('cpu', images, dryRun ? [1] : counts);
if (gpu && cpu) {
  console.log(`\n== ${provider} against cpu (alpha)`);
  for (const [i, row] of gpu.entries()) {
    const c = compare(row.alpha, cpu[i].alpha);
    console.log(JSON.stringify({ image: row.image, maxAbsDiff: c.maxAbsDiff, within2of255: `${(100 * c.within2).toFixed(3)} %`, iou: c.iou.toFixed(5) }));
  }
} else if (!gpu) {
  console.log(`\n${provider} did not start: no comparison with the CPU.`);
}
if (!existsSync('/proc/driver/nvidia')) console.log('(no NVIDIA driver on this machine)');
process.exit(gpu || dryRun ? 0 : 1);
