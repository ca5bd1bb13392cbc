import type { Store } from '../store/index.js';

/**
 * What the HTTP service needs from accounts, keys and credits. src/store implements it on SQLite;
 * the service depends on this narrow interface only.
 */
export interface Authenticated {
  keyId: number;
  accountId: number;
  disabled: boolean;
  rateLimitPerMinute: number;
}

export type Reservation =
  /** remaining: credits left once this request is charged (nothing more if alreadyCharged). */
  | { ok: true; reservationId: number | null; alreadyCharged: boolean; remainingAfterCharge: number }
  | { ok: false; reason: 'payment_required' | 'account_disabled' | 'idempotency_conflict' };

export interface ServiceStore {
  /** null for a malformed, unknown or revoked key (malformed: without touching the database). */
  authenticate(rawKey: string): Authenticated | null;
  reserve(accountId: number, request: { requestId: string; keyId?: number | undefined; idempotencyKey?: string | undefined; imageHash?: string | undefined }): Reservation;
  /** Charges the reservation; returns the credits left in the cycle. */
  commit(reservationId: number): number;
  release(reservationId: number): void;
}

/** The service's view of the SQLite store (src/store). */
export function sqliteServiceStore(store: Store): ServiceStore {
  return {
    authenticate(rawKey) {
      const auth = store.keys.authenticate(rawKey);
      if (!auth) return null;
      return { keyId: auth.keyId, accountId: auth.account.id, disabled: auth.account.disabled, rateLimitPerMinute: auth.plan.rateLimitPerMinute };
    },
    reserve: (accountId, request) => store.credits.reserve(accountId, request),
    commit: (reservationId) => store.credits.commit(reservationId).remaining,
    release: (reservationId) => void store.credits.release(reservationId),
  };
}
