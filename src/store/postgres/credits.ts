/**
 * Credits on PostgreSQL: reservations, charges, grants and balances. Credits stay exact across
 * nodes because a reservation is admitted while its account row is locked (SELECT ... FOR UPDATE)
 * and the balance it checks is read in one statement (one snapshot).
 *
 * A reservation is owned by the node that made it; a dead node's are released by recover(), never
 * a live node's (node.ts keeps this node's heartbeat).
 */
import type pg from 'pg';
import { cycleAt } from '../cycles.js';
import type { PlanTable } from '../plans.js';
import type { AccountRow, ReservationRow } from '../rows.js';
import { checkGrant, checkId, effectivePlanAt, IDEMPOTENCY_TTL_MS } from '../rules.js';
import type { Balance, CommitResult, CreditStore, ReserveOptions, ReserveResult } from '../store.js';
import { DB_NOW_MS, type Queryable } from './context.js';
import { notFound } from './errors.js';
import { accountRow, inTransaction } from './pool.js';

/** Expired idempotency records are deleted at most this often (lazily, on a reservation). */
const PURGE_INTERVAL_MS = 10 * 60 * 1000;

/** What a balance is computed from: one snapshot of the cycle's usage row and reservations. */
export interface CycleCounts {
  used: number;
  granted: number;
  reserved: number;
}

/** Reads a cycle's counts in one statement, so a commit running meanwhile is seen wholly or not at all. */
const CYCLE_COUNTS_SQL = `SELECT
  coalesce((SELECT used FROM cycle_usage WHERE account_id = $1 AND cycle_index = $2), 0) AS used,
  coalesce((SELECT granted FROM cycle_usage WHERE account_id = $1 AND cycle_index = $2), 0) AS granted,
  (SELECT count(*) FROM reservations WHERE account_id = $1 AND cycle_index = $2) AS reserved`;

export class PostgresCredits implements CreditStore {
  #lastIdemPurgeMs = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly pool: pg.Pool,
    private readonly now: () => number,
    private readonly plans: PlanTable,
    private readonly nodeId: string,
    private readonly ensureAlive: () => Promise<void>,
  ) {}

  /**
   * Holds one credit, in one short transaction: the account row is locked (reserves of one account
   * queue there, from any node), then one statement reads the cycle's usage, its reservations and
   * the Idempotency-Key's state, and the reservation is inserted only while used + reserved < allowance.
   */
  async reserve(accountId: number, options: ReserveOptions): Promise<ReserveResult> {
    checkId('requestId', options.requestId, true);
    checkId('idempotencyKey', options.idempotencyKey, false);
    if (options.idempotencyKey !== undefined) checkId('imageHash (required with idempotencyKey)', options.imageHash, true);
    const { idempotencyKey, imageHash } = options;
    await this.ensureAlive();
    const now = this.now();
    if (now - this.#lastIdemPurgeMs >= PURGE_INTERVAL_MS) {
      this.#lastIdemPurgeMs = now;
      await this.pool.query('DELETE FROM idempotency_keys WHERE created_at <= $1', [now - IDEMPOTENCY_TTL_MS]);
    }
    return inTransaction(this.pool, async (c): Promise<ReserveResult> => {
      const row = await accountRow(c, accountId, true);
      if (!row) throw notFound(accountId);
      if (row.disabled_at !== null) return { ok: false, reason: 'account_disabled' };
      const { index } = cycleAt(new Date(row.created_at), new Date(now));
      const { rows } = await c.query<CycleCounts & { in_flight_hash: string | null; charged_hash: string | null }>(
        `${CYCLE_COUNTS_SQL},
         (SELECT image_hash FROM reservations WHERE account_id = $1 AND idempotency_key = $3) AS in_flight_hash,
         (SELECT image_hash FROM idempotency_keys WHERE account_id = $1 AND idempotency_key = $3 AND created_at > $4) AS charged_hash`,
        [accountId, index, idempotencyKey ?? null, now - IDEMPOTENCY_TTL_MS],
      );
      const counts = rows[0]!;
      const b = this.compute(row, now, counts);
      if (idempotencyKey !== undefined) {
        if (counts.in_flight_hash !== null)
          return { ok: false, reason: counts.in_flight_hash === imageHash ? 'idempotency_in_progress' : 'idempotency_conflict' };
        if (counts.charged_hash !== null) {
          if (counts.charged_hash !== imageHash) return { ok: false, reason: 'idempotency_conflict' };
          return { ok: true, reservationId: null, alreadyCharged: true, remainingAfterCharge: b.remaining };
        }
      }
      if (b.remaining <= 0) return { ok: false, reason: 'payment_required', resetsAt: b.cycleEnd };
      const inserted = await c.query<{ id: number }>(
        `INSERT INTO reservations (account_id, api_key_id, owner, request_id, idempotency_key, image_hash, cycle_index, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id`,
        [
          accountId,
          options.keyId ?? null,
          this.nodeId,
          options.requestId,
          idempotencyKey ?? null,
          idempotencyKey !== undefined ? imageHash! : null,
          index,
          now,
        ],
      );
      return { ok: true, reservationId: inserted.rows[0]!.id, alreadyCharged: false, remainingAfterCharge: b.remaining - 1 };
    });
  }

  /** Turns a reservation into a charge, in one transaction; the DELETE makes a second commit (from any node) find nothing. */
  async commit(reservationId: number): Promise<CommitResult | null> {
    return inTransaction(this.pool, (c) => this.commitIn(c, reservationId));
  }

  /**
   * A failed release is the caller's to retry (releaseUntilDone in ../release-retry.ts): a live
   * node's reservation is never released by the others, so an outage would otherwise hold the credit.
   */
  async release(reservationId: number): Promise<boolean> {
    const { rowCount } = await this.pool.query('DELETE FROM reservations WHERE id = $1', [reservationId]);
    return (rowCount ?? 0) > 0;
  }

  async recoverAfterCrash(): Promise<number> {
    return this.#recover();
  }

  async balance(accountId: number): Promise<Balance> {
    const row = await accountRow(this.pool, accountId);
    if (!row) throw notFound(accountId);
    return this.balanceIn(this.pool, row, this.now());
  }

  async grant(accountId: number, amount: number, note?: string): Promise<Balance> {
    const credits = checkGrant(amount);
    return inTransaction(this.pool, async (c) => {
      const row = await accountRow(c, accountId, true);
      if (!row) throw notFound(accountId);
      const now = this.now();
      const { index } = cycleAt(new Date(row.created_at), new Date(now));
      await c.query('INSERT INTO grants (account_id, cycle_index, credits, note, granted_at) VALUES ($1, $2, $3, $4, $5)', [
        accountId,
        index,
        credits,
        note ?? null,
        now,
      ]);
      await c.query(
        `INSERT INTO cycle_usage (account_id, cycle_index, granted) VALUES ($1, $2, $3)
         ON CONFLICT (account_id, cycle_index) DO UPDATE SET granted = cycle_usage.granted + excluded.granted`,
        [accountId, index, credits],
      );
      return this.balanceIn(c, row, now);
    });
  }

  /** A balance from an account row and its cycle's counts (also the usage summary's). */
  compute(row: AccountRow, nowMs: number, counts: CycleCounts): Balance {
    const cycle = cycleAt(new Date(row.created_at), new Date(nowMs));
    const plan = this.plans[effectivePlanAt(row.plan, row.cancel_at, nowMs)];
    const allowance = plan.credits + counts.granted;
    return {
      plan: plan.name,
      allowance,
      granted: counts.granted,
      used: counts.used,
      reserved: counts.reserved,
      remaining: Math.max(0, allowance - counts.used - counts.reserved),
      cycleIndex: cycle.index,
      cycleStart: cycle.start,
      cycleEnd: cycle.end,
      rateLimitPerMinute: plan.rateLimitPerMinute,
    };
  }

  /** The account's current cycle, read in one statement on `q`. */
  async balanceIn(q: Queryable, row: AccountRow, nowMs: number): Promise<Balance> {
    const { index } = cycleAt(new Date(row.created_at), new Date(nowMs));
    const { rows } = await q.query<CycleCounts>(CYCLE_COUNTS_SQL, [row.id, index]);
    return this.compute(row, nowMs, rows[0]!);
  }

  /** commit()'s body, inside the caller's transaction (also a batch image's charge, batches.ts). */
  async commitIn(c: Queryable, reservationId: number): Promise<CommitResult | null> {
    const deleted = await c.query<Omit<ReservationRow, 'id'>>(
      'DELETE FROM reservations WHERE id = $1 RETURNING account_id, api_key_id, request_id, idempotency_key, image_hash, cycle_index',
      [reservationId],
    );
    const r = deleted.rows[0];
    if (!r) return null; // committed or released already: never charged twice
    const now = this.now();
    const charge = await c.query<{ id: number }>(
      'INSERT INTO charges (account_id, api_key_id, request_id, cycle_index, charged_at) VALUES ($1, $2, $3, $4, $5) RETURNING id',
      [r.account_id, r.api_key_id, r.request_id, r.cycle_index, now],
    );
    const chargeId = charge.rows[0]!.id;
    await c.query(
      `INSERT INTO cycle_usage (account_id, cycle_index, used) VALUES ($1, $2, 1)
       ON CONFLICT (account_id, cycle_index) DO UPDATE SET used = cycle_usage.used + 1`,
      [r.account_id, r.cycle_index],
    );
    if (r.idempotency_key !== null) {
      await c.query(
        `INSERT INTO idempotency_keys (account_id, idempotency_key, image_hash, charge_id, created_at) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (account_id, idempotency_key) DO UPDATE
         SET image_hash = excluded.image_hash, charge_id = excluded.charge_id, created_at = excluded.created_at`,
        [r.account_id, r.idempotency_key, r.image_hash, chargeId, now],
      );
    }
    const row = (await accountRow(c, r.account_id))!;
    return { chargeId, cycleIndex: r.cycle_index, remaining: (await this.balanceIn(c, row, now)).remaining };
  }

  /**
   * Releases the reservations of every node without a live heartbeat (stopped, killed, closed),
   * never this node's nor a live one's, and forgets the dead nodes. Also purges expired
   * idempotency records. Returns how many reservations were released.
   *
   * A reservation still held by an unended batch image is left alone: only the transaction that
   * ends the image releases it (failOrphans, finish, delete). A node's heartbeat can lapse between
   * the orphan sweep and this statement, and the node come back (a pause, not a death); had its
   * images' credits been released here, it would then process them with nothing left to charge.
   * If the node is really dead, the sweep fails those images and releases their credits with them.
   * Such an image's batch is unended: the few unended batches are all that is looked through.
   */
  async #recover(): Promise<number> {
    await this.pool.query('DELETE FROM idempotency_keys WHERE created_at <= $1', [this.now() - IDEMPOTENCY_TTL_MS]);
    const { rows } = await this.pool.query<{ n: number }>(
      `WITH live AS (SELECT id FROM nodes WHERE heartbeat_at > ${DB_NOW_MS} - lapse_ms),
       held_by_images AS (
         SELECT i.reservation_id AS id FROM batches b JOIN batch_images i ON i.batch_id = b.id
         WHERE b.completed_at IS NULL AND i.reservation_id IS NOT NULL),
       released AS (DELETE FROM reservations WHERE owner <> $1 AND owner NOT IN (SELECT id FROM live)
         AND id NOT IN (SELECT id FROM held_by_images) RETURNING 1),
       reaped AS (DELETE FROM nodes WHERE id <> $1 AND id NOT IN (SELECT id FROM live))
       SELECT count(*) AS n FROM released`,
      [this.nodeId],
    );
    return rows[0]!.n;
  }
}
