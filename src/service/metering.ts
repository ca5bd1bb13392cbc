/**
 * Credits for the requests that cost one (docs/contract.md, "Credits"): a credit is reserved before
 * the work, charged only when the answer is a success, and released otherwise, even while the
 * store is failing (release-retry.ts). /api/v1/remove and the dashboard's try-it endpoint hold one
 * Credit per request; a batch reserves one per image when it is created (the store does that in
 * the same transaction) and shares the refusals below.
 */
import type { Logger } from '../config/logger.js';
import { isDatabaseUnavailable, type ReserveResult, releaseUntilDone, type Store } from '../store/index.js';
import { ApiError, storeFailure } from './errors.js';

type Refusal = Extract<ReserveResult, { ok: false }>['reason'];

/** The answer to a reservation the store refused. */
export function reservationRefusal(reason: Refusal, retryAfterSeconds: number, paymentMessage?: string, paymentDetails?: Record<string, unknown>): ApiError {
  switch (reason) {
    case 'payment_required':
      return new ApiError('payment_required', paymentMessage, paymentDetails);
    case 'account_disabled':
      return new ApiError('permission_denied');
    case 'idempotency_in_progress':
      // Still running, or on a node that died and whose reservation is not yet released (its
      // heartbeat lapse): the same request is accepted once that ends, so the client waits.
      return new ApiError('idempotency_in_progress', undefined, { field: 'Idempotency-Key' }, { 'Retry-After': String(retryAfterSeconds) });
    default:
      return new ApiError('validation_error', 'This Idempotency-Key was already used with another image or other options.', {
        field: 'Idempotency-Key',
      });
  }
}

export interface CreditOptions {
  store: Store;
  logger?: Logger | undefined;
  requestId: string;
  /** Seconds in Retry-After when the client is asked to try again. */
  retryAfterSeconds: number;
}

/** The one credit of one request. */
export class Credit {
  #reservationId: number | null = null;
  readonly #o: CreditOptions;

  constructor(options: CreditOptions) {
    this.#o = options;
  }

  /** Whether a reservation is held (neither charged nor released yet). */
  get held(): boolean {
    return this.#reservationId !== null;
  }

  /**
   * Reserves the credit; resolves with the balance left once it is charged, or with the answer
   * when it cannot be had (no credits, a disabled account, an Idempotency-Key in use, the store
   * failing).
   */
  async reserve(accountId: number, keyId: number | undefined, idempotency?: { key: string; imageHash: string }): Promise<number | ApiError> {
    const { store, logger, requestId } = this.#o;
    let reservation: ReserveResult;
    try {
      reservation = await store.credits.reserve(accountId, { requestId, keyId, idempotencyKey: idempotency?.key, imageHash: idempotency?.imageHash });
    } catch (err) {
      logger?.error({ requestId, err }, 'reservation failed');
      return storeFailure(isDatabaseUnavailable(err));
    }
    if (!reservation.ok) return reservationRefusal(reservation.reason, this.#o.retryAfterSeconds);
    this.#reservationId = reservation.reservationId;
    return reservation.remainingAfterCharge;
  }

  /**
   * Charges the reserved credit; resolves with the balance left, or with the answer when it cannot
   * be charged: a store error (500, the reservation kept for release), or a reservation another
   * node already released because it took this node for dead (paused or cut off past its
   * heartbeat lapse) while it worked: the credit went back, so the result cannot be paid for, and
   * the same request succeeds when sent again (503).
   */
  async commit(): Promise<number | ApiError> {
    const id = this.#reservationId;
    if (id === null) throw new Error('no credit reserved');
    const { store, logger, requestId } = this.#o;
    this.#reservationId = null;
    let commit: Awaited<ReturnType<Store['credits']['commit']>>;
    try {
      commit = await store.credits.commit(id);
    } catch (err) {
      logger?.error({ requestId, err }, 'charge failed');
      this.#reservationId = id;
      return new ApiError('internal_server_error');
    }
    if (!commit) {
      logger?.warn({ requestId, reservationId: id }, 'the reservation was released while processing: this node was taken for dead');
      return new ApiError(
        'overloaded',
        'This node was briefly unavailable while processing; retry after the time in Retry-After. Nothing was charged.',
        undefined,
        { 'Retry-After': String(this.#o.retryAfterSeconds) },
      );
    }
    return commit.remaining;
  }

  /**
   * Gives the reserved credit back, in the background: a failing store is logged and the release
   * tried again until it succeeds, never thrown into the failure path. Nothing when none is held.
   */
  release(): void {
    const id = this.#reservationId;
    if (id === null) return;
    this.#reservationId = null;
    const { store, logger, requestId } = this.#o;
    void releaseUntilDone(store, id, (err, attempt) => {
      // The first failure, then one line in ten: an outage must not flood the log.
      if (attempt === 1 || attempt % 10 === 0) logger?.error({ requestId, reservationId: id, attempt, err }, 'releasing a reservation failed; retrying');
    });
  }
}
