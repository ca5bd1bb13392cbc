/**
 * The soak bench's fairness phase: a well-behaved account sends `/remove` requests one
 * at a time, first alone, then beside abusive accounts:
 *
 *   webhook-flood  test events, as fast as its rate limit lets it, to an endpoint that never answers
 *   idle           uploads that declare a big Content-Length and send nothing
 *   trickle-N      valid uploads trickled a few bytes at a time, several accounts
 *   (sqlite lock)  another process holding the SQLite file's write lock for a while
 *
 * Meanwhile the well-behaved account also sends a test event to its own (healthy) webhook receiver,
 * one at a time, and times its arrival. Reported: per account what it got (statuses, 5xx, p99
 * latency), the well-behaved account's p99 and 5xx alone and beside the abusers against the target
 * (p99 beside ≤ 1.5× p99 alone, 0 5xx), its webhook delays (the contract: ≤ ~2 s), and the ledger
 * of every account (credits charged == 200 answers, nothing left reserved).
 *
 * Its own server and SQLite file, with the service's defaults for the limits abusers meet
 * (per-account in-flight cap, body deadline, queue): what a deployment would run.
 */
import { spawn } from 'node:child_process';
import { setMaxListeners } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer as createHttpServer, type Server } from 'node:http';
import { type AddressInfo, createServer as createNetServer, type Socket } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createLogger } from '../../src/config/logger.js';
import { loadBackend } from '../../src/http/backend-select.js';
import { startServer } from '../../src/server.js';
import { openStore, type Store } from '../../src/store/index.js';
import { fmt, log, printTable } from './report.js';
import { multipart, send } from './soak-client.js';

const HERE = path.dirname(fileURLToPath(import.meta.url)); // dist/bench/helpers

export interface FairnessSettings {
  /** `/remove` requests of the well-behaved account in each of its two runs (SOAK_FAIR_REQUESTS). */
  wellRequests: number;
  /** Idle uploads held open at once (SOAK_IDLE_UPLOADS). */
  idleUploads: number;
  /** Accounts trickling uploads (SOAK_TRICKLE_ACCOUNTS), each with `tricklesPerAccount` at once (SOAK_TRICKLES_PER_ACCOUNT). */
  trickleAccounts: number;
  tricklesPerAccount: number;
  /** How long another process holds the SQLite write lock, once, a quarter into the run beside the abusers (SOAK_LOCK_SECONDS; 0: never). */
  lockSeconds: number;
  /** Test events per second sent to the stuck endpoint (SOAK_WEBHOOK_FLOOD_PER_SECOND). */
  webhookFloodPerSecond: number;
}

export function fairnessSettingsFromEnv(env: NodeJS.ProcessEnv): FairnessSettings {
  const num = (name: string, fallback: number) => {
    const value = Number(env[name] ?? fallback);
    if (!Number.isFinite(value) || value < 0) throw new Error(`${name} must be a number ≥ 0 (got "${env[name]}")`);
    return value;
  };
  return {
    wellRequests: Math.floor(num('SOAK_FAIR_REQUESTS', 200)),
    idleUploads: Math.floor(num('SOAK_IDLE_UPLOADS', 8)),
    trickleAccounts: Math.floor(num('SOAK_TRICKLE_ACCOUNTS', 3)),
    tricklesPerAccount: Math.floor(num('SOAK_TRICKLES_PER_ACCOUNT', 2)),
    lockSeconds: num('SOAK_LOCK_SECONDS', 5),
    webhookFloodPerSecond: num('SOAK_WEBHOOK_FLOOD_PER_SECOND', 20),
  };
}

/** What one account saw. */
interface Tally {
  role: string;
  accountId: number;
  key: string;
  usedBefore: number;
  statuses: Map<number, number>;
  latenciesMs: number[];
}

function count(t: Tally, status: number): void {
  t.statuses.set(status, (t.statuses.get(status) ?? 0) + 1);
}

function percentile(xs: readonly number[], p: number): number {
  if (xs.length === 0) return Number.NaN;
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Accepts connections and never answers. */
async function stuckEndpoint(): Promise<{ url: string; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server = createNetServer((socket) => {
    sockets.add(socket);
    socket.on('data', () => {});
    socket.on('error', () => {});
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/stuck`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** Answers 200 to every event and tells a waiting caller when the next one arrived. */
async function healthyEndpoint(): Promise<{ url: string; next(timeoutMs: number): Promise<boolean>; close(): Promise<void> }> {
  let waiting: ((arrived: boolean) => void) | undefined;
  const server: Server = createHttpServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200).end();
      waiting?.(true);
      waiting = undefined;
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    next: (timeoutMs) =>
      new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => {
          waiting = undefined;
          resolve(false);
        }, timeoutMs);
        waiting = (arrived) => {
          clearTimeout(timer);
          resolve(arrived);
        };
      }),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Holds the file's write lock from another process for `ms`; resolves once it has let go. */
function lockSqliteFile(file: string, ms: number): { locked: Promise<void>; released: Promise<void> } {
  const child = spawn(process.execPath, [path.join(HERE, 'sqlite-locker.js'), file, String(ms)], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  let onLocked: () => void = () => {};
  const locked = new Promise<void>((resolve) => {
    onLocked = resolve;
  });
  child.stdout.on('data', (c: Buffer) => {
    out += c.toString();
    if (out.includes('locked')) onLocked();
  });
  const released = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  released.then(onLocked);
  return { locked, released };
}

async function account(store: Store, role: string, email: string, credits: number): Promise<Tally> {
  const { id } = await store.accounts.create({ email, plan: 'mega' });
  await store.credits.grant(id, credits, 'soak');
  const { key } = await store.keys.create(id);
  return { role, accountId: id, key, usedBefore: (await store.credits.balance(id)).used, statuses: new Map(), latenciesMs: [] };
}

async function createEndpoint(port: number, key: string, url: string): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${port}/api/v1/webhooks`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ url }),
  });
  const json = (await res.json()) as { id?: string };
  if (res.status !== 201 || !json.id) throw new Error(`creating a webhook endpoint answered ${res.status}`);
  return json.id;
}

async function sendTestEvent(port: number, key: string, endpointId: string): Promise<number> {
  const res = await fetch(`http://127.0.0.1:${port}/api/v1/webhooks/${endpointId}/test`, { method: 'POST', headers: { authorization: `Bearer ${key}` } });
  await res.arrayBuffer();
  return res.status;
}

/** Runs the phase and prints its tables; resolves to whether its targets were met. */
export async function runFairnessPhase(settings: FairnessSettings, photo: Buffer): Promise<boolean> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bgone-soak-fair-'));
  const dbPath = path.join(dir, 'fair.db');
  const store = await openStore({ path: dbPath });
  const stuck = await stuckEndpoint();
  const healthy = await healthyEndpoint();
  const server = await startServer({
    host: '127.0.0.1',
    port: 0,
    queueLimit: 16,
    overloadRetryAfter: 1,
    drainTimeout: 30,
    store,
    logger: createLogger('silent'),
    http: loadBackend('auto').backend,
    // Local receivers stand in for the endpoints on the internet.
    batches: { resultTtlSeconds: 3600, memoryMb: 1024, webhookAllowPrivate: true },
  });
  const port = server.port;
  const valid = multipart({ size: 'preview' }, photo);
  const credits = settings.wellRequests * 4 + 1000;
  try {
    const well = await account(store, 'well-behaved', 'well@example.com', credits);
    const flood = await account(store, 'webhook-flood', 'flood@example.com', credits);
    const idle = await account(store, 'idle', 'idle@example.com', credits);
    const tricklers: Tally[] = [];
    for (let i = 0; i < settings.trickleAccounts; i++) tricklers.push(await account(store, `trickle-${i + 1}`, `trickle${i + 1}@example.com`, credits));
    const everyone = [well, flood, idle, ...tricklers];
    const wellHook = await createEndpoint(port, well.key, healthy.url);
    const stuckHook = await createEndpoint(port, flood.key, stuck.url);

    /** The well-behaved account's run: `/remove` one at a time; its latencies and statuses. */
    const wellRun = async (onRequest?: (i: number) => void) => {
      const latencies: number[] = [];
      const statuses = new Map<number, number>();
      for (let i = 0; i < settings.wellRequests; i++) {
        onRequest?.(i);
        const started = performance.now();
        const status = await send(port, '/api/v1/remove', well.key, valid.body, valid.type, 'whole');
        latencies.push(performance.now() - started);
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
        count(well, status);
      }
      return { latencies, statuses };
    };

    log(`soak fairness: ${settings.wellRequests} well-behaved requests alone, then beside the abusers, on ${server.backend}`);
    for (let i = 0; i < 2; i++) count(well, await send(port, '/api/v1/remove', well.key, valid.body, valid.type, 'whole')); // warm-up
    const alone = await wellRun();
    log(`  alone: p99 ${fmt(percentile(alone.latencies, 99))} ms`);

    // The abusers, until the well-behaved run beside them ends.
    const stop = new AbortController();
    setMaxListeners(0, stop.signal); // every abuser's request listens to it
    const abusers: Array<Promise<void>> = [];
    const loop = (body: () => Promise<void>) =>
      abusers.push(
        (async () => {
          while (!stop.signal.aborted) await body();
        })(),
      );
    loop(async () => {
      count(flood, await sendTestEvent(port, flood.key, stuckHook).catch(() => 0));
      await sleep(1000 / Math.max(settings.webhookFloodPerSecond, 0.001));
    });
    for (let i = 0; i < settings.idleUploads; i++)
      loop(async () => {
        const status = await send(port, '/api/v1/remove', idle.key, Buffer.alloc(0), valid.type, 'idle', { signal: stop.signal, declaredLength: 10 * 2 ** 20 });
        if (!stop.signal.aborted) count(idle, status);
        await sleep(200); // refused at once (a cap): not a busy loop
      });
    for (const t of tricklers)
      for (let i = 0; i < settings.tricklesPerAccount; i++)
        loop(async () => {
          const started = performance.now();
          const status = await send(port, '/api/v1/remove', t.key, valid.body, valid.type, { trickle: { bytes: 256, everyMs: 250 } }, { signal: stop.signal });
          if (stop.signal.aborted) return;
          count(t, status);
          if (status === 200) t.latenciesMs.push(performance.now() - started);
          await sleep(200);
        });
    // The well-behaved account's own webhook, one test event at a time, timed to its arrival.
    const webhookDelays: number[] = [];
    let webhookLost = 0;
    loop(async () => {
      const arrival = healthy.next(15_000);
      const sent = performance.now();
      const status = await sendTestEvent(port, well.key, wellHook).catch(() => 0);
      if (status !== 202) {
        await sleep(1000);
        return;
      }
      if (await arrival) webhookDelays.push(performance.now() - sent);
      else webhookLost++;
      await sleep(500);
    });
    await sleep(2000); // the abusers settle in
    let lock: ReturnType<typeof lockSqliteFile> | undefined;
    const beside = await wellRun((i) => {
      if (i === Math.floor(settings.wellRequests / 4) && settings.lockSeconds > 0) {
        log(`  another process locks the SQLite file for ${settings.lockSeconds} s`);
        lock = lockSqliteFile(dbPath, settings.lockSeconds * 1000);
      }
    });
    stop.abort();
    await Promise.all(abusers);
    await lock?.released;
    await sleep(1000); // closed uploads release their reservations asynchronously

    const p99Alone = percentile(alone.latencies, 99);
    const p99Beside = percentile(beside.latencies, 99);
    const fivexx = (m: Map<number, number>) => [...m].filter(([s]) => s >= 500).reduce((a, [, n]) => a + n, 0);
    const statusList = (m: Map<number, number>) =>
      [...m]
        .sort((a, b) => a[0] - b[0])
        .map(([s, n]) => `${s}: ${n}`)
        .join(', ');
    const runRow = (label: string, run: typeof alone, p99: number) => [
      label,
      String(run.latencies.length),
      fmt(percentile(run.latencies, 50)),
      fmt(p99),
      String(fivexx(run.statuses)),
      statusList(run.statuses),
    ];
    printTable(
      'Soak fairness: the well-behaved account, one /remove at a time',
      ['run', 'requests', 'p50 ms', 'p99 ms', '5xx', 'answers (status: count)'],
      [runRow('alone', alone, p99Alone), runRow('beside abusers', beside, p99Beside)],
    );

    let ledgerExact = true;
    const rows: string[][] = [];
    for (const t of everyone) {
      const balance = await store.credits.balance(t.accountId);
      const charged = balance.used - t.usedBefore;
      const ok = t.statuses.get(200) ?? 0;
      const exact = charged === ok && balance.reserved === 0;
      ledgerExact &&= exact;
      const latencies = t === well ? beside.latencies : t.latenciesMs;
      rows.push([
        t.role,
        String([...t.statuses.values()].reduce((a, b) => a + b, 0)),
        statusList(t.statuses),
        String(fivexx(t.statuses)),
        fmt(percentile(latencies, 99)),
        String(ok),
        String(charged),
        String(balance.reserved),
        exact ? 'yes' : 'NO',
      ]);
    }
    printTable(
      'Soak fairness: every account (the well-behaved one: both runs; p99 of its run beside the abusers; others: p99 of their 200s)',
      ['account', 'requests', 'answers (status: count; 0 = closed)', '5xx', 'p99 ms', '200 answers', 'credits charged', 'left reserved', 'ledger exact'],
      rows,
    );
    const webhookMax = webhookDelays.length ? Math.max(...webhookDelays) : Number.NaN;
    const webhookOk = webhookLost === 0 && webhookDelays.length > 0 && webhookMax <= 2000;
    printTable(
      "Soak fairness: the well-behaved account's webhook beside a stuck endpoint",
      ['test events', 'arrived', 'lost (none in 15 s)', 'p99 delay ms', 'max delay ms', 'target ≤ 2000 ms'],
      [
        [
          String(webhookDelays.length + webhookLost),
          String(webhookDelays.length),
          String(webhookLost),
          fmt(percentile(webhookDelays, 99)),
          fmt(webhookMax),
          webhookOk ? 'met' : 'MISSED',
        ],
      ],
    );
    const ratio = p99Beside / p99Alone;
    const latencyOk = ratio <= 1.5 && fivexx(beside.statuses) === 0;
    console.log(
      `target: well-behaved p99 beside abusers ≤ 1.5× its p99 alone, 0 5xx: ${latencyOk ? 'MET' : 'MISSED'} ` +
        `(p99 ${fmt(p99Beside)} ms vs ${fmt(p99Alone)} ms alone = ${fmt(ratio, 2)}×, ${fivexx(beside.statuses)} 5xx); ledger exact: ${ledgerExact ? 'yes' : 'NO'}`,
    );
    return latencyOk && ledgerExact && webhookOk;
  } finally {
    await stuck.close();
    await healthy.close();
    await server.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
