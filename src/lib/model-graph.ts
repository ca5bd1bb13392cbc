/**
 * What a model's graph may hold before ONNX Runtime runs it. A graph is code: ONNX Runtime allocates
 * what its shapes say and runs what its nodes say, and a shape of 2^62 bytes or a 174,000-channel
 * convolution ends the process inside ONNX Runtime, where nothing can catch it. So the graph (and
 * every subgraph) is walked first, and refused where:
 * - a tensor declared in it (an initializer, a Constant, a declared input, output or value) has more
 *   than MAX_TENSOR_VALUES values;
 * - a shape taken from a constant (Expand, Reshape, ConstantOfShape, Tile's repeats, Resize's sizes,
 *   Range's bounds) makes more than MAX_TENSOR_VALUES values, Resize or Upsample scales enlarge more
 *   than MAX_SCALE times in all, or a Pad constant adds more than MAX_PAD on a side;
 * - a convolution's weights have more than MAX_CHANNELS input or output channels.
 * `graphProblems` says each such place, one sentence each. `unknownOperators` lists the operators
 * outside a family's known set (model-families.ts), which `bgone models add` refuses unless trusted.
 */
import type { ModelFamily } from './model-families.js';
import type { OnnxGraph, OnnxNode, OnnxTensor } from './onnx-signature.js';

/** The most values one tensor may have: 2^28, 1 GiB of float32. */
export const MAX_TENSOR_VALUES = 2 ** 28;
/** The most input or output channels of a convolution (the families' largest are in the low thousands). */
export const MAX_CHANNELS = 16_384;
/** The most a Resize or Upsample may enlarge, all axes together. */
export const MAX_SCALE = 4096;
/** The most a Pad may add on one side of an axis. */
export const MAX_PAD = 16_384;

const INT32 = 6;
const INT64 = 7;
const FLOAT = 1;
/** Constants of at most this many values are read as shapes. */
const SHAPE_VALUES = 64;

const asNumber = (v: unknown) => Number(typeof v === 'object' && v !== null ? String(v) : v);

/** The number of values a shape of these dims holds (a non-positive dim counts as 1: inferred or empty). */
function product(dims: number[]): number {
  return dims.reduce((n, d) => n * (d > 0 ? d : 1), 1);
}

/** The values of a small integer or float constant, or undefined. */
function smallValues(t: OnnxTensor): number[] | undefined {
  const count = product((t.dims ?? []).map(asNumber));
  if (count > SHAPE_VALUES) return undefined;
  const raw = t.rawData && t.rawData.length > 0 ? Buffer.from(t.rawData) : undefined;
  switch (t.dataType) {
    case INT64:
      if (raw) return raw.length % 8 === 0 ? Array.from({ length: raw.length / 8 }, (_, i) => Number(raw.readBigInt64LE(i * 8))) : undefined;
      return (t.int64Data ?? []).map(asNumber);
    case INT32:
      if (raw) return raw.length % 4 === 0 ? Array.from({ length: raw.length / 4 }, (_, i) => raw.readInt32LE(i * 4)) : undefined;
      return (t.int32Data ?? []).map(asNumber);
    case FLOAT:
      if (raw) return raw.length % 4 === 0 ? Array.from({ length: raw.length / 4 }, (_, i) => raw.readFloatLE(i * 4)) : undefined;
      return (t.floatData ?? []).map(Number);
    default:
      return undefined;
  }
}

const showValues = (n: number) => (n >= 2 ** 20 ? `2^${Math.log2(n).toFixed(1)}` : String(n));

/** Every node of a graph and of its subgraphs (Loop, If, Scan bodies). */
function* allNodes(graph: OnnxGraph): Generator<{ node: OnnxNode; graph: OnnxGraph }> {
  for (const node of graph.node) {
    yield { node, graph };
    for (const a of node.attribute) {
      if (a.g) yield* allNodes(a.g);
      for (const g of a.graphs ?? []) yield* allNodes(g);
    }
  }
}

function* allGraphs(graph: OnnxGraph): Generator<OnnxGraph> {
  yield graph;
  for (const node of graph.node) {
    for (const a of node.attribute) {
      if (a.g) yield* allGraphs(a.g);
      for (const g of a.graphs ?? []) yield* allGraphs(g);
    }
  }
}

/** The operators a graph uses (subgraphs included), as `domain:op`, or `op` in the default domain. */
export function graphOperators(graph: OnnxGraph): string[] {
  const ops = new Set<string>();
  for (const { node } of allNodes(graph)) ops.add(node.domain && node.domain !== 'ai.onnx' ? `${node.domain}:${node.opType}` : node.opType);
  return [...ops].sort();
}

/** The operators of a graph outside a family's known set. */
export function unknownOperators(graph: OnnxGraph, family: ModelFamily): string[] {
  const known = new Set(family.operators);
  return graphOperators(graph).filter((op) => !known.has(op));
}

/** Each place where the graph implies a tensor or an operation past the bounds above; empty when none. */
export function graphProblems(graph: OnnxGraph): string[] {
  const problems: string[] = [];
  const constants = new Map<string, OnnxTensor>();
  for (const g of allGraphs(graph)) {
    for (const t of g.initializer) {
      if (t.name) constants.set(t.name, t);
      const values = product((t.dims ?? []).map(asNumber));
      if (values > MAX_TENSOR_VALUES) problems.push(`initializer ${t.name} has ${showValues(values)} values; bgone allows at most 2^28 in one tensor`);
    }
    for (const v of [...g.input, ...g.output, ...(g.valueInfo ?? [])]) {
      const dims = (v.type?.tensorType?.shape?.dim ?? []).map((d) => (d.dimParam ? 0 : asNumber(d.dimValue ?? 0)));
      const values = product(dims);
      if (values > MAX_TENSOR_VALUES) problems.push(`${v.name} is declared with ${showValues(values)} values; bgone allows at most 2^28 in one tensor`);
    }
  }
  for (const { node } of allNodes(graph)) {
    if (node.opType !== 'Constant') continue;
    const t = node.attribute.find((a) => a.name === 'value')?.t;
    if (!t) continue;
    for (const out of node.output) constants.set(out, t);
    const values = product((t.dims ?? []).map(asNumber));
    if (values > MAX_TENSOR_VALUES)
      problems.push(`Constant ${node.name || node.output[0]} has ${showValues(values)} values; bgone allows at most 2^28 in one tensor`);
  }
  const constant = (name: string | undefined) => (name ? constants.get(name) : undefined);
  const valuesOf = (name: string | undefined) => {
    const t = constant(name);
    return t ? smallValues(t) : undefined;
  };
  for (const { node } of allNodes(graph)) {
    const at = `node ${node.name || node.output[0]} (${node.opType})`;
    const tooMany = (values: number, what: string) => {
      if (values > MAX_TENSOR_VALUES) problems.push(`${at} makes a tensor of ${showValues(values)} values (${what}); bgone allows at most 2^28`);
    };
    switch (node.opType) {
      case 'Expand':
      case 'Reshape': {
        const shape = valuesOf(node.input[1]);
        if (shape) tooMany(product(shape), `its shape [${shape.join(', ')}]`);
        break;
      }
      case 'ConstantOfShape': {
        const shape = valuesOf(node.input[0]);
        if (shape) tooMany(product(shape), `its shape [${shape.join(', ')}]`);
        break;
      }
      case 'Tile': {
        const repeats = valuesOf(node.input[1]);
        if (repeats) tooMany(product(repeats), `its repeats [${repeats.join(', ')}]`);
        break;
      }
      case 'Resize':
      case 'Upsample': {
        const sizes = node.opType === 'Resize' ? valuesOf(node.input[3]) : undefined;
        if (sizes) tooMany(product(sizes), `its sizes [${sizes.join(', ')}]`);
        const scales = valuesOf(node.opType === 'Resize' ? node.input[2] : node.input[1]);
        if (scales && scales.length > 0) {
          const enlarge = scales.reduce((n, s) => n * Math.max(s, 1), 1);
          if (!(enlarge <= MAX_SCALE)) problems.push(`${at} enlarges ${enlarge} times (scales [${scales.join(', ')}]); bgone allows at most ${MAX_SCALE}`);
        }
        break;
      }
      case 'Range': {
        const [start, limit, delta] = [valuesOf(node.input[0])?.[0], valuesOf(node.input[1])?.[0], valuesOf(node.input[2])?.[0]];
        if (start !== undefined && limit !== undefined && delta !== undefined && delta !== 0) tooMany(Math.ceil((limit - start) / delta), 'its bounds');
        break;
      }
      case 'Pad': {
        const pads = valuesOf(node.input[1]);
        if (pads?.some((p) => p > MAX_PAD)) problems.push(`${at} pads by up to ${Math.max(...pads)}; bgone allows at most ${MAX_PAD} on a side`);
        break;
      }
      case 'Conv':
      case 'ConvTranspose':
      case 'ConvInteger':
      case 'QLinearConv': {
        const weight = constant(node.opType === 'QLinearConv' ? node.input[3] : node.input[1]);
        const dims = (weight?.dims ?? []).map(asNumber);
        if (dims.length >= 2 && (dims[0]! > MAX_CHANNELS || dims[1]! > MAX_CHANNELS)) {
          problems.push(`${at} has weights [${dims.join(', ')}]: more than ${MAX_CHANNELS} channels`);
        }
        break;
      }
    }
  }
  return problems;
}
