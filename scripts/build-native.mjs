// Compiles the addon with cmake-js (headers fetched first). Used by `npm install` when no prebuild
// matches this platform, and by `npm run build:native` during development.
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { fetchOrtHeaders } from './fetch-ort-headers.mjs';
import { placeOrtLibraryBeside } from './ort-library.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);

export function buildNative({ rebuild = false } = {}) {
  fetchOrtHeaders();
  const cmakeJs = join(dirname(require.resolve('cmake-js/package.json')), 'bin', 'cmake-js');
  execFileSync(process.execPath, [cmakeJs, rebuild ? 'rebuild' : 'compile', '--config', 'Release', '--log-level', 'warn'], { cwd: root, stdio: 'inherit' });
  placeOrtLibraryBeside(join(root, 'build', 'Release'));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) buildNative({ rebuild: process.argv.includes('--rebuild') });
