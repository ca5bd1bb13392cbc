/**
 * Bounds how many jobs are inside the native core at once (the bound: settings.ts,
 * nativeConcurrencyFor). The C++ side lets at most two model runs share the session
 * (native/model.cc): on the CPU a second job's decode and encode overlap the first one's inference,
 * or its run fills the gaps of the first, while more would only wait for a place to run, holding
 * their decoded images; on a GPU many jobs' CPU stages overlap the GPU's runs. Callers beyond the
 * bound wait here, in order. The bound can change while jobs run (configure()): it applies to jobs
 * not yet started.
 *
 * Background jobs (a service's batch work) wait in a lane of their own: one is let in only when no
 * normal job is waiting or running (and, with a grace, none has ended lately), so a normal job
 * never queues behind more than the background jobs already inside the core.
 *
 * So that background work cannot wait without bound behind continuous normal traffic, it has a
 * guaranteed minimum share: once `backgroundEvery` normal jobs have gone in while a background job
 * waited, the next place goes to that background job, whatever waits or runs. A normal job then
 * waits behind that one background job at most (one at a time, at most one in every
 * `backgroundEvery + 1` places).
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
  /** Normal jobs inside now: a background job goes in beside one only when its share is due. */
  private runningNormal = 0;
  /** Normal jobs let in while a background job waited, since the last background job went in. */
  private passedBackground = 0;
  private graceTimer: NodeJS.Timeout | undefined;

  /**
   * `backgroundGraceMs`: a background job goes in only once no normal job has ended for this long.
   * Interactive clients often send their next request right after an answer: without the grace a
   * batch image would slip in between and the next request would wait a whole inference for it.
   * `backgroundEvery`: the normal jobs that may pass a waiting background job before it goes in
   * first (its minimum share; default 4, one place in five under continuous normal traffic).
   */
  constructor(
    concurrency: number,
    private readonly backgroundGraceMs = 0,
    private readonly backgroundEvery = 4,
  ) {
    this.bound = Limiter.check(concurrency);
    if (!Number.isInteger(backgroundEvery) || backgroundEvery < 1) throw new RangeError('backgroundEvery must be a positive integer');
  }

  /** Whether a waiting background job's share is due: it goes in at the next free place. */
  private backgroundDue(): boolean {
    return this.background.length > 0 && this.passedBackground >= this.backgroundEvery;
  }

  /** Counts a normal job going in (it passes the background jobs that wait, if any). */
  private enterNormal(): void {
    this.runningNormal++;
    if (this.background.length > 0) this.passedBackground++;
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
    const mustWait =
      this.running >= this.bound ||
      (lane === 'background' && (this.waiting.length > 0 || this.runningNormal > 0 || this.inGrace() > 0)) ||
      (lane === 'normal' && this.backgroundDue());
    // Whoever wakes a waiting job counts it (running, and runningNormal for a normal one).
    if (mustWait) {
      const waited = Limiter.waitIn(queue, signal);
      // A job that waits with places free has nobody else to wake it: a background job held back
      // only by the grace (wakeNext sets the timer that wakes it), or a normal job held back for a
      // background job whose share is due (wakeNext lets that one in, then this one if there is room).
      while (this.running < this.bound && this.wakeNext()) {}
      await waited;
    } else {
      this.running++;
      if (lane === 'normal') this.enterNormal();
      else this.passedBackground = 0;
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

  /**
   * Lets the next waiting job in (normal ones first, background ones after the grace, or first when
   * their share is due); false when none goes in.
   */
  private wakeNext(): boolean {
    let next: (() => void) | undefined;
    if (this.backgroundDue()) {
      next = this.background.shift();
      this.passedBackground = 0;
    } else if (this.waiting.length > 0) {
      next = this.waiting.shift();
      this.enterNormal();
    } else if (this.background.length > 0) {
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
      this.passedBackground = 0;
    }
    if (!next) return false;
    this.running++;
    next();
    return true;
  }
}
