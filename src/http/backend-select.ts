/**
 * Picks the HTTP backend at start: uWebSockets.js where a native build for this Node ABI loads,
 * node:http everywhere else. Two packages carry uWS binaries, each for some ABIs only:
 * - `uWebSockets.js` (= @trufflesuite/uws-js-unofficial 20.30): ABIs 93/108/115 (Node 16-20),
 *   glibc >= 2.27. Its entry file silently swaps in a partial node:http shim when its binary does
 *   not load, and prints about it: we never run that file, we load the binary itself by path.
 * - @btc-vision/uwebsockets.js 20.57: ABIs 115/127/137/141 (Node 20-25), but glibc >= 2.38.
 * Where both could serve (ABI 115) the trufflesuite build comes first: Node 20 then runs the same
 * uWS build on every glibc, the one the test suite exercises on the reference machine (glibc 2.36,
 * where the 20.57 build cannot load and so cannot be tested); 20.57 is the fallback there.
 * Nothing is read from the environment here: the caller passes the configured choice.
 */
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { type NodeBackendOptions, nodeBackend } from './backends/node.js';
import { type UwsModule, uwsBackend } from './backends/uws.js';
import type { Backend } from './types.js';

export type BackendChoice = 'auto' | 'uws' | 'node';

/** What is probed instead of this process (tests). */
export interface BackendProbe {
  /** A Node ABI (process.versions.modules) other than this process's. */
  abi?: string;
}

export interface ChosenBackend {
  backend: Backend;
  /** One line for the start-up log: which build loaded, or why node:http serves instead. */
  reason: string;
}

interface UwsBuild {
  /** The package name as installed (the dependency's key in package.json). */
  packageName: string;
  /** Node ABIs it ships binaries for. */
  abis: readonly string[];
  /** The binary's path inside the package. */
  binary(platform: string, arch: string, abi: string): string;
}

const UWS_BUILDS: readonly UwsBuild[] = [
  {
    packageName: 'uWebSockets.js',
    abis: ['93', '108', '115'],
    binary: (platform, arch, abi) => join('binaries', `uws_${platform}_${arch}_${abi}.node`),
  },
  {
    packageName: '@btc-vision/uwebsockets.js',
    abis: ['115', '127', '137', '141'],
    binary: (platform, arch, abi) => `uws_${platform}_${arch}_${abi}.node`,
  },
];

type UwsAttempt = { ok: true; module: UwsModule; label: string } | { ok: false; why: string };

const requireHere = createRequire(import.meta.url);
const attempts = new Map<string, UwsAttempt>();

/** The installed package's folder and version, or undefined when it is not installed. */
function packageInfo(packageName: string): { dir: string; version: string } | undefined {
  try {
    // The package's main file, not its package.json: @btc-vision's "exports" hides package.json.
    let dir = dirname(requireHere.resolve(packageName));
    while (!existsSync(join(dir, 'package.json'))) {
      const parent = dirname(dir);
      if (parent === dir) return undefined;
      dir = parent;
    }
    const version = (JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { version?: string }).version ?? '?';
    return { dir, version };
  } catch {
    return undefined;
  }
}

function glibcVersion(): string | undefined {
  const report = process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined;
  return report?.header?.glibcVersionRuntime;
}

/** Why a binary did not load, in one line (the dlopen message names a missing glibc symbol version). */
function loadFailure(label: string, err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  const glibc = /GLIBC_(\d+(?:\.\d+)+)' not found/.exec(message);
  if (glibc) return `${label} needs glibc ${glibc[1]}, this system has ${glibcVersion() ?? 'an older one'}`;
  return `${label} failed to load: ${message.split('\n')[0]}`;
}

function tryUws(abi: string): UwsAttempt {
  const builds = UWS_BUILDS.filter((build) => build.abis.includes(abi));
  if (builds.length === 0) return { ok: false, why: `no uWebSockets.js build ships a binary for Node ABI ${abi}` };
  const failures: string[] = [];
  for (const build of builds) {
    const info = packageInfo(build.packageName);
    const label = `${build.packageName}${info ? `@${info.version}` : ''}`;
    if (!info) {
      failures.push(`${label} is not installed`);
      continue;
    }
    const file = join(info.dir, build.binary(process.platform, process.arch, abi));
    if (!existsSync(file)) {
      failures.push(`${label} has no binary for ${process.platform}-${process.arch}`);
      continue;
    }
    try {
      const mod = requireHere(file) as Partial<UwsModule>;
      // The native module has App and getParts; anything else is not the real thing.
      if (typeof mod.App !== 'function' || typeof mod.getParts !== 'function') {
        failures.push(`${label}'s binary is not the native uWebSockets.js module`);
        continue;
      }
      return { ok: true, module: mod as UwsModule, label };
    } catch (err) {
      failures.push(loadFailure(label, err));
    }
  }
  return { ok: false, why: `no uWebSockets.js binary for Node ABI ${abi} loads here: ${failures.join('; ')}` };
}

/** Each ABI is tried once per process: a loaded binary stays loaded, a failed dlopen fails again. */
function uwsFor(abi: string): UwsAttempt {
  let attempt = attempts.get(abi);
  if (!attempt) {
    attempt = tryUws(abi);
    attempts.set(abi, attempt);
  }
  return attempt;
}

/**
 * The backend for `choice`: 'node' is node:http; 'uws' is uWebSockets.js or an Error saying why it
 * cannot load; 'auto' is uWebSockets.js when it loads, node:http otherwise, `reason` saying which
 * and why. `nodeOptions` configure node:http when it is the one chosen.
 */
export function loadBackend(choice: BackendChoice, probe: BackendProbe = {}, nodeOptions: NodeBackendOptions = {}): ChosenBackend {
  if (choice === 'node') return { backend: nodeBackend(nodeOptions), reason: 'node:http, as configured' };
  const abi = probe.abi ?? process.versions.modules;
  const uws = uwsFor(abi);
  if (uws.ok) return { backend: uwsBackend(uws.module), reason: `uWebSockets.js native binary from ${uws.label} for Node ABI ${abi}` };
  if (choice === 'uws') throw new Error(`the uWebSockets.js HTTP backend was asked for but cannot load: ${uws.why}`);
  return { backend: nodeBackend(nodeOptions), reason: `node:http, because ${uws.why}` };
}

/** Whether the uWebSockets.js backend loads in this process (the test runner's question). */
export function uwsAvailable(): boolean {
  return uwsFor(process.versions.modules).ok;
}
