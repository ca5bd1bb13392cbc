/** Errors thrown by the store for caller mistakes (unknown ids, invalid arguments, invalid state changes). */
export type StoreErrorCode =
  | 'not_found'
  | 'email_taken'
  | 'invalid_argument'
  | 'invalid_state'
  | 'schema_too_new'
  | 'locked'
  | 'unavailable'
  /** keys.create: the account already holds its maximum of active (unrevoked) API keys. */
  | 'key_limit';

export class StoreError extends Error {
  readonly code: StoreErrorCode;

  constructor(code: StoreErrorCode, message: string) {
    super(message);
    this.name = 'StoreError';
    this.code = code;
  }
}
