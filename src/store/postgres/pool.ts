/**
 * The PostgreSQL connection pool and the one way a change runs on it: a short READ COMMITTED
 * transaction, retried as a whole on a serialization failure or a deadlock.
 */
import pg from 'pg';
import { ACCOUNT_COLUMNS, type AccountRow } from '../rows.js';
import type { Queryable } from './context.js';

/** Serialization failure, deadlock: the transaction is retried as a whole. */
const RETRYABLE = new Set(['40001', '40P01']);
const TX_ATTEMPTS = 5;

/** BIGINT (oid 20) as a JS number: ids, counts and ms timestamps all stay far below 2^53. */
const TYPES = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === 20 ? (value: string) => Number(value) : pg.types.getTypeParser(oid, format ?? 'text')) as typeof pg.types.getTypeParser,
};

export interface PoolSettings {
  url: string;
  poolSize: number;
  statementTimeoutMs: number;
  connectionTimeoutMs: number;
  /**
   * Commits that do not wait for the disk (synchronous_commit=off): for counters whose last
   * fraction of a second a database crash may forget (rate limits), never for credits.
   */
  asyncCommit?: boolean | undefined;
}

/** A pool that connects lazily. */
export function createPool(settings: PoolSettings): pg.Pool {
  const pool = new pg.Pool({
    connectionString: settings.url,
    max: settings.poolSize,
    connectionTimeoutMillis: settings.connectionTimeoutMs,
    statement_timeout: settings.statementTimeoutMs,
    // A transaction left open by a bug must not hold an account's lock forever.
    idle_in_transaction_session_timeout: Math.max(settings.statementTimeoutMs * 2, 10_000),
    application_name: 'bgone',
    ...(settings.asyncCommit ? { options: '-c synchronous_commit=off' } : {}),
    types: TYPES,
  });
  // An idle connection dropped by the server (restart, failover) is discarded by the pool; the
  // next query opens a new one. Without a listener the error would crash the process.
  pool.on('error', () => {});
  return pool;
}

/**
 * A connection of the pool for `fn`, released afterwards; dropped from the pool when it broke.
 * Why: pg emits 'error' on a client whose connection is lost (a database restart, a network cut),
 * and the pool listens only while the client is idle. Lost while checked out, with no listener
 * here, the event is an uncaught exception that ends the process. Here it only marks the
 * connection broken: the query running then, or the next one, fails with the error itself.
 * `fn` may also call `discard()` for a connection it cannot trust any more.
 */
export async function withClient<T>(pool: pg.Pool, fn: (client: pg.PoolClient, discard: () => void) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken = false;
  const discard = () => {
    broken = true;
  };
  client.on('error', discard);
  try {
    return await fn(client, discard);
  } finally {
    client.off('error', discard);
    client.release(broken);
  }
}

/** One transaction on its own connection, retried as a whole on a serialization failure or a deadlock. */
export async function inTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await withClient(pool, async (client, discard) => {
        await client.query('BEGIN');
        try {
          const result = await fn(client);
          await client.query('COMMIT');
          return result;
        } catch (err) {
          await client.query('ROLLBACK').catch(discard); // a connection that cannot roll back is gone
          throw err;
        }
      });
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      if (typeof code !== 'string' || !RETRYABLE.has(code) || attempt >= TX_ATTEMPTS) throw err;
    }
  }
}

/**
 * One statement outside a transaction (its own commit), run again on a serialization failure or a
 * deadlock, which roll it back whole.
 */
export async function retryingStatement<T>(run: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      if (typeof code !== 'string' || !RETRYABLE.has(code) || attempt >= TX_ATTEMPTS) throw err;
    }
  }
}

/**
 * An account row's lock for a change that depends on it (a reservation, a grant, a plan change):
 * FOR NO KEY UPDATE, which such changes take in turn, but which leaves the account's key free. A
 * row inserted with a reference to the account (a charge, a reservation) checks that key (FOR KEY
 * SHARE) and so never waits for a reservation's lock held elsewhere: were it FOR UPDATE, a charge
 * holding its usage rows and waiting for an account locked by a reservation that waits for another
 * account, locked by a charge that waits for those usage rows, would close a deadlock.
 * reserve-group.ts takes the same lock.
 */
const ACCOUNT_LOCK = 'FOR NO KEY UPDATE';

/** The account row; locked (ACCOUNT_LOCK) until the transaction ends when `forUpdate`. */
export async function accountRow(q: Queryable, id: number, forUpdate = false): Promise<AccountRow | undefined> {
  const { rows } = await q.query<AccountRow>(`SELECT ${ACCOUNT_COLUMNS} FROM accounts WHERE id = $1${forUpdate ? ` ${ACCOUNT_LOCK}` : ''}`, [id]);
  return rows[0];
}
