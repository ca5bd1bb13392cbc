/**
 * One node of the ledger benchmark (bench/ledger.ts), as a child process: opens its own store (its
 * own connection pool on PostgreSQL, the file on SQLite), reports "ready" on stdout, waits for "go"
 * on stdin, then runs the metering path of POST /api/v1/remove without the model or HTTP for a
 * fixed number of requests, `concurrency` at a time:
 *
 *   authenticate the key → take the rate limit → reserve a credit → commit it
 *
 * and prints one JSON line: { requests, refused, seconds, latencies (ms, sorted) }.
 *
 * Input: one JSON argument { store: StoreOptions, keys: string[], requests, concurrency }.
 */
import { createInterface } from 'node:readline';
import { openStore, type StoreOptions } from '../../src/store/index.js';

interface NodeInput {
  store: StoreOptions;
  keys: string[];
  requests: number;
  concurrency: number;
}

const input = JSON.parse(process.argv[2] ?? '{}') as NodeInput;
const store = await openStore({ ...input.store, ...('url' in input.store ? { autoRecover: false } : {}) });

async function meter(key: string, n: number): Promise<boolean> {
  const auth = await store.keys.authenticate(key);
  if (!auth) throw new Error('a benchmark key did not authenticate');
  const rate = await store.rateLimits.take(`key:${auth.keyId}`, auth.rateLimitPerMinute);
  if (!rate.allowed) return false;
  const reservation = await store.credits.reserve(auth.accountId, { requestId: `req_bench_${process.pid}_${n}`, keyId: auth.keyId });
  if (!reservation.ok || reservation.reservationId === null) return false;
  if (!(await store.credits.commit(reservation.reservationId))) throw new Error('a reservation vanished before its charge');
  return true;
}

process.stdout.write('ready\n');
await new Promise<void>((resolve) => createInterface({ input: process.stdin }).once('line', () => resolve()));

const latencies: number[] = [];
let next = 0;
let refused = 0;
const started = performance.now();
await Promise.all(
  Array.from({ length: input.concurrency }, async () => {
    for (let n = next++; n < input.requests; n = next++) {
      const t0 = performance.now();
      if (!(await meter(input.keys[n % input.keys.length]!, n))) refused++;
      latencies.push(performance.now() - t0);
    }
  }),
);
const seconds = (performance.now() - started) / 1000;
latencies.sort((a, b) => a - b);
process.stdout.write(`${JSON.stringify({ requests: input.requests, refused, seconds, latencies })}\n`);
await store.close();
