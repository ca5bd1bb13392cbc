/**
 * Picks the HTTP backend at start: node:http unless uWebSockets.js is asked for by name. uWS 20.30
 * drops header bytes >= 0x80 at either end of a value before any JavaScript sees the head (its
 * parser trims them as whitespace), so on uWS `Content-Length: 0\xff` frames no body and what
 * follows is served as the next request, `Transfer-Encoding: chunked\xff` reads as chunked, and an
 * API key or Idempotency-Key loses those bytes; node:http keeps them (or refuses the head with 400)
 * and nothing uWS exposes shows they were there (the head's size is not told, only the values
 * already trimmed). One package carries the uWS binaries: `uWebSockets.js`, which is
 * @trufflesuite/uws-js-unofficial 20.30 from the npm registry (upstream publishes only on GitHub),
 * with binaries for ABIs 93/108/115 (Node 16-20) needing glibc >= 2.27. A project that reaches GitHub can put upstream's own release under the same name (an
 * npm override, see docs): its binaries sit at the package root instead of binaries/, and every
 * ABI it ships is found the same way. The package's entry file silently swaps in a partial
 * node:http shim when its binary does not load: we never run that file, we load the binary by path.
 * Nothing is read from the environment here: the caller passes the configured choice.
 */
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { BackendChoice } from '../config/defaults.js';
import { type NodeBackendOptions, nodeBackend } from './backends/node.js';
import { type UwsModule, uwsBackend } from './backends/uws.js';
import type { Backend } from './types.js';

/** What BGONE_HTTP and the server's options ask for: a backend by name, or the default ('auto': node:http). */
export type { BackendChoice };

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

const UWS_PACKAGE = 'uWebSockets.js';

/** Where a binary for this platform and ABI may be, in the npm build's layout and in upstream's. */
function binaryCandidates(platform: string, arch: string, abi: string): string[] {
  const file = `uws_${platform}_${arch}_${abi}.node`;
  return [join('binaries', file), file];
}

type UwsAttempt = { ok: true; module: UwsModule; label: string } | { ok: false; why: string };

const requireHere = createRequire(import.meta.url);
const attempts = new Map<string, UwsAttempt>();

/** The installed package's folder and version, or undefined when it is not installed. */
function packageInfo(packageName: string): { dir: string; version: string } | undefined {
  try {
    // The package's main file, not its package.json: a package's "exports" may hide package.json.
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
  const info = packageInfo(UWS_PACKAGE);
  const label = `${UWS_PACKAGE}${info ? `@${info.version}` : ''}`;
  if (!info) return { ok: false, why: `${label} is not installed` };
  const file = binaryCandidates(process.platform, process.arch, abi)
    .map((candidate) => join(info.dir, candidate))
    .find((path) => existsSync(path));
  if (!file) return { ok: false, why: `${label} ships no binary for ${process.platform}-${process.arch} and Node ABI ${abi}` };
  try {
    const mod = requireHere(file) as Partial<UwsModule>;
    // The native module has App and getParts; anything else is not the real thing.
    if (typeof mod.App !== 'function' || typeof mod.getParts !== 'function')
      return { ok: false, why: `${label}'s binary is not the native uWebSockets.js module` };
    return { ok: true, module: mod as UwsModule, label };
  } catch (err) {
    return { ok: false, why: loadFailure(label, err) };
  }
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
 * The backend for `choice`: 'node' is node:http; 'auto' (the default) is node:http too, `reason`
 * saying so; 'uws' is uWebSockets.js or an Error saying why it cannot load. `nodeOptions`
 * configure node:http when it is the one chosen.
 */
export function loadBackend(choice: BackendChoice, probe: BackendProbe = {}, nodeOptions: NodeBackendOptions = {}): ChosenBackend {
  if (choice === 'node') return { backend: nodeBackend(nodeOptions), reason: 'node:http, as configured' };
  if (choice === 'auto') return { backend: nodeBackend(nodeOptions), reason: 'node:http, the default (BGONE_HTTP=uws serves on uWebSockets.js)' };
  const abi = probe.abi ?? process.versions.modules;
  const uws = uwsFor(abi);
  if (uws.ok) return { backend: uwsBackend(uws.module), reason: `uWebSockets.js native binary from ${uws.label} for Node ABI ${abi}, as configured` };
  throw new Error(`the uWebSockets.js HTTP backend was asked for but cannot load: ${uws.why}`);
}

/** Whether the uWebSockets.js backend loads in this process (the test runner's question). */
export function uwsAvailable(): boolean {
  return uwsFor(process.versions.modules).ok;
}
