/**
 * Accounts on SQLite: email, plan, sign-up time (the billing anchor), cancellation and disabling.
 *
 * A cancelled paid plan is not downgraded by a job: `cancel_at` (the end of the cycle in which the
 * cancellation was made) is stored and the effective plan is evaluated lazily (rules.ts).
 */

import type { Clock } from '../clock.js';
import { cycleAt } from '../cycles.js';
import { StoreError } from '../errors.js';
import type { PlanName, PlanTable } from '../plans.js';
import { ACCOUNT_COLUMNS, type AccountRow, toAccount } from '../rows.js';
import { checkEmail, checkPlan, effectivePlanAt, normalizeEmail } from '../rules.js';
import type { Account, CreateAccountInput } from '../store.js';
import { type Db, isUniqueViolation } from './database.js';

/** The plan in effect at `atMs` for a stored account. */
export function planOf(row: Pick<AccountRow, 'plan' | 'cancel_at'>, atMs: number): PlanName {
  return effectivePlanAt(row.plan, row.cancel_at, atMs);
}

const COLUMNS = ACCOUNT_COLUMNS;

export class Accounts {
  private readonly insertStmt;
  private readonly byIdStmt;
  private readonly byEmailStmt;
  private readonly listStmt;
  private readonly setPlanStmt;
  private readonly setCancelAtStmt;
  private readonly disableStmt;
  private readonly endSessionsStmt;
  private readonly enableStmt;
  private readonly setPlanTx;
  private readonly cancelTx;
  private readonly resumeTx;
  private readonly disableTx;
  private readonly enableTx;

  constructor(
    db: Db,
    private readonly clock: Clock,
    private readonly plans: PlanTable,
  ) {
    this.insertStmt = db.prepare<[string, string, PlanName, number], AccountRow>(
      `INSERT INTO accounts (email, email_normalized, plan, created_at) VALUES (?, ?, ?, ?) RETURNING ${COLUMNS}`,
    );
    this.byIdStmt = db.prepare<[number], AccountRow>(`SELECT ${COLUMNS} FROM accounts WHERE id = ?`);
    this.byEmailStmt = db.prepare<[string], AccountRow>(`SELECT ${COLUMNS} FROM accounts WHERE email_normalized = ?`);
    this.listStmt = db.prepare<[], AccountRow>(`SELECT ${COLUMNS} FROM accounts ORDER BY id`);
    this.setPlanStmt = db.prepare<[PlanName, number]>('UPDATE accounts SET plan = ?, cancel_at = NULL WHERE id = ?');
    this.setCancelAtStmt = db.prepare<[number | null, number]>('UPDATE accounts SET cancel_at = ? WHERE id = ?');
    this.disableStmt = db.prepare<[number, number]>('UPDATE accounts SET disabled_at = coalesce(disabled_at, ?) WHERE id = ?');
    this.enableStmt = db.prepare<[number]>('UPDATE accounts SET disabled_at = NULL WHERE id = ?');
    this.endSessionsStmt = db.prepare<[number]>('DELETE FROM sessions WHERE account_id = ?');

    // Each change and the account read back after it: one transaction, so the answer is the change's.
    this.setPlanTx = db.transaction((id: number, plan: PlanName): Account => {
      this.requireChange(this.setPlanStmt.run(plan, id).changes, id);
      return this.get(id)!;
    });
    this.disableTx = db.transaction((id: number): Account => {
      this.requireChange(this.disableStmt.run(this.clock().getTime(), id).changes, id);
      this.endSessionsStmt.run(id);
      return this.get(id)!;
    });
    this.enableTx = db.transaction((id: number): Account => {
      this.requireChange(this.enableStmt.run(id).changes, id);
      return this.get(id)!;
    });
    this.cancelTx = db.transaction((id: number): Account => {
      const row = this.requireRow(id);
      const now = this.clock().getTime();
      if (row.cancel_at !== null && row.cancel_at > now) return toAccount(row, now); // already pending
      const plan = planOf(row, now);
      if (!this.plans[plan].paid) throw new StoreError('invalid_state', `account ${id} has no paid plan to cancel (plan: ${plan})`);
      const end = cycleAt(new Date(row.created_at), new Date(now)).end.getTime();
      this.setCancelAtStmt.run(end, id);
      return toAccount({ ...row, cancel_at: end }, now);
    });
    this.resumeTx = db.transaction((id: number): Account => {
      const row = this.requireRow(id);
      const now = this.clock().getTime();
      if (row.cancel_at === null) return toAccount(row, now); // nothing to resume
      if (row.cancel_at <= now) {
        throw new StoreError('invalid_state', `the cancellation of account ${id} already took effect; set a plan again instead`);
      }
      this.setCancelAtStmt.run(null, id);
      return toAccount({ ...row, cancel_at: null }, now);
    });
  }

  /** Signs up an account now: its creation time is the anchor of its billing cycles. Throws StoreError 'email_taken'. */
  create(input: CreateAccountInput): Account {
    const email = checkEmail(input.email);
    const plan = checkPlan(input.plan ?? 'free');
    const now = this.clock().getTime();
    try {
      return toAccount(this.insertStmt.get(email, normalizeEmail(email), plan, now)!, now);
    } catch (err) {
      if (isUniqueViolation(err)) throw new StoreError('email_taken', `an account with email ${email} already exists`);
      throw err;
    }
  }

  get(id: number): Account | null {
    const row = this.row(id);
    return row ? toAccount(row, this.clock().getTime()) : null;
  }

  /** Case-insensitive. */
  getByEmail(email: string): Account | null {
    const row = this.byEmailStmt.get(normalizeEmail(email));
    return row ? toAccount(row, this.clock().getTime()) : null;
  }

  /** All accounts, oldest first. */
  list(): Account[] {
    const now = this.clock().getTime();
    return this.listStmt.all().map((row) => toAccount(row, now));
  }

  /** Operator action: the plan takes effect now (for the whole current cycle's allowance) and any pending cancellation is dropped. */
  setPlan(id: number, plan: PlanName): Account {
    return this.setPlanTx.immediate(id, checkPlan(plan));
  }

  /**
   * Cancels the paid plan: it stays in effect until the end of the current billing cycle, then the
   * account is on Free. Calling it again while pending changes nothing. Throws StoreError
   * 'invalid_state' when the plan in effect is Free.
   */
  cancel(id: number): Account {
    return this.cancelTx.immediate(id);
  }

  /**
   * Undoes a pending cancellation (before the cycle ends). No-op when nothing is pending; throws
   * StoreError 'invalid_state' when the cancellation already took effect.
   */
  resume(id: number): Account {
    return this.resumeTx.immediate(id);
  }

  /**
   * Disabled accounts cannot be charged (reserve answers 'account_disabled'; the service answers
   * 403), and their dashboard sessions end in the same transaction.
   */
  disable(id: number): Account {
    return this.disableTx.immediate(id);
  }

  enable(id: number): Account {
    return this.enableTx.immediate(id);
  }

  /** The stored row, for the other parts of this implementation. */
  row(id: number): AccountRow | undefined {
    return this.byIdStmt.get(id);
  }

  /** All stored rows, oldest first. */
  rows(): AccountRow[] {
    return this.listStmt.all();
  }

  requireRow(id: number): AccountRow {
    const row = this.byIdStmt.get(id);
    if (!row) throw new StoreError('not_found', `no account ${id}`);
    return row;
  }

  private requireChange(changes: number, id: number): void {
    if (changes === 0) throw new StoreError('not_found', `no account ${id}`);
  }
}
