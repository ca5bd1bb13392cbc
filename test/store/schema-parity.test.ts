/**
 * The two stores declare the same schema: every table and column of one is in the other, except
 * the few that belong to one implementation by design (listed below, each with its reason). A
 * migration written for one store and forgotten in the other fails here.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/index.js';
import { sqliteDriver } from '../../src/store/sqlite/driver.js';
import { createTestDatabase } from '../helpers/store.js';

type Schema = Map<string, Set<string>>;

/** Tables or columns only one store has, and why. */
const ONLY_SQLITE: Record<string, string> = {};
const ONLY_POSTGRES: Record<string, string> = {
  // Several nodes: each node's heartbeat row, and which node holds or runs a batch image.
  nodes: 'the nodes sharing one database (SQLite serves one process)',
  'batch_images.holder': 'the node holding an image of another node’s batch',
  'batch_images.runner': 'the node running an image of another node’s batch',
  // The rate limit's windows: SQLite's one process keeps them in memory.
  rate_windows: 'rate-limit windows shared by every node (SQLite keeps them in memory)',
  login_failures: 'the login throttle shared by every node (SQLite keeps it in memory)',
  // SQLite records its schema version in PRAGMA user_version.
  schema_migrations: 'the applied migrations (SQLite: PRAGMA user_version)',
};

function differences(a: Schema, b: Schema, allowed: Record<string, string>): string[] {
  const missing: string[] = [];
  for (const [table, columns] of a) {
    if (table in allowed) continue;
    const other = b.get(table);
    if (!other) {
      missing.push(table);
      continue;
    }
    for (const column of columns) if (!other.has(column) && !(`${table}.${column}` in allowed)) missing.push(`${table}.${column}`);
  }
  return missing.sort();
}

let dir: string;
let sqlite: Schema;
let postgres: Schema;
let drop: () => Promise<void>;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'bgone-schema-'));
  const path = join(dir, 'bgone.db');
  await (await openStore({ path })).close();
  const Database = sqliteDriver();
  const db = new Database(path, { readonly: true });
  sqlite = new Map();
  const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'").all() as { name: string }[];
  for (const { name } of tables) {
    const columns = db.prepare(`SELECT name FROM pragma_table_info(?)`).all(name) as { name: string }[];
    sqlite.set(name, new Set(columns.map((c) => c.name)));
  }
  db.close();

  const database = await createTestDatabase();
  drop = database.drop;
  await (await openStore({ url: database.url })).close();
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  const { rows } = await client.query<{ table_name: string; column_name: string }>(
    "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'public'",
  );
  await client.end();
  postgres = new Map();
  for (const { table_name, column_name } of rows) {
    if (!postgres.has(table_name)) postgres.set(table_name, new Set());
    postgres.get(table_name)!.add(column_name);
  }
});

afterAll(async () => {
  await drop?.();
  rmSync(dir, { recursive: true, force: true });
});

describe('the SQLite and PostgreSQL schemas', () => {
  it('every SQLite table and column is in PostgreSQL', () => {
    expect(differences(sqlite, postgres, ONLY_SQLITE)).toEqual([]);
  });

  it('every PostgreSQL table and column is in SQLite, but those of several nodes', () => {
    expect(differences(postgres, sqlite, ONLY_POSTGRES)).toEqual([]);
  });

  it('the exceptions are real: each names a table or column of its own store only', () => {
    for (const name of Object.keys(ONLY_POSTGRES)) {
      const [table, column] = name.split('.') as [string, string | undefined];
      expect(column ? postgres.get(table)?.has(column) : postgres.has(table), name).toBe(true);
      expect(column ? sqlite.get(table)?.has(column) : sqlite.has(table), name).toBeFalsy();
    }
  });
});
