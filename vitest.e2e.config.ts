import { defineConfig } from 'vitest/config';

// The dashboard, and the API called from pages of another origin (CORS), in real headless Chromium
// (playwright-core, Debian's /usr/bin/chromium): each file in its own child process, one after the
// other, against in-process servers with the real model. Not part of `npm test`.
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
