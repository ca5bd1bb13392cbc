/**
 * The PostgreSQL server of the tests: BGONE_TEST_DATABASE_URL when given, else the throwaway server
 * test/postgres-setup.ts started for this run (tools/embedded-postgres.ts), and fresh
 * databases on it.
 */
import pg from 'pg';
import { type RunningPostgres, startPostgres } from '../../tools/embedded-postgres.js';

export { type RunningPostgres, startPostgres };

/**
 * The server the tests use: set by the user to test against an existing server, else set by
 * test/postgres-setup.ts to the throwaway server it started for this run.
 */
export const TEST_DATABASE_URL_ENV = 'BGONE_TEST_DATABASE_URL';

let lazyServer: Promise<RunningPostgres> | undefined;

/**
 * The server the tests use: BGONE_TEST_DATABASE_URL when given, else the one test/postgres-setup.ts
 * started for this run, else (a file run without that setup) one started here for this process.
 */
export async function testDatabaseUrl(): Promise<string> {
  const given = process.env[TEST_DATABASE_URL_ENV];
  if (given) return given;
  // Never stopped explicitly: the watchdog stops it when this process exits.
  lazyServer ??= startPostgres();
  return (await lazyServer).url;
}

/** A new, empty database on the server at baseUrl, so each test file / store starts clean. */
export async function freshDatabase(baseUrl: string): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `bgone_test_${process.pid}_${Math.random().toString(36).slice(2, 10)}`;
  const admin = new pg.Client({ connectionString: baseUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(baseUrl);
  url.pathname = `/${name}`;
  let dropped = false;
  return {
    url: url.toString(),
    async drop() {
      if (dropped) return;
      dropped = true;
      const client = new pg.Client({ connectionString: baseUrl });
      await client.connect();
      try {
        // FORCE ends sessions a test left open (PostgreSQL ≥ 13), so a leaked pool cannot block it.
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await client.end();
      }
    },
  };
}
