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
/** The largest external data file taken beside a model (4 GiB: past the 2 GiB an ONNX file itself may hold). */
export const MAX_DATA_BYTES = 4 * 2 ** 30;

export interface ValueInfo {
  name: string;
  type?: { tensorType?: { elemType?: number; shape?: { dim?: Array<{ dimValue?: unknown; dimParam?: string }> } } };
}

export interface OnnxTensor {
  name?: string;
  dataType?: number;
  dims?: unknown[];
  /** 1 (EXTERNAL): the values are in a file beside the model, named by the `location` key of externalData. */
  dataLocation?: number;
  externalData?: Array<{ key?: string; value?: string }>;
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

/** Bytes per value of the ONNX element types a tensor's data may be stored as. */
const ELEMENT_BYTES: Readonly<Record<number, number>> = { 1: 4, 2: 1, 3: 1, 4: 2, 5: 2, 6: 4, 7: 8, 9: 1, 10: 2, 11: 8, 12: 4, 13: 8, 16: 2 };

/** A file of a graph's external data: its name beside the model and what the graph reads of it. */
export interface ExternalDataFile {
  /** The `location` key: a file name in the model's folder. */
  location: string;
  /** The bytes the graph's tensors address (their largest offset + length). */
  extent: number;
  /** The SHA-1 (hex) the graph's `checksum` key gives the file, where it gives one. */
  sha1?: string;
}

function* graphTensors(graph: OnnxGraph): Generator<OnnxTensor> {
  yield* graph.initializer;
  for (const node of graph.node) {
    for (const a of node.attribute) {
      if (a.t) yield a.t;
      if (a.g) yield* graphTensors(a.g);
      for (const g of a.graphs ?? []) yield* graphTensors(g);
    }
  }
}

/**
 * The files a graph keeps tensors' data in (data_location EXTERNAL), in the graph's order, and what
 * is wrong with the graph's references to them, one sentence each: a location that is not a plain
 * file name (ONNX Runtime opens it relative to the model's folder, so a path would reach outside
 * it), a negative or unreadable offset or length, or two checksums for one file.
 */
export function externalDataFiles(graph: OnnxGraph): { files: ExternalDataFile[]; problems: string[] } {
  const files = new Map<string, ExternalDataFile>();
  const problems: string[] = [];
  for (const t of graphTensors(graph)) {
    if (t.dataLocation !== 1) continue;
    const keys = new Map((t.externalData ?? []).map((e) => [e.key ?? '', e.value ?? '']));
    const location = keys.get('location');
    const tensor = `tensor ${t.name ?? '(unnamed)'}`;
    if (!location) {
      problems.push(`${tensor} keeps its data outside the file but names no location`);
      continue;
    }
    if (/[/\\]/.test(location) || location === '.' || location === '..' || location.includes('\0')) {
      problems.push(`${tensor} keeps its data in ${JSON.stringify(location)}, which is not a file name beside the model`);
      continue;
    }
    const offset = Number(keys.get('offset') ?? 0);
    const values = (t.dims ?? []).reduce<number>((n, d) => n * Number(typeof d === 'object' && d !== null ? String(d) : d), 1);
    const length = keys.has('length') ? Number(keys.get('length')) : values * (ELEMENT_BYTES[t.dataType ?? 0] ?? Number.NaN);
    if (!Number.isSafeInteger(offset) || offset < 0 || !Number.isSafeInteger(length) || length < 0) {
      problems.push(`${tensor} has no readable offset and length in ${location}`);
      continue;
    }
    const file = files.get(location) ?? { location, extent: 0 };
    file.extent = Math.max(file.extent, offset + length);
    const checksum = keys.get('checksum')?.toLowerCase();
    if (checksum) {
      if (file.sha1 !== undefined && file.sha1 !== checksum) problems.push(`the graph gives ${location} two different checksums`);
      file.sha1 = checksum;
    }
    files.set(location, file);
  }
  return { files: [...files.values()], problems };
}
