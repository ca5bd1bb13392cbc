/**
 * The batch memory budget: the bytes that batches hold in memory (uploads being read, queued
 * images, results waiting to be fetched; the memory a job needs while it runs is the job memory
 * gate's, service/job-memory-gate.ts) against one budget (BGONE_BATCH_MEMORY_MB), and against each account's share of it
 * (BGONE_BATCH_ACCOUNT_SHARE), so that one account's uploads and kept results cannot hold the
 * memory every other account's batches need. A batch is admitted only if its declared size fits
 * both, before its body is read; what it then really holds is accounted as it changes.
 */

/** Why tryTake refused: the whole budget is full, or the account holds its share of it. */
export type BudgetRefusal = 'server' | 'account';

export class BatchMemoryBudget {
  #used = 0;
  /** Bytes held per account (only accounts holding some). */
  readonly #byAccount = new Map<number, number>();

  /** `accountLimit`: the most one account may hold (default: the whole budget). */
  constructor(
    readonly limit: number,
    readonly accountLimit = limit,
  ) {}

  get used(): number {
    return this.#used;
  }

  /** Bytes the account holds now. */
  heldBy(accountId: number): number {
    return this.#byAccount.get(accountId) ?? 0;
  }

  /** Takes `bytes` for the account if they fit the budget and its share; otherwise takes nothing and says which does not fit. */
  tryTake(accountId: number, bytes: number): BudgetRefusal | undefined {
    if (bytes < 0 || this.#used + bytes > this.limit) return 'server';
    if (this.heldBy(accountId) + bytes > this.accountLimit) return 'account';
    this.take(accountId, bytes);
    return undefined;
  }

  /** Takes `bytes` whether they fit or not (a result that exists already must be accounted). */
  take(accountId: number, bytes: number): void {
    this.#used += bytes;
    this.#byAccount.set(accountId, this.heldBy(accountId) + bytes);
  }

  give(accountId: number, bytes: number): void {
    this.#used = Math.max(0, this.#used - bytes);
    const left = this.heldBy(accountId) - bytes;
    if (left > 0) this.#byAccount.set(accountId, left);
    else this.#byAccount.delete(accountId);
  }
}
