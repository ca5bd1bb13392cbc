/**
 * Which better-sqlite3 build each Node loads (src/store/sqlite/driver.ts): 12 on Node 20, where 13
 * crashes; 13 from Node 22 on, where 12's objects can abort the process when collected.
 */
import { describe, expect, it } from 'vitest';
import { sqliteDriver, sqlitePackageFor } from '../../src/store/sqlite/driver.js';

describe('sqlitePackageFor', () => {
  it.each([
    ['20.9.0', 'better-sqlite3-node20'],
    ['v20.20.2', 'better-sqlite3-node20'],
    ['22.0.0', 'better-sqlite3'],
    ['v22.22.0', 'better-sqlite3'],
    ['24.21.0', 'better-sqlite3'],
    ['25.1.0', 'better-sqlite3'],
  ])('Node %s loads %s', (version, name) => {
    expect(sqlitePackageFor(version)).toBe(name);
  });
});

describe('sqliteDriver', () => {
  it('loads the build for the Node that runs the tests, and it opens a database', () => {
    const Database = sqliteDriver();
    expect(sqliteDriver()).toBe(Database); // loaded once
    const db = new Database(':memory:');
    try {
      expect(db.prepare('SELECT 1 + 1 AS two').get()).toEqual({ two: 2 });
    } finally {
      db.close();
    }
  });
});
