/**
 * Run as a child process by the soak bench (soak-abuse.ts): another program holding a SQLite file's
 * write lock for a while, as a backup tool or an operator's shell on the same file would.
 *
 *   node dist/bench/helpers/sqlite-locker.js <file> <milliseconds>
 *
 * Prints "locked" once it holds the lock and "released" when it lets go.
 */
import { sqliteDriver } from '../../src/store/sqlite/driver.js';

const [file, ms] = process.argv.slice(2);
if (!file || !Number.isFinite(Number(ms))) {
  console.error('usage: sqlite-locker <file> <milliseconds>');
  process.exit(2);
}
const Database = sqliteDriver();
const db = new Database(file, { timeout: 30_000 });
db.exec('BEGIN EXCLUSIVE');
process.stdout.write('locked\n');
setTimeout(() => {
  db.exec('COMMIT');
  db.close();
  process.stdout.write('released\n');
}, Number(ms));
