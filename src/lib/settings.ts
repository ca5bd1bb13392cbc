/**
 * The library's process-wide settings, their defaults (here and nowhere else) and their validation.
 * The library never reads the environment: the application reads its variables once, at start
 * (src/config), and passes them to configure(). Until then the defaults apply.
 */
import { statSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join, resolve } from 'node:path';
import { FETCH_ALLOW_GRAMMAR, parseFetchAllow } from './address-guard.js';
import { BgoneError } from './errors.js';
import { PACKAGE_ROOT } from './package-root.js';

export interface LibrarySettings {
  /** Folder holding manifest.json and the model files. Default: the package's models/ folder. */
  modelsDir: string;
  /** ONNX Runtime intra-op threads for one inference; 0 (default): one per core (inferenceThreadCount). */
  inferenceThreads: number;
  /**
   * Jobs inside the native core at once; 0 (default): nativeConcurrencyFor's choice for the provider
   * in use, 2 on the CPU and one per core (4 to 16) on a GPU. Each job has a thread of the core's
   * own from decode to encode (native/job_threads.h), and at most two model runs share the session at
   * a time (native/model.cc): the other jobs decode, mat and encode meanwhile.
   */
  nativeConcurrency: number;
  /**
   * Where inference runs: one provider, or an ordered fall-back list such as 'webgpu,cpu'. Each entry
   * is 'cpu' (default), 'cuda[:<device id>]' or 'tensorrt[:<device id>]' (an NVIDIA GPU through ONNX
   * Runtime's CUDA or TensorRT execution provider, device 0 unless given; their provider libraries
   * must sit beside the ONNX Runtime library, onnxRuntimeLibrary) or 'webgpu' (ONNX Runtime's WebGPU
   * provider, over Vulkan). A provider that cannot start fails the model's load with a message
   * saying what is missing, unless an entry follows it: then the next one is tried (models.ts).
   */
  executionProvider: ExecutionProvider;
  /** With CUDA or TensorRT: the most GPU memory ONNX Runtime's arena may take, in MiB; 0 (default): no limit. */
  cudaMemLimitMb: number;
  /**
   * With TensorRT: the folder where ONNX Runtime keeps the engines TensorRT builds from a model (and
   * its timing cache), so that a restart loads them in seconds instead of building them again for
   * minutes; created at the first load. '' turns the cache off. They hold the model's compiled
   * layers, nothing of an image. Default: .tensorrt-cache in the package's folder.
   */
  tensorrtCacheDir: string;
  /**
   * With WebGPU: whether a CPU Vulkan device (SwiftShader, as Chromium ships it) may run the models
   * when the Vulkan loader lists no GPU. false (default): such a machine refuses webgpu, since WebGPU
   * on a CPU runs many times slower than the cpu provider; true is for checking the WebGPU route on
   * a machine without a GPU.
   */
  webgpuCpuAdapter: boolean;
  /**
   * The ONNX Runtime shared library the native core opens (e.g. a GPU build's libonnxruntime.so.1);
   * undefined (default): onnxruntime-node's copy. Fixed once the native core has started.
   */
  onnxRuntimeLibrary: string | undefined;
  /**
   * Which build of the native addon to load: 'auto' (default) takes the AVX2 build where the package
   * has one (x86-64 Linux) and the CPU runs AVX2 (the same output bytes for about 5 ms less CPU per
   * 2 MP image); 'baseline' takes the build every CPU of the platform runs. Fixed once the native
   * core has started.
   */
  addonBuild: AddonBuild;
  /**
   * Whether removeBackground may download imageUrl and bgImageUrl from loopback and private
   * addresses, cloud metadata addresses included (false by default: a URL that resolves to one is
   * refused; src/lib/address-guard.ts). For local setups and tests; fetchAllow opens them one by one.
   */
  fetchAllowPrivate: boolean;
  /**
   * The hosts and networks imageUrl and bgImageUrl may reach although they are private ([] by
   * default: none). Each entry is a host name (`images.example.internal`; `localhost` only so), a
   * wildcard (`*.example.internal`: every name under that domain, not the domain itself), an IPv4 or
   * IPv6 network in CIDR notation (`10.1.0.0/16`, `fd12:3456::/48`) or an address (`10.1.2.3`,
   * meaning /32). A listed name may resolve to private addresses; an address inside a listed network
   * may be connected to, whatever name led there. A cloud metadata address (169.254.169.254 and the
   * others of address-guard.ts METADATA_ADDRESSES) stays refused unless an entry names that exact
   * address. Kept normalised (lower case, canonical addresses).
   */
  fetchAllow: readonly string[];
  /** Seconds a model no job uses stays loaded (0: for good); preloadModel's model stays loaded. Default 600. */
  modelIdleSeconds: number;
  /** MiB the loaded models' sessions may hold together (0, default: no limit); idle ones are released to make room. */
  modelsMemoryMb: number;
  /**
   * Seconds one model run may take (0: no limit). A run past it is stopped (ONNX Runtime's run-level
   * terminate, native/run_deadline.h) and its job fails with internal_error: a model that loops or
   * stalls cannot hold the native core's places. Default 60.
   */
  inferenceTimeout: number;
}

/** 'auto' or 'baseline': see LibrarySettings.addonBuild. */
export type AddonBuild = 'auto' | 'baseline';
export const ADDON_BUILDS: readonly AddonBuild[] = ['auto', 'baseline'];

/** One provider or an ordered fall-back list of them, comma-separated: see LibrarySettings.executionProvider. */
export type ExecutionProvider = string;

/** The execution providers bgone knows. */
export type ProviderName = 'cpu' | 'cuda' | 'tensorrt' | 'webgpu';
export const PROVIDER_NAMES: readonly ProviderName[] = ['cpu', 'cuda', 'tensorrt', 'webgpu'];

/** One entry of an executionProvider value. */
export interface ProviderChoice {
  provider: ProviderName;
  /** The GPU's index with cuda and tensorrt (0 unless given); 0 otherwise. */
  deviceId: number;
  /** The entry as written, e.g. 'cuda:1'. */
  text: string;
}

/** What an executionProvider value may be, for messages. */
export const EXECUTION_PROVIDER_GRAMMAR =
  'one provider or an ordered fall-back list (e.g. webgpu,cpu) of cpu, cuda[:<device id>], tensorrt[:<device id>] and webgpu';

/** Highest GPU index accepted in 'cuda:<device id>'. */
export const MAX_DEVICE_ID = 255;
/** Highest cudaMemLimitMb (1 TiB). */
const MAX_GPU_MEM_MB = 1_048_576;

export const DEFAULT_SETTINGS: Readonly<LibrarySettings> = Object.freeze({
  modelsDir: join(PACKAGE_ROOT, 'models'),
  inferenceThreads: 0,
  nativeConcurrency: 0,
  executionProvider: 'cpu',
  cudaMemLimitMb: 0,
  tensorrtCacheDir: join(PACKAGE_ROOT, '.tensorrt-cache'),
  webgpuCpuAdapter: false,
  onnxRuntimeLibrary: undefined,
  addonBuild: 'auto',
  fetchAllowPrivate: false,
  fetchAllow: Object.freeze([]) as readonly string[],
  modelIdleSeconds: 600,
  modelsMemoryMb: 0,
  inferenceTimeout: 60,
});

/** Above this, a value is a typo rather than a machine (the native core refuses more than 4096). */
const MAX_THREADS = 1024;

let current: Readonly<LibrarySettings> = DEFAULT_SETTINGS;

/**
 * The intra-op threads an inference gets: the setting, or with 0 one per core this process may run
 * on (os.availableParallelism(), which follows taskset). Not ONNX Runtime's own default: that counts
 * physical cores as its cpuinfo sees them, and on the 2-vCPU virtual machines here it saw one, so the
 * model ran on one core while the other idled (595 against 355 ms per 2 MP inference;
 * docs/development.md, "Inference on every core").
 */
export function inferenceThreadCount(settings: Readonly<LibrarySettings>): number {
  return settings.inferenceThreads > 0 ? settings.inferenceThreads : availableParallelism();
}

/** Jobs inside the native core at once on the CPU: see nativeConcurrencyFor. */
export const CPU_NATIVE_CONCURRENCY = 2;
/** Bounds of the jobs inside the native core at once on a GPU: see nativeConcurrencyFor. */
export const GPU_NATIVE_CONCURRENCY = { min: 4, max: 16 } as const;

/**
 * The jobs inside the native core at once: the setting, or with 0 the choice for the provider.
 * - The CPU: 2 (CPU_NATIVE_CONCURRENCY). The model's run takes every core; a second job's decode and
 *   encode fill the gaps of the first one's run, or its run shares the session; more would only wait
 *   for a place to run, holding their decoded images.
 * - A GPU provider: one job per core this process may run on, at least 4 and at most 16. The GPU
 *   runs one model at a time in about a tenth of the CPU time a job spends outside it (decode,
 *   resize, matting, encode: about 50 ms of CPU per 2 MP image), so that many jobs in their CPU
 *   stages at once keep it busy; more than one per core would only hold memory.
 * `provider` is the provider in use, undefined before the first model has loaded (a fall-back list
 * is decided then): the CPU's value meanwhile.
 */
export function nativeConcurrencyFor(settings: Readonly<LibrarySettings>, provider: ProviderName | undefined): number {
  if (settings.nativeConcurrency > 0) return settings.nativeConcurrency;
  if (provider === undefined || provider === 'cpu') return CPU_NATIVE_CONCURRENCY;
  return Math.min(GPU_NATIVE_CONCURRENCY.max, Math.max(GPU_NATIVE_CONCURRENCY.min, availableParallelism()));
}

/** The settings in effect. */
export function librarySettings(): Readonly<LibrarySettings> {
  return current;
}

/** Replaces the settings in effect; `next` must come from mergeSettings. */
export function replaceSettings(next: Readonly<LibrarySettings>): void {
  current = Object.freeze({ ...next });
}

function invalid(field: string, message: string): never {
  throw new BgoneError('validation_error', message, { field });
}

function integerSetting(field: string, value: unknown, min: number, max: number, meaning: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    invalid(field, `${field} must be an integer from ${min} to ${max} (${meaning}), got ${JSON.stringify(value) ?? String(value)}.`);
  }
  return value;
}

function modelsDirSetting(value: unknown): string {
  if (typeof value !== 'string' || value.trim() === '')
    invalid('modelsDir', 'modelsDir must be the path of a folder holding manifest.json and the model files.');
  const dir = resolve(value);
  let isDirectory = false;
  try {
    isDirectory = statSync(dir).isDirectory();
  } catch {
    // Reported below, with the path.
  }
  if (!isDirectory) invalid('modelsDir', `modelsDir ${dir} is not an existing folder.`);
  return dir;
}

/**
 * The ordered entries of an executionProvider value, or why it is not one: an unknown provider, a
 * device id out of 0..MAX_DEVICE_ID or given to webgpu, an empty or repeated entry, or an entry after
 * cpu (which always starts, so that entry would never be tried).
 */
export function parseExecutionProvider(value: unknown): { choices: ProviderChoice[] } | { problem: string } {
  if (typeof value !== 'string') return { problem: 'it is not a string' };
  const entries = value.split(',').map((e) => e.trim());
  const choices: ProviderChoice[] = [];
  for (const [i, text] of entries.entries()) {
    if (text === '') return { problem: entries.length === 1 ? 'it is empty' : `entry ${i + 1} of ${entries.length} is empty` };
    const match = /^(cpu|cuda|tensorrt|webgpu)(?::([0-9]+))?$/.exec(text);
    if (!match) return { problem: `"${text}" is not a provider` };
    const provider = match[1] as ProviderName;
    if (match[2] !== undefined && (provider === 'cpu' || provider === 'webgpu')) {
      return { problem: `"${text}": ${provider} takes no device id${provider === 'webgpu' ? ' (it uses the first GPU adapter)' : ''}` };
    }
    const deviceId = Number(match[2] ?? 0);
    if (!/^(0|[1-9][0-9]*)$/.test(match[2] ?? '0') || deviceId > MAX_DEVICE_ID) {
      return { problem: `"${text}": the device id must be a GPU index from 0 to ${MAX_DEVICE_ID}` };
    }
    if (choices.some((c) => c.provider === provider)) return { problem: `${provider} is listed twice` };
    if (choices.at(-1)?.provider === 'cpu') return { problem: `"${text}" follows cpu, which always starts, so it would never be tried` };
    choices.push({ provider, deviceId, text });
  }
  return { choices };
}

/** The entries of a validated executionProvider value. */
export function providerChoices(value: ExecutionProvider): ProviderChoice[] {
  const parsed = parseExecutionProvider(value);
  if ('problem' in parsed) throw new BgoneError('internal_error', `executionProvider ${JSON.stringify(value)} was not validated: ${parsed.problem}.`);
  return parsed.choices;
}

function executionProviderSetting(value: unknown): ExecutionProvider {
  const parsed = parseExecutionProvider(value);
  if ('problem' in parsed) {
    invalid('executionProvider', `executionProvider must be ${EXECUTION_PROVIDER_GRAMMAR}, got ${JSON.stringify(value) ?? String(value)}: ${parsed.problem}.`);
  }
  return parsed.choices.map((c) => c.text).join(',');
}

function libraryFileSetting(value: unknown): string {
  if (typeof value !== 'string' || value.trim() === '')
    invalid('onnxRuntimeLibrary', 'onnxRuntimeLibrary must be the path of the ONNX Runtime shared library (libonnxruntime.so.1).');
  const file = resolve(value);
  let isFile = false;
  try {
    isFile = statSync(file).isFile();
  } catch {
    // Reported below, with the path.
  }
  if (!isFile) invalid('onnxRuntimeLibrary', `onnxRuntimeLibrary ${file} is not an existing file.`);
  return file;
}

function tensorrtCacheDirSetting(value: unknown): string {
  if (typeof value !== 'string') invalid('tensorrtCacheDir', "tensorrtCacheDir must be the path of a folder, or '' for no engine cache.");
  if (value.trim() === '') return '';
  const dir = resolve(value);
  let isOther = false;
  try {
    isOther = !statSync(dir).isDirectory();
  } catch {
    // Not there yet: the first TensorRT load creates it.
  }
  if (isOther) invalid('tensorrtCacheDir', `tensorrtCacheDir ${dir} exists and is not a folder.`);
  return dir;
}

function fetchAllowSetting(value: unknown): readonly string[] {
  if (!Array.isArray(value)) invalid('fetchAllow', `fetchAllow must be an array of entries: ${FETCH_ALLOW_GRAMMAR}.`);
  const parsed = parseFetchAllow(value);
  if ('problem' in parsed) invalid('fetchAllow', `fetchAllow must hold ${FETCH_ALLOW_GRAMMAR}: ${parsed.problem}.`);
  return Object.freeze([...(parsed.list?.entries ?? [])]);
}

function addonBuildSetting(value: unknown): AddonBuild {
  if (!(ADDON_BUILDS as readonly unknown[]).includes(value)) {
    invalid('addonBuild', `addonBuild must be ${ADDON_BUILDS.join(' or ')}, got ${JSON.stringify(value) ?? String(value)}.`);
  }
  return value as AddonBuild;
}

const KNOWN: ReadonlyArray<keyof LibrarySettings> = [
  'modelsDir',
  'inferenceThreads',
  'nativeConcurrency',
  'executionProvider',
  'cudaMemLimitMb',
  'tensorrtCacheDir',
  'webgpuCpuAdapter',
  'onnxRuntimeLibrary',
  'addonBuild',
  'fetchAllowPrivate',
  'fetchAllow',
  'modelIdleSeconds',
  'modelsMemoryMb',
  'inferenceTimeout',
];

/**
 * Validates `input` and returns the settings in effect with it applied. A field left out or
 * undefined keeps its current value; any other bad value, or an unknown field, is a
 * BgoneError('validation_error') whose details.field names it.
 */
export function mergeSettings(input: unknown): LibrarySettings {
  if (input === null || typeof input !== 'object' || Array.isArray(input)) invalid('settings', 'settings must be an object.');
  const given = input as Record<string, unknown>;
  for (const field of Object.keys(given)) {
    if (!(KNOWN as readonly string[]).includes(field)) invalid(field, `${field} is not a setting of bgone; the settings are ${KNOWN.join(', ')}.`);
  }
  const next: LibrarySettings = { ...current };
  if (given.modelsDir !== undefined) next.modelsDir = modelsDirSetting(given.modelsDir);
  if (given.inferenceThreads !== undefined) {
    next.inferenceThreads = integerSetting('inferenceThreads', given.inferenceThreads, 0, MAX_THREADS, '0: one per core');
  }
  if (given.nativeConcurrency !== undefined) {
    next.nativeConcurrency = integerSetting(
      'nativeConcurrency',
      given.nativeConcurrency,
      0,
      MAX_THREADS,
      'jobs inside the native core at once, 0: 2 on the CPU, one per core (4 to 16) on a GPU',
    );
  }
  if (given.executionProvider !== undefined) next.executionProvider = executionProviderSetting(given.executionProvider);
  if (given.cudaMemLimitMb !== undefined) {
    next.cudaMemLimitMb = integerSetting('cudaMemLimitMb', given.cudaMemLimitMb, 0, MAX_GPU_MEM_MB, 'MiB of GPU memory, 0: no limit');
  }
  if (given.tensorrtCacheDir !== undefined) next.tensorrtCacheDir = tensorrtCacheDirSetting(given.tensorrtCacheDir);
  if (given.webgpuCpuAdapter !== undefined) {
    if (typeof given.webgpuCpuAdapter !== 'boolean') invalid('webgpuCpuAdapter', 'webgpuCpuAdapter must be a boolean.');
    next.webgpuCpuAdapter = given.webgpuCpuAdapter;
  }
  if (given.onnxRuntimeLibrary !== undefined) next.onnxRuntimeLibrary = libraryFileSetting(given.onnxRuntimeLibrary);
  if (given.addonBuild !== undefined) next.addonBuild = addonBuildSetting(given.addonBuild);
  if (given.fetchAllowPrivate !== undefined) {
    if (typeof given.fetchAllowPrivate !== 'boolean') invalid('fetchAllowPrivate', 'fetchAllowPrivate must be a boolean.');
    next.fetchAllowPrivate = given.fetchAllowPrivate;
  }
  if (given.fetchAllow !== undefined) next.fetchAllow = fetchAllowSetting(given.fetchAllow);
  if (given.modelIdleSeconds !== undefined) {
    next.modelIdleSeconds = integerSetting('modelIdleSeconds', given.modelIdleSeconds, 0, 365 * 24 * 3600, 'seconds, 0: for good');
  }
  if (given.modelsMemoryMb !== undefined) {
    next.modelsMemoryMb = integerSetting('modelsMemoryMb', given.modelsMemoryMb, 0, 1 << 20, 'MiB, 0: no limit');
  }
  if (given.inferenceTimeout !== undefined) {
    next.inferenceTimeout = integerSetting('inferenceTimeout', given.inferenceTimeout, 0, 86_400, 'seconds one model run may take, 0: no limit');
  }
  return next;
}
