/**
 * Text bodies' memory (npm run bench:bodies): BODIES_ACCOUNTS accounts (default 8) each send
 * BODIES_PER_ACCOUNT (default 4) JSON removals at once, every one carrying a BODIES_MB (default 19)
 * MB PNG (a photo of the dev set, uncompressed) in base64 (image_file_b64, 4/3 of that on the wire), against one server in this process
 * on the service's default limits (BGONE_* variables apply, as for `bgone serve`).
 *
 * Reported: the process's RSS fresh (the model loaded), its peak while the bodies arrive and the
 * jobs run (sampled every 50 ms), and 20 s after the last answer; the answers by status; and the
 * memory plan of docs/operations.md for the same load: the fresh figure, ONNX Runtime's working
 * memory (0.5 GB), the job memory budget, and each request's decoded image while it waits. The
 * client's one copy of the body (shared by every request) is part of the figure. The exit code is 1
 * when the peak passes the plan or an answer is a 5xx.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { loadConfig, serviceLimits } from '../src/config/config.js';
import { createLogger } from '../src/config/logger.js';
import { loadBackend } from '../src/http/backend-select.js';
import { configure, preloadModel } from '../src/lib/index.js';
import { startServer } from '../src/server.js';
import { openStore } from '../src/store/index.js';
import { log, printTable } from './helpers/report.js';

const ACCOUNTS = Number(process.env.BODIES_ACCOUNTS ?? 8);
const PER_ACCOUNT = Number(process.env.BODIES_PER_ACCOUNT ?? 4);
const IMAGE_MB = Number(process.env.BODIES_MB ?? 19);
const MB = 2 ** 20;
const ORT_WORKING_MB = 512;
const HERE = path.dirname(fileURLToPath(import.meta.url)); // dist/bench
const PHOTO = path.resolve(HERE, '..', '..', '..', 'shared', 'datasets', 'dev', 'images', 'gc_teddy.jpg');

/** A photo as an uncompressed PNG of about `mb` MB (a stored deflate stream: the PNG is its pixels' size). */
async function photoPng(mb: number): Promise<Buffer> {
  const side = Math.floor(Math.sqrt((mb * MB) / 3));
  return sharp(PHOTO).resize(side, side, { fit: 'fill' }).removeAlpha().png({ compressionLevel: 0 }).toBuffer();
}

/** One POST of `body` on its own socket; resolves to the status (0: closed without an answer). */
function post(port: number, key: string, body: Buffer): Promise<number> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let head = '';
    socket.on('data', (chunk) => {
      if (head.length < 64) head += chunk.toString('latin1');
    });
    socket.on('error', () => {});
    socket.on('close', () => resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0)));
    socket.write(
      `POST /api/v1/remove HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`,
    );
    socket.write(body); // no half-close: uWS takes it for the client leaving
  });
}

async function main(): Promise<void> {
  const config = loadConfig();
  configure(config.library);
  await preloadModel();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bgone-bodies-'));
  const store = await openStore({ path: path.join(dir, 'bodies.db'), rateLimits: { free: 1_000_000, pro: 1_000_000, ultra: 1_000_000, mega: 1_000_000 } });
  const server = await startServer({
    host: '127.0.0.1',
    port: 0,
    http: loadBackend(config.http).backend,
    ...serviceLimits(config),
    drainTimeout: 30,
    store,
    logger: createLogger('silent'),
  });
  try {
    const keys: string[] = [];
    for (let i = 0; i < ACCOUNTS; i++) {
      const account = await store.accounts.create({ email: `bodies-${i}@example.com`, plan: 'mega' });
      await store.credits.grant(account.id, 1000, 'bench');
      keys.push((await store.keys.create(account.id)).key);
    }
    const png = await photoPng(IMAGE_MB);
    const body = Buffer.from(JSON.stringify({ image_file_b64: png.toString('base64'), size: 'preview' }));
    const requests = ACCOUNTS * PER_ACCOUNT;
    log(
      `bodies: ${requests} JSON bodies of ${(body.length / MB).toFixed(1)} MB (a ${(png.length / MB).toFixed(1)} MB PNG) from ${ACCOUNTS} accounts, on ${server.backend}`,
    );
    await new Promise((r) => setTimeout(r, 1000));
    const fresh = process.memoryUsage.rss();
    let peak = fresh;
    const sampler = setInterval(() => {
      peak = Math.max(peak, process.memoryUsage.rss());
    }, 50);
    const started = performance.now();
    const statuses = await Promise.all(Array.from({ length: requests }, (_, i) => post(server.port, keys[i % ACCOUNTS]!, body)));
    const seconds = (performance.now() - started) / 1000;
    clearInterval(sampler);
    peak = Math.max(peak, process.memoryUsage.rss());
    await new Promise((r) => setTimeout(r, 20_000));
    const after = process.memoryUsage.rss();
    const counts = new Map<number, number>();
    for (const s of statuses) counts.set(s, (counts.get(s) ?? 0) + 1);
    const waiting = Math.min(requests, config.queueLimit + config.uploadLimit);
    const planMb = fresh / MB + ORT_WORKING_MB + config.memoryBudgetMb + (waiting * png.length) / MB + body.length / MB;
    printTable(
      'Text bodies: RSS',
      ['', 'MB'],
      [
        ['RSS fresh, the model loaded', (fresh / MB).toFixed(0)],
        ['RSS at its peak', (peak / MB).toFixed(0)],
        ['RSS 20 s after the last answer', (after / MB).toFixed(0)],
        [`the plan: fresh + ${ORT_WORKING_MB} + budget ${config.memoryBudgetMb} + ${waiting} decoded images + the client's body`, planMb.toFixed(0)],
      ],
    );
    log(`answers in ${seconds.toFixed(1)} s: ${[...counts].map(([s, n]) => `${n} × ${s}`).join(', ')}`);
    if (peak / MB > planMb || statuses.some((s) => s >= 500 || s === 0)) process.exitCode = 1;
  } finally {
    await server.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
