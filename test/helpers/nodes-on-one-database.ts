/**
 * Several `bgone serve` processes (the compiled CLI) on one fresh PostgreSQL database, as an
 * operator runs them: the test's own store opens the database first (and so migrates it), then the
 * nodes start against it together on loopback ports, with the HTTP backend under test. Used by the
 * suites of several nodes (several-nodes, batches-any-node); close() in afterAll.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore, type PlanName, type Store } from '../../src/store/index.js';
import { killChildren, ServeProcess } from './cli-process.js';
import { freshDatabase, testDatabaseUrl } from './postgres.js';
import { testBackend } from './server.js';

/** Short, so that a test that kills a node waits seconds for its heartbeat to lapse, not the default 30 s. */
export const HEARTBEAT_LAPSE_MS = 3000;

export class NodesOnOneDatabase {
  /** The nodes start() started, in order, and the base URL of each. */
  nodes: ServeProcess[] = [];
  urls: string[] = [];

  private constructor(
    /** The nodes' working folder. */
    readonly dir: string,
    readonly database: { url: string; drop(): Promise<void> },
    /** The test's own connection, for what a test sets up and checks beside the nodes. */
    readonly store: Store,
  ) {}

  /** A fresh database (and a working folder named after `name`) with the test's store on it; no node yet. */
  static async open(name: string): Promise<NodesOnOneDatabase> {
    const dir = mkdtempSync(join(tmpdir(), `bgone-${name}-`));
    const database = await freshDatabase(await testDatabaseUrl());
    // The test's own connection migrates the database first; the nodes then find it ready.
    const store = await openStore({ url: database.url, autoRecover: false });
    return new NodesOnOneDatabase(dir, database, store);
  }

  /**
   * The environment of a node: `settings` over what every node here shares (this database, port 0
   * on 127.0.0.1, the short heartbeat lapse, the backend under test).
   */
  nodeEnv(settings: Record<string, string>): Record<string, string> {
    const backend = testBackend();
    return {
      BGONE_DATABASE_URL: this.database.url,
      BGONE_HOST: '127.0.0.1',
      BGONE_PORT: '0',
      BGONE_NODE_HEARTBEAT_LAPSE_MS: String(HEARTBEAT_LAPSE_MS),
      ...(backend === 'auto' ? {} : { BGONE_HTTP: backend }),
      ...settings,
    };
  }

  /** Starts one node per entry of `settings` (see nodeEnv), all at once, and waits until each listens. */
  async start(settings: Array<Record<string, string>>): Promise<void> {
    this.nodes = settings.map((node) => new ServeProcess(this.dir, this.nodeEnv(node)));
    this.urls = await Promise.all(this.nodes.map(async (node) => `http://127.0.0.1:${await node.port()}`));
  }

  /**
   * Stops node `index` (SIGTERM: it drains and deletes its heartbeat row) and starts it again with
   * `settings` (see nodeEnv), as an operator restarts one node of several; waits until it listens.
   */
  async restart(index: number, settings: Record<string, string>): Promise<void> {
    const old = this.nodes[index]!;
    if (old.alive) {
      old.child.kill('SIGTERM');
      await old.exited;
    }
    const node = new ServeProcess(this.dir, this.nodeEnv(settings));
    this.nodes[index] = node;
    this.urls[index] = `http://127.0.0.1:${await node.port()}`;
  }

  /** A new account on `plan` with one API key, written through the test's store. */
  async account(email: string, plan: PlanName = 'free'): Promise<{ id: number; key: string }> {
    const created = await this.store.accounts.create({ email, plan });
    return { id: created.id, key: (await this.store.keys.create(created.id)).key };
  }

  /** Kills every node, closes the test's store, drops the database and removes the folder. */
  async close(): Promise<void> {
    killChildren();
    await this.store.close();
    await this.database.drop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
