/**
 * Accounts on PostgreSQL: email, plan, sign-up time (the billing anchor), cancellation, disabling
 * and the dashboard password. A cancelled paid plan is not downgraded by a job: `cancel_at` is
 * stored and the effective plan evaluated lazily (rules.ts).
 */
import type pg from 'pg';
import { cycleAt } from '../cycles.js';
import { StoreError } from '../errors.js';
import type { PlanName, PlanTable } from '../plans.js';
import { ACCOUNT_COLUMNS, type AccountRow, toAccount } from '../rows.js';
import { checkEmail, checkPasswordHash, checkPlan, effectivePlanAt, normalizeEmail } from '../rules.js';
import type { Account, CreateAccountInput } from '../store.js';
import type { Queryable } from './context.js';
import { notFound } from './errors.js';
import type { PostgresKeys } from './keys.js';
import { accountRow, inTransaction } from './pool.js';

export class PostgresAccounts {
  constructor(
    private readonly pool: pg.Pool,
    private readonly now: () => number,
    private readonly plans: PlanTable,
    private readonly keys: PostgresKeys,
  ) {}

  async create(input: CreateAccountInput): Promise<Account> {
    return this.#insert(this.pool, checkEmail(input.email), checkPlan(input.plan ?? 'free'), null);
  }

  async createWithPassword({ email, passwordHash }: { email: string; passwordHash: string }): Promise<{ account: Account; key: string }> {
    const checkedEmail = checkEmail(email);
    const hash = checkPasswordHash(passwordHash);
    // The account, its password and its first key exist together or not at all.
    return inTransaction(this.pool, async (c) => {
      const account = await this.#insert(c, checkedEmail, 'free', hash);
      return { account, key: (await this.keys.createIn(c, account.id)).key };
    });
  }

  async get(id: number): Promise<Account | null> {
    const row = await accountRow(this.pool, id);
    return row ? toAccount(row, this.now()) : null;
  }

  async getByEmail(email: string): Promise<Account | null> {
    const { rows } = await this.pool.query<AccountRow>(`SELECT ${ACCOUNT_COLUMNS} FROM accounts WHERE email_normalized = $1`, [normalizeEmail(email)]);
    return rows[0] ? toAccount(rows[0], this.now()) : null;
  }

  async list(): Promise<Account[]> {
    const { rows } = await this.pool.query<AccountRow>(`SELECT ${ACCOUNT_COLUMNS} FROM accounts ORDER BY id`);
    const now = this.now();
    return rows.map((row) => toAccount(row, now));
  }

  async setPlan(id: number, plan: PlanName): Promise<Account> {
    return this.#update(id, 'plan = $2, cancel_at = NULL', [checkPlan(plan)]);
  }

  async cancel(id: number): Promise<Account> {
    return inTransaction(this.pool, async (c) => {
      const row = await accountRow(c, id, true);
      if (!row) throw notFound(id);
      const now = this.now();
      if (row.cancel_at !== null && row.cancel_at > now) return toAccount(row, now); // already pending
      const plan = effectivePlanAt(row.plan, row.cancel_at, now);
      if (!this.plans[plan].paid) throw new StoreError('invalid_state', `account ${id} has no paid plan to cancel (plan: ${plan})`);
      const end = cycleAt(new Date(row.created_at), new Date(now)).end.getTime();
      await c.query('UPDATE accounts SET cancel_at = $2 WHERE id = $1', [id, end]);
      return toAccount({ ...row, cancel_at: end }, now);
    });
  }

  async resume(id: number): Promise<Account> {
    return inTransaction(this.pool, async (c) => {
      const row = await accountRow(c, id, true);
      if (!row) throw notFound(id);
      const now = this.now();
      if (row.cancel_at === null) return toAccount(row, now);
      if (row.cancel_at <= now) throw new StoreError('invalid_state', `the cancellation of account ${id} already took effect; set a plan again instead`);
      await c.query('UPDATE accounts SET cancel_at = NULL WHERE id = $1', [id]);
      return toAccount({ ...row, cancel_at: null }, now);
    });
  }

  /** Its dashboard sessions end in the same transaction: none outlives the disabling. */
  async disable(id: number): Promise<Account> {
    return inTransaction(this.pool, async (c) => {
      const account = await this.#update(id, 'disabled_at = coalesce(disabled_at, $2)', [this.now()], c);
      await c.query('DELETE FROM sessions WHERE account_id = $1', [id]);
      return account;
    });
  }

  async enable(id: number): Promise<Account> {
    return this.#update(id, 'disabled_at = NULL', []);
  }

  async passwordHash(id: number): Promise<string | null> {
    const { rows } = await this.pool.query<{ password_hash: string | null }>('SELECT password_hash FROM accounts WHERE id = $1', [id]);
    return rows[0]?.password_hash ?? null;
  }

  async setPasswordHash(id: number, encodedHash: string): Promise<void> {
    const { rowCount } = await this.pool.query('UPDATE accounts SET password_hash = $2 WHERE id = $1', [id, checkPasswordHash(encodedHash)]);
    if (rowCount === 0) throw notFound(id);
  }

  async #insert(q: Queryable, email: string, plan: PlanName, passwordHash: string | null): Promise<Account> {
    const now = this.now();
    const { rows } = await q.query<AccountRow>(
      `INSERT INTO accounts (email, email_normalized, plan, created_at, password_hash) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (email_normalized) DO NOTHING RETURNING ${ACCOUNT_COLUMNS}`,
      [email, normalizeEmail(email), plan, now, passwordHash],
    );
    if (!rows[0]) throw new StoreError('email_taken', `an account with email ${email} already exists`);
    return toAccount(rows[0], now);
  }

  async #update(id: number, set: string, params: unknown[], db: Queryable = this.pool): Promise<Account> {
    const { rows } = await db.query<AccountRow>(`UPDATE accounts SET ${set} WHERE id = $1 RETURNING ${ACCOUNT_COLUMNS}`, [id, ...params]);
    if (!rows[0]) throw notFound(id);
    return toAccount(rows[0], this.now());
  }
}
