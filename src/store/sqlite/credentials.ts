/**
 * Dashboard credentials on SQLite: the encoded password hash kept in accounts.password_hash (the
 * column reserved by migration 1). The store keeps the string as given; hashing and verifying belong
 * to the dashboard (src/dashboard/passwords.ts). Accounts created by the CLI have none and cannot
 * log in until one is set.
 */
import { StoreError } from '../errors.js';
import { checkPasswordHash } from '../rules.js';
import type { Db } from './database.js';

export class Credentials {
  private readonly getStmt;
  private readonly setStmt;

  constructor(db: Db) {
    this.getStmt = db.prepare<[number], { password_hash: string | null }>('SELECT password_hash FROM accounts WHERE id = ?');
    this.setStmt = db.prepare<[string, number]>('UPDATE accounts SET password_hash = ? WHERE id = ?');
  }

  /** The stored password hash, or null when the account has none (or does not exist). */
  passwordHash(accountId: number): string | null {
    return this.getStmt.get(accountId)?.password_hash ?? null;
  }

  setPasswordHash(accountId: number, encodedHash: string): void {
    if (this.setStmt.run(checkPasswordHash(encodedHash), accountId).changes === 0) throw new StoreError('not_found', `no account ${accountId}`);
  }
}
