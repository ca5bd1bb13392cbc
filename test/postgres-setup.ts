/**
 * vitest globalSetup: one throwaway PostgreSQL server per run, unless BGONE_TEST_DATABASE_URL
 * already names one. Its URL goes to the workers through that same variable: forked workers and the
 * `bgone serve` processes that tests spawn inherit the environment, which vitest's `inject` would
 * not reach. Several projects list this setup in the same main process: the first one starts the
 * server and the others see the variable set; the first one's teardown stops it once all are done.
 */
import { startPostgres, TEST_DATABASE_URL_ENV } from './helpers/postgres.js';

export default async function setup(): Promise<(() => Promise<void>) | undefined> {
  if (process.env[TEST_DATABASE_URL_ENV]) return undefined;
  const started = Date.now();
  const server = await startPostgres();
  process.env[TEST_DATABASE_URL_ENV] = server.url;
  console.log(`[postgres-setup] PostgreSQL ready at ${server.url} in ${Date.now() - started} ms`);
  // A signal would skip teardown: stop the server first, then let the signal do what it does
  // (the watchdog in startPostgres covers a SIGKILL of this process).
  const onSignal = (signal: NodeJS.Signals): void => {
    void server.stop().finally(() => process.kill(process.pid, signal));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  return async () => {
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
    delete process.env[TEST_DATABASE_URL_ENV];
    await server.stop();
  };
}
