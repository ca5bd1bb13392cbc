/**
 * The model manifests (manifest.json, shipped, and manifest.local.json, written by `bgone models add`,
 * in the configured models folder) and the loaded sessions. Each entry names its family
 * (model-families.ts), which gives its input and output contract. Every failure here is a
 * BgoneError: an unknown model name is a validation_error; a missing or malformed manifest, a
 * missing model file or one ONNX Runtime cannot load is an internal_error naming the file.
 *
 * Sessions load on first use (or preloadModel, which keeps its model loaded), and one no job has used
 * for the modelIdleSeconds setting is released. With the modelsMemoryMb setting, a model loads only
 * when the sessions' memory with its own stays within it: idle sessions are released first, least
 * recently used first, and while the running jobs' sessions fill it the load waits for one to end.
 *
 * The execution provider in use is chosen at the first load from the executionProvider setting: one
 * provider is used or its load fails; with a fall-back list, each provider but the last that cannot
 * start is skipped (and remembered, with ONNX Runtime's reason, for inferenceProviders), and the
 * first that loads the model is kept for every later load until the settings change. On a GPU
 * provider, the default model is its float variant where the manifest has one (floatVariant).
 */
import { existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import {
  BgoneError,
  fromNativeError,
  manifestError,
  modelLoadError,
  modelNotInstalledError,
  modelRefusedError,
  providerLoadError,
  tensorrtCacheError,
} from './errors.js';
import { fullSide } from './job-plan.js';
import { type FamilyName, isFamilyName, MATTE_TRANSFORMS, type ModelFamily, modelFamily, nativeNormalisation } from './model-families.js';
import { graphProblems } from './model-graph.js';
import { type ModelHandle, type NativeModelSpec, native } from './native.js';
import { externalDataFiles, graphSignature, type OnnxGraph, readOnnxGraph } from './onnx-signature.js';
import { inferenceThreadCount, librarySettings, type ProviderChoice, providerChoices } from './settings.js';

export interface ModelEntry {
  description?: string;
  file: string;
  sha256: string;
  bytes: number;
  license: string;
  /** Its family (model-families.ts): the input and output contract. */
  family: FamilyName;
  /** The graph's height and width are symbolic: it runs at its family's dynamicSide, or at the job's inference side where the family allows smaller sides. */
  dynamic?: boolean;
  /**
   * A fixed graph's side, read from its input's shape (`bgone models add` writes it); without it, the
   * family's first side (family.input.sides).
   */
  side?: number;
  /** The file the graph keeps its weights in (its initializers' `location`), beside it in the models folder. */
  data?: { file: string; sha256: string; bytes: number };
  /**
   * ONNX Runtime's working memory for one run, its input and output included, per pixel of the
   * input's square, measured on the CPU (`bgone models add` measures it on its proving run); without
   * it, the family's figure (ModelFamily.runBytesPerPixel).
   */
  runBytesPerPixel?: number;
  /** Where it came from: a published package, or the file `bgone models add` copied. */
  source?: { package: string; resource: string } | { file: string };
  derive?: unknown;
}

export interface Manifest {
  default: string;
  models: Record<string, ModelEntry>;
}

/** The manifest `bgone models add` writes beside the shipped one: its models, no default. */
export const LOCAL_MANIFEST = 'manifest.local.json';

/** Checks what the library relies on in each entry; returns a description of the first problem, if any. */
function entriesProblem(models: unknown): string | undefined {
  if (typeof models !== 'object' || models === null) return 'has no "models" object';
  for (const [name, entry] of Object.entries(models as Record<string, Partial<ModelEntry>>)) {
    const at = `models.${name}`;
    if (typeof entry?.file !== 'string' || entry.file === '' || /[/\\]/.test(entry.file)) return `${at}.file must be a file name in the models folder`;
    if (!isFamilyName(entry.family)) return `${at}.family must be a model family (src/lib/model-families.ts)`;
    if (entry.dynamic !== undefined && typeof entry.dynamic !== 'boolean') return `${at}.dynamic must be a boolean`;
    if (entry.side !== undefined) {
      const sides = modelFamily(entry.family).input.sides;
      if (entry.dynamic === true) return `${at}.side is for a fixed graph, and the entry is dynamic`;
      if (!sides.includes(entry.side)) return `${at}.side must be one of family ${entry.family}'s sides (${sides.join(', ')})`;
    }
    if (entry.data !== undefined) {
      const d = entry.data as Partial<NonNullable<ModelEntry['data']>> | null;
      if (typeof d?.file !== 'string' || d.file === '' || /[/\\]/.test(d.file) || d.file === entry.file) {
        return `${at}.data.file must be a file name in the models folder, not the model's`;
      }
      if (!Number.isSafeInteger(d.bytes) || d.bytes! < 0) return `${at}.data.bytes must be the data file's size in bytes`;
    }
    if (entry.runBytesPerPixel !== undefined && !(Number.isFinite(entry.runBytesPerPixel) && entry.runBytesPerPixel > 0)) {
      return `${at}.runBytesPerPixel must be a positive number`;
    }
  }
  return undefined;
}

function readJson(path: string): unknown {
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw manifestError(path, 'could not be read as JSON', err);
  }
}

let cached: { dir: string; manifest: Manifest; local: Set<string> } | undefined;

function load(): { manifest: Manifest; local: Set<string> } {
  const dir = librarySettings().modelsDir;
  if (cached?.dir !== dir) {
    const path = join(dir, 'manifest.json');
    const shipped = readJson(path) as Partial<Manifest> | null;
    if (shipped === null || typeof shipped !== 'object') throw manifestError(path, 'is malformed: has no "models" object');
    const problem = entriesProblem(shipped.models);
    if (problem) throw manifestError(path, `is malformed: ${problem}`);
    const models = { ...(shipped.models as Record<string, ModelEntry>) };
    const local = new Set<string>();
    const localPath = join(dir, LOCAL_MANIFEST);
    if (existsSync(localPath)) {
      const added = readJson(localPath) as { models?: unknown } | null;
      const localProblem = entriesProblem(added?.models);
      if (localProblem) throw manifestError(localPath, `is malformed: ${localProblem}`);
      for (const [name, entry] of Object.entries(added!.models as Record<string, ModelEntry>)) {
        if (Object.hasOwn(models, name)) throw manifestError(localPath, `is malformed: models.${name} is a name of the shipped manifest`);
        models[name] = entry;
        local.add(name);
      }
    }
    if (typeof shipped.default !== 'string' || !Object.hasOwn(models, shipped.default)) {
      throw manifestError(path, 'is malformed: "default" is not one of the listed models');
    }
    cached = { dir, manifest: { default: shipped.default, models }, local };
  }
  return cached;
}

/** The manifests of the configured models folder, the local one's models merged in (read once per folder). */
export function readManifest(): Manifest {
  return load().manifest;
}

/** Whether a model was added by `bgone models add` (listed in manifest.local.json). */
export function isLocalModel(name: string): boolean {
  return load().local.has(name);
}

export function modelNames(): string[] {
  return Object.keys(readManifest().models);
}

/** What the native core is told about a model of this entry: numbers only. */
export interface ModelContract {
  family: ModelFamily;
  width: number;
  height: number;
  dynamic: boolean;
  mean: [number, number, number];
  std: [number, number, number];
  outputIndex: number;
  matteTransform: number;
  /** The model's working memory for a run per pixel of its input's square (the entry's, else its family's). */
  runBytesPerPixel: number;
}

/** The fields of the native core's model spec (native/model_spec.h) that a model's contract decides. */
export function contractSpec(
  contract: ModelContract,
): Pick<NativeModelSpec, 'outputIndex' | 'matteTransform' | 'width' | 'height' | 'mean' | 'std' | 'dynamicSize'> {
  const { outputIndex, matteTransform, width, height, mean, std, dynamic } = contract;
  return { outputIndex, matteTransform, width, height, mean, std, dynamicSize: dynamic };
}

export function modelContract(entry: ModelEntry): ModelContract {
  const family = modelFamily(entry.family);
  const dynamic = entry.dynamic === true;
  const side = entry.side ?? family.input.sides[0]!;
  return {
    family,
    width: side,
    height: side,
    dynamic,
    ...nativeNormalisation(family),
    outputIndex: family.output.index,
    matteTransform: MATTE_TRANSFORMS[family.output.matte],
    runBytesPerPixel: entry.runBytesPerPixel ?? family.runBytesPerPixel,
  };
}

interface Session {
  loading: Promise<ModelHandle>;
  handle: ModelHandle | undefined;
  /** What the session holds (native modelMemory once loaded; the file's size until then). */
  bytes: number;
  /** Jobs using it now. */
  users: number;
  lastUsed: number;
  /** Loaded by preloadModel: never released for idleness or memory. */
  pinned: boolean;
  idleTimer: NodeJS.Timeout | undefined;
}

/** Sessions by model name, for the settings they were loaded with. */
const sessions = new Map<string, Session>();
/** Loads waiting for memory: called when a job lets go of a session. */
let memoryWaiters: Array<() => void> = [];

function releaseSession(name: string, session: Session): void {
  if (sessions.get(name) === session) sessions.delete(name);
  if (session.idleTimer) clearTimeout(session.idleTimer);
  if (session.handle) native().releaseModel(session.handle);
}

/**
 * Forgets the manifest and the sessions, after the models folder or the thread count changed: the
 * next job loads its model again with the new settings. Jobs already running keep their session.
 */
export function forgetModels(): void {
  cached = undefined;
  providerState = undefined;
  for (const [name, session] of [...sessions]) {
    if (session.users === 0) releaseSession(name, session);
    else sessions.delete(name); // released when its last job ends (lease below)
  }
}

/**
 * Runs preloadModel gives a model on a blank input before it serves: ONNX Runtime's first runs of
 * a session are slow (at 1024² on the CPU about 650 and 470 ms, then 340-350, as fast as a warmed
 * bare session), and what makes later runs fast outlives the memory, which goes back at once. A
 * model loaded by a job's first call is not warmed: that call would wait for it.
 */
export const WARM_UP_RUNS = 2;

/**
 * What stops an added model's file from running as its entry says: a fixed side other than the
 * contract's, or external data the entry does not list, is not there, or is not the size recorded
 * (its sha256 is checked when `bgone models add` copies it, not at every load).
 */
function localFileProblem(entry: ModelEntry, contract: ModelContract, graph: OnnxGraph, dir: string): string | undefined {
  const input = graphSignature(graph).inputs[0];
  const [h, w] = input?.dims.slice(2) ?? [];
  if (!contract.dynamic && (h !== contract.height || w !== contract.width)) {
    return `its input is ${h}x${w}, and its manifest entry runs it at ${contract.width}x${contract.height} (its "side")`;
  }
  const { files, problems } = externalDataFiles(graph);
  if (problems.length > 0) return problems.join('; ');
  const listed = entry.data?.file;
  const unlisted = files.filter((f) => f.location !== listed).map((f) => f.location);
  if (unlisted.length > 0) return `its weights are in ${unlisted.join(', ')}, which its manifest entry does not list ("data")`;
  if (entry.data) {
    const dataPath = join(dir, entry.data.file);
    let bytes: number;
    try {
      bytes = statSync(dataPath).size;
    } catch {
      return `its data file ${dataPath} is not there`;
    }
    if (bytes !== entry.data.bytes) return `its data file ${dataPath} is ${bytes} bytes, and its manifest entry says ${entry.data.bytes}`;
  }
  return undefined;
}

function loadSession(name: string, entry: ModelEntry, warmUp: boolean, choice: ProviderChoice): Promise<ModelHandle> {
  const settings = librarySettings();
  const path = join(settings.modelsDir, entry.file);
  if (!existsSync(path)) return Promise.reject(modelNotInstalledError(name, path));
  const { provider, deviceId } = choice;
  // An added model's graph is checked before ONNX Runtime opens it (model-graph.ts): one placed in
  // the folder by hand, or added with --trust, must not take the process down with a shape.
  let graph: OnnxGraph | undefined;
  if (isLocalModel(name)) {
    let problems: string[];
    try {
      graph = readOnnxGraph(path);
      problems = graphProblems(graph);
    } catch (err) {
      return Promise.reject(modelRefusedError(name, path, (err as Error).message));
    }
    if (problems.length > 0) return Promise.reject(modelRefusedError(name, path, problems.join('; ')));
  }
  const contract = modelContract(entry);
  if (isLocalModel(name)) {
    const problem = localFileProblem(entry, contract, graph!, settings.modelsDir);
    if (problem) return Promise.reject(modelRefusedError(name, path, problem));
  }
  const spec: NativeModelSpec = {
    path,
    ...contractSpec(contract),
    threads: inferenceThreadCount(settings),
    provider,
    deviceId,
    gpuMemLimitMb: provider === 'cuda' || provider === 'tensorrt' ? settings.cudaMemLimitMb : 0,
    tensorrtCacheDir: provider === 'tensorrt' ? settings.tensorrtCacheDir : '',
    webgpuCpuAdapter: provider === 'webgpu' && settings.webgpuCpuAdapter,
    warmUpRuns: warmUp ? WARM_UP_RUNS : 0,
    // The side every hd and full job uses.
    warmUpSide: fullSide(contract),
    runTimeoutMs: settings.inferenceTimeout * 1000,
  };
  if (spec.tensorrtCacheDir !== '') {
    try {
      mkdirSync(spec.tensorrtCacheDir, { recursive: true });
    } catch (err) {
      return Promise.reject(tensorrtCacheError(name, path, choice.text, spec.tensorrtCacheDir, err));
    }
  }
  let loading: Promise<ModelHandle>;
  try {
    loading = native().loadModel(spec);
  } catch (err) {
    // native() throws a BgoneError already; a TypeError here would be a bug in the spec above.
    return Promise.reject(fromNativeError(err));
  }
  return loading.catch((err: unknown) => {
    if ((err as { reason?: unknown })?.reason === 'execution_provider') throw providerLoadError(name, path, choice.text, err);
    throw modelLoadError(name, path, err, choice.text);
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

/** A loaded session for the length of a job: release() when the job ends. */
export interface ModelLease {
  key: string;
  handle: ModelHandle;
  release(): void;
}

function residentBytes(except?: Session): number {
  let total = 0;
  for (const s of sessions.values()) if (s !== except) total += s.bytes;
  return total;
}

/**
 * Makes room for `bytes` within the modelsMemoryMb setting: releases idle sessions, least recently
 * used first; while the running jobs' sessions fill it, waits for one of them to end. With nothing
 * else loaded, a model larger than the budget loads anyway (alone).
 */
async function makeRoom(bytes: number): Promise<void> {
  const budget = librarySettings().modelsMemoryMb * 2 ** 20;
  if (budget <= 0) return;
  for (;;) {
    if (residentBytes() + bytes <= budget || sessions.size === 0) return;
    const idle = [...sessions].filter(([, s]) => s.users === 0 && !s.pinned && s.handle).sort(([, a], [, b]) => a.lastUsed - b.lastUsed);
    if (idle.length > 0) {
      releaseSession(idle[0]![0], idle[0]![1]);
      continue;
    }
    if ([...sessions.values()].every((s) => s.users === 0)) return; // only pinned models: nothing to wait for
    await new Promise<void>((resolve) => memoryWaiters.push(resolve));
  }
}

function scheduleIdleRelease(key: string, session: Session): void {
  const seconds = librarySettings().modelIdleSeconds;
  if (session.pinned || seconds <= 0) return;
  if (session.idleTimer) clearTimeout(session.idleTimer);
  session.idleTimer = setTimeout(() => {
    if (session.users === 0 && sessions.get(key) === session) releaseSession(key, session);
  }, seconds * 1000);
  session.idleTimer.unref();
}

/** The provider in use and the ones skipped before it (a fall-back list's providers that could not start). */
export interface ProviderState {
  choice: ProviderChoice;
  skipped: Array<{ provider: string; reason: string }>;
}

/** Chosen at the first load for the settings in effect (forgetModels starts again). */
let providerState: ProviderState | undefined;
let choosing: Promise<ProviderState> | undefined;

/** The provider in use; undefined while a fall-back list has not yet been tried by a load. */
export function providerInUse(): ProviderState | undefined {
  if (providerState) return providerState;
  const choices = providerChoices(librarySettings().executionProvider);
  return choices.length === 1 ? { choice: choices[0]!, skipped: [] } : undefined;
}

/**
 * The float variant of an int8 model on a GPU provider: the manifest entry derived from the same
 * source by the same steps less 'int8' (for medium, medium-fp32). int8 QDQ graphs are shaped for
 * the CPU's kernels; a GPU provider runs them as float with casts around every op, or not at all.
 */
export function floatVariant(key: string): string | undefined {
  const models = readManifest().models;
  const derive = models[key]?.derive as { from?: unknown; steps?: unknown } | undefined;
  if (!Array.isArray(derive?.steps) || !derive.steps.includes('int8')) return undefined;
  const wanted = JSON.stringify(derive.steps.filter((step) => step !== 'int8'));
  for (const [name, entry] of Object.entries(models)) {
    const d = entry.derive as { from?: unknown; steps?: unknown } | undefined;
    if (d?.from === derive.from && JSON.stringify(d?.steps) === wanted && existsSync(join(librarySettings().modelsDir, entry.file))) return name;
  }
  return undefined;
}

/** The default model on a provider: the manifest's, or on a GPU its float variant where there is one. */
function defaultOn(choice: ProviderChoice | undefined): string {
  const manifestDefault = readManifest().default;
  if (choice === undefined || choice.provider === 'cpu') return manifestDefault;
  return floatVariant(manifestDefault) ?? manifestDefault;
}

/** The model a job naming none runs on the provider in use (the manifest's default until one is chosen). */
export function defaultModelName(): string {
  return defaultOn(providerInUse()?.choice);
}

/** The model a job runs on this provider: the one named, or the default (its float variant on a GPU). */
function modelFor(name: string | undefined, choice: ProviderChoice): { key: string; entry: ModelEntry } {
  return resolveModel(name ?? defaultOn(choice));
}

/**
 * Tries a fall-back list's providers in order with the model a job asked for, keeping the session
 * of the first that loads it; the last one's failure is the load's failure, as with one provider.
 */
async function chooseProvider(name: string | undefined, pin: boolean): Promise<ProviderState> {
  const choices = providerChoices(librarySettings().executionProvider);
  const skipped: ProviderState['skipped'] = [];
  for (const [i, choice] of choices.entries()) {
    const { key, entry } = modelFor(name, choice);
    const loading = loadSession(key, entry, pin, choice);
    try {
      await loading;
    } catch (err) {
      const isLast = i === choices.length - 1;
      if (isLast || !(err instanceof BgoneError) || err.details?.component !== 'execution_provider') throw err;
      skipped.push({ provider: choice.text, reason: err.detail ?? err.message });
      continue;
    }
    const state = { choice, skipped };
    if (!sessions.has(key)) addSession(key, entry, pin, loading);
    else void loading.then((handle) => native().releaseModel(handle));
    return state;
  }
  throw new BgoneError('internal_error', 'executionProvider lists no provider.');
}

function addSession(key: string, entry: ModelEntry, pin: boolean, loading: Promise<ModelHandle>): Session {
  const created: Session = {
    loading,
    handle: undefined,
    bytes: entry.bytes,
    users: 0,
    lastUsed: Date.now(),
    pinned: pin,
    idleTimer: undefined,
  };
  sessions.set(key, created);
  created.loading.then(
    (handle) => {
      created.handle = handle;
      created.bytes = native().modelMemory(handle) || entry.bytes;
      if (sessions.get(key) !== created) native().releaseModel(handle); // forgotten while it loaded
    },
    () => {
      // A failed load is not kept: the next job tries again (the file may have been fixed).
      if (sessions.get(key) === created) sessions.delete(key);
    },
  );
  return created;
}

/**
 * Resolves a model name (undefined: the default) to a loaded session, loading it once, and holds it
 * for one job; `pin` (preloadModel) warms a session it loads (WARM_UP_RUNS) and keeps it loaded.
 */
export async function acquireModel(name?: string, pin = false): Promise<ModelLease> {
  let state = providerInUse();
  if (state === undefined) {
    const settingsAtStart = librarySettings();
    choosing ??= chooseProvider(name, pin).finally(() => {
      choosing = undefined;
    });
    const chosen = await choosing;
    // Kept only for the settings it was chosen with (configure may have changed them meanwhile).
    if (librarySettings() === settingsAtStart) providerState = chosen;
    state = chosen;
  }
  const { key, entry } = modelFor(name, state.choice);
  let session = sessions.get(key);
  if (!session) {
    await makeRoom(entry.bytes);
    session = sessions.get(key); // another job may have loaded it meanwhile
  }
  if (!session) session = addSession(key, entry, pin, loadSession(key, entry, pin, state.choice));
  if (pin) session.pinned = true;
  const held = session;
  held.users++;
  if (held.idleTimer) clearTimeout(held.idleTimer);
  let handle: ModelHandle;
  try {
    handle = await held.loading;
  } catch (err) {
    held.users--;
    throw err;
  }
  let released = false;
  return {
    key,
    handle,
    release() {
      if (released) return;
      released = true;
      held.users--;
      held.lastUsed = Date.now();
      if (held.users > 0) return;
      if (sessions.get(key) !== held)
        releaseSession(key, held); // forgotten while in use
      else scheduleIdleRelease(key, held);
      const waiters = memoryWaiters;
      memoryWaiters = [];
      for (const wake of waiters) wake();
    },
  };
}

/** Each loaded model and the memory its session holds (bytes), for /metrics. */
export function loadedModels(): Array<{ model: string; bytes: number }> {
  return [...sessions].filter(([, s]) => s.handle).map(([model, s]) => ({ model, bytes: s.bytes }));
}

/**
 * A loaded session's handle for calling the native core directly (benchmarks, tests), loaded as a
 * job would load it; no job holds it, so it is released after modelIdleSeconds unless `pin`.
 */
export async function getModel(name?: string, pin = false): Promise<ModelHandle> {
  const lease = await acquireModel(name, pin);
  lease.release();
  return lease.handle;
}

/** Reads the manifests again at the next lookup (after `bgone models add` or `remove` wrote the local one); sessions stay. */
export function reloadManifest(): void {
  cached = undefined;
}
