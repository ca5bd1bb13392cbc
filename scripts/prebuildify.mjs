// `npm pack` runs this (prepack): builds prebuilds/<platform>-<arch>/bgone.glibc.node (and on x86-64
// Linux bgone.glibc.avx2.addon) with
// prebuildify (N-API, so one build serves every Node version; tagged glibc so that node-gyp-build
// never offers it to a musl system) and puts the ONNX Runtime library it opens beside it, with its
// licence. An embedder's install then compiles nothing and needs no onnxruntime-node: that package
// is 288 MB for every platform, and its postinstall downloads CUDA files from outside the npm
// registry, which fails where only the registry is reachable. The addon finds libvips through
// RUNPATH entries relative to its own folder (see CMakeLists.txt).
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ortLibraryFile, ortLibraryIn } from './ort-library.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);
const prebuildify = join(dirname(require.resolve('prebuildify/package.json')), 'bin.js');
const target = join(root, 'prebuilds', `${process.platform}-${process.arch}`);

rmSync(join(root, 'prebuilds'), { recursive: true, force: true });
execFileSync(process.execPath, [prebuildify, '--napi', '--strip', '--tag-libc', '--node-gyp', join(root, 'scripts', 'node-gyp-shim.mjs')], {
  cwd: root,
  stdio: 'inherit',
});
// prebuildify moves the compiled addon out of build/Release: a copy goes back, so that a clone keeps
// loading its own build (node-gyp-build prefers it) after `npm pack`, as before it.
copyFileSync(join(target, 'bgone.glibc.node'), join(root, 'build', 'Release', 'bgone.node'));
// The AVX2 build (x86-64 Linux, CMakeLists.txt) goes beside it, under the name src/lib/native.ts
// derives from the addon's, stripped as prebuildify strips its own.
const avx2 = join(root, 'build', 'Release', 'bgone.avx2.addon');
if (existsSync(avx2)) {
  const shipped = join(target, 'bgone.glibc.avx2.addon');
  copyFileSync(avx2, shipped);
  execFileSync('strip', ['--strip-all', shipped], { stdio: 'inherit' });
}
const ortPackage = dirname(require.resolve('onnxruntime-node/package.json'));
copyFileSync(ortLibraryIn(ortPackage), join(target, ortLibraryFile()));
const ortVersion = JSON.parse(readFileSync(join(ortPackage, 'package.json'), 'utf8')).version;
// onnxruntime-node's tarball carries no licence file (its package.json says MIT): the notice that
// must travel with the library is written here.
writeFileSync(join(target, 'ONNXRUNTIME-LICENSE'), ortLicence(ortVersion));
console.log(`bgone: prebuilds/${process.platform}-${process.arch}/ holds the addon and ${ortLibraryFile()} (onnxruntime-node ${ortVersion})`);

function ortLicence(version) {
  return `${ortLibraryFile()} is ONNX Runtime ${version}, taken unchanged from the npm package
onnxruntime-node@${version} (https://github.com/microsoft/onnxruntime), under the MIT License:

MIT License

Copyright (c) Microsoft Corporation

Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.
`;
}
