/**
 * Runs once before the test files (in vitest's main process):
 * 1. compiles the project into dist/ (tests that start worker threads or child processes load the
 *    compiled store and CLI, which must be the current source);
 * 2. generates the fixtures in test/.fixtures/ from the test photos (test/photos) if any is missing or stale;
 * 3. installs every model of the manifest (npm install puts only the default): the tests check each
 *    installed file and derive them again, and some run the small model.
 */
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { join } from 'node:path';
// @ts-expect-error: a plain ESM script without type declarations
import { addModels, readManifest } from '../scripts/models.mjs';
import { ensureFixtures } from './helpers/fixtures.js';
import { REPO_ROOT } from './helpers/paths.js';

export default async function setup(): Promise<void> {
  // Each vitest project lists this setup; they share vitest's main process, so once is enough.
  if (process.env.BGONE_TEST_SETUP_DONE === '1') return;
  process.env.BGONE_TEST_SETUP_DONE = '1';
  const tsc = createRequire(join(REPO_ROOT, 'package.json')).resolve('typescript/bin/tsc');
  try {
    execFileSync(process.execPath, [tsc, '-p', join(REPO_ROOT, 'tsconfig.json')], { cwd: REPO_ROOT, stdio: 'pipe' });
  } catch (err) {
    const e = err as { stdout?: Buffer; stderr?: Buffer };
    throw new Error(`compiling the project failed:\n${e.stdout?.toString() ?? ''}${e.stderr?.toString() ?? ''}`);
  }
  await ensureFixtures((line) => console.log(`[global-setup] ${line}`));
  addModels(Object.keys((readManifest() as { models: Record<string, unknown> }).models));
}
