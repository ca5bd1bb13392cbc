/**
 * Credits on SQLite: exact charging under concurrency, by reservation.
 *
 *   reserve  (BEGIN IMMEDIATE) checks used + reserved < allowance and inserts a reservation row
 *   commit   turns the reservation into a charge (1 credit), after a successful response
 *   release  drops it (processing failed, client aborted)
 *
 * The check and the insert run in one write transaction, so any number of concurrent requests,
 * from any number of connections or processes sharing the file, cannot admit more requests than
 * the balance. A reservation is charged to the cycle whose balance admitted it. A crash leaves
 * reservations, never charges: recoverAfterCrash() at startup releases them.
 *
 * Balance of a cycle: allowance = credits of the plan in effect + operator grants for that cycle;
 * used = charges of that cycle (the cycle_usage counter, kept with the ledger in charges). A new
 * cycle has no usage row yet, so credits reset at each cycle start with no job; nothing carries
 * over.
 */
import type { Clock } from '../clock.js';
import { type Cycle, cycleAt } from '../cycles.js';
import { type Settled, settle } from '../groups.js';
import type { PlanTable } from '../plans.js';
import type { AccountRow, ReservationRow } from '../rows.js';
import { checkGrant, checkId, IDEMPOTENCY_TTL_MS } from '../rules.js';
import type { Balance, CommitResult, ReserveOptions, ReserveResult } from '../store.js';
import { type Accounts, planOf } from './accounts.js';
import type { Db } from './database.js';

/** Expired idempotency records are deleted at most this often (lazily, by reserve). */
const PURGE_INTERVAL_MS = 10 * 60 * 1000;

export class Credits {
  private readonly usageStmt;
  private readonly reservedStmt;
  private readonly reservationByIdemStmt;
  private readonly idemStmt;
  private readonly insertReservationStmt;
  private readonly reservationStmt;
  private readonly deleteReservationStmt;
  private readonly releaseForeignStmt;
  private readonly insertChargeStmt;
  private readonly bumpUsedStmt;
  private readonly upsertIdemStmt;
  private readonly purgeIdemStmt;
  private readonly insertGrantStmt;
  private readonly bumpGrantedStmt;
  private readonly reserveTx;
  private readonly commitTx;
  private readonly reserveGroupTx;
  private readonly commitGroupTx;
  private readonly releaseGroupTx;
  private readonly grantTx;
  private readonly balanceTx;
  private readonly recoverTx;
  private lastPurgeMs = Number.NEGATIVE_INFINITY;

  constructor(
    db: Db,
    private readonly clock: Clock,
    private readonly plans: PlanTable,
    private readonly accounts: Accounts,
    /** Tags this instance's reservations, so that recoverAfterCrash() leaves them alone. */
    private readonly owner: string,
  ) {
    this.usageStmt = db.prepare<[number, number], { used: number; granted: number }>(
      'SELECT used, granted FROM cycle_usage WHERE account_id = ? AND cycle_index = ?',
    );
    this.reservedStmt = db.prepare<[number, number], { n: number }>('SELECT count(*) AS n FROM reservations WHERE account_id = ? AND cycle_index = ?');
    this.reservationByIdemStmt = db.prepare<[number, string], { image_hash: string }>(
      'SELECT image_hash FROM reservations WHERE account_id = ? AND idempotency_key = ?',
    );
    this.idemStmt = db.prepare<[number, string, number], { image_hash: string }>(
      'SELECT image_hash FROM idempotency_keys WHERE account_id = ? AND idempotency_key = ? AND created_at > ?',
    );
    this.insertReservationStmt = db.prepare<[number, number | null, string, string, string | null, string | null, number, number]>(
      `INSERT INTO reservations (account_id, api_key_id, owner, request_id, idempotency_key, image_hash, cycle_index, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    this.reservationStmt = db.prepare<[number], ReservationRow>(
      'SELECT id, account_id, api_key_id, request_id, idempotency_key, image_hash, cycle_index FROM reservations WHERE id = ?',
    );
    this.deleteReservationStmt = db.prepare<[number]>('DELETE FROM reservations WHERE id = ?');
    this.releaseForeignStmt = db.prepare<[string]>('DELETE FROM reservations WHERE owner <> ?');
    this.insertChargeStmt = db.prepare<[number, number | null, string, number, number]>(
      'INSERT INTO charges (account_id, api_key_id, request_id, cycle_index, charged_at) VALUES (?, ?, ?, ?, ?)',
    );
    this.bumpUsedStmt = db.prepare<[number, number]>(
      `INSERT INTO cycle_usage (account_id, cycle_index, used) VALUES (?, ?, 1)
       ON CONFLICT (account_id, cycle_index) DO UPDATE SET used = used + 1`,
    );
    this.upsertIdemStmt = db.prepare<[number, string, string, number, number]>(
      `INSERT INTO idempotency_keys (account_id, idempotency_key, image_hash, charge_id, created_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (account_id, idempotency_key) DO UPDATE
       SET image_hash = excluded.image_hash, charge_id = excluded.charge_id, created_at = excluded.created_at`,
    );
    this.purgeIdemStmt = db.prepare<[number]>('DELETE FROM idempotency_keys WHERE created_at <= ?');
    this.insertGrantStmt = db.prepare<[number, number, number, string | null, number]>(
      'INSERT INTO grants (account_id, cycle_index, credits, note, granted_at) VALUES (?, ?, ?, ?, ?)',
    );
    this.bumpGrantedStmt = db.prepare<[number, number, number]>(
      `INSERT INTO cycle_usage (account_id, cycle_index, granted) VALUES (?, ?, ?)
       ON CONFLICT (account_id, cycle_index) DO UPDATE SET granted = granted + excluded.granted`,
    );

    this.reserveTx = db.transaction((accountId: number, options: ReserveOptions): ReserveResult => {
      const row = this.accounts.requireRow(accountId);
      const now = this.clock().getTime();
      if (now - this.lastPurgeMs >= PURGE_INTERVAL_MS) this.purge(now);
      if (row.disabled_at !== null) return { ok: false, reason: 'account_disabled' };
      const b = this.compute(row, now);
      const { idempotencyKey, imageHash } = options;
      if (idempotencyKey !== undefined) {
        const inFlight = this.reservationByIdemStmt.get(accountId, idempotencyKey);
        if (inFlight) return { ok: false, reason: inFlight.image_hash === imageHash ? 'idempotency_in_progress' : 'idempotency_conflict' };
        const record = this.idemStmt.get(accountId, idempotencyKey, now - IDEMPOTENCY_TTL_MS);
        if (record) {
          if (record.image_hash !== imageHash) return { ok: false, reason: 'idempotency_conflict' };
          return { ok: true, reservationId: null, alreadyCharged: true, remainingAfterCharge: b.remaining };
        }
      }
      if (b.remaining <= 0) return { ok: false, reason: 'payment_required', resetsAt: b.cycleEnd };
      const id = this.insertReservationStmt.run(
        accountId,
        options.keyId ?? null,
        this.owner,
        options.requestId,
        idempotencyKey ?? null,
        idempotencyKey !== undefined ? imageHash! : null,
        b.cycleIndex,
        now,
      ).lastInsertRowid;
      return { ok: true, reservationId: Number(id), alreadyCharged: false, remainingAfterCharge: b.remaining - 1 };
    });

    this.commitTx = db.transaction((reservationId: number): CommitResult | null => this.chargeReservation(reservationId));

    // Groups (../groups.ts): one write transaction, one commit to disk, for all; each item in a
    // savepoint of its own (a nested transaction), so one item's error undoes only its own writes.
    this.reserveGroupTx = db.transaction((items: ReadonlyArray<{ accountId: number; options: ReserveOptions }>): Settled<ReserveResult>[] =>
      items.map(({ accountId, options }) => settle(() => this.reserveTx(accountId, options))),
    );
    this.commitGroupTx = db.transaction((ids: readonly number[]): Settled<CommitResult | null>[] => ids.map((id) => settle(() => this.commitTx(id))));
    this.releaseGroupTx = db.transaction((ids: readonly number[]): Settled<boolean>[] => ids.map((id) => settle(() => this.release(id))));

    this.grantTx = db.transaction((accountId: number, credits: number, note: string | null): Balance => {
      const row = this.accounts.requireRow(accountId);
      const now = this.clock().getTime();
      const { index } = cycleAt(new Date(row.created_at), new Date(now));
      this.insertGrantStmt.run(accountId, index, credits, note, now);
      this.bumpGrantedStmt.run(accountId, index, credits);
      return this.compute(row, now);
    });

    // A read transaction: one consistent snapshot of the account, its usage and its reservations.
    this.balanceTx = db.transaction((accountId: number): Balance => this.compute(this.accounts.requireRow(accountId), this.clock().getTime()));

    this.recoverTx = db.transaction((): number => {
      this.purge(this.clock().getTime());
      return this.releaseForeignStmt.run(this.owner).changes;
    });
  }

  /**
   * Holds one credit for a request, atomically (BEGIN IMMEDIATE): succeeds only while
   * used + reserved < allowance in the current cycle. With an idempotencyKey (scope: the account):
   * a key already charged within 24 h for the same imageHash gives `alreadyCharged` (process again,
   * charge nothing); for a different image (charged or in flight), 'idempotency_conflict'; while
   * a request with that key and the same imageHash is in flight, 'idempotency_in_progress'. A released (failed) request leaves no record: its retry is charged
   * normally. Throws StoreError 'not_found' for an unknown account, 'invalid_argument' for bad options.
   */
  reserve(accountId: number, options: ReserveOptions): ReserveResult {
    Credits.checkReserve(options);
    return this.reserveTx.immediate(accountId, options);
  }

  /** reserve()'s checks of its options: StoreError 'invalid_argument'. */
  static checkReserve(options: ReserveOptions): void {
    checkId('requestId', options.requestId, true);
    checkId('idempotencyKey', options.idempotencyKey, false);
    if (options.idempotencyKey !== undefined) checkId('imageHash (required with idempotencyKey)', options.imageHash, true);
  }

  /** reserve() for each item (checked by checkReserve), in one write transaction: each item's own outcome, in order. */
  reserveGroup(items: ReadonlyArray<{ accountId: number; options: ReserveOptions }>): Settled<ReserveResult>[] {
    return this.reserveGroupTx.immediate(items);
  }

  /** commit() for each reservation, in one write transaction; one asked twice is charged once (null the second time). */
  commitGroup(ids: readonly number[]): Settled<CommitResult | null>[] {
    return this.commitGroupTx.immediate(ids);
  }

  /** release() for each reservation, in one write transaction. */
  releaseGroup(ids: readonly number[]): Settled<boolean>[] {
    return this.releaseGroupTx.immediate(ids);
  }

  /**
   * Charges a reservation (1 credit) after a successful response. Returns null when the
   * reservation is gone (committed or released already): nothing is charged then.
   */
  commit(reservationId: number): CommitResult | null {
    return this.commitTx.immediate(reservationId);
  }

  /**
   * Holds one credit per entry of `holds` for the account, all or none: only while
   * used + reserved + holds.length <= allowance in the current cycle. For a caller that writes more
   * in the same write transaction (a batch submission): it must run inside one (BEGIN IMMEDIATE),
   * so the check and the inserts see no other writer; the account's disabled state is the caller's
   * to check. Returns the reservation ids, in the order of `holds`.
   */
  reserveManyInTransaction(
    row: AccountRow,
    holds: ReadonlyArray<{ requestId: string; keyId: number | null }>,
    nowMs: number,
  ): { ok: true; reservationIds: number[] } | { ok: false; resetsAt: Date } {
    const b = this.compute(row, nowMs);
    if (b.remaining < holds.length) return { ok: false, resetsAt: b.cycleEnd };
    const reservationIds = holds.map(({ requestId, keyId }) =>
      Number(this.insertReservationStmt.run(row.id, keyId, this.owner, requestId, null, null, b.cycleIndex, nowMs).lastInsertRowid),
    );
    return { ok: true, reservationIds };
  }

  /**
   * The body of commit(), for a caller that charges inside a larger transaction of its own (a
   * batch image ending): the same charge row, cycle usage and Idempotency-Key record as a /remove
   * success. null when the reservation is gone: nothing is charged then.
   */
  chargeReservation(reservationId: number): CommitResult | null {
    const r = this.reservationStmt.get(reservationId);
    if (!r) return null; // committed or released already: never charged twice
    const now = this.clock().getTime();
    this.deleteReservationStmt.run(r.id);
    const chargeId = Number(this.insertChargeStmt.run(r.account_id, r.api_key_id, r.request_id, r.cycle_index, now).lastInsertRowid);
    this.bumpUsedStmt.run(r.account_id, r.cycle_index);
    if (r.idempotency_key !== null) this.upsertIdemStmt.run(r.account_id, r.idempotency_key, r.image_hash!, chargeId, now);
    return { chargeId, cycleIndex: r.cycle_index, remaining: this.compute(this.accounts.requireRow(r.account_id), now).remaining };
  }

  /** This store instance's owner tag (batches carry it too: failOrphans spares this instance's). */
  get ownerTag(): string {
    return this.owner;
  }

  /**
   * Drops a reservation without charging (failure, client abort). Returns whether it existed. One
   * statement: also safe inside a larger transaction.
   */
  release(reservationId: number): boolean {
    return this.deleteReservationStmt.run(reservationId).changes > 0;
  }

  /**
   * At startup: releases every reservation not made by this store instance, i.e. those left by a
   * previous process that stopped (crash, kill, power cut) between reserve and commit/release.
   * Only one service process may use a database file: another process's in-flight reservations
   * would be released too. Returns how many were released.
   */
  recoverAfterCrash(): number {
    return this.recoverTx.immediate();
  }

  /** The account's credits in the current cycle. */
  balance(accountId: number): Balance {
    return this.balanceTx(accountId);
  }

  /** Operator: extra credits for the current cycle only (they do not carry over). Returns the new balance. */
  grant(accountId: number, credits: number, note?: string): Balance {
    return this.grantTx.immediate(accountId, checkGrant(credits), note ?? null);
  }

  /** The balance of the cycle containing `nowMs` (also read by usage.ts). */
  compute(row: AccountRow, nowMs: number): Balance {
    const cycle: Cycle = cycleAt(new Date(row.created_at), new Date(nowMs));
    const plan = this.plans[planOf(row, nowMs)];
    const usage = this.usageStmt.get(row.id, cycle.index);
    const used = usage?.used ?? 0;
    const granted = usage?.granted ?? 0;
    const reserved = this.reservedStmt.get(row.id, cycle.index)!.n;
    const allowance = plan.credits + granted;
    return {
      plan: plan.name,
      allowance,
      granted,
      used,
      reserved,
      remaining: Math.max(0, allowance - used - reserved),
      cycleIndex: cycle.index,
      cycleStart: cycle.start,
      cycleEnd: cycle.end,
      rateLimitPerMinute: plan.rateLimitPerMinute,
    };
  }

  private purge(nowMs: number): void {
    this.purgeIdemStmt.run(nowMs - IDEMPOTENCY_TTL_MS);
    this.lastPurgeMs = nowMs;
  }
}
