/**
 * Soak benchmark (npm run bench:soak): 2,000 mixed requests against one server over a few minutes,
 * to show that nothing leaks, nothing crashes and the ledger stays exact under a realistic mix of
 * good, bad, aborted and slow clients.
 *
 * In one process: a throw-away SQLite store (temporary folder, deleted at the end), two accounts
 * (plenty of credits, no rate limit in the way), the server on 127.0.0.1. Requests, SOAK_CONCURRENCY
 * at a time, drawn from a fixed cycle of kinds:
 *   valid     a small photo (size=preview): 200, charged
 *   invalid   not an image (415), truncated JPEG (422), bad option (400), no image (400),
 *             bad key (401), no key (401), unknown path (404)
 *   aborted   the socket closed halfway through the upload: never charged
 *   slow      a valid upload trickled in small pieces, then answered 200
 * Reported: RSS at the start and the end and its slope per 1,000 requests (from a least-squares
 * fit of the RSS sampled after every 100 requests), the status counts, the 5xx count (must be 0), and
 * the ledger: credits charged = 200 answers, nothing left reserved.
 * SOAK_REQUESTS (default 2000; 0 skips this mix) and SOAK_CONCURRENCY (default 8) change the run.
 *
 * Then the fairness phase (helpers/soak-abuse.ts): a well-behaved account's `/remove`
 * requests one at a time, alone and then beside abusers (a stuck webhook endpoint flooded with test
 * events, idle uploads declaring a big Content-Length, slow trickling uploads from several accounts,
 * the SQLite file locked by another process for a while), with its p99 and 5xx against the target
 * (p99 beside ≤ 1.5× alone, 0 5xx) and every account's ledger. SOAK_FAIR_REQUESTS (default 200;
 * 0 skips it), SOAK_IDLE_UPLOADS, SOAK_TRICKLE_ACCOUNTS, SOAK_TRICKLES_PER_ACCOUNT, SOAK_LOCK_SECONDS
 * and SOAK_WEBHOOK_FLOOD_PER_SECOND size it. A short smoke run:
 *   SOAK_REQUESTS=40 SOAK_FAIR_REQUESTS=10 SOAK_LOCK_SECONDS=2 npm run bench:soak
 * Loopback only; each phase is bounded by its request count. The exit code is 1 when a target is missed.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadLibraryConfig } from '../src/config/config.js';
import { createLogger } from '../src/config/logger.js';
import { loadBackend } from '../src/http/backend-select.js';
import { configure, preloadModel } from '../src/lib/index.js';
import { type RunningServer, startServer } from '../src/server.js';
import { openStore } from '../src/store/index.js';
import { fmt, log, printTable } from './helpers/report.js';
import { fairnessSettingsFromEnv, runFairnessPhase } from './helpers/soak-abuse.js';
import { multipart, send } from './helpers/soak-client.js';

const HERE = path.dirname(fileURLToPath(import.meta.url)); // dist/bench
const REPO_ROOT = path.resolve(HERE, '..', '..');
const PHOTO = path.resolve(REPO_ROOT, '..', 'shared', 'datasets', 'dev', 'images', 'gc_teddy.jpg');
const REQUESTS = Number(process.env.SOAK_REQUESTS ?? 2000);
const CONCURRENCY = Number(process.env.SOAK_CONCURRENCY ?? 8);
const SAMPLE_EVERY = 100;

type Kind = 'valid' | 'not_image' | 'truncated' | 'bad_option' | 'no_image' | 'bad_key' | 'no_key' | 'unknown_path' | 'aborted' | 'slow';
/** One cycle of 20: 2 valid, 1 slow valid, 2 aborted, the rest refusals of every kind. */
const CYCLE: Kind[] = [
  'valid',
  'not_image',
  'truncated',
  'bad_option',
  'no_image',
  'bad_key',
  'aborted',
  'no_key',
  'unknown_path',
  'not_image',
  'valid',
  'truncated',
  'bad_option',
  'slow',
  'bad_key',
  'no_image',
  'aborted',
  'no_key',
  'not_image',
  'unknown_path',
];

interface Outcome {
  kind: Kind;
  status: number; // 0: no answer (the aborted ones)
}

function slope(xs: number[], ys: number[]): number {
  const n = xs.length;
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  let num = 0;
  let den = 0;
  for (let i = 0; i < n; i++) {
    num += (xs[i]! - mx) * (ys[i]! - my);
    den += (xs[i]! - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

async function main(): Promise<void> {
  configure(loadLibraryConfig());
  const photo = readFileSync(PHOTO);
  const fairness = fairnessSettingsFromEnv(process.env);
  await preloadModel();
  const mixOk = REQUESTS > 0 ? await runMix(photo) : true;
  const fairOk = fairness.wellRequests > 0 ? await runFairnessPhase(fairness, photo) : true;
  if (!mixOk || !fairOk) process.exitCode = 1;
}

/** The mixed requests of one account; resolves to whether nothing failed and the ledger is exact. */
async function runMix(photo: Buffer): Promise<boolean> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bgone-soak-'));
  const store = await openStore({ path: path.join(dir, 'soak.db'), rateLimits: { free: 1_000_000, pro: 1_000_000, ultra: 1_000_000, mega: 1_000_000 } });
  let server: RunningServer | undefined;
  try {
    const account = await store.accounts.create({ email: 'soak@example.com', plan: 'mega' });
    const { key } = await store.keys.create(account.id);
    server = await startServer({
      host: '127.0.0.1',
      port: 0,
      queueLimit: 64,
      // One account sends everything: its per-account cap must not turn the mix into 429s.
      accountInFlight: 64,
      overloadRetryAfter: 1,
      drainTimeout: 30,
      store,
      logger: createLogger('silent'),
      http: loadBackend('auto').backend,
    });
    const port = server.port;
    const valid = multipart({ size: 'preview' }, photo);
    const bodies: Record<Kind, () => Promise<number>> = {
      valid: () => send(port, '/api/v1/remove', key, valid.body, valid.type, 'whole'),
      slow: () => send(port, '/api/v1/remove', key, valid.body, valid.type, 'slow'),
      aborted: () => send(port, '/api/v1/remove', key, valid.body, valid.type, 'abort'),
      not_image: () => {
        const m = multipart({}, Buffer.from('GIF89a not what we take'));
        return send(port, '/api/v1/remove', key, m.body, m.type, 'whole');
      },
      truncated: () => {
        const m = multipart({}, photo.subarray(0, photo.length >> 2));
        return send(port, '/api/v1/remove', key, m.body, m.type, 'whole');
      },
      bad_option: () => {
        const m = multipart({ format: 'gif' }, photo);
        return send(port, '/api/v1/remove', key, m.body, m.type, 'whole');
      },
      no_image: () => {
        const m = multipart({ format: 'png' }, null);
        return send(port, '/api/v1/remove', key, m.body, m.type, 'whole');
      },
      bad_key: () => send(port, '/api/v1/remove', 'rb-sk_notakeyatallnotakeyatallnotakeyatall123', valid.body, valid.type, 'whole'),
      no_key: () => send(port, '/api/v1/remove', null, valid.body, valid.type, 'whole'),
      unknown_path: () => send(port, '/api/v1/nothing', key, valid.body, valid.type, 'whole'),
    };

    log(`soak: ${REQUESTS} requests, ${CONCURRENCY} at a time, on ${server.backend}`);
    // Warm-up: the first jobs allocate what every later one reuses; the slope is about what follows.
    for (let i = 0; i < 3; i++) await bodies.valid();
    const warmUsed = (await store.credits.balance(account.id)).used;
    const rssStart = process.memoryUsage.rss();
    const samples: Array<[number, number]> = [[0, rssStart]];
    const outcomes: Outcome[] = [];
    let next = 0;
    const started = performance.now();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < REQUESTS) {
          const i = next++;
          const kind = CYCLE[i % CYCLE.length]!;
          outcomes.push({ kind, status: await bodies[kind]() });
          if (outcomes.length % SAMPLE_EVERY === 0) {
            samples.push([outcomes.length, process.memoryUsage.rss()]);
            if (outcomes.length % 500 === 0) log(`  ${outcomes.length} done, RSS ${(process.memoryUsage.rss() / 2 ** 20).toFixed(0)} MB`);
          }
        }
      }),
    );
    const seconds = (performance.now() - started) / 1000;
    // Aborted uploads release their credit asynchronously: let the last ones land.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const rssEnd = process.memoryUsage.rss();
    const after = await store.credits.balance(account.id);
    const byKind = new Map<string, Map<number, number>>();
    for (const o of outcomes) {
      const m = byKind.get(o.kind) ?? new Map<number, number>();
      m.set(o.status, (m.get(o.status) ?? 0) + 1);
      byKind.set(o.kind, m);
    }
    const ok = outcomes.filter((o) => o.status === 200).length;
    const fivexx = outcomes.filter((o) => o.status >= 500).length;
    const charged = after.used - warmUsed;
    const slopeMB =
      (slope(
        samples.map((s) => s[0]),
        samples.map((s) => s[1]),
      ) *
        1000) /
      2 ** 20;

    printTable(
      `Soak: ${REQUESTS} requests in ${seconds.toFixed(0)} s (${(REQUESTS / seconds).toFixed(1)} req/s), ${CONCURRENCY} at a time`,
      ['kind', 'requests', 'answers (status: count; 0 = closed by the client)'],
      [...byKind].map(([kind, m]) => [
        kind,
        String([...m.values()].reduce((a, b) => a + b, 0)),
        [...m]
          .sort((a, b) => a[0] - b[0])
          .map(([s, n]) => `${s}: ${n}`)
          .join(', '),
      ]),
    );
    printTable(
      'Soak: memory, errors and the ledger',
      ['RSS start MB', 'RSS end MB', 'slope MB / 1000 requests', '5xx', '200 answers', 'credits charged', 'left reserved', 'ledger exact'],
      [
        [
          fmt(rssStart / 2 ** 20),
          fmt(rssEnd / 2 ** 20),
          fmt(slopeMB, 1),
          String(fivexx),
          String(ok),
          String(charged),
          String(after.reserved),
          charged === ok && after.reserved === 0 ? 'yes' : 'NO',
        ],
      ],
    );
    return fivexx === 0 && charged === ok && after.reserved === 0;
  } finally {
    await server?.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(process.exitCode ?? 0),
  (err: unknown) => {
    console.error(err instanceof Error ? (err.stack ?? err.message) : err);
    process.exit(1);
  },
);
