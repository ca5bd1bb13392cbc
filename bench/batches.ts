/**
 * Batches spread over several nodes (npm run bench:batches).
 *
 * One batch of BENCH_BATCH_IMAGES (default 30) ~2 MP JPEGs (made in memory from a dev photo, as
 * bench:http does) is submitted to one node, first on a cluster of 1 node, then on one of 2 nodes,
 * each a real `bgone serve` process on one throw-away PostgreSQL database (tools/embedded-postgres),
 * pinned to its own core (`taskset -c <i>`, BGONE_INFERENCE_THREADS=1), with a cluster secret.
 * Measured from the submission to the batch's completion (status polled every 100 ms through the
 * node that accepted it). Target: the 2-node run takes <= 0.6x the 1-node run, with the same
 * credits charged (one per image).
 *
 * Also reported: the bytes moved between the nodes (each node's /readyz peer_bytes), and the extra
 * latency of a result fetched through a peer: each result of the 2-node run is fetched once through
 * the node holding it and once through the other one, and the medians are compared.
 *
 * BENCH_BATCH_IMAGES=<n> and BENCH_MEGAPIXELS=<mp> make it smaller (a smoke run); BENCH_IMAGE picks
 * another photo of ../shared/datasets/dev/images. The load average at the start and the end is
 * printed: a run on a busy machine is noisy. Results go to bench/results/batches.json.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { openStore } from '../src/store/index.js';
import { startPostgres } from '../tools/embedded-postgres.js';
import type { GeneratedInputs } from './helpers/make-inputs.js';
import { fmt, gitCommit, printTable, round, runToCompletion } from './helpers/report.js';

const HERE = path.dirname(fileURLToPath(import.meta.url)); // dist/bench
const REPO_ROOT = path.resolve(HERE, '..', '..');
const CLI = path.join(REPO_ROOT, 'dist', 'src', 'cli', 'main.js');
const DATASET_DIR = path.resolve(REPO_ROOT, '..', 'shared', 'datasets', 'dev');
const INPUTS_CHILD = path.join(HERE, 'helpers', 'make-inputs.js');
const IMAGES = Number(process.env.BENCH_BATCH_IMAGES ?? 30);
const MEGAPIXELS = Number(process.env.BENCH_MEGAPIXELS ?? 2);
const PHOTO = process.env.BENCH_IMAGE ?? 'gc_person1.jpg';
const SECRET = 'bench-cluster-secret-0123456789abcdef0123456789';
const TARGET_RATIO = 0.6;

interface Node {
  url: string;
  exited: Promise<void>;
  kill(): void;
}

function startNode(core: number, databaseUrl: string, cwd: string): Promise<Node> {
  const env = {
    ...process.env,
    BGONE_DATABASE_URL: databaseUrl,
    BGONE_CLUSTER_SECRET: SECRET,
    BGONE_HOST: '127.0.0.1',
    BGONE_PORT: '0',
    BGONE_INFERENCE_THREADS: '1',
    BGONE_BOOTSTRAP_ACCOUNT: 'false',
    BGONE_BATCH_MEMORY_MB: '2048',
    BGONE_BATCH_ACCOUNT_SHARE: '100',
    BGONE_LOG_LEVEL: 'info',
    // The status is polled every 100 ms: the per-minute limit is not what this measures.
    BGONE_RATE_LIMIT_PRO: '1000000',
  };
  // One core per node, as the measurement asks; taskset is util-linux, on every Linux.
  const child = spawn('taskset', ['-c', String(core), process.execPath, CLI, 'serve'], { cwd, env, stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise<void>((resolve) => child.on('close', () => resolve()));
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /bgone listening on (http:\/\/[^"\s]+)/.exec(out);
      if (m) resolve({ url: m[1]!, exited, kill: () => child.kill('SIGTERM') });
    });
    child.on('close', (code) => reject(new Error(`node exited (${code}) before listening:\n${out.slice(-2000)}`)));
  });
}

async function makeImage(): Promise<Buffer> {
  const photo = path.join(DATASET_DIR, 'images', PHOTO);
  if (!existsSync(photo)) throw new Error(`no photo at ${photo} (BENCH_IMAGE picks another of ../shared/datasets/dev/images)`);
  const generated = JSON.parse((await runToCompletion(INPUTS_CHILD, [photo, String(MEGAPIXELS), '90'])).toString('utf8')) as GeneratedInputs;
  return Buffer.from(generated.images[0]!.jpegBase64, 'base64');
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

interface RunResult {
  nodes: number;
  seconds: number;
  succeeded: number;
  creditsUsed: number;
  peerBytes: number;
  perNode: number[];
  peerFetch?: { viaHolderMs: number; viaPeerMs: number; extraMs: number; results: number } | undefined;
}

async function timedFetch(url: string, key: string): Promise<number> {
  const t = performance.now();
  const res = await fetch(url, { headers: { authorization: `Bearer ${key}` } });
  await res.arrayBuffer();
  if (res.status !== 200) throw new Error(`GET ${url}: ${res.status}`);
  return performance.now() - t;
}

async function runCluster(nodeCount: number, image: Buffer, postgresUrl: string): Promise<RunResult> {
  const dbName = `bench_batches_${nodeCount}_${process.pid}`;
  const admin = new pg.Client({ connectionString: postgresUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  const dbUrl = new URL(postgresUrl);
  dbUrl.pathname = `/${dbName}`;
  const cwd = mkdtempSync(path.join(os.tmpdir(), 'bgone-bench-batches-'));
  const store = await openStore({ url: dbUrl.toString(), autoRecover: false });
  const nodes: Node[] = [];
  try {
    for (let i = 0; i < nodeCount; i++) nodes.push(await startNode(i % os.availableParallelism(), dbUrl.toString(), cwd));
    const account = await store.accounts.create({ email: 'bench@example.com', plan: 'pro' });
    const { key } = await store.keys.create(account.id);
    const form = new FormData();
    for (let i = 0; i < IMAGES; i++) form.append('image_file', new Blob([new Uint8Array(image)], { type: 'image/jpeg' }), `img-${i}.jpg`);
    const started = performance.now();
    const submitted = await fetch(`${nodes[0]!.url}/api/v1/batches`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: form });
    if (submitted.status !== 202) throw new Error(`submission answered ${submitted.status}: ${await submitted.text()}`);
    const batch = (await submitted.json()) as { id: string };
    let view: { status: string; images: Array<{ id: string; status: string }> };
    for (;;) {
      view = (await (await fetch(`${nodes[0]!.url}/api/v1/batches/${batch.id}`, { headers: { authorization: `Bearer ${key}` } })).json()) as typeof view;
      if (view.status === 'completed') break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const seconds = (performance.now() - started) / 1000;
    const succeeded = view.images.filter((i) => i.status === 'succeeded').length;
    const balance = await store.credits.balance(account.id);

    // Who ran what, and the bytes that moved, before the peer fetches below add to them.
    const client = new pg.Client({ connectionString: dbUrl.toString() });
    await client.connect();
    const held = new Map(
      (
        await client.query<{ id: string; url: string }>(
          `SELECT i.id, n.internal_url AS url FROM batch_images i JOIN batches b ON b.id = i.batch_id JOIN nodes n ON n.id = coalesce(i.holder, b.owner) WHERE i.batch_id = $1`,
          [batch.id],
        )
      ).rows.map((r) => [r.id, r.url]),
    );
    await client.end();
    const perNode = nodes.map((n) => [...held.values()].filter((u) => u === n.url).length);
    let peerBytes = 0;
    for (const n of nodes) {
      const ready = (await (await fetch(`${n.url}/readyz`)).json()) as { peer_bytes: { in: number } | null };
      peerBytes += ready.peer_bytes?.in ?? 0;
    }

    let peerFetch: RunResult['peerFetch'];
    if (nodeCount > 1) {
      const direct: number[] = [];
      const viaPeer: number[] = [];
      for (const image of view.images) {
        const holder = nodes.find((n) => n.url === held.get(image.id));
        const other = nodes.find((n) => n !== holder);
        if (!holder || !other) continue;
        const path = `/api/v1/batches/${batch.id}/images/${image.id}`;
        direct.push(await timedFetch(`${holder.url}${path}`, key));
        viaPeer.push(await timedFetch(`${other.url}${path}`, key));
      }
      peerFetch = { viaHolderMs: median(direct), viaPeerMs: median(viaPeer), extraMs: median(viaPeer) - median(direct), results: direct.length };
    }
    return { nodes: nodeCount, seconds, succeeded, creditsUsed: balance.used, peerBytes, perNode, peerFetch };
  } finally {
    for (const n of nodes) n.kill();
    await Promise.all(nodes.map((n) => n.exited));
    await store.close();
    await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`).catch(() => {});
    await admin.end();
    rmSync(cwd, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const loadStart = os.loadavg();
  console.log(`bench:batches: ${IMAGES} images of ~${MEGAPIXELS} MP (${PHOTO}), load average at start ${loadStart.map((x) => x.toFixed(2)).join(' ')}`);
  const image = await makeImage();
  const postgres = await startPostgres();
  const runs: RunResult[] = [];
  try {
    for (const n of [1, 2]) {
      const run = await runCluster(n, image, postgres.url);
      console.log(
        `  ${n} node(s): ${run.seconds.toFixed(1)} s, ${run.succeeded} succeeded, ${run.creditsUsed} credits, images per node ${run.perNode.join('/')}`,
      );
      runs.push(run);
    }
  } finally {
    await postgres.stop();
  }
  const [one, two] = runs as [RunResult, RunResult];
  const ratio = two.seconds / one.seconds;
  const loadEnd = os.loadavg();
  printTable(
    'Batch on 1 and 2 nodes (one core each)',
    ['nodes', 'seconds', 'succeeded', 'credits', 'images per node', 'bytes between nodes'],
    runs.map((r) => [String(r.nodes), fmt(r.seconds, 1), String(r.succeeded), String(r.creditsUsed), r.perNode.join('/'), String(r.peerBytes)]),
  );
  const met = ratio <= TARGET_RATIO && one.creditsUsed === IMAGES && two.creditsUsed === IMAGES;
  console.log(`ratio 2 nodes / 1 node: ${ratio.toFixed(3)} (target <= ${TARGET_RATIO}, same ${IMAGES} credits): ${met ? 'met' : 'MISSED'}`);
  if (two.peerFetch)
    console.log(
      `result through a peer: median ${fmt(two.peerFetch.viaPeerMs, 1)} ms vs ${fmt(two.peerFetch.viaHolderMs, 1)} ms from its holder (+${fmt(two.peerFetch.extraMs, 1)} ms, ${two.peerFetch.results} results)`,
    );
  console.log(`load average at end ${loadEnd.map((x) => x.toFixed(2)).join(' ')}`);
  const outDir = path.join(REPO_ROOT, 'bench', 'results');
  mkdirSync(outDir, { recursive: true });
  writeFileSync(
    path.join(outDir, 'batches.json'),
    `${JSON.stringify({ commit: gitCommit(REPO_ROOT), images: IMAGES, megapixels: MEGAPIXELS, loadStart, loadEnd, ratio: round(ratio, 3), target: TARGET_RATIO, met, runs }, null, 2)}\n`,
  );
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
