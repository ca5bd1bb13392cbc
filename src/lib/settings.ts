/**
 * The library's process-wide settings, their defaults (here and nowhere else) and their validation.
 * The library never reads the environment: the application reads its variables once, at start
 * (src/config), and passes them to configure(). Until then the defaults apply.
 */
import { statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { BgoneError } from './errors.js';
import { PACKAGE_ROOT } from './package-root.js';

export interface LibrarySettings {
  /** Folder holding manifest.json and the model files. Default: the package's models/ folder. */
  modelsDir: string;
  /** ONNX Runtime intra-op threads for one inference; 0 (default): one per core. */
  inferenceThreads: number;
  /**
   * Jobs inside the native core at once (default 2): a second job's decode and encode overlap the
   * first one's inference, while more would only hold libuv threads waiting on the inference lock.
   */
  nativeConcurrency: number;
}

export const DEFAULT_SETTINGS: Readonly<LibrarySettings> = Object.freeze({
  modelsDir: join(PACKAGE_ROOT, 'models'),
  inferenceThreads: 0,
  nativeConcurrency: 2,
});

/** Above this, a value is a typo rather than a machine (the native core refuses more than 4096). */
const MAX_THREADS = 1024;

let current: Readonly<LibrarySettings> = DEFAULT_SETTINGS;

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

const KNOWN: ReadonlyArray<keyof LibrarySettings> = ['modelsDir', 'inferenceThreads', 'nativeConcurrency'];

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
    next.nativeConcurrency = integerSetting('nativeConcurrency', given.nativeConcurrency, 1, MAX_THREADS, 'jobs inside the native core at once');
  }
  return next;
}
