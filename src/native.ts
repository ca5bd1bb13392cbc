/**
 * Loads the addon (node-gyp-build: build/Release first, then prebuilds/) and starts it once, with
 * the path of onnxruntime-node's ONNX Runtime library, which the addon opens with dlopen.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { NativeOptions } from './options.js';

const require = createRequire(import.meta.url);

/** The package root: the nearest folder with a package.json (works from src/ and from dist/src/). */
function findPackageRoot(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    if (dirname(dir) === dir) throw new Error(`bgone: no package.json above ${from}`);
  }
}
export const PACKAGE_ROOT = findPackageRoot(dirname(fileURLToPath(import.meta.url)));

export interface NativeTimings {
  decode: number;
  preprocess: number;
  queue: number;
  inference: number;
  resize: number;
  matting: number;
  encode: number;
  total: number;
}

export interface NativeResult {
  data: Buffer;
  width: number;
  height: number;
  channels: number;
  timings: NativeTimings;
}

export interface NativeModelSpec {
  path: string;
  inputName: string;
  outputName: string;
  width: number;
  height: number;
  mean: number[];
  std: number[];
  threads: number;
}

/** Opaque handle on a loaded model session. */
export type ModelHandle = { readonly __brand: 'ModelHandle' };

interface Addon {
  init(options: { onnxruntime: string; vipsConcurrency?: number }): { vips: string };
  loadModel(spec: NativeModelSpec): Promise<ModelHandle>;
  removeBackground(input: Buffer, options: NativeOptions, model: ModelHandle): Promise<NativeResult>;
}

function onnxRuntimeLibrary(): string {
  const pkg = dirname(require.resolve('onnxruntime-node/package.json'));
  const platform = process.platform === 'win32' ? 'win32' : process.platform;
  const file = process.platform === 'darwin' ? 'libonnxruntime.1.dylib' : process.platform === 'win32' ? 'onnxruntime.dll' : 'libonnxruntime.so.1';
  return join(pkg, 'bin', 'napi-v6', platform, process.arch, file);
}

let addon: Addon | undefined;
let versions: { vips: string } | undefined;

export function native(): Addon {
  if (!addon) {
    const loaded = require('node-gyp-build')(PACKAGE_ROOT) as Addon;
    versions = loaded.init({ onnxruntime: onnxRuntimeLibrary() });
    addon = loaded;
  }
  return addon;
}

export function nativeVersions(): { vips: string } {
  native();
  return versions!;
}
