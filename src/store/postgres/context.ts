/**
 * What the PostgreSQL store lends the classes beside it (webhooks.ts, batches.ts): its pool, its
 * retrying transaction, its clock, its node id, and the credit steps they share with /remove, so a
 * batch image is charged by the very code that charges a request, inside the batch's transaction.
 */
import type pg from 'pg';
import type { AccountRow } from '../rows.js';
import type { Balance, CommitResult } from '../store.js';

export type Queryable = Pick<pg.PoolClient, 'query'>;

export interface PostgresContext {
  readonly pool: pg.Pool;
  /** This node: the owner of its reservations and batches. */
  readonly nodeId: string;
  /** The store's clock, in ms. */
  now(): number;
  /** One transaction (READ COMMITTED), retried as a whole on a serialization failure or a deadlock. */
  transaction<T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T>;
  /** The account row, locked (ACCOUNT_LOCK) until the transaction ends; undefined: no such account. */
  lockAccount(client: Queryable, accountId: number): Promise<AccountRow | undefined>;
  /** The account's current cycle, read in one statement. */
  balance(client: Queryable, row: AccountRow, nowMs: number): Promise<Balance>;
  /** commit()'s body inside the caller's transaction; null when the reservation is gone. */
  commitReservation(client: Queryable, reservationId: number): Promise<CommitResult | null>;
  /** Before a write that reserves credits: this node's heartbeat must be fresh (see PostgresStore). */
  ensureAlive(): Promise<void>;
}

/** The database server's clock, in ms: the one clock all nodes' heartbeats are compared on. */
export const DB_NOW_MS = '(extract(epoch FROM clock_timestamp()) * 1000)::bigint';

/** The nodes whose heartbeat is fresh by their own lapse. */
export const LIVE_NODES = `SELECT id FROM nodes WHERE heartbeat_at > ${DB_NOW_MS} - lapse_ms`;
