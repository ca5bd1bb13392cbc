/** Errors the PostgreSQL store's areas share. */
import { StoreError } from '../errors.js';

export function notFound(id: number): StoreError {
  return new StoreError('not_found', `no account ${id}`);
}
