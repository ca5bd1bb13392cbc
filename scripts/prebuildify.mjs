// `npm run prebuildify`: builds prebuilds/<platform>-<arch>/bgone.node (N-API, so one build serves
// every Node version) that node-gyp-build loads when there is no build/Release. The addon finds
// libvips through RUNPATH entries relative to its own folder (see CMakeLists.txt).
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);
const prebuildify = join(dirname(require.resolve('prebuildify/package.json')), 'bin.js');
execFileSync(process.execPath, [prebuildify, '--napi', '--strip', '--node-gyp', join(root, 'scripts', 'node-gyp-shim.mjs')], { cwd: root, stdio: 'inherit' });
