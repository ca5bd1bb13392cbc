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

/** Makes the input's height and width symbolic, so one model serves several inference sizes. */
export function symbolicSpatialInput(graph, inputName) {
  const input = graph.input.find((i) => i.name === inputName);
  const dims = input.type.tensorType.shape.dim;
  dims[2] = onnx.TensorShapeProto.Dimension.create({ dimParam: 'height' });
  dims[3] = onnx.TensorShapeProto.Dimension.create({ dimParam: 'width' });
  for (const output of graph.output) {
    const od = output.type.tensorType.shape?.dim;
    if (od && od.length === 4) {
      od[2] = onnx.TensorShapeProto.Dimension.create({ dimParam: 'height' });
      od[3] = onnx.TensorShapeProto.Dimension.create({ dimParam: 'width' });
    }
  }
  // Intermediate shapes recorded for 1024² would now be wrong: let ONNX Runtime infer them.
  graph.valueInfo = [];
}
