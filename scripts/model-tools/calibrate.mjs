// Measures the activation ranges that quantize.mjs needs: runs the float32 model over photos with
// every tensor of the quantization plan exposed as an output, and records each tensor's range.
// A developer's step, not an install step: its result, models/calibration/<model>.json, is committed
// (a few KB of numbers we measured), so that every install quantizes identically and offline.
//
//   node scripts/model-tools/calibrate.mjs <float32 model> <out.json> <photo>...
//
// Per tensor it keeps the mean over photos of each photo's 0.01 % and 99.99 % points: a global
// min/max lets one outlier pixel stretch a whole layer's scale and costs edge detail.
import { writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { basename } from 'node:path';
import { loadModel, onnx } from './onnx-graph.mjs';
import { foldRelu, logitTensors, quantizedTensors } from './quantize-plan.mjs';

const require = createRequire(import.meta.url);
const ort = require('onnxruntime-node');
const sharp = require('sharp');

const TAIL = 1e-4;

/** The value at quantile q of a Float32Array, from a 4096-bin histogram between its min and max. */
function tails(data) {
  let min = Number.POSITIVE_INFINITY;
  let max = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < data.length; i++) {
    const v = data[i];
    if (v < min) min = v;
    if (v > max) max = v;
  }
  if (max <= min) return [min, max, min, max];
  const bins = new Float64Array(4096);
  const k = (bins.length - 1) / (max - min);
  for (let i = 0; i < data.length; i++) bins[Math.floor((data[i] - min) * k)]++;
  const cut = data.length * TAIL;
  let lo = 0;
  for (let seen = 0; lo < bins.length && seen + bins[lo] <= cut; lo++) seen += bins[lo];
  let hi = bins.length - 1;
  for (let seen = 0; hi > 0 && seen + bins[hi] <= cut; hi--) seen += bins[hi];
  return [min, max, min + lo / k, min + (hi + 1) / k];
}

export async function calibrate(modelPath, photos, size = 1024) {
  const model = loadModel(modelPath);
  const folded = onnx.ModelProto.decode(onnx.ModelProto.encode(model).finish());
  const keepFloat = logitTensors(folded.graph);
  foldRelu(folded.graph);
  const names = quantizedTensors(folded.graph, { keepFloat }).map((p) => p.name);
  const exposed = names.filter((n) => !model.graph.input.some((i) => i.name === n));
  for (const name of exposed) model.graph.output.push(onnx.ValueInfoProto.create({ name, type: { tensorType: { elemType: 1 } } }));
  const session = await ort.InferenceSession.create(Buffer.from(onnx.ModelProto.encode(model).finish()), { graphOptimizationLevel: 'basic' });
  const sums = new Map(names.map((n) => [n, { lo: 0, hi: 0, min: Number.POSITIVE_INFINITY, max: Number.NEGATIVE_INFINITY }]));
  for (const photo of photos) {
    const { data } = await sharp(photo).removeAlpha().resize(size, size, { fit: 'fill', kernel: 'cubic' }).raw().toBuffer({ resolveWithObject: true });
    const plane = size * size;
    const input = new Float32Array(3 * plane);
    for (let i = 0; i < plane; i++) for (let c = 0; c < 3; c++) input[c * plane + i] = (data[i * 3 + c] - 128) / 256;
    const outputs = await session.run({ input: new ort.Tensor('float32', input, [1, 3, size, size]) }, exposed);
    outputs.input = { data: input };
    for (const name of names) {
      const [min, max, lo, hi] = tails(outputs[name].data);
      const s = sums.get(name);
      s.lo += lo;
      s.hi += hi;
      s.min = Math.min(s.min, min);
      s.max = Math.max(s.max, max);
    }
    console.log(`calibrated on ${basename(photo)}`);
  }
  const ranges = {};
  for (const [name, s] of sums) ranges[name] = [s.lo / photos.length, s.hi / photos.length, s.min, s.max];
  return ranges;
}

if (process.argv[1] && basename(process.argv[1]) === 'calibrate.mjs') {
  const [modelPath, out, ...photos] = process.argv.slice(2);
  const ranges = await calibrate(modelPath, photos);
  writeFileSync(out, `${JSON.stringify({ photos: photos.map((p) => basename(p)), tail: TAIL, ranges }, null, 1)}\n`);
  console.log(`${Object.keys(ranges).length} tensor ranges -> ${out}`);
}
