/**
 * Groups the calls of one kind (reservations, charges, releases, rate-limit counts, key lookups)
 * that a store instance receives close together, so that they share one round trip and one
 * durable commit instead of paying one each.
 *
 * One group is in flight at a time; the next forms meanwhile. A call made while nothing is in
 * flight waits only for the current turn of the event loop to end (setImmediate), so calls that
 * arrive together go out together; a call made while a group is in flight joins the next group,
 * which goes out as soon as that one returns. The busier the store, the larger the groups, and the
 * fewer commits per call: the grouping adapts to the load without a timer to tune.
 *
 * Every call keeps its own outcome: the runner returns one Settled per item, in order, so one
 * item's refusal or error never fails the others. A runner that throws (the database unreachable,
 * a statement failing) fails every item of its group with that error; the next group is tried
 * afresh.
 */

/** One item's outcome in a group: its value, or the error it alone fails with. */
export type Settled<T> = { value: T } | { error: unknown };

/** Runs one group: one Settled per item, in the order of `items`. */
export type GroupRunner<I, O> = (items: I[]) => Promise<Settled<O>[]>;

interface Waiting<I, O> {
  item: I;
  resolve(value: O): void;
  reject(error: unknown): void;
}

export class Grouped<I, O> {
  #queue: Waiting<I, O>[] = [];
  #running = false;

  constructor(
    private readonly run: GroupRunner<I, O>,
    /** At most this many items per group (bounds a statement's size and a group's time). */
    private readonly maxGroup: number,
  ) {
    if (!Number.isSafeInteger(maxGroup) || maxGroup < 1) throw new RangeError(`maxGroup must be a positive integer, got ${String(maxGroup)}`);
  }

  /** The item's outcome, once the group it joins has run. */
  submit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.#queue.push({ item, resolve, reject });
      if (!this.#running) {
        this.#running = true;
        setImmediate(() => void this.#drain());
      }
    });
  }

  async #drain(): Promise<void> {
    while (this.#queue.length > 0) {
      const group = this.#queue.splice(0, this.maxGroup);
      let outcomes: Settled<O>[];
      try {
        outcomes = await this.run(group.map((w) => w.item));
        if (outcomes.length !== group.length) throw new Error(`a group of ${group.length} got ${outcomes.length} outcomes`);
      } catch (err) {
        for (const w of group) w.reject(err);
        continue;
      }
      group.forEach((w, i) => {
        const outcome = outcomes[i]!;
        if ('error' in outcome) w.reject(outcome.error);
        else w.resolve(outcome.value);
      });
    }
    this.#running = false;
  }
}

/** Runs `fn` for one item inside a group: its value, or its own error. */
export function settle<T>(fn: () => T): Settled<T> {
  try {
    return { value: fn() };
  } catch (error) {
    return { error };
  }
}
