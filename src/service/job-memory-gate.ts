/**
 * The job memory gate, admission by estimated memory (not to be confused with the batch memory
 * budget, batches/batch-memory-budget.ts, which counts the bytes batches hold while they wait and
 * after they ran; this gate counts what a job needs while it runs, /remove's and batch images'
 * alike). Requests count in admitted places (admission.ts), but a 6000² 16-bit PNG needs hundreds
 * of MB where a 0.3 MP JPEG needs a few, so after its header is read each job also takes the
 * bytes its plan estimates (PreparedJob.memoryBytes, src/lib/job-memory.ts) from one budget (BGONE_MEMORY_BUDGET_MB) before it is reserved a credit and run.
 * A job that does not fit waits; one that waits longer than `maxWaitMs` is refused (503, nothing
 * charged). Waiters are served in order, but a small job may pass a large one that does not fit
 * yet — only a few times, so the large one is never starved: once passed `maxPasses` times it holds
 * the line and everything behind it waits.
 *
 * An estimate larger than the whole budget is taken as the whole budget: such a job (a valid image
 * within the contract's limits) runs alone rather than being refused.
 */

/** Why acquire() refused. */
export class JobMemoryGateTimeout extends Error {
  constructor(readonly waitedMs: number) {
    super(`no memory for this job after ${waitedMs} ms`);
    this.name = 'JobMemoryGateTimeout';
  }
}

export interface JobMemoryGateOptions {
  budgetBytes: number;
  /** How long a job may wait for memory before it is refused. */
  maxWaitMs: number;
  /** How often a waiting job may be passed by later, smaller ones (default 4). */
  maxPasses?: number | undefined;
}

interface Waiter {
  bytes: number;
  passes: number;
  grant: (release: () => void) => void;
  timer: NodeJS.Timeout;
}

export class JobMemoryGate {
  readonly #budget: number;
  readonly #maxWaitMs: number;
  readonly #maxPasses: number;
  #used = 0;
  readonly #waiting: Waiter[] = [];

  constructor(options: JobMemoryGateOptions) {
    if (!(options.budgetBytes > 0)) throw new RangeError('budgetBytes must be positive');
    this.#budget = options.budgetBytes;
    this.#maxWaitMs = options.maxWaitMs;
    this.#maxPasses = options.maxPasses ?? 4;
  }

  get used(): number {
    return this.#used;
  }

  get waiting(): number {
    return this.#waiting.length;
  }

  get budget(): number {
    return this.#budget;
  }

  /**
   * Takes `bytes` (capped at the budget); resolves with the function that gives them back (call it
   * once, when the job's memory is gone), or rejects with JobMemoryGateTimeout. An aborted `signal`
   * (the client went away) withdraws a waiting request: it rejects with the signal's reason.
   */
  acquire(bytes: number, signal?: AbortSignal): Promise<() => void> {
    const need = Math.min(Math.max(0, Math.ceil(bytes)), this.#budget);
    if (this.#waiting.length === 0 && this.#used + need <= this.#budget) return Promise.resolve(this.#take(need));
    if (this.#waiting.length > 0 && this.#used + need <= this.#budget && this.#mayPass()) {
      for (const w of this.#waiting) w.passes++;
      return Promise.resolve(this.#take(need));
    }
    return new Promise((resolve, reject) => {
      const started = performance.now();
      const waiter: Waiter = {
        bytes: need,
        passes: 0,
        grant: resolve,
        timer: setTimeout(() => {
          this.#remove(waiter);
          reject(new JobMemoryGateTimeout(Math.round(performance.now() - started)));
        }, this.#maxWaitMs),
      };
      waiter.timer.unref?.();
      signal?.addEventListener(
        'abort',
        () => {
          if (!this.#remove(waiter)) return;
          clearTimeout(waiter.timer);
          reject(signal.reason);
        },
        { once: true },
      );
      this.#waiting.push(waiter);
    });
  }

  /** Whether a newcomer may go ahead of the jobs waiting: none of them has been passed too often. */
  #mayPass(): boolean {
    return this.#waiting.every((w) => w.passes < this.#maxPasses);
  }

  #take(bytes: number): () => void {
    this.#used += bytes;
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      this.#used -= bytes;
      this.#wake();
    };
  }

  #remove(waiter: Waiter): boolean {
    const i = this.#waiting.indexOf(waiter);
    if (i < 0) return false;
    this.#waiting.splice(i, 1);
    this.#wake(); // a large waiter that left may unblock smaller ones behind it
    return true;
  }

  /** Grants waiters in order while they fit; one that does not fit is passed, or holds the line once passed too often. */
  #wake(): void {
    for (let i = 0; i < this.#waiting.length; ) {
      const w = this.#waiting[i]!;
      if (this.#used + w.bytes <= this.#budget) {
        this.#waiting.splice(i, 1);
        clearTimeout(w.timer);
        w.grant(this.#take(w.bytes));
        continue;
      }
      if (w.passes >= this.#maxPasses) return;
      i++;
    }
    // Those still waiting were passed by whoever went ahead of them in this round.
  }
}
