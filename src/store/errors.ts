/** Errors thrown by the store for caller mistakes (unknown ids, invalid arguments, invalid state changes). */
export type StoreErrorCode =
  | 'not_found'
  | 'email_taken'
  | 'invalid_argument'
  | 'invalid_state'
  | 'schema_too_new';

export class StoreError extends Error {
  readonly code: StoreErrorCode;

  constructor(code: StoreErrorCode, message: string) {
    super(message);
    this.name = 'StoreError';
    this.code = code;
  }
}

/** Whether a better-sqlite3 error is a UNIQUE (or PRIMARY KEY) constraint violation. */
export function isUniqueViolation(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
}
