/**
 * The bytes that batches hold in memory (uploads being read, queued images, results waiting to be
 * fetched) against one budget (BGONE_BATCH_MEMORY_MB). A batch is admitted only if its declared
 * size fits, before its body is read; what it then really holds is accounted as it changes.
 */
export class MemoryBudget {
  #used = 0;

  constructor(readonly limit: number) {}

  get used(): number {
    return this.#used;
  }

  /** Takes `bytes` if they fit; false (and nothing taken) otherwise. */
  tryTake(bytes: number): boolean {
    if (bytes < 0 || this.#used + bytes > this.limit) return false;
    this.#used += bytes;
    return true;
  }

  /** Takes `bytes` whether they fit or not (a result that exists already must be accounted). */
  take(bytes: number): void {
    this.#used += bytes;
  }

  give(bytes: number): void {
    this.#used = Math.max(0, this.#used - bytes);
  }
}
