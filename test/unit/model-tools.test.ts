/**
 * The install-time model tooling (scripts/model-tools) on tiny generated graphs with the published
 * ISNet's shapes of structure: float16 weights behind casts, Conv+Relu, MaxPool, a Resize whose size
 * was a constant at export, Concat, and a sigmoid output. Each transform is checked by running the
 * graph before and after it in ONNX Runtime (onnxruntime-node) on the same input.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { afterAll, describe, expect, it } from 'vitest';
// @ts-expect-error: plain ESM scripts without type declarations
import { calibrate } from '../../scripts/model-tools/calibrate.mjs';
// @ts-expect-error: plain ESM scripts without type declarations
import { FLOAT, FLOAT16, INT8, keepOutputs, makeTensor, onnx, symbolicSpatialInput } from '../../scripts/model-tools/onnx-graph.mjs';
// @ts-expect-error: plain ESM scripts without type declarations
import { activationParams, quantizeStatic } from '../../scripts/model-tools/quantize.mjs';
// @ts-expect-error: plain ESM scripts without type declarations
import { convertToFloat32 } from '../../scripts/model-tools/to-fp32.mjs';
import { photoPath } from '../helpers/paths.js';

const dir = mkdtempSync(join(tmpdir(), 'bgone-model-tools-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Deterministic pseudo-random numbers in [-1, 1). */
function noise(n: number, seed: number): Float32Array {
  const out = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = s / 2 ** 31 - 1;
  }
  return out;
}

function toHalf(values: Float32Array): Uint16Array {
  const f = new Float32Array(1);
  const u = new Uint32Array(f.buffer);
  return Uint16Array.from(values, (v) => {
    f[0] = v;
    const x = u[0]!;
    const sign = (x >>> 16) & 0x8000;
    const exp = ((x >>> 23) & 0xff) - 127 + 15;
    if (exp <= 0) return sign;
    return sign | (exp << 10) | ((x >>> 13) & 0x3ff);
  });
}

type Node = { op: string; inputs: string[]; outputs: string[]; attrs?: Record<string, number | number[] | string> };

function attr(name: string, value: number | number[] | string) {
  const T = onnx.AttributeProto.AttributeType;
  if (typeof value === 'string') return onnx.AttributeProto.create({ name, type: T.STRING, s: Buffer.from(value) });
  if (Array.isArray(value)) return onnx.AttributeProto.create({ name, type: T.INTS, ints: value });
  return onnx.AttributeProto.create({ name, type: T.INT, i: value });
}

const constantNode = (name: string, values: bigint[]): Node & { tensor: unknown } => ({
  op: 'Constant',
  inputs: [],
  outputs: [name],
  tensor: makeTensor(`${name}_value`, 7, [values.length], BigInt64Array.from(values)),
});

/** A small ISNet-like graph at a fixed `side`; half: float16 weights and casts, as published. */
function buildModel(side: number, half: boolean) {
  const initializers: unknown[] = [];
  const weight = (name: string, dims: number[], seed: number, scale: number) => {
    const values = noise(
      dims.reduce((a, b) => a * b, 1),
      seed,
    ).map((v) => v * scale);
    initializers.push(half ? makeTensor(name, FLOAT16, dims, toHalf(values)) : makeTensor(name, FLOAT, dims, values));
  };
  weight('w1', [8, 3, 3, 3], 1, 0.4);
  weight('b1', [8], 2, 0.1);
  weight('w2', [8, 8, 3, 3], 3, 0.2);
  weight('b2', [8], 4, 0.1);
  weight('w3', [1, 16, 1, 1], 5, 0.5);
  weight('b3', [1], 6, 0.1);
  const x = half ? 'x16' : 'input';
  const nodes: Array<Node & { tensor?: unknown }> = [
    ...(half ? [{ op: 'Cast', inputs: ['input'], outputs: ['x16'], attrs: { to: FLOAT16 } }] : []),
    { op: 'Conv', inputs: [x, 'w1', 'b1'], outputs: ['c1'], attrs: { pads: [1, 1, 1, 1] } },
    { op: 'Relu', inputs: ['c1'], outputs: ['r1'] },
    { op: 'MaxPool', inputs: ['r1'], outputs: ['p1'], attrs: { kernel_shape: [2, 2], strides: [2, 2], ceil_mode: 1 } },
    { op: 'Conv', inputs: ['p1', 'w2', 'b2'], outputs: ['c2'], attrs: { pads: [1, 1, 1, 1] } },
    { op: 'Relu', inputs: ['c2'], outputs: ['r2'] },
    // The exported decoder: resize to a size that was a constant at export (Shape[0:2] ++ [H, W]).
    { op: 'Shape', inputs: ['r2'], outputs: ['shape'] },
    constantNode('zero', [0n]),
    constantNode('two', [2n]),
    { op: 'Slice', inputs: ['shape', 'zero', 'two'], outputs: ['nc'] },
    constantNode('hw', [BigInt(side), BigInt(side)]),
    { op: 'Concat', inputs: ['nc', 'hw'], outputs: ['sizes'], attrs: { axis: 0 } },
    ...(half ? [{ op: 'Cast', inputs: ['r2'], outputs: ['r2f'], attrs: { to: FLOAT } }] : []),
    { op: 'Resize', inputs: [half ? 'r2f' : 'r2', '', '', 'sizes'], outputs: ['up'], attrs: { mode: 'linear' } },
    ...(half ? [{ op: 'Cast', inputs: ['up'], outputs: ['up16'], attrs: { to: FLOAT16 } }] : []),
    { op: 'Concat', inputs: ['r1', half ? 'up16' : 'up'], outputs: ['cat'], attrs: { axis: 1 } },
    { op: 'Conv', inputs: ['cat', 'w3', 'b3'], outputs: ['logit'] },
    { op: 'Sigmoid', inputs: ['logit'], outputs: [half ? 'out16' : 'output'] },
    ...(half ? [{ op: 'Cast', inputs: ['out16'], outputs: ['output'], attrs: { to: FLOAT } }] : []),
    // A side output, as the published model has 11 of them.
    { op: 'Sigmoid', inputs: ['c2'], outputs: [half ? 'side16' : 'side'] },
    ...(half ? [{ op: 'Cast', inputs: ['side16'], outputs: ['side'], attrs: { to: FLOAT } }] : []),
  ];
  const valueInfo = (name: string, dims: number[]) =>
    onnx.ValueInfoProto.create({ name, type: { tensorType: { elemType: FLOAT, shape: { dim: dims.map((d) => ({ dimValue: d })) } } } });
  const graph = onnx.GraphProto.create({
    name: 'tiny',
    node: nodes.map((n) =>
      onnx.NodeProto.create({
        opType: n.op,
        input: n.inputs,
        output: n.outputs,
        name: n.outputs[0],
        attribute: n.tensor
          ? [onnx.AttributeProto.create({ name: 'value', type: onnx.AttributeProto.AttributeType.TENSOR, t: n.tensor })]
          : Object.entries(n.attrs ?? {}).map(([k, v]) => attr(k, v)),
      }),
    ),
    initializer: initializers,
    input: [valueInfo('input', [1, 3, side, side])],
    output: [valueInfo('output', [1, 1, side, side]), valueInfo('side', [1, 8, side / 2, side / 2])],
  });
  return onnx.ModelProto.create({ irVersion: 8, opsetImport: [{ domain: '', version: 15 }], graph });
}

const encode = (model: unknown): Uint8Array => onnx.ModelProto.encode(model).finish();
const decodeModel = (bytes: Uint8Array) => onnx.ModelProto.decode(bytes);

async function run(model: unknown, input: Float32Array, side: number): Promise<Float32Array> {
  const session = await ort.InferenceSession.create(encode(model));
  const out = await session.run({ input: new ort.Tensor('float32', input, [1, 3, side, side]) }, ['output']);
  await session.release();
  return out.output!.data as Float32Array;
}

const input = (side: number) => noise(3 * side * side, 42).map((v) => v / 2);
const maxDiff = (a: Float32Array, b: Float32Array) => a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i]!)), 0);
const ops = (model: { graph: { node: Array<{ opType: string }> } }) => model.graph.node.map((n) => n.opType);

describe('convertToFloat32 and keepOutputs', () => {
  it('float16 weights become float32, every cast goes, the side output and its nodes go, the answer stays', async () => {
    const published = buildModel(32, true);
    const before = await run(published, input(32), 32);
    const model = decodeModel(encode(published));
    convertToFloat32(model.graph);
    keepOutputs(model.graph, ['output']);
    expect(ops(model)).not.toContain('Cast');
    expect(model.graph.output.map((o: { name: string }) => o.name)).toEqual(['output']);
    expect(model.graph.node.filter((n: { opType: string }) => n.opType === 'Sigmoid')).toHaveLength(1);
    expect(model.graph.initializer.every((t: { dataType: number }) => t.dataType === FLOAT)).toBe(true);
    // The float16 graph rounds its activations to float16 between ops; float32 does not.
    expect(maxDiff(before, await run(model, input(32), 32))).toBeLessThan(5e-3);
  });
});

describe('symbolicSpatialInput', () => {
  it('the exported resize constant becomes the input size / 2^k: the model runs at other sizes', async () => {
    const model = buildModel(32, false);
    keepOutputs(model.graph, ['output']);
    const fixed = await run(model, input(32), 32);
    expect(symbolicSpatialInput(model.graph, 'input')).toBe(1);
    expect(maxDiff(fixed, await run(model, input(32), 32))).toBeLessThan(1e-6);
    const larger = await run(model, input(64), 64);
    expect(larger).toHaveLength(64 * 64);
    // Before the rewrite, a 64² input fails on the constant 32² resize.
    const original = buildModel(32, false);
    keepOutputs(original.graph, ['output']);
    await expect(run(original, input(64), 64)).rejects.toThrow();
  });
});

describe('activationParams', () => {
  it.each([
    [-1, 1, 2 / 255, 128],
    [0, 10, 10 / 255, 0],
    [0.5, 2, 2 / 255, 0], // the range always holds 0 (zero padding must be exact)
    [-3, -1, 3 / 255, 255],
  ])('[%d, %d]', (min, max, scale, zeroPoint) => {
    const p = activationParams(min, max);
    expect(p.scale).toBeCloseTo(scale, 9);
    expect(p.zeroPoint).toBe(zeroPoint);
  });
});

describe('calibrate and quantizeStatic', () => {
  it('per-channel int8 weights and calibrated uint8 activations: close to the float answer, Relu folded', async () => {
    const model = buildModel(32, false);
    keepOutputs(model.graph, ['output']);
    const floatPath = join(dir, 'tiny-float.onnx');
    writeFileSync(floatPath, encode(model));
    const photos = ['gc_book.jpg', 'davis_camel_00045.jpg'].map(photoPath);
    const measured: Record<string, number[]> = await calibrate(floatPath, photos, 32);
    // Every float activation between int8-capable ops has a range; the logits (last Conv) do not.
    expect(Object.keys(measured).sort()).toEqual(['cat', 'input', 'p1', 'r1', 'r2', 'up'].sort());
    for (const [lo, hi, min, max] of Object.values(measured)) expect(min! <= lo! && lo! <= hi! && hi! <= max!).toBe(true);

    const quantized = decodeModel(encode(model));
    const ranges = Object.fromEntries(Object.entries(measured).map(([k, r]) => [k, [r[0], r[1]]]));
    quantizeStatic(quantized, ranges);
    expect(ops(quantized)).not.toContain('Relu');
    expect(ops(quantized).filter((o: string) => o === 'QuantizeLinear')).toHaveLength(6);
    const weights = quantized.graph.initializer.filter((t: { name: string }) => /^w\d_q$/.test(t.name));
    expect(weights.map((t: { dataType: number }) => t.dataType)).toEqual([INT8, INT8, INT8]);
    const floatOut = await run(model, input(32), 32);
    const int8Out = await run(quantized, input(32), 32);
    const meanDiff = floatOut.reduce((a, v, i) => a + Math.abs(v - int8Out[i]!), 0) / floatOut.length;
    // The input is noise, not a photo like the calibration set: the bound is loose but far below
    // what a wrong scale, zero point or weight layout gives (0.1 and more).
    expect(meanDiff).toBeLessThan(0.02);
    expect(maxDiff(floatOut, int8Out)).toBeLessThan(0.1);
    // Quantization changed something: the test would catch a transform that did nothing.
    expect(maxDiff(floatOut, int8Out)).toBeGreaterThan(0);
  });

  it('floatTensors: the first convolution reads the float image and keeps float weights', () => {
    const model = buildModel(32, false);
    keepOutputs(model.graph, ['output']);
    const ranges = { r1: [0, 4], p1: [0, 4], r2: [0, 4], up: [0, 4], cat: [0, 4] };
    quantizeStatic(model, ranges, { floatTensors: ['input'] });
    const names = model.graph.initializer.map((t: { name: string }) => t.name);
    expect(names).toContain('w1');
    expect(names).not.toContain('w1_q');
    expect(names).toContain('w2_q');
    expect(ops(model).filter((o: string) => o === 'QuantizeLinear')).toHaveLength(5);
  });

  it('a tensor with no calibrated range is an error naming it', () => {
    const model = buildModel(32, false);
    keepOutputs(model.graph, ['output']);
    expect(() => quantizeStatic(model, {})).toThrow(/no calibrated range for tensor input/);
  });
});
