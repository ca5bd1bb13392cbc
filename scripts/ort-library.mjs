// Where the ONNX Runtime shared library is, for the scripts that ship or fetch it. src/lib/native.ts
// looks for the same file name beside the loaded addon.
import { copyFileSync, existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { packAndExtract } from './npm-pack.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);

export function ortLibraryFile(platform = process.platform) {
  return platform === 'darwin' ? 'libonnxruntime.1.dylib' : platform === 'win32' ? 'onnxruntime.dll' : 'libonnxruntime.so.1';
}

/** The library inside an unpacked onnxruntime-node package, for this platform. */
export function ortLibraryIn(packageDir) {
  return join(packageDir, 'bin', 'napi-v6', process.platform, process.arch, ortLibraryFile());
}

/**
 * After a compile from source: puts the ONNX Runtime library beside the addon when onnxruntime-node
 * is not installed (an embedder's install, where it is only a development dependency). The library
 * comes from onnxruntime-node's tarball on the npm registry, unpacked without running its scripts.
 */
export function placeOrtLibraryBeside(addonDir) {
  try {
    require.resolve('onnxruntime-node/package.json');
    return; // a clone: src/lib/native.ts falls back to that package's copy
  } catch {}
  const target = join(addonDir, ortLibraryFile());
  if (existsSync(target)) return;
  const { devDependencies } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
  const spec = `onnxruntime-node@${devDependencies['onnxruntime-node']}`;
  console.log(`bgone: fetching the ONNX Runtime library from ${spec}`);
  const pkg = packAndExtract(spec);
  try {
    copyFileSync(ortLibraryIn(pkg.dir), target);
  } finally {
    pkg.cleanup();
  }
}
