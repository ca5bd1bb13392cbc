/**
 * Accounts: email, plan, sign-up time (the billing anchor), cancellation and disabling.
 *
 * A cancelled paid plan is not downgraded by a job: `cancel_at` (the end of the cycle in which the
 * cancellation was made) is stored and the effective plan is evaluated lazily: `plan` before
 * `cancel_at`, Free from then on.
 */
import type { Clock } from './clock.js';
import { cycleAt } from './cycles.js';
import type { Db } from './database.js';
import { isUniqueViolation, StoreError } from './errors.js';
import { isPlanName, type PlanName, type PlanTable } from './plans.js';

/** A row of the accounts table (password_hash is never read here). */
export interface AccountRow {
  id: number;
  email: string;
  plan: PlanName;
  created_at: number;
  cancel_at: number | null;
  disabled_at: number | null;
}

export interface Account {
  readonly id: number;
  readonly email: string;
  /** The plan in effect now: `subscribedPlan`, or 'free' once a cancellation has taken effect. */
  readonly plan: PlanName;
  /** The plan as last set (sign-up or operator); stays as it was after a cancellation took effect. */
  readonly subscribedPlan: PlanName;
  /** Sign-up time, the anchor of the monthly billing cycles. */
  readonly createdAt: Date;
  /** When a cancelled paid plan ends (pending while in the future); null when not cancelled. */
  readonly cancelAt: Date | null;
  readonly disabled: boolean;
  readonly disabledAt: Date | null;
}

export interface CreateAccountInput {
  email: string;
  /** Default 'free'. */
  plan?: PlanName;
}

const MAX_EMAIL_LENGTH = 254;

/** The plan in effect at `atMs` for a stored account. */
export function effectivePlanAt(row: Pick<AccountRow, 'plan' | 'cancel_at'>, atMs: number): PlanName {
  return row.cancel_at !== null && atMs >= row.cancel_at ? 'free' : row.plan;
}

export function toAccount(row: AccountRow, nowMs: number): Account {
  return {
    id: row.id,
    email: row.email,
    plan: effectivePlanAt(row, nowMs),
    subscribedPlan: row.plan,
    createdAt: new Date(row.created_at),
    cancelAt: row.cancel_at === null ? null : new Date(row.cancel_at),
    disabled: row.disabled_at !== null,
    disabledAt: row.disabled_at === null ? null : new Date(row.disabled_at),
  };
}

export function normalizeEmail(email: string): string {
  return email.trim().normalize('NFC').toLowerCase();
}

function checkEmail(email: unknown): string {
  if (typeof email !== 'string') throw new StoreError('invalid_argument', 'email must be a string');
  const trimmed = email.trim().normalize('NFC');
  const at = trimmed.lastIndexOf('@');
  if (trimmed.length > MAX_EMAIL_LENGTH || /\s/.test(trimmed) || at < 1 || at === trimmed.length - 1) {
    throw new StoreError('invalid_argument', `not a valid email address: ${JSON.stringify(email)}`);
  }
  return trimmed;
}

function checkPlan(plan: unknown): PlanName {
  if (!isPlanName(plan)) throw new StoreError('invalid_argument', `unknown plan: ${JSON.stringify(plan)}`);
  return plan;
}

const COLUMNS = 'id, email, plan, created_at, cancel_at, disabled_at';

export class Accounts {
  private readonly insertStmt;
  private readonly byIdStmt;
  private readonly byEmailStmt;
  private readonly listStmt;
  private readonly setPlanStmt;
  private readonly setCancelAtStmt;
  private readonly disableStmt;
  private readonly enableStmt;
  private readonly cancelTx;
  private readonly resumeTx;

  constructor(
    private readonly db: Db,
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

    this.cancelTx = db.transaction((id: number): Account => {
      const row = this.requireRow(id);
      const now = this.clock().getTime();
      if (row.cancel_at !== null && row.cancel_at > now) return toAccount(row, now); // already pending
      const plan = effectivePlanAt(row, now);
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
    checkPlan(plan);
    this.requireChange(this.setPlanStmt.run(plan, id).changes, id);
    return this.get(id)!;
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

  /** Disabled accounts cannot be charged (reserve answers 'account_disabled'; the service answers 403). */
  disable(id: number): Account {
    this.requireChange(this.disableStmt.run(this.clock().getTime(), id).changes, id);
    return this.get(id)!;
  }

  enable(id: number): Account {
    this.requireChange(this.enableStmt.run(id).changes, id);
    return this.get(id)!;
  }

  /** The plan in effect at `at` (default now). */
  effectivePlan(id: number, at: Date = this.clock()): PlanName {
    return effectivePlanAt(this.requireRow(id), at.getTime());
  }

  /** @internal The stored row, for the other parts of the store. */
  row(id: number): AccountRow | undefined {
    return this.byIdStmt.get(id);
  }

  /** @internal All stored rows, oldest first. */
  rows(): AccountRow[] {
    return this.listStmt.all();
  }

  /** @internal */
  requireRow(id: number): AccountRow {
    const row = this.byIdStmt.get(id);
    if (!row) throw new StoreError('not_found', `no account ${id}`);
    return row;
  }

  private requireChange(changes: number, id: number): void {
    if (changes === 0) throw new StoreError('not_found', `no account ${id}`);
  }
}
