/**
 * What the HTTP service needs from accounts, keys and credits. src/store implements it on SQLite;
 * the service depends on this narrow interface only.
 */
export interface Authenticated {
  keyId: string;
  accountId: string;
  disabled: boolean;
  rateLimitPerMinute: number;
}

export type Reservation =
  | { ok: true; reservationId: string | null; alreadyCharged: boolean }
  | { ok: false; reason: 'payment_required' | 'account_disabled' | 'idempotency_conflict' };

export interface ServiceStore {
  /** null for a malformed, unknown or revoked key (malformed: without touching the database). */
  authenticate(rawKey: string): Authenticated | null;
  reserve(accountId: string, request: { requestId: string; idempotencyKey?: string; imageHash?: string }): Reservation;
  commit(reservationId: string): void;
  release(reservationId: string): void;
  remaining(accountId: string): number;
}
