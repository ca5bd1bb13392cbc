/**
 * An ONNX file read before ONNX Runtime sees it: its size checked first (stat: a regular file of at
 * most MAX_MODEL_BYTES, never read whole before that), decoded with onnx-proto (protobufjs code
 * generated from onnx.proto), and its declared inputs and outputs (model-families.ts checkGraph reads
 * them). Initializers listed among the inputs (older exports) are left out: they are weights, not
 * inputs.
 */
import { readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { GraphSignature, TensorSignature } from './model-families.js';

/** The largest ONNX file read (1 GiB: BiRefNet's float32 export is about 0.9 GiB). */
export const MAX_MODEL_BYTES = 2 ** 30;

export interface ValueInfo {
  name: string;
  type?: { tensorType?: { elemType?: number; shape?: { dim?: Array<{ dimValue?: unknown; dimParam?: string }> } } };
}

export interface OnnxTensor {
  name?: string;
  dataType?: number;
  dims?: unknown[];
  rawData?: Uint8Array;
  int64Data?: unknown[];
  int32Data?: number[];
  floatData?: number[];
}

export interface OnnxAttribute {
  name: string;
  i?: unknown;
  ints?: unknown[];
  t?: OnnxTensor;
  g?: OnnxGraph;
  graphs?: OnnxGraph[];
}

export interface OnnxNode {
  name?: string;
  opType: string;
  domain?: string;
  input: string[];
  output: string[];
  attribute: OnnxAttribute[];
}

export interface OnnxGraph {
  node: OnnxNode[];
  input: ValueInfo[];
  output: ValueInfo[];
  valueInfo?: ValueInfo[];
  initializer: OnnxTensor[];
}

const require = createRequire(import.meta.url);

function tensor(info: ValueInfo): TensorSignature {
  const t = info.type?.tensorType;
  const dims = (t?.shape?.dim ?? []).map((d) => {
    const value = Number(d.dimValue ?? 0);
    return d.dimParam || !(value > 0) ? ('symbolic' as const) : value;
  });
  return { name: info.name, elemType: t?.elemType ?? 0, dims };
}

/**
 * The decoded graph of an ONNX file. Throws an Error saying why when the path is not a regular file,
 * is larger than MAX_MODEL_BYTES, or cannot be decoded as an ONNX model.
 */
export function readOnnxGraph(path: string): OnnxGraph {
  const stat = statSync(path);
  if (!stat.isFile()) throw new Error(`${path} is not a regular file`);
  if (stat.size > MAX_MODEL_BYTES) {
    throw new Error(`${path} is ${(stat.size / 2 ** 30).toFixed(2)} GiB; bgone reads ONNX files of at most ${MAX_MODEL_BYTES / 2 ** 30} GiB`);
  }
  const { onnx } = require('onnx-proto') as { onnx: { ModelProto: { decode(bytes: Uint8Array): { graph?: unknown } } } };
  let graph: OnnxGraph | undefined;
  try {
    graph = onnx.ModelProto.decode(readFileSync(path)).graph as OnnxGraph | undefined;
  } catch (err) {
    throw new Error(`${path} is not an ONNX model (${(err as Error).message})`);
  }
  if (!graph || graph.output.length === 0) throw new Error(`${path} is not an ONNX model (no graph outputs)`);
  return graph;
}

/** A decoded graph's declared inputs (initializers left out) and outputs. */
export function graphSignature(graph: OnnxGraph): GraphSignature {
  const weights = new Set(graph.initializer.map((t) => t.name));
  return { inputs: graph.input.filter((i) => !weights.has(i.name)).map(tensor), outputs: graph.output.map(tensor) };
}

/** Throws an Error saying the file is no ONNX model when it cannot be read or decoded as one. */
export function readGraphSignature(path: string): GraphSignature {
  return graphSignature(readOnnxGraph(path));
}
