/**
 * Which build of better-sqlite3 this Node loads. Both builds have the same JavaScript API.
 *
 * better-sqlite3 12 wraps its objects in node::ObjectWrap, whose destructor on Node 24's headers
 * removes a per-object environment cleanup hook found through the isolate's current context. A
 * statement collected by the garbage collector while no context is entered aborts the whole process
 * (`Assertion failed: (env) != nullptr` in RemoveEnvironmentCleanupHook): seen in CI on Node 24,
 * and reported upstream without a fix in 12.x. better-sqlite3 13 wraps its objects with
 * node-addon-api instead and ships N-API prebuilds (nothing to compile), but needs Node >= 22 and
 * crashes on Node 20. So Node >= 22 loads 13 (`better-sqlite3`, a dependency) and Node 20 loads 12,
 * under the alias `better-sqlite3-node20`. 12 compiles at install (its prebuilds are downloaded
 * from outside the npm registry), so it is only a development dependency: a clone has it, while a
 * project that embeds bgone compiles nothing and adds it only to serve on SQLite under Node 20.
 */
import { createRequire } from 'node:module';
import type BetterSqlite3 from 'better-sqlite3';
import { StoreError } from '../errors.js';

export type Db = BetterSqlite3.Database;
export type SqliteDriver = typeof BetterSqlite3;

const NEWEST_BUILD = 'better-sqlite3';
const NODE20_BUILD = 'better-sqlite3-node20';

/** The package this Node loads: 13 (N-API prebuilds) from Node 22 on, 12 on Node 20. */
export function sqlitePackageFor(nodeVersion: string): string {
  const major = Number(nodeVersion.replace(/^v/, '').split('.')[0]);
  return major >= 22 ? NEWEST_BUILD : NODE20_BUILD;
}

let driver: SqliteDriver | undefined;

/** better-sqlite3's Database constructor for this Node, loaded on first use. */
export function sqliteDriver(): SqliteDriver {
  if (driver) return driver;
  const name = sqlitePackageFor(process.versions.node);
  try {
    driver = createRequire(import.meta.url)(name) as SqliteDriver;
  } catch (err) {
    throw new StoreError(
      'unavailable',
      `cannot load ${name} for Node ${process.versions.node} (in a clone, run \`npm install\` again under this Node${
        name === NODE20_BUILD ? '; where bgone is a dependency, `npm install better-sqlite3-node20@npm:better-sqlite3@12.11.1`, or use PostgreSQL' : ''
      }): ${(err as Error).message}`,
    );
  }
  return driver;
}
