/**
 * Monthly billing cycles anchored at the account's sign-up time (UTC). Cycle k starts at
 * anchor + k calendar months, at the anchor's time of day; when the anchor's day of month does not
 * exist in that month (e.g. the 31st in February), the cycle starts on the month's last day.
 * Clamping is always relative to the anchor, never cumulative: Jan 31 → Feb 28 (29) → Mar 31.
 */
export interface Cycle {
  /** 0 for the cycle that starts at sign-up. */
  readonly index: number;
  /** Inclusive. */
  readonly start: Date;
  /** Exclusive: the start of the next cycle. */
  readonly end: Date;
}

function daysInMonth(year: number, month0: number): number {
  const d = new Date(0);
  d.setUTCFullYear(year, month0 + 1, 0);
  return d.getUTCDate();
}

/** Start of cycle `index` (any integer) for the given anchor. */
export function cycleStart(anchor: Date, index: number): Date {
  if (!Number.isSafeInteger(index)) throw new RangeError(`cycle index must be an integer, got ${index}`);
  const months = anchor.getUTCMonth() + index;
  const year = anchor.getUTCFullYear() + Math.floor(months / 12);
  const month0 = ((months % 12) + 12) % 12;
  const d = new Date(0);
  d.setUTCFullYear(year, month0, Math.min(anchor.getUTCDate(), daysInMonth(year, month0)));
  d.setUTCHours(anchor.getUTCHours(), anchor.getUTCMinutes(), anchor.getUTCSeconds(), anchor.getUTCMilliseconds());
  return d;
}

/** Cycle number `index` (>= 0). */
export function cycleByIndex(anchor: Date, index: number): Cycle {
  if (!Number.isSafeInteger(index) || index < 0) throw new RangeError(`cycle index must be a non-negative integer, got ${index}`);
  return { index, start: cycleStart(anchor, index), end: cycleStart(anchor, index + 1) };
}

/**
 * The cycle that contains `now`. A `now` before the anchor (a clock stepping back just after
 * sign-up) counts as cycle 0.
 */
export function cycleAt(anchor: Date, now: Date): Cycle {
  if (Number.isNaN(anchor.getTime()) || Number.isNaN(now.getTime())) throw new RangeError('invalid date');
  if (now.getTime() < anchor.getTime()) return cycleByIndex(anchor, 0);
  let index = (now.getUTCFullYear() - anchor.getUTCFullYear()) * 12 + (now.getUTCMonth() - anchor.getUTCMonth());
  // Cycle `index` starts in now's month: on or before now, or later in the month (then it is the previous one).
  if (cycleStart(anchor, index).getTime() > now.getTime()) index--;
  return cycleByIndex(anchor, Math.max(index, 0));
}
