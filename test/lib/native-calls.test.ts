/**
 * The native core's calls run on threads of its own (native/job_threads.h), not on libuv's pool:
 * with more jobs inside the core than libuv has threads (4), Node's file system and DNS lookups
 * still answer at once, and every job still answers with its own bytes. A worker thread that ends
 * while its jobs run waits for them and leaves the process healthy.
 */
import { execFile } from 'node:child_process';
import { lookup } from 'node:dns/promises';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { removeBackground, setConcurrency } from '../helpers/bgone.js';
import { photoPath, REPO_ROOT, readPhoto } from '../helpers/paths.js';

const run = promisify(execFile);
const DIST = join(REPO_ROOT, 'dist', 'src', 'lib', 'index.js');
const PHOTOS = ['gc_book.jpg', 'gc_llama.jpg', 'gc_teddy.jpg', 'davis_camel_00045.jpg'];

describe('native calls off libuv', () => {
  it('8 jobs inside the core leave the file system and DNS free, and each gives its own bytes', async () => {
    const inputs = PHOTOS.map(readPhoto);
    const alone = [];
    for (const input of inputs) alone.push((await removeBackground(input, { format: 'jpg' })).data);
    setConcurrency(8);
    try {
      const order: string[] = [];
      const jobs = [...inputs, ...inputs].map((input, i) =>
        removeBackground(input, { format: 'jpg' }).then((result) => {
          order.push(`job ${i}`);
          return result.data;
        }),
      );
      // All eight are inside the core now; libuv's pool would hold four of them, with the rest and
      // the reads below queued behind them.
      await new Promise((resolve) => setImmediate(resolve));
      await Promise.all([readFile(photoPath(PHOTOS[0]!)).then(() => order.push('readFile')), lookup('localhost').then(() => order.push('lookup'))]);
      const results = await Promise.all(jobs);
      expect(order.slice(0, 2).sort()).toEqual(['lookup', 'readFile']);
      for (const [i, data] of results.entries()) expect(data.equals(alone[i % inputs.length]!), `job ${i}`).toBe(true);
    } finally {
      setConcurrency(2);
    }
  }, 120_000);

  it('a worker thread ended while its jobs run: the process goes on and exits normally', async () => {
    const script = `
      import { readFileSync } from 'node:fs';
      import { Worker } from 'node:worker_threads';
      const photo = readFileSync(${JSON.stringify(photoPath('gc_teddy.jpg'))});
      const source = (terminate) => \`
        import { readFileSync } from 'node:fs';
        import { parentPort } from 'node:worker_threads';
        const lib = await import(\${JSON.stringify(${JSON.stringify(DIST)})});
        const photo = readFileSync(\${JSON.stringify(${JSON.stringify(photoPath('gc_teddy.jpg'))})});
        await lib.preloadModel();
        parentPort.postMessage('ready');
        const jobs = [lib.removeBackground(photo, { format: 'jpg' }), lib.removeBackground(photo, { format: 'png' })];
        if (!\${terminate}) parentPort.postMessage((await Promise.all(jobs)).map((r) => r.data.length));
      \`;
      const start = (terminate) => new Worker(source(terminate), { eval: true, type: 'module' });
      const outcomes = [];
      // Ended at once, and ended a moment later (its jobs decoding, then in inference).
      for (const delay of [0, 50, 300]) {
        const worker = start(true);
        await new Promise((resolve, reject) => { worker.once('message', resolve); worker.once('error', reject); });
        await new Promise((resolve) => setTimeout(resolve, delay));
        outcomes.push('terminated ' + (await worker.terminate()));
      }
      const worker = start(false);
      const lengths = await new Promise((resolve, reject) => {
        worker.on('message', (m) => m !== 'ready' && resolve(m));
        worker.once('error', reject);
      });
      outcomes.push('answered ' + lengths.every((n) => n > 1000));
      const lib = await import(${JSON.stringify(DIST)});
      outcomes.push('main ' + ((await lib.removeBackground(photo, { format: 'jpg' })).data.length > 1000));
      console.log(JSON.stringify(outcomes));
    `;
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: REPO_ROOT }).catch((err) => {
      throw new Error(`the child ended with ${err.signal ?? `code ${err.code}`}: ${err.stderr}`);
    });
    expect(JSON.parse(stdout)).toEqual(['terminated 1', 'terminated 1', 'terminated 1', 'answered true', 'main true']);
  }, 180_000);
});
