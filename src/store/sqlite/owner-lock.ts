/**
 * One service process per SQLite file. The service (`bgone serve`) releases, at start, every credit
 * reservation left in the file and fails the batch images left unended, which is only right when no
 * other service uses it; so it takes this lock first, and a second service on the same file refuses
 * to start instead of corrupting the first one's state. Operator commands (the CLI) do not take it:
 * they may run beside the service.
 *
 * The lock is a lock the kernel holds for the process: a small SQLite database beside the file's
 * real path (`<real path>.owner-lock`), on which the owner keeps a write transaction open (a
 * RESERVED lock, an fcntl lock of SQLite's unix VFS) for as long as it runs. The kernel drops it when
 * the process ends in any way (kill -9 included), so there is no stale lock to judge: no pid is
 * compared, and a restarted container whose service is PID 1 again starts. Another writer cannot
 * take it while it is held, so the second service is refused at once; readers still can, which is
 * how the refusal names the owner (a row written just before the lock is kept).
 *
 * The real path (symlinks resolved) names the lock, so a second service through a symlink to the
 * same file finds the same lock. The lock file is never deleted: deleting it while a starter has it
 * open would let two processes lock two different files of the same name.
 */
import { closeSync, mkdirSync, openSync, realpathSync } from 'node:fs';
import { hostname } from 'node:os';
import { dirname, resolve } from 'node:path';
import { StoreError } from '../errors.js';
import { isBusy } from './busy.js';
import { type Db, sqliteDriver } from './driver.js';

export const OWNER_LOCK_SUFFIX = '.owner-lock';

export interface OwnerLock {
  /** The lock file: the database's real path + OWNER_LOCK_SUFFIX. */
  readonly path: string;
  /** Gives the lock back (idempotent). */
  release(): void;
}

interface Owner {
  pid: number;
  host: string;
  started_at: string;
}

/** Who holds the lock, as its row says; null when it cannot be read right now. */
function describeOwner(db: Db): string | null {
  try {
    const owner = db.prepare<[], Owner>('SELECT pid, host, started_at FROM owner WHERE id = 1').get();
    if (!owner) return null;
    return owner.host === hostname() ? `pid ${owner.pid}, since ${owner.started_at}` : `pid ${owner.pid} on ${owner.host}, since ${owner.started_at}`;
  } catch {
    return null; // the owner is writing its row, or it has none yet
  }
}

/**
 * The real path of the database at `databasePath`: the file is created first when missing (an
 * empty file is an empty SQLite database), so that a symlink to a file not yet created resolves
 * to it as well.
 */
export function realDatabasePath(databasePath: string): string {
  mkdirSync(dirname(resolve(databasePath)), { recursive: true }); // the database's folder may not exist yet
  closeSync(openSync(databasePath, 'a'));
  return realpathSync(databasePath);
}

/** Takes the owner lock of the database at `databasePath`, or throws StoreError 'locked'. */
export function acquireOwnerLock(databasePath: string): OwnerLock {
  const real = realDatabasePath(databasePath);
  const path = `${real}${OWNER_LOCK_SUFFIX}`;
  const Database = sqliteDriver();
  // No busy wait: a held lock is held by a running service, and waiting would not change that.
  const db = new Database(path, { timeout: 0 });
  const same = real === resolve(databasePath) ? '' : ` (the file ${real})`;
  const refuse = (detail: string | null): never => {
    db.close();
    throw new StoreError(
      'locked',
      `${databasePath}${same} is in use by another bgone service${detail ? ` (${detail})` : ''}. ` +
        'One service process per SQLite file: stop it first, or use another BGONE_DB.',
    );
  };
  const take = (): boolean => {
    try {
      db.exec('BEGIN IMMEDIATE');
      return true;
    } catch (err) {
      if (isBusy(err)) return false;
      db.close();
      throw new StoreError('locked', `cannot take the lock ${path} (${(err as Error).message}); if no bgone service runs on ${databasePath}, delete it`);
    }
  };
  if (!take()) refuse(describeOwner(db));
  try {
    // The row says who owns the lock; it is committed so that a refused starter can read it, and
    // the lock is taken again at once. A starter that slips in between wins, and this one is refused.
    db.exec('CREATE TABLE IF NOT EXISTS owner (id INTEGER PRIMARY KEY CHECK (id = 1), pid INTEGER NOT NULL, host TEXT NOT NULL, started_at TEXT NOT NULL)');
    db.prepare('INSERT OR REPLACE INTO owner (id, pid, host, started_at) VALUES (1, ?, ?, ?)').run(process.pid, hostname(), new Date().toISOString());
    db.exec('COMMIT');
  } catch (err) {
    db.close();
    throw err;
  }
  if (!take()) refuse(describeOwner(db));
  let held = true;
  return {
    path,
    release: () => {
      if (!held) return;
      held = false;
      db.close(); // rolls the empty transaction back: the kernel lock goes with it
    },
  };
}
