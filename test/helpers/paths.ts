/**
 * Where things live. The real photos are the few the tests need, copied into the repository from
 * the DEV set (test/photos/SOURCES.md), so that a clone alone passes its tests; generated fixtures
 * go to test/.fixtures/ (gitignored).
 */
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const PHOTOS_DIR = join(REPO_ROOT, 'test', 'photos');
export const FIXTURES_DIR = join(REPO_ROOT, 'test', '.fixtures');

/** A test photo, e.g. 'gc_teddy.jpg'. */
export function photoPath(name: string): string {
  return join(PHOTOS_DIR, 'images', name);
}

/** The ground-truth mask of a test photo (always a PNG named after the photo). */
export function gtPath(name: string): string {
  return join(PHOTOS_DIR, 'gt', name.replace(/\.(jpg|png)$/, '.png'));
}

export function readPhoto(name: string): Buffer {
  return readFileSync(photoPath(name));
}

/** A generated fixture (see fixtures.ts); test/global-setup.ts makes sure it exists. */
export function fixturePath(name: string): string {
  return join(FIXTURES_DIR, name);
}

export function readFixture(name: string): Buffer {
  return readFileSync(fixturePath(name));
}
