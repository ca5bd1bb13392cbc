/**
 * Bounds how many jobs are inside the native core at once. Inference is serialised in C++ anyway;
 * letting a second job in means its decode and encode overlap the first one's inference, while more
 * would only hold libuv threads waiting on the inference lock. Callers beyond the bound wait here,
 * in order. The bound can change while jobs run (configure()): it applies to jobs not yet started.
 *
 * Background jobs (a service's batch work) wait in a lane of their own: one is let in only when no
 * normal job is waiting or running (and, with a grace, none has ended lately), so a normal job
 * never queues behind more than the background jobs already inside the core.
 *
 * A waiting job can be dropped by its AbortSignal (an HTTP client that went away), so that no
 * inference is spent on an answer nobody will read.
 */
export class Limiter {
  private running = 0;
  private readonly waiting: Array<() => void> = [];
  private readonly background: Array<() => void> = [];
  private bound: number;
  /** When the last normal job ended (performance.now()). */
  private lastNormalEnd = Number.NEGATIVE_INFINITY;
  /** Normal jobs inside now: a background job never goes in beside one. */
  private runningNormal = 0;
  private graceTimer: NodeJS.Timeout | undefined;

  /**
   * `backgroundGraceMs`: a background job goes in only once no normal job has ended for this long.
   * Interactive clients often send their next request right after an answer: without the grace a
   * batch image would slip in between and the next request would wait a whole inference for it.
   */
  constructor(
    concurrency: number,
    private readonly backgroundGraceMs = 0,
  ) {
    this.bound = Limiter.check(concurrency);
  }

  private static check(concurrency: number): number {
    if (!Number.isInteger(concurrency) || concurrency < 1) throw new RangeError('concurrency must be a positive integer');
    return concurrency;
  }

  get concurrency(): number {
    return this.bound;
  }

  /** A larger bound lets waiting jobs in at once; a smaller one lets running jobs finish. */
  set concurrency(concurrency: number) {
    this.bound = Limiter.check(concurrency);
    while (this.running < this.bound && this.wakeNext()) {}
  }

  /** Jobs running plus jobs waiting, background ones included. */
  get size(): number {
    return this.running + this.waiting.length + this.background.length;
  }

  get pending(): number {
    return this.waiting.length + this.background.length;
  }

  /** Normal jobs waiting (background ones not counted). */
  get pendingNormal(): number {
    return this.waiting.length;
  }

  /**
   * Runs `job` once a place is free. A `signal` that aborts while the job still waits removes it
   * from the queue, and the returned promise rejects with the signal's reason; once the job has its
   * place the signal is no longer looked at (the job runs to its end).
   */
  async run<T>(job: () => Promise<T>, lane: 'normal' | 'background' = 'normal', signal?: AbortSignal): Promise<T> {
    signal?.throwIfAborted();
    // A waiting job is counted as running by whoever wakes it, so that a job arriving in between
    // cannot take its place. A background job also waits while normal jobs wait or run.
    const queue = lane === 'background' ? this.background : this.waiting;
    const mustWait = this.running >= this.bound || (lane === 'background' && (this.waiting.length > 0 || this.runningNormal > 0 || this.inGrace() > 0));
    // Whoever wakes a waiting job counts it (running, and runningNormal for a normal one).
    if (mustWait) {
      const waited = Limiter.waitIn(queue, signal);
      // A background job held back only by the grace, with places free, has nobody to wake it when
      // the grace is over: wakeNext sets the timer that does.
      if (lane === 'background' && this.running < this.bound) this.wakeNext();
      await waited;
    } else {
      this.running++;
      if (lane === 'normal') this.runningNormal++;
    }
    try {
      return await job();
    } finally {
      this.running--;
      if (lane === 'normal') {
        this.runningNormal--;
        this.lastNormalEnd = performance.now();
      }
      if (this.running < this.bound) this.wakeNext();
    }
  }

  /** Milliseconds left before a background job may go in (0: now). */
  private inGrace(): number {
    return Math.max(0, this.backgroundGraceMs - (performance.now() - this.lastNormalEnd));
  }

  /** Resolves when the job is let in; rejects (out of the queue) when `signal` aborts before that. */
  private static waitIn(queue: Array<() => void>, signal: AbortSignal | undefined): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        const at = queue.indexOf(wake);
        if (at < 0) return; // already let in (and counted as running): it runs
        queue.splice(at, 1);
        reject(signal!.reason);
      };
      const wake = () => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      };
      queue.push(wake);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Lets the next waiting job in (normal ones first, background ones after the grace); false when none goes in. */
  private wakeNext(): boolean {
    let next = this.waiting.shift();
    if (next) this.runningNormal++;
    else if (this.background.length > 0) {
      if (this.runningNormal > 0) return false; // looked at again when that job ends
      const wait = this.inGrace();
      if (wait > 0) {
        // Look again when the grace is over (unless a normal job comes and resets it).
        if (!this.graceTimer) {
          this.graceTimer = setTimeout(() => {
            this.graceTimer = undefined;
            while (this.running < this.bound && this.wakeNext()) {}
          }, wait + 1);
          this.graceTimer.unref?.();
        }
        return false;
      }
      next = this.background.shift();
    }
    if (!next) return false;
    this.running++;
    next();
    return true;
  }
}
