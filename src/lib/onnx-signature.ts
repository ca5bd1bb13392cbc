/**
 * An ONNX file's declared inputs and outputs (model-families.ts checkGraph reads them), read with
 * onnx-proto (protobufjs code generated from onnx.proto). Initializers listed among the inputs (older
 * exports) are left out: they are weights, not inputs.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { GraphSignature, TensorSignature } from './model-families.js';

interface ValueInfo {
  name: string;
  type?: { tensorType?: { elemType?: number; shape?: { dim?: Array<{ dimValue?: unknown; dimParam?: string }> } } };
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

/** Throws an Error saying the file is no ONNX model when it cannot be decoded as one. */
export function readGraphSignature(path: string): GraphSignature {
  const { onnx } = require('onnx-proto') as { onnx: { ModelProto: { decode(bytes: Uint8Array): { graph?: unknown } } } };
  let graph: { input: ValueInfo[]; output: ValueInfo[]; initializer: Array<{ name: string }> } | undefined;
  try {
    graph = onnx.ModelProto.decode(readFileSync(path)).graph as typeof graph;
  } catch (err) {
    throw new Error(`${path} is not an ONNX model (${(err as Error).message})`);
  }
  if (!graph || graph.output.length === 0) throw new Error(`${path} is not an ONNX model (no graph outputs)`);
  const weights = new Set(graph.initializer.map((t) => t.name));
  return { inputs: graph.input.filter((i) => !weights.has(i.name)).map(tensor), outputs: graph.output.map(tensor) };
}
