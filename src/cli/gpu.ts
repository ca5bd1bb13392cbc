/**
 * `bgone gpu install`: the CUDA route's ONNX Runtime from the npm registry (docs/operations.md, "GPU
 * deployment"). com.github.asus4.onnxruntime.linux-x64-gpu@0.4.9 ships the CUDA provider built
 * for ONNX Runtime 1.29, and a provider must match its core, so the 1.29 core comes from
 * com.github.asus4.onnxruntime@0.4.9. That core is built without CUDA: it loads the provider as a
 * plugin (native/providers.cc append_cuda_plugin), which the package's TensorRT provider is not, so
 * TensorRT is not installed. npm installs both into a folder of their own (no install scripts); its
 * lib/ then holds the core beside the provider, and BGONE_ORT_LIBRARY names that core. `--dry-run`
 * prints the plan and downloads nothing.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, linkSync, mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { PACKAGE_ROOT } from '../lib/package-root.js';
import { booleanFlag, type ParsedArgs, stringFlag, UsageError } from './args.js';

export const GPU_CORE_PACKAGE = 'com.github.asus4.onnxruntime';
export const GPU_PROVIDERS_PACKAGE = 'com.github.asus4.onnxruntime.linux-x64-gpu';
export const GPU_PACKAGES_VERSION = '0.4.9';
/** Where both packages keep their Linux x64 libraries. */
const PLATFORM_DIR = join('Plugins', 'Linux', 'x64');
/** The default folder: beside the package, ignored by git. */
export const DEFAULT_GPU_DIR = join(PACKAGE_ROOT, '.gpu');

export interface GpuLibrary {
  /** The package it comes from and its file name there. */
  from: string;
  /** Where it goes, in the plan's lib/. */
  to: string;
  /** Whether the install fails without it. */
  required: boolean;
}

export interface GpuInstallPlan {
  dir: string;
  packages: string[];
  /** The npm command line (its arguments; npm itself is found on PATH). */
  npmArgs: string[];
  libraries: GpuLibrary[];
  /** What to set for bgone to use it. */
  env: { BGONE_ORT_LIBRARY: string; BGONE_EXECUTION_PROVIDER: string };
}

export function gpuInstallPlan(dir: string = DEFAULT_GPU_DIR): GpuInstallPlan {
  const root = resolve(dir);
  const lib = join(root, 'lib');
  const packages = [GPU_CORE_PACKAGE, GPU_PROVIDERS_PACKAGE].map((name) => `${name}@${GPU_PACKAGES_VERSION}`);
  const from = (pkg: string, file: string) => join(root, 'node_modules', pkg, PLATFORM_DIR, file);
  const libraries: GpuLibrary[] = [
    { from: from(GPU_CORE_PACKAGE, 'libonnxruntime.so'), to: join(lib, 'libonnxruntime.so'), required: true },
    { from: from(GPU_CORE_PACKAGE, 'libonnxruntime_providers_shared.so'), to: join(lib, 'libonnxruntime_providers_shared.so'), required: true },
    { from: from(GPU_PROVIDERS_PACKAGE, 'libonnxruntime_providers_cuda.so'), to: join(lib, 'libonnxruntime_providers_cuda.so'), required: true },
  ];
  return {
    dir: root,
    packages,
    npmArgs: ['install', '--prefix', root, '--no-save', '--no-package-lock', '--ignore-scripts', '--no-audit', '--no-fund', ...packages],
    libraries,
    env: { BGONE_ORT_LIBRARY: join(lib, 'libonnxruntime.so'), BGONE_EXECUTION_PROVIDER: 'cuda' },
  };
}

/** The plan in words, one step a line. */
export function describePlan(plan: GpuInstallPlan): string[] {
  return [
    `npm ${plan.npmArgs.join(' ')}`,
    ...plan.libraries.map((l) => `${l.required ? 'place' : 'place if present'} ${l.from} -> ${l.to}`),
    `then: BGONE_ORT_LIBRARY=${plan.env.BGONE_ORT_LIBRARY} BGONE_EXECUTION_PROVIDER=${plan.env.BGONE_EXECUTION_PROVIDER}`,
    'with CUDA 13 (libcudart.so.13, libcublas.so.13, libcublasLt.so.13, libcurand.so.10) and cuDNN 9 (libcudnn.so.9) on the library path',
  ];
}

/**
 * Puts the installed libraries in lib/ (a hard link, or a copy across file systems). Throws an Error
 * naming each required library the packages did not hold; returns the files placed.
 */
export function placeLibraries(plan: GpuInstallPlan): string[] {
  const absent = plan.libraries.filter((l) => l.required && !existsSync(l.from));
  if (absent.length > 0) throw new Error(`the installed packages lack ${absent.map((l) => l.from).join(', ')}`);
  const placed: string[] = [];
  for (const library of plan.libraries) {
    if (!existsSync(library.from)) continue;
    mkdirSync(join(library.to, '..'), { recursive: true });
    rmSync(library.to, { force: true });
    try {
      linkSync(library.from, library.to);
    } catch {
      copyFileSync(library.from, library.to);
    }
    placed.push(library.to);
  }
  return placed;
}

export function gpuCommand(args: ParsedArgs): number {
  if (args.action !== 'install') throw new UsageError(`unknown command: gpu ${args.action}`);
  const plan = gpuInstallPlan(stringFlag(args, 'dir') ?? DEFAULT_GPU_DIR);
  if (existsSync(plan.dir) && !statSync(plan.dir).isDirectory()) throw new UsageError(`--dir ${plan.dir} is not a folder`);
  if (booleanFlag(args, 'dry-run')) {
    console.log(
      `bgone gpu install would (nothing is downloaded with --dry-run):\n${describePlan(plan)
        .map((l) => `  ${l}`)
        .join('\n')}`,
    );
    return 0;
  }
  mkdirSync(plan.dir, { recursive: true });
  console.log(`bgone: installing ${plan.packages.join(' and ')} into ${plan.dir} (about 400 MB)`);
  const npm = spawnSync('npm', plan.npmArgs, { stdio: 'inherit' });
  if (npm.error || npm.status !== 0) {
    console.error(`bgone: npm ${plan.npmArgs.join(' ')} failed${npm.error ? `: ${npm.error.message}` : ` (exit ${npm.status})`}`);
    return 1;
  }
  let placed: string[];
  try {
    placed = placeLibraries(plan);
  } catch (err) {
    console.error(`bgone: ${(err as Error).message}; found: ${readdirSync(plan.dir).join(', ')}`);
    return 1;
  }
  console.log(`placed ${placed.length} libraries in ${join(plan.dir, 'lib')}\n${describePlan(plan).slice(-2).join('\n')}`);
  return 0;
}
