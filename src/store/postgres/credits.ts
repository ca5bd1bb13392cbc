/**
 * Credits on PostgreSQL: reservations, charges, grants and balances. Credits stay exact across
 * nodes because a reservation is admitted while its account row is locked (ACCOUNT_LOCK, pool.ts)
 * and the balance it checks is read in one statement (one snapshot) after the lock is held.
 *
 * The metering path's writes go in groups (../groups.ts): the reservations this node is asked
 * for close together are admitted in one statement (reserve-group.ts: the accounts locked in id
 * order, so groups of several nodes never deadlock; each item decided on its own, in the order it
 * came), and the charges and the releases each in one statement; one durable commit per group.
 *
 * A reservation is owned by the node that made it; a dead node's are released by recover(), never
 * a live node's (node.ts keeps this node's heartbeat).
 */
import type pg from 'pg';
import { type Cycle, cycleAt } from '../cycles.js';
import { Grouped, type Settled } from '../groups.js';
import type { PlanTable } from '../plans.js';
import { ACCOUNT_COLUMNS, type AccountRow, type ReservationRow } from '../rows.js';
import { checkGrant, checkId, effectivePlanAt, IDEMPOTENCY_TTL_MS } from '../rules.js';
import type { Balance, CommitResult, CreditStore, ReserveOptions, ReserveResult } from '../store.js';
import { DB_NOW_MS, type Queryable } from './context.js';
import { notFound } from './errors.js';
import { accountRow, inTransaction, retryingStatement } from './pool.js';

/** Expired idempotency records are deleted at most this often (lazily, on a reservation). */
const PURGE_INTERVAL_MS = 10 * 60 * 1000;

/** Items per group: bounds a statement's arrays and a group's transaction. */
const MAX_GROUP = 256;

/** Accounts whose sign-up time (their cycles' anchor) is remembered; forgotten all at once past this. */
const MAX_SIGN_UPS = 100_000;

interface ReserveItem {
  accountId: number;
  options: ReserveOptions;
}

/** Per (account, cycle) of $1/$2: the cycle's usage and its reservations, in one statement (one snapshot). */
const GROUP_COUNTS_SQL = `SELECT c.account_id, coalesce(u.used, 0) AS used, coalesce(u.granted, 0) AS granted,
    (SELECT count(*) FROM reservations r WHERE r.account_id = c.account_id AND r.cycle_index = c.cycle_index) AS reserved
  FROM unnest($1::bigint[], $2::int[]) AS c(account_id, cycle_index)
  LEFT JOIN cycle_usage u ON u.account_id = c.account_id AND u.cycle_index = c.cycle_index`;

/** One group of reservations: reserve-group.ts. */
const RESERVE_GROUP_SQL = 'SELECT ord, outcome, reservation_id, remaining FROM bgone_reserve_group($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)';

type GroupOutcome = 'not_found' | 'account_disabled' | 'idempotency_in_progress' | 'idempotency_conflict' | 'already_charged' | 'payment_required' | 'reserved';

/** An item's row of bgone_reserve_group as the store answers it. */
function groupOutcome(
  r: { outcome: GroupOutcome; reservation_id: number | null; remaining: number | null },
  accountId: number,
  cycle: Cycle,
): Settled<ReserveResult> {
  switch (r.outcome) {
    case 'not_found':
      return { error: notFound(accountId) };
    case 'account_disabled':
    case 'idempotency_in_progress':
    case 'idempotency_conflict':
      return { value: { ok: false, reason: r.outcome } };
    case 'payment_required':
      return { value: { ok: false, reason: 'payment_required', resetsAt: cycle.end } };
    case 'already_charged':
      return { value: { ok: true, reservationId: null, alreadyCharged: true, remainingAfterCharge: r.remaining! } };
    case 'reserved':
      return { value: { ok: true, reservationId: r.reservation_id!, alreadyCharged: false, remainingAfterCharge: r.remaining! } };
  }
}

/**
 * A group of charges ($1: the reservation ids; $2: now): what commitIn does for one, for all of
 * them in one statement. The cycle_usage and idempotency_keys rows are written in key order, so two
 * nodes' groups lock them in the same order. Each charge comes back with its account and its
 * cycle's counts as the statement's snapshot saw them, before its own writes: a charge moves a
 * credit from reserved to used, so the remaining credits they give are those after the group.
 */
const COMMIT_GROUP_SQL = `WITH deleted AS MATERIALIZED (
    DELETE FROM reservations WHERE id = ANY($1::bigint[])
    RETURNING id, account_id, api_key_id, request_id, idempotency_key, image_hash, cycle_index
  ), charged AS MATERIALIZED (
    SELECT d.*, nextval(pg_get_serial_sequence('charges', 'id')) AS charge_id FROM deleted d
  ), charges_written AS (
    INSERT INTO charges (id, account_id, api_key_id, request_id, cycle_index, charged_at) OVERRIDING SYSTEM VALUE
    SELECT charge_id, account_id, api_key_id, request_id, cycle_index, $2 FROM charged ORDER BY id
  ), usage_counted AS (
    INSERT INTO cycle_usage (account_id, cycle_index, used)
    SELECT account_id, cycle_index, count(*) FROM charged GROUP BY account_id, cycle_index ORDER BY account_id, cycle_index
    ON CONFLICT (account_id, cycle_index) DO UPDATE SET used = cycle_usage.used + excluded.used
  ), keys_recorded AS (
    INSERT INTO idempotency_keys (account_id, idempotency_key, image_hash, charge_id, created_at)
    SELECT account_id, idempotency_key, image_hash, charge_id, $2 FROM charged WHERE idempotency_key IS NOT NULL
    ORDER BY account_id, idempotency_key
    ON CONFLICT (account_id, idempotency_key) DO UPDATE
    SET image_hash = excluded.image_hash, charge_id = excluded.charge_id, created_at = excluded.created_at
  )
  SELECT c.id AS reservation_id, c.charge_id, c.cycle_index, a.${ACCOUNT_COLUMNS.split(', ').join(', a.')}, a.id AS account_id,
    coalesce(u.used, 0) AS used, coalesce(u.granted, 0) AS granted,
    (SELECT count(*) FROM reservations r WHERE r.account_id = c.account_id AND r.cycle_index = c.cycle_index) AS reserved
  FROM charged c JOIN accounts a ON a.id = c.account_id
  LEFT JOIN cycle_usage u ON u.account_id = c.account_id AND u.cycle_index = c.cycle_index`;

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
  readonly #signUps = new Map<number, number>();
  readonly #reserves: Grouped<ReserveItem, ReserveResult>;
  readonly #commits: Grouped<number, CommitResult | null>;
  readonly #releases: Grouped<number, boolean>;

  constructor(
    private readonly pool: pg.Pool,
    private readonly now: () => number,
    private readonly plans: PlanTable,
    private readonly nodeId: string,
    private readonly ensureAlive: () => Promise<void>,
  ) {
    this.#reserves = new Grouped((items) => this.#reserveGroup(items), MAX_GROUP);
    this.#commits = new Grouped((ids) => this.#commitGroup(ids), MAX_GROUP);
    this.#releases = new Grouped((ids) => this.#releaseGroup(ids), MAX_GROUP);
  }

  /**
   * Holds one credit. Joins this node's next group of reservations (#reserveGroup): one statement
   * in which the accounts are locked (reserves of one account queue there, from any node), then
   * each cycle's usage, its reservations and the Idempotency-Keys' state are read, and a
   * reservation is inserted only while used + reserved < allowance.
   */
  async reserve(accountId: number, options: ReserveOptions): Promise<ReserveResult> {
    checkId('requestId', options.requestId, true);
    checkId('idempotencyKey', options.idempotencyKey, false);
    if (options.idempotencyKey !== undefined) checkId('imageHash (required with idempotencyKey)', options.imageHash, true);
    return this.#reserves.submit({ accountId, options });
  }

  /** Turns a reservation into a charge; the DELETE makes a second commit (from any node) find nothing. Joins the next group of charges. */
  async commit(reservationId: number): Promise<CommitResult | null> {
    return this.#commits.submit(reservationId);
  }

  /**
   * Drops a reservation; joins the next group of releases. A failed release is the caller's to
   * retry (releaseUntilDone in ../release-retry.ts): a live node's reservation is never released by
   * the others, so an outage would otherwise hold the credit.
   */
  async release(reservationId: number): Promise<boolean> {
    return this.#releases.submit(reservationId);
  }

  /**
   * One group of reservations in one statement (bgone_reserve_group, reserve-group.ts): the
   * accounts locked in id order, each item decided in the order it came against what the items
   * before it took, the admitted reservations inserted; one durable commit, and no round trip to
   * this node while the locks are held. The cycle of each account is computed here from its
   * sign-up time, read once per account (#learnSignUps); an account without one is no account.
   */
  async #reserveGroup(items: ReserveItem[]): Promise<Settled<ReserveResult>[]> {
    await this.ensureAlive();
    const now = this.now();
    if (now - this.#lastIdemPurgeMs >= PURGE_INTERVAL_MS) {
      this.#lastIdemPurgeMs = now;
      await this.pool.query('DELETE FROM idempotency_keys WHERE created_at <= $1', [now - IDEMPOTENCY_TTL_MS]);
    }
    // Only safe integers are account ids: another id is no account.
    const ids = [...new Set(items.map((i) => i.accountId).filter((id) => Number.isSafeInteger(id)))];
    await this.#learnSignUps(ids);
    const cycles = new Map<number, Cycle>();
    for (const id of ids) {
      const createdAt = this.#signUps.get(id);
      if (createdAt !== undefined) cycles.set(id, cycleAt(new Date(createdAt), new Date(now)));
    }
    const outcomes: Settled<ReserveResult>[] = new Array(items.length);
    const sent: Array<{ at: number; item: ReserveItem; cycle: Cycle }> = [];
    items.forEach((item, at) => {
      const cycle = cycles.get(item.accountId);
      if (cycle === undefined) outcomes[at] = { error: notFound(item.accountId) };
      else sent.push({ at, item, cycle });
    });
    if (sent.length === 0) return outcomes;
    const plans = Object.values(this.plans);
    const { rows } = await retryingStatement(() =>
      this.pool.query<{ ord: number; outcome: GroupOutcome; reservation_id: number | null; remaining: number | null }>(
        { name: 'bgone_reserve_group', text: RESERVE_GROUP_SQL },
        [
          sent.map((s) => s.item.accountId),
          sent.map((s) => s.cycle.index),
          sent.map((s) => s.item.options.keyId ?? null),
          sent.map((s) => s.item.options.requestId),
          sent.map((s) => s.item.options.idempotencyKey ?? null),
          sent.map((s) => (s.item.options.idempotencyKey !== undefined ? s.item.options.imageHash! : null)),
          this.nodeId,
          now,
          now - IDEMPOTENCY_TTL_MS,
          plans.map((p) => p.name),
          plans.map((p) => p.credits),
        ],
      ),
    );
    if (rows.length !== sent.length) throw new Error(`a group of ${sent.length} reservations got ${rows.length} outcomes`);
    for (const r of rows) {
      const { at, item, cycle } = sent[r.ord - 1]!;
      outcomes[at] = groupOutcome(r, item.accountId, cycle);
    }
    return outcomes;
  }

  /** Remembers the sign-up times (which never change) of the accounts not seen before, in one statement. */
  async #learnSignUps(ids: number[]): Promise<void> {
    const unknown = ids.filter((id) => !this.#signUps.has(id));
    if (unknown.length === 0) return;
    const { rows } = await this.pool.query<{ id: number; created_at: number }>(
      { name: 'bgone_sign_ups', text: 'SELECT id, created_at FROM accounts WHERE id = ANY($1::bigint[])' },
      [unknown],
    );
    if (this.#signUps.size + rows.length > MAX_SIGN_UPS) this.#signUps.clear();
    for (const r of rows) this.#signUps.set(r.id, r.created_at);
  }

  /**
   * One group of charges in one statement (one durable commit): the reservations deleted, a charge
   * row each, each cycle's usage counted once per group (its rows locked in key order), the
   * Idempotency-Keys recorded; then the balances after it, read in one statement. A reservation
   * already gone (committed, released, or released by another node that took this one for dead),
   * or asked twice in the group, gets null: never charged twice.
   */
  async #commitGroup(reservationIds: number[]): Promise<Settled<CommitResult | null>[]> {
    const now = this.now();
    const unique = [...new Set(reservationIds)];
    const { rows: charged } = await retryingStatement(() =>
      this.pool.query<AccountRow & CycleCounts & { reservation_id: number; charge_id: number; account_id: number; cycle_index: number }>(
        { name: 'bgone_commit_group', text: COMMIT_GROUP_SQL },
        [unique, now],
      ),
    );
    // The remaining credits of the current cycle: from the statement's counts, unless a charge
    // went to an earlier cycle (a reservation made before the cycle turned), then read afresh.
    const remaining = new Map<number, number>();
    const stale = new Map<number, AccountRow>();
    for (const r of charged) {
      if (cycleAt(new Date(r.created_at), new Date(now)).index === r.cycle_index) remaining.set(r.account_id, this.compute(r, now, r).remaining);
      else stale.set(r.account_id, r);
    }
    for (const [id, left] of await this.#remainingOf([...stale.values()], now)) remaining.set(id, left);
    const byId = new Map(charged.map((r) => [r.reservation_id, r]));
    return reservationIds.map((id) => {
      const r = byId.get(id);
      if (!r) return { value: null };
      byId.delete(id); // a second commit of the same reservation in this group finds nothing
      return { value: { chargeId: r.charge_id, cycleIndex: r.cycle_index, remaining: remaining.get(r.account_id)! } };
    });
  }

  /** One group of releases in one statement; a reservation asked twice in the group is released once. */
  async #releaseGroup(reservationIds: number[]): Promise<Settled<boolean>[]> {
    const { rows } = await this.pool.query<{ id: number }>(
      { name: 'bgone_release_group', text: 'DELETE FROM reservations WHERE id = ANY($1::bigint[]) RETURNING id' },
      [[...new Set(reservationIds)]],
    );
    const gone = new Set(rows.map((r) => r.id));
    return reservationIds.map((id) => ({ value: gone.delete(id) }));
  }

  /** Each account's remaining credits in its current cycle, read in one statement. */
  async #remainingOf(accountRows: AccountRow[], nowMs: number): Promise<Map<number, number>> {
    const result = new Map<number, number>();
    if (accountRows.length === 0) return result;
    const cycles = accountRows.map((r) => cycleAt(new Date(r.created_at), new Date(nowMs)).index);
    const { rows } = await this.pool.query<CycleCounts & { account_id: number }>({ name: 'bgone_group_counts', text: GROUP_COUNTS_SQL }, [
      accountRows.map((r) => r.id),
      cycles,
    ]);
    const byId = new Map(accountRows.map((r) => [r.id, r]));
    for (const r of rows) result.set(r.account_id, this.compute(byId.get(r.account_id)!, nowMs, r).remaining);
    return result;
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
