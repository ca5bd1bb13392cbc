/**
 * Loads the addon (node-gyp-build: build/Release first, then prebuilds/) and starts it once, with
 * the path of the ONNX Runtime library, which the addon opens with dlopen: the onnxRuntimeLibrary
 * setting, else the copy beside the addon (a prebuild ships one, a compile from source in another
 * project fetches one), else onnxruntime-node's (a clone, where it is a development dependency).
 * On x86-64 Linux a second build of the same sources for AVX2 lies beside it (CMakeLists.txt), loaded
 * instead where the CPU runs it (the addonBuild setting).
 * A failure to load or start it is a BgoneError (internal_error), never a bare Error.
 */
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { addonLoadError, onnxRuntimeLoadError } from './errors.js';
import type { EncodedFormat, NativeOptions } from './options.js';
import { PACKAGE_ROOT } from './package-root.js';
import { type AddonBuild, librarySettings, type ProviderName } from './settings.js';

const require = createRequire(import.meta.url);

export interface NativeTimings {
  decode: number;
  preprocess: number;
  queue: number;
  inference: number;
  /**
   * CPU time of the whole process while the model ran (ms, all threads). With one job at a time, the
   * job's CPU minus this is its CPU cost outside the inference (what still runs on the CPU when the
   * model runs on a GPU).
   */
  inferenceCpu: number;
  resize: number;
  matting: number;
  encode: number;
  /** The outline's and the blurred background's layers, made before composing (their sampling row by row counts as encode). */
  effects: number;
  total: number;
}

/** A box in the result's pixels. */
export interface ForegroundBox {
  top: number;
  left: number;
  width: number;
  height: number;
}

export interface NativeResult {
  data: Buffer;
  width: number;
  height: number;
  channels: number;
  /** What was encoded (format auto decided); with zip, jpg: the colours. */
  format: Exclude<EncodedFormat, 'zip'>;
  /** With zip: the alpha as a one-band PNG of the same size; else null. */
  alpha: Buffer | null;
  /** The subject's box (mask ≥ 0.5) in the result's pixels, clipped to it; all 0 when it falls outside. */
  foreground: ForegroundBox;
  /**
   * How unsure the model is of its mask, 0..1 (native/pipeline.cc uncertainty; docs/contract.md,
   * "Uncertainty"): higher where the photo's matte is more likely wrong.
   */
  uncertainty: number;
  timings: NativeTimings;
}

/** What crosses into C++ for loadModel (read field by field by native/addon.cc read_model_spec). */
export interface NativeModelSpec {
  path: string;
  /** Which of the graph's outputs is the matte (the graph's first input takes the image). */
  outputIndex: number;
  /** How that output becomes a matte: model-families.ts MATTE_TRANSFORMS. */
  matteTransform: number;
  width: number;
  height: number;
  mean: [number, number, number];
  /** The graph takes any input size: the job's inferenceSize is used instead of width × height. */
  dynamicSize: boolean;
  std: [number, number, number];
  /** ONNX Runtime intra-op threads, at least 1 (settings.ts inferenceThreadCount resolves 0). */
  threads: number;
  /** Execution provider (native/providers.h). */
  provider: ProviderName;
  /** With cuda: the GPU's index (0 with cpu). */
  deviceId: number;
  /** With cuda: the most GPU memory ONNX Runtime's arena takes, in MiB; 0: no limit. */
  gpuMemLimitMb: number;
  /** With tensorrt: the existing folder of its engine and timing caches; '': none (and with every other provider). */
  tensorrtCacheDir: string;
  /** With webgpu: whether a CPU Vulkan device may run the model when the loader lists no GPU (false with every other provider). */
  webgpuCpuAdapter: boolean;
  /** Runs on a blank input right after loading, whose memory is given back at once (0: none). */
  warmUpRuns: number;
  /** The side of those runs when the graph takes any size (else its own width × height). */
  warmUpSide: number;
  /** The longest one run may take, in ms (0: no limit): a run past it is stopped and fails its job (native/run_deadline.h). */
  runTimeoutMs: number;
}

/** Opaque handle on a loaded model session. */
export type ModelHandle = { readonly __brand: 'ModelHandle' };

/**
 * The addon's functions. Each reads its object argument strictly (native/fields.h): a missing,
 * mistyped or unknown field throws a TypeError, which means a bug in src/lib.
 */
interface Addon {
  init(options: { onnxruntime: string }): { vips: string };
  /**
   * Rejects with { code, message } (and reason 'execution_provider' when the provider could not
   * be set up, e.g. CUDA with a CPU-only ONNX Runtime).
   */
  loadModel(spec: NativeModelSpec): Promise<ModelHandle>;
  /** Lets go of the handle's session: jobs running on it keep it until they end. */
  releaseModel(model: ModelHandle): void;
  /** Bytes the session holds for its life (its weights on the CPU); 0 once released. */
  modelMemory(model: ModelHandle): number;
  /**
   * The execution providers the loaded ONNX Runtime was built with (GetAvailableProviders), e.g.
   * ['CPUExecutionProvider']. One listed may still fail to load: its libraries, CUDA or cuDNN missing.
   */
  availableProviders(): string[];
  /**
   * The name of the Vulkan device the WebGPU provider runs on (a discrete GPU before an integrated
   * one, before a CPU device), as the Vulkan loader lists it; null without a loader or a device.
   */
  webgpuDevice(): string | null;
  /**
   * `background`: the encoded bytes of a JPEG, PNG or WebP background image (scaled to cover the
   * canvas, the subject composed over it), or null. An error caused by it carries input: 'background'.
   * `model`: null exactly when options.inference is false (a job that runs no model).
   */
  removeBackground(input: Buffer, options: NativeOptions, model: ModelHandle | null, background: Buffer | null): Promise<NativeResult>;
  /** Sniff and header check only (no pixel decoded); throws a coded error like removeBackground. */
  probe(input: Buffer, maxSide: number): { format: 'jpg' | 'png' | 'webp'; width: number; height: number };
  /** The large blocks of native/buffers.h, in bytes. */
  memoryStats(): NativeMemoryStats;
  /**
   * The model's matte (its output through the family's transform, unclamped) for width × height RGB
   * pixels given to the model as they are, normalised as a job's are; throws a coded error where a
   * job's run fails (a matte not finite everywhere, a run past its limit). Synchronous: for the
   * proving process of `bgone models add`.
   */
  modelMatte(model: ModelHandle, rgb: Buffer, width: number, height: number): Float32Array;
  /** The most private writable memory (RLIMIT_DATA) the process may map from now on: for the proving process of `bgone models add`. */
  limitMemory(bytes: number): void;
  /**
   * Tells every model run in progress to stop, and every later one as it starts (each fails its job
   * with internal_error); returns how many were in progress. For a process that is ending.
   */
  stopRuns(): number;
  /** Model runs in progress now. */
  runsInProgress(): number;
  /** The PNG writer alone on raw pixels (rows of width x bands bytes), for tests of its encoders. */
  encodePng(pixels: Buffer, width: number, height: number, bands: number, level: number): Buffer;
  /** The model input's resampler alone (native/model_resample.h): 3 or 4 bands in, RGB out, for its tests. */
  resampleForModel(pixels: Buffer, width: number, height: number, bands: number, outWidth: number, outHeight: number): Buffer;
  /**
   * Takes (take true) or gives back a write lock on `length` bytes of an open file from `start`;
   * false when another descriptor holds one of them (Linux's open file description locks, for the
   * SQLite owner lock, src/store/sqlite/owner-lock.ts).
   */
  lockBytes(fd: number, start: number, length: number, take: boolean): boolean;
  /** The first byte of a lock another descriptor holds on those bytes, null when none. */
  lockedByte(fd: number, start: number, length: number): number | null;
  /**
   * The next call of any export throws a C++ exception of this kind inside the guard every export
   * runs in (native/addon.cc): for the test that proves none reaches N-API.
   */
  failNextCall(kind: 'contract' | 'pipeline' | 'bad_alloc' | 'std' | 'unknown'): void;
}

/**
 * The native core's large blocks (native/buffers.h): bytes in use by jobs now, bytes kept warm for
 * the next job (given back to the OS about a second after the last job ends), the most bytes in use
 * at once since they were last given back (the cached and in-use blocks together stay within 1.75
 * times it), and how many blocks were mapped so far (a job on warm memory maps next to none).
 * Besides them, `lasting`: bytes mapped for the loaded models' weights (each session's own huge
 * pages, given back when the model is dropped). And `inferenceStages`: the jobs that reached the
 * inference stage so far (every check before it passed), for tests of what is refused before it.
 */
export interface NativeMemoryStats {
  inUse: number;
  cached: number;
  peak: number;
  mapped: number;
  lasting: number;
  inferenceStages: number;
}

const ORT_LIBRARY_FILE = process.platform === 'darwin' ? 'libonnxruntime.1.dylib' : process.platform === 'win32' ? 'onnxruntime.dll' : 'libonnxruntime.so.1';

/** The addon file node-gyp-build picks (build/Release first, then a matching prebuild). */
function addonPath(): string {
  return (require('node-gyp-build') as { path(dir: string): string }).path(PACKAGE_ROOT);
}

/**
 * The AVX2 build beside an addon file: its name with .avx2.addon for .node (bgone.avx2.addon in
 * build/Release, bgone.glibc.avx2.addon in a prebuild). Not a .node file, so that node-gyp-build
 * never offers it to a CPU without AVX2.
 */
function avx2Build(file: string): string {
  return file.replace(/\.node$/, '.avx2.addon');
}

let avx2: boolean | undefined;

/** Whether this CPU runs AVX2 code (read once): Linux lists avx2 only where the kernel also saves its registers. */
export function cpuRunsAvx2(): boolean {
  if (avx2 === undefined) {
    avx2 = false;
    if (process.platform === 'linux' && process.arch === 'x64') {
      try {
        const flags = /^flags\s*:(.*)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1] ?? '';
        avx2 = flags.split(/\s+/).includes('avx2');
      } catch {
        // No /proc: the baseline build.
      }
    }
  }
  return avx2;
}

/** The addon file the addonBuild setting chooses: the AVX2 build where it may, else node-gyp-build's. */
export function addonFile(build: AddonBuild = librarySettings().addonBuild): string {
  const baseline = addonPath();
  const avx2File = avx2Build(baseline);
  return build === 'auto' && avx2File !== baseline && existsSync(avx2File) && cpuRunsAvx2() ? avx2File : baseline;
}

/** Loads an addon file; the AVX2 build's suffix is not .node, which require() would read as JavaScript. */
function loadAddon(file: string): Addon {
  if (file.endsWith('.node')) return require(file) as Addon;
  const module = { exports: {} };
  process.dlopen(module, file);
  return module.exports as Addon;
}

/** The default of the onnxRuntimeLibrary setting: beside the addon, else onnxruntime-node's copy. */
export function defaultOnnxRuntimeLibrary(): string {
  try {
    const beside = join(dirname(addonPath()), ORT_LIBRARY_FILE);
    if (existsSync(beside)) return beside;
  } catch {
    // no addon at all: native() reports that; the path below is only named in messages
  }
  try {
    return join(dirname(require.resolve('onnxruntime-node/package.json')), 'bin', 'napi-v6', process.platform, process.arch, ORT_LIBRARY_FILE);
  } catch {
    return join(PACKAGE_ROOT, 'prebuilds', `${process.platform}-${process.arch}`, ORT_LIBRARY_FILE);
  }
}

/** What native/ort.cc's load_onnxruntime says when the library is the problem. */
const ORT_FAILURE = /ONNX Runtime|OrtGetApiBase|CreateEnv/;

let addon: Addon | undefined;
let versions: { vips: string } | undefined;
let startedWith: string | undefined;
let loadedFile: string | undefined;

/** The started addon; throws BgoneError('internal_error') if it cannot be loaded or started. */
export function native(): Addon {
  if (!addon) {
    let file: string;
    let loaded: Addon;
    try {
      file = addonFile();
      loaded = loadAddon(file);
    } catch (err) {
      throw addonLoadError(err);
    }
    const library = librarySettings().onnxRuntimeLibrary ?? defaultOnnxRuntimeLibrary();
    try {
      versions = loaded.init({ onnxruntime: library });
    } catch (err) {
      // The addon is there; what init opens first is the ONNX Runtime library (native/ort.cc).
      if (ORT_FAILURE.test((err as Error)?.message ?? '')) throw onnxRuntimeLoadError(library, err);
      throw addonLoadError(err);
    }
    addon = loaded;
    startedWith = library;
    loadedFile = file;
  }
  return addon;
}

/** The ONNX Runtime library the started addon opened; undefined before it started. */
export function onnxRuntimeLibraryInUse(): string | undefined {
  return startedWith;
}

/** The addon file the started native core came from; undefined before it started. */
export function addonFileInUse(): string | undefined {
  return loadedFile;
}

/**
 * Tells every model run in progress, and every later one, to stop (each fails its job); returns how
 * many were in progress. Nothing when the native core never started.
 */
export function stopRuns(): number {
  return addon ? addon.stopRuns() : 0;
}

/** The native core's large blocks now (starts the native core). */
export function nativeMemoryStats(): NativeMemoryStats {
  return native().memoryStats();
}

export function nativeVersions(): { vips: string } {
  native();
  return versions!;
}
