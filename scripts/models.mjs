// Which models are installed, and installing more: the one place that turns model names into
// files in models/. `npm install` installs the default model (or BGONE_MODELS), `bgone models add`
// and the test setup install more later. A derived model needs its published source only while it
// is derived: the source is removed afterwards unless it was asked for by name, so an install holds
// just the models in use (the default is 44 MB; the published source it comes from is 88 MB).
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { deriveModels, sourcesOf } from './derive-models.mjs';
import { fetchModels, modelIsPresent } from './fetch-models.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
export const defaultModelsDir = join(root, 'models');

export function readManifest(dir = defaultModelsDir) {
  return JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8'));
}

/** The names BGONE_MODELS asks for (comma-separated, or `all`), else the manifest's default. */
export function requestedModels(manifest, env = process.env) {
  const list = (env.BGONE_MODELS ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (list.includes('all')) return Object.keys(manifest.models);
  return list.length > 0 ? list : [manifest.default];
}

/** Each model of the manifest with whether its file is there and current (sha256). */
export function listModels(dir = defaultModelsDir) {
  const manifest = readManifest(dir);
  return Object.entries(manifest.models).map(([name, entry]) => ({
    name,
    file: entry.file,
    bytes: entry.bytes,
    isDefault: name === manifest.default,
    installed: modelIsPresent(entry, dir),
  }));
}

/**
 * Installs the named models (fetching published ones, deriving the others), then removes each
 * published source that was fetched only to derive from and was not named. Throws on an unknown
 * name before anything is fetched.
 */
export function addModels(names, { dir = defaultModelsDir } = {}) {
  const manifest = readManifest(dir);
  const unknown = names.filter((n) => !Object.hasOwn(manifest.models, n));
  if (unknown.length > 0) throw new Error(`unknown model ${unknown.join(', ')}: the manifest lists ${Object.keys(manifest.models).join(', ')}`);
  const missing = names.filter((n) => !modelIsPresent(manifest.models[n], dir));
  if (missing.length === 0) return [];
  const sources = sourcesOf(manifest, missing).filter((n) => !names.includes(n));
  const sourcesThere = new Set(sources.filter((n) => existsSync(join(dir, manifest.models[n].file))));
  fetchModels({ only: sourcesOf(manifest, missing), dir });
  deriveModels({ only: missing, dir });
  for (const source of sources) {
    if (sourcesThere.has(source)) continue; // it was installed before: someone uses it
    rmSync(join(dir, manifest.models[source].file), { force: true });
    console.log(`bgone: removed ${manifest.models[source].file} (the published source of ${missing.join(', ')}, not itself requested)`);
  }
  return missing;
}
