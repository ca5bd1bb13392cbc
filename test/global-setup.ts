/**
 * Runs once before the test files (in vitest's main process): generates the fixtures in
 * test/.fixtures/ from the DEV photos if any is missing or stale.
 */
import { ensureFixtures } from './helpers/fixtures.js';

export default async function setup(): Promise<void> {
  await ensureFixtures((line) => console.log(`[global-setup] ${line}`));
}
