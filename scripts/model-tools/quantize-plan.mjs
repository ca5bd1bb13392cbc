// Which tensors of the float32 ISNet graph get an int8 representation, shared by the calibration
// (which measures their ranges) and the quantizer (which inserts QuantizeLinear/DequantizeLinear
// around them). Every float activation between the int8-capable ops is quantized, so that ONNX
// Runtime can run Conv, MaxPool, Resize, Concat and Add on uint8 tensors end to end; the last
// convolution (the matte's logits) and the sigmoid stay float, where precision shows in the edges,
// and so does whatever the caller names in keepFloat (the manifest keeps the image input float, so
// the first convolution runs in float32).

/** Ops whose float outputs are quantized. Relu is folded into the Conv before it (see foldRelu). */
const QUANTIZED_PRODUCERS = new Set(['Conv', 'Relu', 'MaxPool', 'Resize', 'Concat', 'Add']);
/** Ops whose output must use the input's scale, so ONNX Runtime can drop the Q/DQ pair around them. */
export const SCALE_PRESERVING = new Set(['MaxPool', 'Resize']);

function consumersOf(graph) {
  const consumers = new Map();
  for (const node of graph.node) for (const name of node.input) if (name) consumers.set(name, [...(consumers.get(name) ?? []), node]);
  return consumers;
}

/**
 * Removes each Relu that is the only reader of a Conv's output, giving the Conv the Relu's output
 * name, unless that output stays float. A uint8 quantization with zero point 0 clamps negatives to 0, so Q(Conv) == Q(Relu(Conv)):
 * the pair becomes one int8 convolution. The tensor keeps the Relu's name, so the ranges measured
 * on the float model apply unchanged.
 */
export function foldRelu(graph, keepFloat = []) {
  const keep = new Set(keepFloat);
  const consumers = consumersOf(graph);
  const producers = new Map(graph.node.flatMap((n) => n.output.map((o) => [o, n])));
  const removed = new Set();
  const nonNegative = new Set();
  for (const relu of graph.node) {
    if (relu.opType !== 'Relu' || keep.has(relu.output[0])) continue; // a float Relu must stay a Relu
    const conv = producers.get(relu.input[0]);
    if (conv?.opType !== 'Conv' || consumers.get(relu.input[0]).length !== 1) continue;
    conv.output[0] = relu.output[0];
    removed.add(relu);
    nonNegative.add(relu.output[0]);
  }
  graph.node = graph.node.filter((n) => !removed.has(n));
  return nonNegative;
}

/**
 * The float tensors to quantize, in topological order, each with the tensor whose scale it must
 * share (MaxPool/Resize outputs) or null. `graph` may be the float model or the Relu-folded one.
 */
export function quantizedTensors(graph, { keepFloat = [] } = {}) {
  const float = new Set(graph.input.map((i) => i.name));
  const plan = [];
  const keep = new Set(keepFloat);
  for (const name of float) if (!keep.has(name)) plan.push({ name, sameAs: null });
  for (const node of graph.node) {
    if (!QUANTIZED_PRODUCERS.has(node.opType)) continue;
    if (!float.has(node.input[0])) continue; // e.g. the int64 Concat that builds a Resize's sizes
    const out = node.output[0];
    float.add(out);
    if (keep.has(out)) continue;
    plan.push({ name: out, sameAs: SCALE_PRESERVING.has(node.opType) ? node.input[0] : null });
  }
  return plan;
}

/** The last Conv before the output's Resize and Sigmoid: its output stays float. */
export function logitTensors(graph) {
  const producers = new Map(graph.node.flatMap((n) => n.output.map((o) => [o, n])));
  const names = [];
  for (const output of graph.output) {
    let node = producers.get(output.name);
    while (node && node.opType !== 'Conv') node = producers.get(node.input[0]);
    if (node) names.push(node.output[0]);
  }
  return names;
}
