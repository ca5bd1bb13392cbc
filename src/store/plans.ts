/**
 * The plans of docs/contract.md ("Plans"): credits per monthly billing cycle, and the rate limit per
 * minute (defaults, overridable through the store's configuration).
 */
export const PLAN_NAMES = ['free', 'pro', 'ultra', 'mega'] as const;

export type PlanName = (typeof PLAN_NAMES)[number];

export interface Plan {
  readonly name: PlanName;
  /** Credits per billing cycle (1 credit per successful request). */
  readonly credits: number;
  /** Requests per minute per API key. */
  readonly rateLimitPerMinute: number;
  /** Paid plans can be cancelled (they then fall back to Free at the end of the cycle). */
  readonly paid: boolean;
}

export type PlanTable = Readonly<Record<PlanName, Plan>>;

/** Rate-limit overrides by plan name; plans not listed keep their default. */
export type RateLimits = Partial<Record<PlanName, number>>;

export const PLANS: PlanTable = Object.freeze({
  free: Object.freeze({ name: 'free', credits: 100, rateLimitPerMinute: 10, paid: false }),
  pro: Object.freeze({ name: 'pro', credits: 10_000, rateLimitPerMinute: 60, paid: true }),
  ultra: Object.freeze({ name: 'ultra', credits: 50_000, rateLimitPerMinute: 300, paid: true }),
  mega: Object.freeze({ name: 'mega', credits: 200_000, rateLimitPerMinute: 1000, paid: true }),
});

export function isPlanName(value: unknown): value is PlanName {
  return typeof value === 'string' && (PLAN_NAMES as readonly string[]).includes(value);
}

/** PLANS with the given rate limits applied. Throws a RangeError on an unknown plan or a limit that is not a positive integer. */
export function resolvePlans(rateLimits: RateLimits = {}): PlanTable {
  for (const [name, limit] of Object.entries(rateLimits)) {
    if (!isPlanName(name)) throw new RangeError(`unknown plan in rate limits: ${JSON.stringify(name)}`);
    if (limit !== undefined && (!Number.isSafeInteger(limit) || limit < 1)) {
      throw new RangeError(`rate limit of plan ${name} must be a positive integer, got ${String(limit)}`);
    }
  }
  const table = {} as Record<PlanName, Plan>;
  for (const name of PLAN_NAMES) {
    table[name] = Object.freeze({ ...PLANS[name], rateLimitPerMinute: rateLimits[name] ?? PLANS[name].rateLimitPerMinute });
  }
  return Object.freeze(table);
}
