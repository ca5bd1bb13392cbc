import { defineConfig } from 'vitest/config';

// The dashboard in real headless Chromium (playwright-core, Debian's /usr/bin/chromium): one file,
// in its own child process, against an in-process server with the real model. Not part of `npm test`.
export default defineConfig({
  test: {
    include: ['test/e2e/**/*.e2e.ts'],
    pool: 'forks',
    fileParallelism: false,
    testTimeout: 180_000,
    hookTimeout: 120_000,
    teardownTimeout: 60_000,
  },
});
