// Static int8 quantization of a float32 graph in the QDQ format: per-channel symmetric int8
// weights, int32 biases, and uint8 activations with the ranges measured by calibrate.mjs. ONNX
// Runtime turns each DequantizeLinear → Conv → QuantizeLinear group into an int8 convolution
// (VNNI on the CPUs here), and drops the pairs around MaxPool and Resize.
import { FLOAT, INT8, INT32, makeTensor, onnx, replaceUses, tensorValues, UINT8 } from './onnx-graph.mjs';
import { foldRelu, logitTensors, quantizedTensors } from './quantize-plan.mjs';

/** uint8 scale and zero point for a range; the range always holds 0 so that zero padding is exact. */
export function activationParams(min, max) {
  const lo = Math.min(0, min);
  const hi = Math.max(0, max, lo + 1e-6);
  const scale = (hi - lo) / 255;
  const zeroPoint = Math.min(255, Math.max(0, Math.round(-lo / scale)));
  return { scale, zeroPoint };
}

function node(opType, inputs, outputs, attributes = []) {
  return onnx.NodeProto.create({ opType, input: inputs, output: outputs, name: outputs[0], attribute: attributes });
}

const axis0 = () => [onnx.AttributeProto.create({ name: 'axis', type: onnx.AttributeProto.AttributeType.INT, i: 0 })];

/**
 * Quantizes `model` (float32, as convertToFloat32 leaves it) in place.
 * ranges: { tensorName: [min, max] } from calibrate.mjs, for every tensor of quantizedTensors().
 * floatPrefixes: node-name prefixes (e.g. '/stage1d/') whose outputs stay float, so that the
 * convolutions reading them run in float32; floatTensors: tensor names that stay float, likewise.
 */
export function quantizeStatic(model, ranges, { floatPrefixes = [], floatTensors = [] } = {}) {
  const graph = model.graph;
  const keepFloat = [
    ...logitTensors(graph),
    ...floatTensors,
    ...graph.node.filter((n) => floatPrefixes.some((p) => n.name.startsWith(p))).flatMap((n) => n.output),
  ];
  foldRelu(graph, keepFloat);
  const plan = quantizedTensors(graph, { keepFloat });
  const params = new Map();
  for (const { name, sameAs } of plan) {
    if (sameAs && params.has(sameAs)) {
      params.set(name, params.get(sameAs));
      continue;
    }
    const range = ranges[name];
    if (!range) throw new Error(`no calibrated range for tensor ${name}`);
    params.set(name, activationParams(range[0], range[1]));
  }

  const initializers = new Map(graph.initializer.map((t) => [t.name, t]));
  const added = [];
  const newNodes = [];
  // Activations: T → QuantizeLinear → DequantizeLinear → (every former reader of T).
  const dequantized = new Map();
  for (const [name, { scale, zeroPoint }] of params) {
    added.push(makeTensor(`${name}_scale`, FLOAT, [], Float32Array.of(scale)));
    added.push(makeTensor(`${name}_zero_point`, UINT8, [], Uint8Array.of(zeroPoint)));
    dequantized.set(name, `${name}_dq`);
  }
  for (const [name, dq] of dequantized) replaceUses(graph, name, dq);
  // Graph outputs must keep their float producers: replaceUses also renamed them, so undo that.
  for (const output of graph.output) if (dequantized.has(output.name.replace(/_dq$/, ''))) output.name = output.name.replace(/_dq$/, '');

  // A per-output-channel quantized initializer and its DequantizeLinear; returns the float name.
  const perChannel = (name, type, dims, values, scales, zeroPoints) => {
    added.push(makeTensor(`${name}_q`, type, dims, values));
    added.push(makeTensor(`${name}_scale`, FLOAT, [scales.length], scales));
    added.push(makeTensor(`${name}_zero_point`, type, [scales.length], zeroPoints));
    newNodes.push(node('DequantizeLinear', [`${name}_q`, `${name}_scale`, `${name}_zero_point`], [`${name}_dq`], axis0()));
    return `${name}_dq`;
  };

  // Weights and biases of every Conv whose input is quantized.
  for (const conv of graph.node) {
    if (conv.opType !== 'Conv') continue;
    const x = conv.input[0].replace(/_dq$/, '');
    const xParams = params.get(x);
    const weight = initializers.get(conv.input[1]);
    if (!xParams || !weight) continue;
    const w = tensorValues(weight);
    const outChannels = Number(weight.dims[0]);
    const per = w.length / outChannels;
    const wq = new Int8Array(w.length);
    const wScale = new Float32Array(outChannels);
    for (let o = 0; o < outChannels; o++) {
      let m = 0;
      for (let i = 0; i < per; i++) m = Math.max(m, Math.abs(w[o * per + i]));
      const s = m > 0 ? m / 127 : 1;
      wScale[o] = s;
      for (let i = 0; i < per; i++) wq[o * per + i] = Math.max(-127, Math.min(127, Math.round(w[o * per + i] / s)));
    }
    conv.input[1] = perChannel(conv.input[1], INT8, weight.dims, wq, wScale, new Int8Array(outChannels));
    const bias = conv.input[2] ? initializers.get(conv.input[2]) : null;
    if (bias) {
      const b = tensorValues(bias);
      const bq = new Int32Array(outChannels);
      const bScale = new Float32Array(outChannels);
      for (let o = 0; o < outChannels; o++) {
        bScale[o] = xParams.scale * wScale[o];
        bq[o] = Math.round(b[o] / bScale[o]);
      }
      conv.input[2] = perChannel(conv.input[2], INT32, bias.dims, bq, bScale, new Int32Array(outChannels));
    }
  }

  // Insert each activation's Q/DQ pair right after its producer, keeping the node list topological.
  const pairs = new Map();
  for (const name of dequantized.keys()) {
    pairs.set(name, [
      node('QuantizeLinear', [name, `${name}_scale`, `${name}_zero_point`], [`${name}_q`]),
      node('DequantizeLinear', [`${name}_q`, `${name}_scale`, `${name}_zero_point`], [`${name}_dq`]),
    ]);
  }
  const ordered = [...newNodes];
  for (const name of graph.input.map((i) => i.name)) if (pairs.has(name)) ordered.push(...pairs.get(name));
  for (const n of graph.node) {
    ordered.push(n);
    for (const out of n.output) if (pairs.has(out)) ordered.push(...pairs.get(out));
  }
  graph.node = ordered;
  const replacedWeights = new Set(newNodes.map((n) => n.input[0].replace(/_q$/, '')));
  graph.initializer = [...graph.initializer.filter((t) => !replacedWeights.has(t.name)), ...added];
  graph.valueInfo = [];
  return { activations: params.size, convolutions: newNodes.length };
}
