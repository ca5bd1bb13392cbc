/**
 * The model manifest (models/manifest.json) and the loaded sessions. Any ONNX model with the same
 * contract (one NCHW RGB float input, one [1,1,H,W] output in 0..1) can be listed there and used.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { BgoneError } from './errors.js';
import { native, PACKAGE_ROOT, type ModelHandle } from './native.js';

export interface ModelEntry {
  description: string;
  file: string;
  sha256: string;
  bytes: number;
  license: string;
  source?: { package: string; resource: string };
  input: { name: string; width: number; height: number; layout: 'NCHW'; channels: 'RGB'; mean: number[]; std: number[] };
  output: { name: string; range: [number, number] };
}

export interface Manifest {
  default: string;
  models: Record<string, ModelEntry>;
}

export const MODELS_DIR = process.env.BGONE_MODELS_DIR ?? join(PACKAGE_ROOT, 'models');

let manifest: Manifest | undefined;
export function readManifest(): Manifest {
  manifest ??= JSON.parse(readFileSync(join(MODELS_DIR, 'manifest.json'), 'utf8')) as Manifest;
  return manifest;
}

export function modelNames(): string[] {
  return Object.keys(readManifest().models);
}

const sessions = new Map<string, Promise<ModelHandle>>();

/** Threads ONNX Runtime uses for one inference (0: one per core). */
function inferenceThreads(): number {
  const value = Number(process.env.BGONE_INFERENCE_THREADS ?? 0);
  return Number.isInteger(value) && value >= 0 ? value : 0;
}

/** Resolves a model name (undefined: the default) to a loaded session, loading it once. */
export function getModel(name?: string): Promise<ModelHandle> {
  const m = readManifest();
  const key = name ?? m.default;
  const entry = m.models[key];
  if (!entry) {
    return Promise.reject(new BgoneError('validation_error', `model must be one of ${Object.keys(m.models).join(', ')}.`, { field: 'model', allowed: Object.keys(m.models) }));
  }
  let session = sessions.get(key);
  if (!session) {
    const path = join(MODELS_DIR, entry.file);
    if (!existsSync(path)) {
      return Promise.reject(new BgoneError('internal_error', `Model ${key} is not installed (models/${entry.file}); run npm install.`));
    }
    session = native().loadModel({
      path,
      inputName: entry.input.name,
      outputName: entry.output.name,
      width: entry.input.width,
      height: entry.input.height,
      mean: entry.input.mean,
      std: entry.input.std,
      threads: inferenceThreads(),
    });
    session.catch(() => sessions.delete(key));
    sessions.set(key, session);
  }
  return session;
}
