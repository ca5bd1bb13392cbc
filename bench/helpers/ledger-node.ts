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
 * Input: one JSON argument { store: StoreOptions, keys: string[], requests, concurrency, order,
 * seed }. Order 'turn': request n uses key n mod keys, so every node's requests in flight go to the
 * same few accounts at once; 'random': each request draws its key (a generator seeded per node).
 */
import { createInterface } from 'node:readline';
import { openStore, type StoreOptions } from '../../src/store/index.js';

interface NodeInput {
  store: StoreOptions;
  keys: string[];
  requests: number;
  concurrency: number;
  order: 'turn' | 'random';
  seed: number;
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

let state = input.seed >>> 0 || 1;
/** xorshift32: the same draws for the same seed. */
const draw = (): number => {
  state ^= state << 13;
  state ^= state >>> 17;
  state ^= state << 5;
  state >>>= 0;
  return state % input.keys.length;
};
const keyOf = (n: number): string => input.keys[input.order === 'turn' ? n % input.keys.length : draw()]!;

const latencies: number[] = [];
let next = 0;
let refused = 0;
const started = performance.now();
await Promise.all(
  Array.from({ length: input.concurrency }, async () => {
    for (let n = next++; n < input.requests; n = next++) {
      const t0 = performance.now();
      if (!(await meter(keyOf(n), n))) refused++;
      latencies.push(performance.now() - t0);
    }
  }),
);
const seconds = (performance.now() - started) / 1000;
latencies.sort((a, b) => a - b);
process.stdout.write(`${JSON.stringify({ requests: input.requests, refused, seconds, latencies })}\n`);
await store.close();
