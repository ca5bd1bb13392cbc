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
    types: TYPES,
  });
  // An idle connection dropped by the server (restart, failover) is discarded by the pool; the
  // next query opens a new one. Without a listener the error would crash the process.
  pool.on('error', () => {});
  return pool;
}

/** One transaction on its own connection, retried as a whole on a serialization failure or a deadlock. */
export async function inTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    const client = await pool.connect();
    let broken = false;
    try {
      await client.query('BEGIN');
      const result = await fn(client);
      await client.query('COMMIT');
      return result;
    } catch (err) {
      try {
        await client.query('ROLLBACK');
      } catch {
        broken = true; // the connection is gone: drop it from the pool
      }
      const code = (err as { code?: unknown }).code;
      if (typeof code !== 'string' || !RETRYABLE.has(code) || attempt >= TX_ATTEMPTS) throw err;
    } finally {
      client.release(broken);
    }
  }
}

/** The account row; locked (FOR UPDATE) until the transaction ends when `forUpdate`. */
export async function accountRow(q: Queryable, id: number, forUpdate = false): Promise<AccountRow | undefined> {
  const { rows } = await q.query<AccountRow>(`SELECT ${ACCOUNT_COLUMNS} FROM accounts WHERE id = $1${forUpdate ? ' FOR UPDATE' : ''}`, [id]);
  return rows[0];
}
