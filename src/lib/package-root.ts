/**
 * The package root: the nearest folder above this file with a package.json. Found from the file's
 * own location, so the library works the same from src/ (vitest, tsx) and from dist/src/, as the
 * app itself or installed under another app's node_modules.
 */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

function findPackageRoot(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    if (dirname(dir) === dir) throw new Error(`bgone: no package.json above ${from}`);
  }
}

export const PACKAGE_ROOT = findPackageRoot(dirname(fileURLToPath(import.meta.url)));
