/**
 * The two HTTP backends side by side (npm run bench:http:backends, after npm run build): what
 * serving on node:http (the default) instead of uWebSockets.js costs, on a real removal and on a
 * cheap request.
 *
 * Each round starts the service on one backend, then on the other (the order alternates between
 * rounds), with a throw-away SQLite store and a Mega account (bench/helpers/http-fixture.ts), and
 * measures on each:
 * - removal: REMOVAL_CALLS sequential POST /api/v1/remove of a ~2 MP JPEG from the dev photos
 *   (-> png), one connection each; the round's figure is their median latency (ms);
 * - cheap: autocannon's GET /healthz, CHEAP_REQUESTS requests over CHEAP_CONNECTIONS keep-alive
 *   connections; the round's figure is 2xx answers / wall time (req/s).
 * One removal before the first round loads the model. The report gives, per backend and figure,
 * the median over the rounds and the spread (min-max), and node:http's cost per request in
 * microseconds against the removal's own time. BENCH_ROUNDS (default 5), BENCH_IMAGE as bench:http.
 * Results go to bench/results/http-backends.json. Only loopback traffic; every run is bounded.
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { runBounded } from './helpers/http-autocannon.js';
import { HOST, multipartBody, postOnce, startService } from './helpers/http-fixture.js';
import type { GeneratedInputs } from './helpers/make-inputs.js';
import { fmt, gitCommit, printTable, runToCompletion } from './helpers/report.js';

const HERE = path.dirname(fileURLToPath(import.meta.url)); // dist/bench
const REPO_ROOT = path.resolve(HERE, '..', '..');
const DATASET_DIR = path.resolve(REPO_ROOT, '..', 'shared', 'datasets', 'dev');
const INPUTS_CHILD = path.join(HERE, 'helpers', 'make-inputs.js');
const PHOTO = process.env.BENCH_IMAGE ?? 'gc_person1.jpg';
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 5));
const REMOVAL_CALLS = 3;
const CHEAP_REQUESTS = 20_000;
const CHEAP_CONNECTIONS = 16;
const BACKENDS = ['uws', 'node'] as const;
type Name = (typeof BACKENDS)[number];

const log = (message: string): void => {
  process.stderr.write(`[bench:http:backends] ${message}\n`);
};

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};

interface Round {
  removalMs: number;
  cheapRps: number;
}

async function makeJpeg(): Promise<Buffer> {
  const photo = path.join(DATASET_DIR, 'images', PHOTO);
  if (!existsSync(photo)) throw new Error(`photo not found: ${photo}`);
  const out = JSON.parse((await runToCompletion(INPUTS_CHILD, [photo, '2', '90'])).toString('utf8')) as GeneratedInputs;
  const img = out.images[0];
  if (!img) throw new Error('make-inputs returned no image');
  return Buffer.from(img.jpegBase64, 'base64');
}

async function round(backend: Name, jpeg: Buffer, warm: boolean): Promise<Round> {
  const fixture = await startService({ queueLimit: 16, grant: 1_000_000, rateLimitPerMinute: 1_000_000, http: backend });
  try {
    if (fixture.server.backend !== backend) throw new Error(`asked for ${backend}, got ${fixture.server.backend}`);
    const { body, contentType } = multipartBody(jpeg, 'photo.jpg', { format: 'png' });
    const headers = { Authorization: `Bearer ${fixture.apiKey}`, 'Content-Type': contentType };
    if (warm) await postOnce(fixture.url, body, headers, 120_000);
    const removals: number[] = [];
    for (let i = 0; i < REMOVAL_CALLS; i++) {
      const res = await postOnce(fixture.url, body, headers, 120_000);
      if (res.status !== 200) throw new Error(`removal answered ${res.status}: ${res.body.toString('utf8').slice(0, 200)}`);
      removals.push(res.ms);
    }
    const cheap = await runBounded(
      { url: `http://${HOST}:${fixture.server.port}/healthz`, method: 'GET', connections: CHEAP_CONNECTIONS, amount: CHEAP_REQUESTS, timeout: 30 },
      120_000,
    );
    const ok = cheap.latenciesMs.length;
    if (ok !== CHEAP_REQUESTS) throw new Error(`/healthz: ${ok} of ${CHEAP_REQUESTS} answers were 2xx (${JSON.stringify(cheap.requestErrors)})`);
    return { removalMs: median(removals), cheapRps: ok / (cheap.wallMs / 1000) };
  } finally {
    await fixture.close();
  }
}

async function main(): Promise<void> {
  log(`${ROUNDS} rounds; removal: ${REMOVAL_CALLS} sequential 2 MP JPEG -> png; cheap: ${CHEAP_REQUESTS} GET /healthz over ${CHEAP_CONNECTIONS} connections`);
  const jpeg = await makeJpeg();
  const rounds: Record<Name, Round[]> = { uws: [], node: [] };
  for (let r = 0; r < ROUNDS; r++) {
    const order = r % 2 === 0 ? BACKENDS : ([...BACKENDS].reverse() as Name[]);
    for (const backend of order) {
      const result = await round(backend, jpeg, r === 0 && backend === order[0]);
      rounds[backend].push(result);
      log(`round ${r + 1} ${backend}: removal ${fmt(result.removalMs)} ms, /healthz ${fmt(result.cheapRps)} req/s`);
    }
  }
  const summary = Object.fromEntries(
    BACKENDS.map((b) => {
      const of = (pick: (x: Round) => number) => {
        const xs = rounds[b].map(pick);
        return { median: median(xs), min: Math.min(...xs), max: Math.max(...xs) };
      };
      return [b, { removalMs: of((x) => x.removalMs), cheapRps: of((x) => x.cheapRps) }];
    }),
  ) as Record<Name, Record<keyof Round, { median: number; min: number; max: number }>>;
  const cell = (s: { median: number; min: number; max: number }) => `${fmt(s.median)} (${fmt(s.min)}-${fmt(s.max)})`;
  printTable(
    `HTTP backends, median (min-max) of ${ROUNDS} rounds`,
    ['backend', 'removal ms', '/healthz req/s'],
    BACKENDS.map((b) => [b, cell(summary[b].removalMs), cell(summary[b].cheapRps)]),
  );
  const perRequestUs = (1 / summary.node.cheapRps.median - 1 / summary.uws.cheapRps.median) * 1e6;
  const share = perRequestUs / 1000 / summary.uws.removalMs.median;
  console.log(
    `node:http / uWS on /healthz: ${fmt(summary.node.cheapRps.median / summary.uws.cheapRps.median, 3)} of the throughput, ${fmt(perRequestUs, 1)} µs more per request: ${fmt(share * 100, 4)} % of one removal (${fmt(summary.uws.removalMs.median)} ms). Removal, node:http / uWS: ${fmt(summary.node.removalMs.median / summary.uws.removalMs.median, 3)}.`,
  );
  const dir = path.join(REPO_ROOT, 'bench', 'results');
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, 'http-backends.json');
  writeFileSync(
    file,
    `${JSON.stringify({ commit: gitCommit(REPO_ROOT), node: process.version, cpus: os.cpus().length, loadavg: os.loadavg(), rounds, summary, perRequestUs }, null, 2)}\n`,
  );
  log(`written ${path.relative(REPO_ROOT, file)}`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
