import { defineConfig } from 'vitest/config';

// One inference takes ~2-3 s on the 2-core CI machine and the native core serialises inference
// anyway: files run one after another, each in its own child process (pool "forks" isolates files,
// which test/no-disk.test.ts relies on to set TMPDIR before the addon loads).
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    fileParallelism: false,
    testTimeout: 120_000,
    hookTimeout: 240_000,
    teardownTimeout: 60_000,
    globalSetup: ['test/global-setup.ts'],
  },
});
