/**
 * Bounds how many jobs are inside the native core at once. Inference is serialised in C++ anyway;
 * letting a second job in means its decode and encode overlap the first one's inference, while more
 * would only hold libuv threads waiting on the inference lock. Callers beyond the bound wait here,
 * in order. The bound can change while jobs run (configure()): it applies to jobs not yet started.
 */
export class Limiter {
  private running = 0;
  private readonly waiting: Array<() => void> = [];
  private bound: number;

  constructor(concurrency: number) {
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
    while (this.running < this.bound && this.waiting.length > 0) {
      this.running++;
      this.waiting.shift()!();
    }
  }

  /** Jobs running plus jobs waiting. */
  get size(): number {
    return this.running + this.waiting.length;
  }

  get pending(): number {
    return this.waiting.length;
  }

  async run<T>(job: () => Promise<T>): Promise<T> {
    // A waiting job is counted as running by whoever wakes it, so that a job arriving in between
    // cannot take its place.
    if (this.running >= this.bound) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.running++;
    try {
      return await job();
    } finally {
      this.running--;
      if (this.running < this.bound && this.waiting.length > 0) {
        this.running++;
        this.waiting.shift()!();
      }
    }
  }
}
