import { defineConfig } from 'vitest/config';

// One inference takes ~2-3 s on the 2-core CI machine and the native core serialises inference
// anyway: files run one after another, each in its own child process (pool "forks" isolates files,
// which test/lib/no-disk.test.ts relies on to set TMPDIR before the addon loads).
//
// Projects:
//   unit       pure modules, no model, no server: seconds
//   lib        the library and the native core (real model, real photos)
//   store      the store interface (real SQLite files and PostgreSQL)
//   http-uws   the HTTP suites on the uWebSockets.js backend
//   http-node  the same suites on the node:http backend
// `npm test -- --project http-node` runs one of them.
// Every project but `unit` needs dist/ and the fixtures (test/global-setup.ts), and a PostgreSQL
// server from npm (test/postgres-setup.ts, unless BGONE_TEST_DATABASE_URL names one): each once per run.
const shared = {
  pool: 'forks' as const,
  globalSetup: ['test/global-setup.ts', 'test/postgres-setup.ts'],
  testTimeout: 120_000,
  hookTimeout: 240_000,
  teardownTimeout: 60_000,
};

export default defineConfig({
  test: {
    fileParallelism: false,
    projects: [
      { extends: true, test: { ...shared, globalSetup: [], name: 'unit', include: ['test/unit/**/*.test.ts'] } },
      { extends: true, test: { ...shared, name: 'lib', include: ['test/lib/**/*.test.ts'] } },
      { extends: true, test: { ...shared, name: 'store', include: ['test/store/**/*.test.ts'] } },
      { extends: true, test: { ...shared, name: 'http-uws', include: ['test/http/**/*.test.ts'], env: { BGONE_TEST_HTTP: 'uws' } } },
      { extends: true, test: { ...shared, name: 'http-node', include: ['test/http/**/*.test.ts'], env: { BGONE_TEST_HTTP: 'node' } } },
    ],
  },
});
