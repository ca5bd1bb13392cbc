/**
 * One service process per SQLite file. The service (`bgone serve`) releases, at start, every credit
 * reservation left in the file, which is only right when no other service uses it; so it takes this
 * lock first, and a second service on the same file refuses to start instead of corrupting the
 * first one's state. Operator commands (the CLI) do not take it: they may run beside the service.
 *
 * The lock is a file beside the database (`<db>.lock`), created exclusively (O_EXCL), holding the
 * owner's pid and start time. A lock whose process is gone (kill -9, power cut) is stale and taken
 * over; the file system makes the take-over atomic (the stale file is renamed away, then created
 * again exclusively). SQLite files are local by nature, so a pid on this machine is a fair owner.
 */
import { closeSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs';
import { hostname } from 'node:os';
import { dirname, resolve } from 'node:path';
import { StoreError } from '../errors.js';

interface LockContent {
  pid: number;
  host: string;
  startedAt: string;
}

export interface OwnerLock {
  readonly path: string;
  /** Gives the lock back (idempotent); only removes the file while it is still ours. */
  release(): void;
}

function readLock(path: string): LockContent | null {
  try {
    const content = JSON.parse(readFileSync(path, 'utf8')) as Partial<LockContent>;
    if (typeof content.pid !== 'number' || typeof content.host !== 'string') return null;
    return { pid: content.pid, host: content.host, startedAt: String(content.startedAt ?? '') };
  } catch {
    return null; // unreadable or half-written: treated as stale below
  }
}

/** Whether `pid` is a running process on this machine. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'; // exists, owned by someone else
  }
}

function createExclusive(path: string, content: LockContent): boolean {
  let fd: number;
  try {
    fd = openSync(path, 'wx', 0o644);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  }
  try {
    writeSync(fd, `${JSON.stringify(content)}\n`);
  } finally {
    closeSync(fd);
  }
  return true;
}

/** Takes the owner lock of the database at `databasePath`, or throws StoreError 'locked'. */
export function acquireOwnerLock(databasePath: string): OwnerLock {
  const path = `${databasePath}.lock`;
  mkdirSync(dirname(resolve(path)), { recursive: true }); // the database's folder may not exist yet
  const mine: LockContent = { pid: process.pid, host: hostname(), startedAt: new Date().toISOString() };
  for (let attempt = 0; attempt < 3; attempt++) {
    if (createExclusive(path, mine)) {
      let held = true;
      return {
        path,
        release: () => {
          if (!held) return;
          held = false;
          const current = readLock(path);
          if (current?.pid === mine.pid && current.startedAt === mine.startedAt) rmSync(path, { force: true });
        },
      };
    }
    const owner = readLock(path);
    if (owner && owner.host === mine.host && alive(owner.pid)) {
      throw new StoreError(
        'locked',
        `${databasePath} is in use by another bgone service (pid ${owner.pid}, since ${owner.startedAt}). ` +
          'One service process per SQLite file: stop it first, or use another BGONE_DB.',
      );
    }
    if (owner && owner.host !== mine.host) {
      throw new StoreError(
        'locked',
        `${databasePath} is locked by a bgone service on ${owner.host} (pid ${owner.pid}); a SQLite file is served by one process on one machine.`,
      );
    }
    // Stale (its process is gone) or unreadable: move it aside atomically, check that what we moved
    // is the stale lock we judged (not a fresh one another starter just created), then try again.
    const aside = `${path}.stale-${process.pid}`;
    try {
      renameSync(path, aside);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue; // another starter moved it first
      throw err;
    }
    const moved = readLock(aside);
    if (moved && owner && (moved.pid !== owner.pid || moved.startedAt !== owner.startedAt)) {
      renameSync(aside, path); // a live starter's fresh lock: give it back
      throw new StoreError('locked', `${databasePath} was just taken by another bgone service (pid ${moved.pid}).`);
    }
    rmSync(aside, { force: true });
  }
  throw new StoreError('locked', `cannot take the lock ${path}: other processes keep taking it`);
}
