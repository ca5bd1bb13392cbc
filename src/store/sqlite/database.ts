/**
 * Opens the SQLite database file: durable settings first, then the pending migrations. The
 * connection never leaves src/store/sqlite/ (SqliteStore.databaseOf aside, for tests of this
 * implementation).
 */
import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { StoreError } from '../errors.js';
import { type Db, sqliteDriver } from './driver.js';
import { MIGRATIONS, SCHEMA_VERSION } from './migrations.js';

export type { Db };

/** While opening and migrating only: nothing is served yet, so waiting inside the call blocks no one. */
export const OPEN_BUSY_TIMEOUT_MS = 5000;

/**
 * Opens (creating it and its parent folder if needed) the database at `path`, with
 * journal_mode=WAL (readers never block the writer), synchronous=FULL (a committed charge survives
 * a power cut) and foreign_keys=ON, and applies the pending migrations, waiting up to 5 s for a
 * file another process holds. Then the busy timeout is 0: a busy statement fails at once, and the
 * store waits for the file between attempts, off the event loop (busy.ts).
 */
export function openDatabase(path: string): Db {
  const memory = path === ':memory:';
  if (!memory) mkdirSync(dirname(resolve(path)), { recursive: true });
  const Database = sqliteDriver();
  const db = new Database(path, { timeout: OPEN_BUSY_TIMEOUT_MS });
  try {
    db.pragma(`busy_timeout = ${OPEN_BUSY_TIMEOUT_MS}`);
    const mode = db.pragma('journal_mode = WAL', { simple: true });
    if (!memory && String(mode).toLowerCase() !== 'wal') throw new Error(`cannot enable WAL journal mode on ${path} (got ${String(mode)})`);
    db.pragma('synchronous = FULL');
    db.pragma('foreign_keys = ON');
    migrate(db);
    db.pragma('busy_timeout = 0');
  } catch (err) {
    db.close();
    throw err;
  }
  return db;
}

export function schemaVersion(db: Db): number {
  return db.pragma('user_version', { simple: true }) as number;
}

/**
 * Applies the migrations the database lacks, each in its own BEGIN IMMEDIATE transaction together
 * with its `user_version` bump. The version is read inside the transaction, so two processes
 * opening a fresh file at once do not both apply the same migration.
 */
export function migrate(db: Db): void {
  const step = db.transaction((): boolean => {
    const version = schemaVersion(db);
    if (version > SCHEMA_VERSION) {
      throw new StoreError('schema_too_new', `database schema version ${version} is newer than this build understands (${SCHEMA_VERSION})`);
    }
    if (version === SCHEMA_VERSION) return false;
    db.exec(MIGRATIONS[version]!);
    db.pragma(`user_version = ${version + 1}`);
    return true;
  });
  while (step.immediate()) {
    // one migration per transaction
  }
}

/** Whether a better-sqlite3 error is a UNIQUE (or PRIMARY KEY) constraint violation. */
export function isUniqueViolation(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
}
