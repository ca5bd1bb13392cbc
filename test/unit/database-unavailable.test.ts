/**
 * Which store failures mean "the database cannot be reached now" (answered 503 with Retry-After)
 * rather than a bug (500): src/store/unavailable.ts, on the errors the drivers really throw.
 */
import { describe, expect, it } from 'vitest';
import { isDatabaseUnavailable, StoreError } from '../../src/store/index.js';

const withCode = (code: string, message = 'x') => Object.assign(new Error(message), { code });

describe('isDatabaseUnavailable', () => {
  it.each([
    ['connection refused', withCode('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:5432')],
    ['connection reset', withCode('ECONNRESET')],
    ['connection timed out', withCode('ETIMEDOUT')],
    ['host not found', withCode('ENOTFOUND')],
    ['PostgreSQL shutting down (57P01)', withCode('57P01', 'terminating connection due to administrator command')],
    ['PostgreSQL starting up (57P03)', withCode('57P03', 'the database system is starting up')],
    ['a connection exception (class 08)', withCode('08006', 'connection failure')],
    ['SQLite busy past its timeout', withCode('SQLITE_BUSY', 'database is locked')],
    ['the pool could not connect in time', new Error('timeout exceeded when trying to connect')],
    ['the connection died mid-query', new Error('Connection terminated unexpectedly')],
    ['the store said so', new StoreError('unavailable', 'cannot load better-sqlite3')],
  ])('%s: unavailable', (_, err) => {
    expect(isDatabaseUnavailable(err)).toBe(true);
  });

  it.each([
    ['a syntax error (42601)', withCode('42601', 'syntax error at or near "SELEC"')],
    ['a unique violation (23505)', withCode('23505')],
    ['a statement cancelled by its timeout (57014)', withCode('57014', 'canceling statement due to statement timeout')],
    ['SQLite constraint', withCode('SQLITE_CONSTRAINT_UNIQUE')],
    ['another store error', new StoreError('not_found', 'no account 7')],
    ['a plain bug', new TypeError("Cannot read properties of undefined (reading 'id')")],
    ['not an error at all', undefined],
  ])('%s: not unavailable', (_, err) => {
    expect(isDatabaseUnavailable(err)).toBe(false);
  });
});
