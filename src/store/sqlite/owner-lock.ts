/**
 * One service process per SQLite file. The service (`bgone serve`) releases, at start, every credit
 * reservation left in the file and fails the batch images left unended, which is only right when no
 * other service uses it; so it takes this lock first, and a second service on the same file refuses
 * to start instead of corrupting the first one's state. Operator commands (the CLI) do not take it:
 * they may run beside the service.
 *
 * The lock is a write lock on one byte of the database file itself (OWNER_BYTE), far past the bytes
 * SQLite locks (its lock page at 1 GiB): the kernel keys it by the file's identity, so every name of
 * the file (a symlink, a hard link, another relative path, another mount of the same volume) finds
 * it, and drops it when the process ends in any way (kill -9 included): no stale lock to judge, no
 * pid compared, and a restarted container whose service is PID 1 again starts. The owner also locks
 * the byte OWNER_BYTE + 1 + its pid, which is how a refused starter names it. These are Linux's open
 * file description locks (the addon's lockBytes), held by the descriptor: SQLite closing its own
 * descriptors of the file never drops them, and a second owner in the same process is refused too.
 * A descriptor is never closed either (closing one drops every POSIX lock this process's SQLite
 * connections hold on the file): given back, it waits for the next lock of the same file.
 */
import { closeSync, existsSync, mkdirSync, openSync, realpathSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { native } from '../../lib/native.js';
import { StoreError } from '../errors.js';

/** The byte the owner locks: at 1 TiB, far from SQLite's lock page (1 GiB to 1 GiB + 512); advisory, it stops no read or write. */
export const OWNER_BYTE = 2 ** 40;
/** Pids are below 2^22 on Linux (pid_max): the owner's pid byte lies in OWNER_BYTE + 1 + [0, 2^22]. */
const PID_BYTES = 2 ** 22 + 1;

export interface OwnerLock {
  /** The database's real path (symlinks resolved) when the lock was taken. */
  readonly path: string;
  /** Gives the lock back (idempotent). */
  release(): void;
}

/** Descriptors given back, by file identity (`dev:ino`), for the next lock of the same file. */
const spare = new Map<string, number[]>();

/**
 * The real path of the database at `databasePath`: the file is created first when missing (an
 * empty file is an empty SQLite database), so that a symlink to a file not yet created resolves
 * to it as well. An existing file is not opened here (see acquireOwnerLock on closing descriptors).
 */
export function realDatabasePath(databasePath: string): string {
  mkdirSync(dirname(resolve(databasePath)), { recursive: true }); // the database's folder may not exist yet
  if (!existsSync(databasePath)) closeSync(openSync(databasePath, 'a'));
  return realpathSync(databasePath);
}

/** Who holds the lock: its pid, from the pid byte it locked; null while it has not locked that byte yet. */
function describeOwner(fd: number): string | null {
  const byte = native().lockedByte(fd, OWNER_BYTE + 1, PID_BYTES);
  return byte === null ? null : `pid ${byte - OWNER_BYTE - 1}`;
}

/** Takes the owner lock of the database at `databasePath`, or throws StoreError 'locked'. */
export function acquireOwnerLock(databasePath: string): OwnerLock {
  const real = realDatabasePath(databasePath);
  const addon = native();
  const { dev, ino } = statSync(real, { bigint: true });
  const identity = `${dev}:${ino}`;
  const fd = spare.get(identity)?.pop() ?? openSync(real, 'r+'); // a write lock needs a descriptor open for writing
  const park = (): void => {
    const list = spare.get(identity) ?? [];
    list.push(fd);
    spare.set(identity, list);
  };
  if (!addon.lockBytes(fd, OWNER_BYTE, 1, true)) {
    const owner = describeOwner(fd);
    park();
    const same = real === resolve(databasePath) ? '' : ` (the file ${real})`;
    throw new StoreError(
      'locked',
      `${databasePath}${same} is in use by another bgone service${owner ? ` (${owner})` : ''}. ` +
        'One service process per SQLite file: stop it first, or use another BGONE_DB.',
    );
  }
  const pidByte = OWNER_BYTE + 1 + process.pid;
  addon.lockBytes(fd, pidByte, 1, true); // only the owner of OWNER_BYTE locks in this range
  let held = true;
  return {
    path: real,
    release: () => {
      if (!held) return;
      held = false;
      addon.lockBytes(fd, pidByte, 1, false);
      addon.lockBytes(fd, OWNER_BYTE, 1, false);
      park();
    },
  };
}
