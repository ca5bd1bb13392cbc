/**
 * Usage reports on SQLite, read from the charges ledger: requests per day of a cycle (dashboard) and a
 * summary over all accounts (operator CLI). Read-only.
 */
import type { Clock } from '../clock.js';
import { cycleAt, cycleByIndex } from '../cycles.js';
import { PLAN_NAMES, type PlanName } from '../plans.js';
import type { AccountUsage, DayUsage, UsageSummary } from '../store.js';
import type { Accounts } from './accounts.js';
import type { Credits } from './credits.js';
import type { Db } from './database.js';

const DAY_MS = 24 * 60 * 60 * 1000;

function dayString(dayNumber: number): string {
  return new Date(dayNumber * DAY_MS).toISOString().slice(0, 10);
}

export class Usage {
  private readonly byDayStmt;
  private readonly keysStmt;
  private readonly chargedSinceStmt;
  private readonly chargedTotalStmt;
  private readonly inFlightStmt;
  private readonly byDayTx;
  private readonly summaryTx;

  constructor(
    db: Db,
    private readonly clock: Clock,
    private readonly accounts: Accounts,
    private readonly credits: Credits,
  ) {
    this.byDayStmt = db.prepare<[number, number], { day: number; requests: number }>(
      `SELECT charged_at / ${DAY_MS} AS day, count(*) AS requests FROM charges
       WHERE account_id = ? AND cycle_index = ? GROUP BY day ORDER BY day`,
    );
    this.keysStmt = db.prepare<[], { active: number; revoked: number }>(
      'SELECT count(*) - count(revoked_at) AS active, count(revoked_at) AS revoked FROM api_keys',
    );
    this.chargedSinceStmt = db.prepare<[number], { n: number }>('SELECT count(*) AS n FROM charges WHERE charged_at >= ?');
    this.chargedTotalStmt = db.prepare<[], { n: number }>('SELECT count(*) AS n FROM charges');
    this.inFlightStmt = db.prepare<[], { n: number }>('SELECT count(*) AS n FROM reservations');

    this.byDayTx = db.transaction((accountId: number, cycleIndex: number | undefined): DayUsage[] => {
      const row = this.accounts.requireRow(accountId);
      const anchor = new Date(row.created_at);
      const cycle = cycleIndex === undefined ? cycleAt(anchor, this.clock()) : cycleByIndex(anchor, cycleIndex);
      const first = Math.floor(cycle.start.getTime() / DAY_MS);
      const last = Math.floor((cycle.end.getTime() - 1) / DAY_MS);
      const counts = new Array<number>(last - first + 1).fill(0);
      for (const { day, requests } of this.byDayStmt.all(accountId, cycle.index)) {
        counts[Math.min(Math.max(day, first), last) - first]! += requests;
      }
      return counts.map((requests, i) => ({ day: dayString(first + i), requests }));
    });

    this.summaryTx = db.transaction((): UsageSummary => {
      const now = this.clock().getTime();
      const byPlan = Object.fromEntries(PLAN_NAMES.map((name) => [name, 0])) as Record<PlanName, number>;
      const perAccount: AccountUsage[] = [];
      let disabled = 0;
      for (const row of this.accounts.rows()) {
        const balance = this.credits.compute(row, now);
        byPlan[balance.plan]++;
        if (row.disabled_at !== null) disabled++;
        perAccount.push({ accountId: row.id, email: row.email, disabled: row.disabled_at !== null, ...balance });
      }
      return {
        at: new Date(now),
        accounts: { total: perAccount.length, disabled, byPlan },
        keys: { ...this.keysStmt.get()! },
        charged: {
          last24h: this.chargedSinceStmt.get(now - DAY_MS)!.n,
          last30d: this.chargedSinceStmt.get(now - 30 * DAY_MS)!.n,
          total: this.chargedTotalStmt.get()!.n,
        },
        inFlight: this.inFlightStmt.get()!.n,
        perAccount,
      };
    });
  }

  /**
   * Charged requests per UTC day of a billing cycle (default: the current one), every day the
   * cycle touches included (0 when none). The counts add up to the cycle's `used`: a request
   * admitted just before the cycle ended and committed just after is counted on the cycle's last
   * day.
   */
  byDay(accountId: number, cycleIndex?: number): DayUsage[] {
    return this.byDayTx(accountId, cycleIndex);
  }

  /** Operator overview: accounts by plan, keys, charges, and every account's current cycle. */
  summary(): UsageSummary {
    return this.summaryTx();
  }
}
