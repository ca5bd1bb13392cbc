/**
 * Tiny ONNX graphs with a model family's input and output contract (src/lib/model-families.ts), whose
 * matte is a known function of the input: out = (x0 * k0 + x1 * k1) + x2 * k2 + bias, each op in
 * float32 (Split, Mul, Add: exact IEEE operations that `expectedMatte` repeats with Math.fround), and
 * decoy outputs after it (each a single channel), so that a wrong output choice shows.
 */
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
// @ts-expect-error: plain ESM scripts without type declarations
import { FLOAT, makeTensor, onnx } from '../../scripts/model-tools/onnx-graph.mjs';
import type { ModelFamily } from '../../src/lib/model-families.js';

export interface FamilyGraph {
  /** Input name, as the family's reference export names it. */
  inputName: string;
  /** Fixed side, or 'symbolic' (height and width). */
  side: number | 'symbolic';
  batch: number | 'symbolic';
  /** Per channel weight and the bias of the matte's function. */
  k: [number, number, number];
  bias: number;
  /** Decoy outputs after the matte. */
  decoys: number;
  /** Element type of the input (1: float32). */
  elemType?: number;
  /** Channels of the matte output (1 for a family's contract). */
  matteChannels?: number;
  /** Weights of this many bytes behind one more output (never fetched): a session that holds memory. */
  ballastBytes?: number;
  /**
   * The matte's weights (k and the bias) kept in a file of this name beside the graph's, as large
   * exports keep theirs (data_location EXTERNAL, with location, offset and length keys).
   */
  externalData?: string;
}

const dim = (d: number | string) => (typeof d === 'number' ? { dimValue: d } : { dimParam: d });

function valueInfo(name: string, dims: Array<number | string>, elemType = FLOAT) {
  return onnx.ValueInfoProto.create({ name, type: { tensorType: { elemType, shape: { dim: dims.map(dim) } } } });
}

/** Writes the graph to `path` (and its external data beside it, with `externalData`). */
export function writeFamilyGraph(path: string, g: FamilyGraph): void {
  const b = g.batch === 'symbolic' ? 'batch_size' : g.batch;
  const [h, w] = g.side === 'symbolic' ? ['height', 'width'] : [g.side, g.side];
  const scalar = (name: string, v: number) => makeTensor(name, FLOAT, [], Float32Array.of(v));
  const node = (opType: string, input: string[], output: string[], attribute: unknown[] = []) =>
    onnx.NodeProto.create({ opType, input, output, name: output[0], attribute });
  const splitSizes = makeTensor('split_sizes', 7, [3], BigInt64Array.of(1n, 1n, 1n));
  const axis = onnx.AttributeProto.create({ name: 'axis', type: onnx.AttributeProto.AttributeType.INT, i: 1 });
  const nodes = [
    node('Split', [g.inputName, 'split_sizes'], ['x0', 'x1', 'x2'], [axis]),
    node('Mul', ['x0', 'k0'], ['m0']),
    node('Mul', ['x1', 'k1'], ['m1']),
    node('Mul', ['x2', 'k2'], ['m2']),
    node('Add', ['m0', 'm1'], ['s01']),
    node('Add', ['s01', 'm2'], ['s012']),
    node('Add', ['s012', 'bias'], [g.matteChannels === 3 ? 'single' : 'matte']),
    ...(g.matteChannels === 3 ? [node('Concat', ['single', 'single', 'single'], ['matte'], [axis])] : []),
  ];
  // Decoys: the channels themselves (x0, x1, x2 in turn), plainly not the matte.
  const decoys = Array.from({ length: g.decoys }, (_, i) => `decoy${i}`);
  decoys.forEach((name, i) => {
    nodes.push(node('Identity', [`x${i % 3}`], [name]));
  });
  const initializer = [splitSizes, scalar('k0', g.k[0]), scalar('k1', g.k[1]), scalar('k2', g.k[2]), scalar('bias', g.bias)];
  const outputs = [valueInfo('matte', [b, g.matteChannels ?? 1, h, w]), ...decoys.map((name) => valueInfo(name, [b, 1, h, w]))];
  if (g.ballastBytes) {
    // The image's channel means, times a [3, n] matrix: n values out, whatever the image's size.
    const n = Math.ceil(g.ballastBytes / 12);
    initializer.push(makeTensor('ballast_w', FLOAT, [3, n], new Float32Array(3 * n).fill(0.5)));
    initializer.push(makeTensor('ballast_shape', 7, [2], BigInt64Array.of(1n, 3n)));
    nodes.push(node('GlobalAveragePool', [g.inputName], ['ballast_mean']));
    nodes.push(node('Reshape', ['ballast_mean', 'ballast_shape'], ['ballast_row']));
    nodes.push(node('MatMul', ['ballast_row', 'ballast_w'], ['ballast']));
    outputs.push(valueInfo('ballast', [1, n]));
  }
  if (g.externalData) {
    // Each weight's raw bytes move to the data file, at the offset it starts at there.
    const chunks: Buffer[] = [];
    let offset = 0;
    for (const t of initializer.slice(1, 5)) {
      const raw = Buffer.from(t.rawData);
      t.rawData = new Uint8Array(0);
      t.dataLocation = onnx.TensorProto.DataLocation.EXTERNAL;
      t.externalData = [
        { key: 'location', value: g.externalData },
        { key: 'offset', value: String(offset) },
        { key: 'length', value: String(raw.length) },
      ];
      chunks.push(raw);
      offset += raw.length;
    }
    writeFileSync(join(dirname(path), g.externalData), Buffer.concat(chunks));
  }
  const graph = onnx.GraphProto.create({
    name: 'family',
    node: nodes,
    initializer,
    input: [valueInfo(g.inputName, [b, 3, h, w], g.elemType ?? FLOAT)],
    output: outputs,
  });
  const model = onnx.ModelProto.create({ irVersion: 8, opsetImport: [{ domain: '', version: 15 }], graph });
  writeFileSync(path, onnx.ModelProto.encode(model).finish());
}

const f = Math.fround;

/**
 * The alpha bytes bgone must give for `rgb` (the model's input, side², 3 bands) through a graph of
 * writeFamilyGraph: the native core's normalisation ((v - mean) / std in float32), the graph's
 * function, the family's matte transform, the clamp to 0..1 and the byte (v * 255 + 0.5, truncated).
 */
export function expectedMatte(rgb: Uint8Array, g: FamilyGraph, family: ModelFamily, mean: number[], std: number[]): Uint8Array {
  const n = rgb.length / 3;
  const v = new Float64Array(n);
  const [k0, k1, k2] = g.k.map(f) as [number, number, number];
  for (let i = 0; i < n; i++) {
    const x = [0, 1, 2].map((c) => f(f(rgb[i * 3 + c]! - f(mean[c]!)) / f(std[c]!)));
    v[i] = f(f(f(f(x[0]! * k0) + f(x[1]! * k1)) + f(x[2]! * k2)) + f(g.bias));
  }
  if (family.output.matte === 'sigmoid') for (let i = 0; i < n; i++) v[i] = f(f(1) / f(1 + f(Math.exp(-v[i]!))));
  if (family.output.matte === 'min-max') {
    let lo = v[0]!;
    let hi = v[0]!;
    for (const x of v) {
      lo = Math.min(lo, x);
      hi = Math.max(hi, x);
    }
    const scale = f(1 / f(hi - lo));
    for (let i = 0; i < n; i++) v[i] = f(f(v[i]! - lo) * scale);
  }
  return Uint8Array.from(v, (x) => Math.floor(f(f(Math.min(Math.max(x, 0), 1) * 255) + 0.5)));
}
