// Reading, editing and writing ONNX graphs with onnx-proto (protobufjs code generated from onnx.proto).
// Shared by the model transforms in this folder: tensor data in and out of initializers, the
// producer/consumer maps a rewrite needs, and dead-node removal.
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
export const { onnx } = require('onnx-proto');

export const FLOAT = 1;
export const UINT8 = 2;
export const INT8 = 3;
export const INT32 = 6;
export const INT64 = 7;
export const FLOAT16 = 10;

export function loadModel(path) {
  return onnx.ModelProto.decode(readFileSync(path));
}

export function saveModel(model, path) {
  const bytes = onnx.ModelProto.encode(model).finish();
  writeFileSync(`${path}.partial`, bytes);
  renameSync(`${path}.partial`, path);
  return bytes.length;
}

/** Float16 bits to a JS number (IEEE 754 half precision, subnormals included). */
export function halfToFloat(h) {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const frac = h & 0x3ff;
  if (exp === 0) return sign * frac * 2 ** -24;
  if (exp === 31) return frac ? Number.NaN : sign * Number.POSITIVE_INFINITY;
  return sign * (1 + frac / 1024) * 2 ** (exp - 15);
}

/** The values of a float, float16 or int tensor as a Float32Array / typed array, whichever field holds them. */
export function tensorValues(tensor) {
  const raw = tensor.rawData && tensor.rawData.length > 0 ? Buffer.from(tensor.rawData) : null;
  switch (tensor.dataType) {
    case FLOAT:
      if (raw) return new Float32Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.length));
      return Float32Array.from(tensor.floatData);
    case FLOAT16: {
      const halves = raw ? new Uint16Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.length)) : Uint16Array.from(tensor.int32Data);
      const out = new Float32Array(halves.length);
      for (let i = 0; i < halves.length; i++) out[i] = halfToFloat(halves[i]);
      return out;
    }
    case INT64:
      if (raw) return new BigInt64Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.length));
      return BigInt64Array.from(tensor.int64Data.map((v) => BigInt(v.toString())));
    default:
      throw new Error(`tensor ${tensor.name}: data type ${tensor.dataType} is not handled`);
  }
}

/** A new TensorProto holding `values` (a typed array) as raw data. */
export function makeTensor(name, dataType, dims, values) {
  return onnx.TensorProto.create({
    name,
    dataType,
    dims,
    rawData: Buffer.from(values.buffer, values.byteOffset, values.byteLength),
  });
}

export function attribute(node, name) {
  return node.attribute.find((a) => a.name === name);
}

/** Renames every use of tensor `from` (node inputs and graph outputs) to `to`. */
export function replaceUses(graph, from, to) {
  for (const node of graph.node) node.input = node.input.map((name) => (name === from ? to : name));
  for (const output of graph.output) if (output.name === from) output.name = to;
}

/** Renames a tensor everywhere: where it is produced and where it is read. */
export function renameTensor(graph, from, to) {
  for (const node of graph.node) {
    node.input = node.input.map((name) => (name === from ? to : name));
    node.output = node.output.map((name) => (name === from ? to : name));
  }
}

/** Drops nodes whose outputs reach no graph output, and initializers no node reads. */
export function removeDeadNodes(graph) {
  const live = new Set(graph.output.map((o) => o.name));
  const kept = [];
  for (let i = graph.node.length - 1; i >= 0; i--) {
    const node = graph.node[i];
    if (!node.output.some((name) => live.has(name))) continue;
    kept.push(node);
    for (const name of node.input) if (name) live.add(name);
  }
  graph.node = kept.reverse();
  graph.initializer = graph.initializer.filter((t) => live.has(t.name));
  graph.valueInfo = graph.valueInfo.filter((v) => live.has(v.name));
}

/** Keeps only the named graph outputs (the model's side outputs cost memory and time). */
export function keepOutputs(graph, names) {
  graph.output = graph.output.filter((o) => names.includes(o.name));
  removeDeadNodes(graph);
}

/**
 * Makes the input's height and width symbolic, so one model serves several inference sizes. The
 * exported graph resizes each decoder level to a constant size recorded at export (1024 / 2^k):
 * every such constant becomes the input's own size divided by 2^k, computed in the graph. Sizes
 * must then be multiples of 64, so that every level halves exactly (src/lib/inference-size.ts).
 */
export function symbolicSpatialInput(graph, inputName) {
  const input = graph.input.find((i) => i.name === inputName);
  const dims = input.type.tensorType.shape.dim;
  const exportedSide = Number(dims[2].dimValue);
  const symbolic = (d) => {
    d[2] = onnx.TensorShapeProto.Dimension.create({ dimParam: 'height' });
    d[3] = onnx.TensorShapeProto.Dimension.create({ dimParam: 'width' });
  };
  symbolic(dims);
  for (const output of graph.output) {
    const od = output.type.tensorType.shape?.dim;
    if (od && od.length === 4) symbolic(od);
  }
  // Intermediate shapes recorded for the exported size would now be wrong: let ONNX Runtime infer them.
  graph.valueInfo = [];

  const producers = new Map(graph.node.flatMap((n) => n.output.map((o) => [o, n])));
  const constant = (name) => {
    const node = producers.get(name);
    return node?.opType === 'Constant' ? tensorValues(attribute(node, 'value').t) : null;
  };
  const added = [makeTensor('bgone_hw_starts', INT64, [1], BigInt64Array.of(2n)), makeTensor('bgone_hw_ends', INT64, [1], BigInt64Array.of(4n))];
  const nodes = [
    onnx.NodeProto.create({ opType: 'Shape', input: [inputName], output: ['bgone_input_shape'], name: 'bgone_input_shape' }),
    onnx.NodeProto.create({
      opType: 'Slice',
      input: ['bgone_input_shape', 'bgone_hw_starts', 'bgone_hw_ends'],
      output: ['bgone_input_hw'],
      name: 'bgone_input_hw',
    }),
  ];
  let rewritten = 0;
  for (const resize of graph.node) {
    if (resize.opType !== 'Resize' || !resize.input[3]) continue;
    const concat = producers.get(resize.input[3]);
    if (concat?.opType !== 'Concat') continue;
    concat.input = concat.input.map((name) => {
      const hw = constant(name);
      if (hw?.length !== 2 || !(hw instanceof BigInt64Array)) return name;
      const divisors = BigInt64Array.from(hw, (v) => {
        if (v <= 0n || BigInt(exportedSide) % v !== 0n) throw new Error(`resize size ${v} does not divide the exported side ${exportedSide}`);
        return BigInt(exportedSide) / v;
      });
      const id = `bgone_resize_hw_${rewritten++}`;
      added.push(makeTensor(`${id}_divisor`, INT64, [2], divisors));
      nodes.push(onnx.NodeProto.create({ opType: 'Div', input: ['bgone_input_hw', `${id}_divisor`], output: [id], name: id }));
      return id;
    });
  }
  // The new nodes only read the graph input and initializers: they can go first.
  graph.node = [...nodes, ...graph.node];
  graph.initializer.push(...added);
  removeDeadNodes(graph);
  return rewritten;
}
