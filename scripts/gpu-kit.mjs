// Packs what scripts/gpu-check.sh needs on a GPU machine that may have no Node and reaches no
// registry, in parts that each travel in one call of the device tool (at most 64 MiB with the
// working tree): this Node, the built addon with its ONNX Runtime and libvips, dist/, the runtime
// packages the library, the input maker and the model tools load, the published model the GPU's
// float variant is derived from, and Debian's Vulkan loader (libvulkan1) for WebGPU.
//
//   node scripts/gpu-kit.mjs [--out .gpu-kit] [--part-mib 52] [--cuda] [--check]
//
// --cuda: also packs the cuda route's libraries (`bgone gpu install` first: the 1.29 core and its CUDA
// provider from .gpu/lib, about 170 MiB of tar.xz) into OUT/cuda-1, cuda-2, ..., made after the WebGPU
// parts so that the WebGPU check runs before they travel; scripts/gpu-check.sh --cuda-kit DIR
// unpacks them. CUDA and cuDNN come from the machine's Python wheels.
//
// Run after `npm install` and `npm run build`. Writes OUT/1, OUT/2, ... (slices of one tar.xz,
// kit.NN) and OUT/README with the device commands. Unpacked in the repository's root, the kit puts
// each file where it is here, Node in .gpu-kit-bin/ and the .deb in .gpu-kit-deb/; scripts/gpu-check.sh
// --kit DIR does that and the rest (the loader unpacked with dpkg -x, the float model derived).
// --check unpacks the parts into a fresh copy of the tracked files here and runs
// scripts/gpu-check.sh --kit --dry-run in it, with nothing of this checkout's node_modules beside it.
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values } = parseArgs({
  options: {
    out: { type: 'string', default: '.gpu-kit' },
    'part-mib': { type: 'string', default: '52' },
    cuda: { type: 'boolean', default: false },
    check: { type: 'boolean', default: false },
  },
});
const out = join(ROOT, values.out);
const partBytes = Number(values['part-mib']) * 2 ** 20;
if (!(partBytes > 0)) throw new Error('--part-mib must be a positive number');

/** Every file under `dir` (relative to ROOT). */
function filesUnder(dir) {
  const found = [];
  for (const entry of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) found.push(...filesUnder(path));
    else found.push(path);
  }
  return found;
}

/** The packages a package needs at run time, itself included, as folders under node_modules. */
function packageClosure(names) {
  const seen = new Set();
  const visit = (name) => {
    if (seen.has(name)) return;
    const dir = join('node_modules', name);
    if (!existsSync(join(ROOT, dir, 'package.json'))) return; // an optional dependency for another platform
    seen.add(name);
    const pkg = JSON.parse(readFileSync(join(ROOT, dir, 'package.json'), 'utf8'));
    for (const dep of [...Object.keys(pkg.dependencies ?? {}), ...Object.keys(pkg.optionalDependencies ?? {})]) visit(dep);
  };
  for (const name of names) visit(name);
  return [...seen];
}

// What the library (dist/src/lib), the input maker (dist/bench/helpers/make-inputs.js: sharp) and
// the model tools (scripts/derive-models.mjs: onnx-proto) load; onnxruntime-node is only the folder
// of the ONNX Runtime library the addon opens.
const packages = packageClosure(['node-gyp-build', 'color-name', 'sharp', 'onnx-proto', '@img/sharp-libvips-linux-x64']);
const ortDir = 'node_modules/onnxruntime-node';
const files = [
  ...packages.flatMap((p) => filesUnder(join('node_modules', p))),
  `${ortDir}/package.json`,
  `${ortDir}/bin/napi-v6/linux/x64/libonnxruntime.so.1`,
  ...filesUnder('build/Release').filter((f) => /\.(node|addon)$/.test(f)),
  ...filesUnder('dist/src'),
  ...filesUnder('dist/bench/helpers'),
  'models/isnet-medium.onnx',
];
for (const f of files) if (!existsSync(join(ROOT, f))) throw new Error(`${f} is missing: run npm install and npm run build first`);
const cudaFiles = values.cuda
  ? ['libonnxruntime.so', 'libonnxruntime_providers_shared.so', 'libonnxruntime_providers_cuda.so'].map((f) => join('.gpu', 'lib', f))
  : [];
for (const f of cudaFiles)
  if (!existsSync(join(ROOT, f))) throw new Error(`${f} is missing: run bgone gpu install (node dist/src/cli/main.js gpu install) first`);

/** Writes `bytes` as parts of at most partBytes into OUT/<prefix>1, <prefix>2, ... named <name>.NN; returns their folders. */
function writeParts(bytes, prefix, name) {
  const parts = Math.ceil(bytes.length / partBytes);
  const folders = [];
  for (let i = 0; i < parts; i++) {
    const folder = join(out, `${prefix}${i + 1}`);
    mkdirSync(folder, { recursive: true });
    writeFileSync(join(folder, `${name}.${String(i).padStart(2, '0')}`), bytes.subarray(i * partBytes, (i + 1) * partBytes));
    folders.push(folder);
  }
  return folders;
}

const stage = mkdtempSync(join(tmpdir(), 'bgone-gpu-kit-'));
try {
  mkdirSync(join(stage, '.gpu-kit-bin'));
  copyFileSync(process.execPath, join(stage, '.gpu-kit-bin', 'node'));
  mkdirSync(join(stage, '.gpu-kit-deb'));
  // Debian's Vulkan loader, as apt downloads it (the device machines' README does the same).
  execFileSync('apt-get', ['download', 'libvulkan1'], { cwd: join(stage, '.gpu-kit-deb'), stdio: 'inherit' });
  const list = join(stage, 'files');
  writeFileSync(list, `${files.join('\n')}\n`);
  const archive = join(stage, 'kit.tar.xz');
  execFileSync('sh', ['-c', `tar -cf - -C "${ROOT}" -T "${list}" -C "${stage}" .gpu-kit-bin .gpu-kit-deb | xz -6 -T0 > "${archive}"`], { stdio: 'inherit' });
  rmSync(out, { recursive: true, force: true });
  const bytes = readFileSync(archive);
  const kitFolders = writeParts(bytes, '', 'kit');
  let cudaFolders = [];
  let cudaBytes = 0;
  if (cudaFiles.length > 0) {
    const cudaArchive = join(stage, 'cuda.tar.xz');
    writeFileSync(list, `${cudaFiles.join('\n')}\n`);
    execFileSync('sh', ['-c', `tar -cf - -C "${ROOT}" -T "${list}" | xz -6 -T0 > "${cudaArchive}"`], { stdio: 'inherit' });
    const cuda = readFileSync(cudaArchive);
    cudaBytes = cuda.length;
    cudaFolders = writeParts(cuda, 'cuda-', 'cuda');
  }
  const rel = (folder) => relative(ROOT, folder);
  const copyTo = (folder, dest) => `run(carry: ["${rel(folder)}"], command: "mkdir -p ${dest} && cp ${rel(folder)}/* ${dest}/`;
  const steps = kitFolders.map((folder, i) =>
    i + 1 < kitFolders.length
      ? `${copyTo(folder, '/tmp/kit')} && ls -la /tmp/kit")`
      : `${copyTo(folder, '/tmp/kit')} && scripts/gpu-check.sh --kit /tmp/kit --provider webgpu 2>&1 | tee $OUT/gpu-check.log")`,
  );
  const cudaSteps = cudaFolders.map((folder, i) =>
    i + 1 < cudaFolders.length
      ? `${copyTo(folder, '/tmp/kit-cuda')} && ls -la /tmp/kit-cuda")`
      : `${copyTo(folder, '/tmp/kit-cuda')} && scripts/gpu-check.sh --kit /tmp/kit --cuda-kit /tmp/kit-cuda --provider cuda 2>&1 | tee $OUT/gpu-check-cuda.log")`,
  );
  writeFileSync(
    join(out, 'README'),
    [
      `bgone GPU kit: ${files.length} files, Node ${process.version}, ${(bytes.length / 2 ** 20).toFixed(1)} MiB of tar.xz in ${kitFolders.length} parts.`,
      'On the device machine, calls made back to back (its /tmp lasts while it stays warm):',
      ...steps.map((step, i) => `${i + 1}. ${step}`),
      ...(cudaSteps.length === 0
        ? []
        : [
            `Then the cuda route, if the device time allows (${(cudaBytes / 2 ** 20).toFixed(1)} MiB of tar.xz in ${cudaFolders.length} parts):`,
            ...cudaSteps.map((step, i) => `${steps.length + i + 1}. ${step}`),
          ]),
      '',
    ].join('\n'),
  );
  console.log(readFileSync(join(out, 'README'), 'utf8'));
  for (const folder of [...kitFolders, ...cudaFolders])
    for (const f of readdirSync(folder)) console.log(`${rel(folder)}/${f}: ${(statSync(join(folder, f)).size / 2 ** 20).toFixed(1)} MiB`);
} finally {
  rmSync(stage, { recursive: true, force: true });
}

if (values.check) {
  // A fresh copy of the tracked files, as the device tool sends them, with the parts in one folder.
  const clone = mkdtempSync(join(tmpdir(), 'bgone-gpu-kit-check-'));
  try {
    execFileSync('sh', ['-c', `cd "${ROOT}" && git ls-files -z | tar --null -T - -cf - | tar -x -C "${clone}"`]);
    mkdirSync(join(clone, 'kit'));
    mkdirSync(join(clone, 'kit-cuda'));
    for (const part of readdirSync(out).filter((d) => /^(cuda-)?\d+$/.test(d))) {
      const to = part.startsWith('cuda-') ? 'kit-cuda' : 'kit';
      for (const f of readdirSync(join(out, part))) copyFileSync(join(out, part, f), join(clone, to, f));
    }
    const cudaArgs = cudaFiles.length > 0 ? ['--cuda-kit', join(clone, 'kit-cuda'), '--provider', 'cuda'] : [];
    // gpu-check.sh puts the kit's Node first on the PATH.
    execFileSync('scripts/gpu-check.sh', ['--kit', join(clone, 'kit'), ...cudaArgs, '--dry-run'], {
      cwd: clone,
      stdio: 'inherit',
      env: { PATH: process.env.PATH, HOME: clone },
    });
  } finally {
    rmSync(clone, { recursive: true, force: true });
  }
}
