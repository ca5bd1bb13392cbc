/**
 * The store's only source of time. Everything time-dependent (billing cycles, cancellations,
 * charges, key usage, idempotency expiry) reads the injected clock, so tests drive time with a fake
 * clock instead of sleeping.
 */
export type Clock = () => Date;

export const systemClock: Clock = () => new Date();
