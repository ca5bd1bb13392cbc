/** Usage on PostgreSQL: an account's charges per day, and the operator's summary of every account. */
import type pg from 'pg';
import type { Clock } from '../clock.js';
import { cycleAt, cycleByIndex } from '../cycles.js';
import { PLAN_NAMES, type PlanName } from '../plans.js';
import { ACCOUNT_COLUMNS, type AccountRow } from '../rows.js';
import type { AccountUsage, DayUsage, UsageStore, UsageSummary } from '../store.js';
import type { PostgresCredits } from './credits.js';
import { notFound } from './errors.js';
import { accountRow, withClient } from './pool.js';

const DAY_MS = 24 * 60 * 60 * 1000;

export class PostgresUsage implements UsageStore {
  constructor(
    private readonly pool: pg.Pool,
    private readonly clock: Clock,
    private readonly credits: PostgresCredits,
  ) {}

  async byDay(accountId: number, cycleIndex?: number): Promise<DayUsage[]> {
    const row = await accountRow(this.pool, accountId);
    if (!row) throw notFound(accountId);
    const anchor = new Date(row.created_at);
    const cycle = cycleIndex === undefined ? cycleAt(anchor, this.clock()) : cycleByIndex(anchor, cycleIndex);
    const first = Math.floor(cycle.start.getTime() / DAY_MS);
    const last = Math.floor((cycle.end.getTime() - 1) / DAY_MS);
    const counts = new Array<number>(last - first + 1).fill(0);
    const { rows } = await this.pool.query<{ day: number; requests: number }>(
      `SELECT charged_at / ${DAY_MS} AS day, count(*) AS requests FROM charges
       WHERE account_id = $1 AND cycle_index = $2 GROUP BY day ORDER BY day`,
      [accountId, cycle.index],
    );
    // A request admitted just before the cycle ended and committed after counts on its last day.
    for (const { day, requests } of rows) counts[Math.min(Math.max(day, first), last) - first]! += requests;
    return counts.map((requests, i) => ({ day: new Date((first + i) * DAY_MS).toISOString().slice(0, 10), requests }));
  }

  /** One consistent snapshot (REPEATABLE READ, read only) of every account's current cycle and the totals. */
  async summary(): Promise<UsageSummary> {
    return withClient(this.pool, async (client, discard) => {
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      try {
        const now = this.clock().getTime();
        const accounts = (await client.query<AccountRow>(`SELECT ${ACCOUNT_COLUMNS} FROM accounts ORDER BY id`)).rows;
        const usage = (
          await client.query<{ account_id: number; cycle_index: number; used: number; granted: number }>(
            'SELECT account_id, cycle_index, used, granted FROM cycle_usage',
          )
        ).rows;
        const reserved = (
          await client.query<{ account_id: number; cycle_index: number; n: number }>(
            'SELECT account_id, cycle_index, count(*) AS n FROM reservations GROUP BY account_id, cycle_index',
          )
        ).rows;
        const totals = (
          await client.query<{ active: number; revoked: number; last24h: number; last30d: number; total: number; in_flight: number }>(
            `SELECT (SELECT count(*) FROM api_keys WHERE revoked_at IS NULL) AS active,
                  (SELECT count(*) FROM api_keys WHERE revoked_at IS NOT NULL) AS revoked,
                  (SELECT count(*) FROM charges WHERE charged_at >= $1) AS last24h,
                  (SELECT count(*) FROM charges WHERE charged_at >= $2) AS last30d,
                  (SELECT count(*) FROM charges) AS total,
                  (SELECT count(*) FROM reservations) AS in_flight`,
            [now - DAY_MS, now - 30 * DAY_MS],
          )
        ).rows[0]!;
        await client.query('COMMIT');
        const key = (account: number, cycle: number) => `${account}:${cycle}`;
        const usageOf = new Map(usage.map((u) => [key(u.account_id, u.cycle_index), u]));
        const reservedOf = new Map(reserved.map((r) => [key(r.account_id, r.cycle_index), r.n]));
        const byPlan = Object.fromEntries(PLAN_NAMES.map((name) => [name, 0])) as Record<PlanName, number>;
        let disabled = 0;
        const perAccount: AccountUsage[] = accounts.map((row) => {
          const { index } = cycleAt(new Date(row.created_at), new Date(now));
          const u = usageOf.get(key(row.id, index));
          const balance = this.credits.compute(row, now, {
            used: u?.used ?? 0,
            granted: u?.granted ?? 0,
            reserved: reservedOf.get(key(row.id, index)) ?? 0,
          });
          byPlan[balance.plan]++;
          if (row.disabled_at !== null) disabled++;
          return { accountId: row.id, email: row.email, disabled: row.disabled_at !== null, ...balance };
        });
        return {
          at: new Date(now),
          accounts: { total: perAccount.length, disabled, byPlan },
          keys: { active: totals.active, revoked: totals.revoked },
          charged: { last24h: totals.last24h, last30d: totals.last30d, total: totals.total },
          inFlight: totals.in_flight,
          perAccount,
        };
      } catch (err) {
        await client.query('ROLLBACK').catch(discard);
        throw err;
      }
    });
  }
}
