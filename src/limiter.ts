/**
 * Bounds how many jobs are inside the native core at once. Inference is serialised in C++ anyway;
 * letting a second job in means its decode and encode overlap the first one's inference, while more
 * would only hold libuv threads waiting on the inference lock. Callers beyond the bound wait here,
 * in order.
 */
export class Limiter {
  private running = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(readonly concurrency: number) {
    if (!Number.isInteger(concurrency) || concurrency < 1) throw new RangeError('concurrency must be a positive integer');
  }

  /** Jobs running plus jobs waiting. */
  get size(): number {
    return this.running + this.waiting.length;
  }

  get pending(): number {
    return this.waiting.length;
  }

  async run<T>(job: () => Promise<T>): Promise<T> {
    if (this.running >= this.concurrency) await new Promise<void>((resolve) => this.waiting.push(resolve));
    this.running++;
    try {
      return await job();
    } finally {
      this.running--;
      this.waiting.shift()?.();
    }
  }
}
