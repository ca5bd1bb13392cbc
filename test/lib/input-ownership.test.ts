/**
 * The input's bytes belong to the job for its whole life: a caller that transfers the input's
 * ArrayBuffer away (structuredClone or postMessage with a transfer list) while the job runs, and
 * lets it be collected, must not crash the process or change the result. Runs in a child process
 * (the compiled library, with --expose-gc), since the failure it guards against is a signal.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { fixturePath, REPO_ROOT } from '../helpers/paths.js';

const run = promisify(execFile);
const DIST = join(REPO_ROOT, 'dist', 'src', 'lib', 'index.js');

describe('the input transferred away while its job runs', () => {
  it('each job still gives the bytes of the same job left alone, and the process exits normally', async () => {
    // 5 MP (swan-big.jpg, 0.6 MB): its decode, which reads the input, lasts long enough to be
    // overtaken by the transfer at some of the delays below.
    const script = `
      import { readFileSync } from 'node:fs';
      import { MessageChannel } from 'node:worker_threads';
      const lib = await import(${JSON.stringify(DIST)});
      const photo = readFileSync(${JSON.stringify(fixturePath('swan-big.jpg'))});
      const options = { size: 'preview' };
      const expected = (await lib.removeBackground(photo, options)).data;
      const outcomes = [];
      for (const [i, delay] of [0, 3, 10, 30].entries()) {
        const input = new Uint8Array(photo.length);
        input.set(photo);
        const job = lib.removeBackground(input, options).then(
          (r) => (r.data.equals(expected) ? 'same' : 'different'),
          (e) => 'error ' + e.code,
        );
        await new Promise((resolve) => setTimeout(resolve, delay));
        if (i % 2 === 0) structuredClone(input.buffer, { transfer: [input.buffer] });
        else {
          const { port1, port2 } = new MessageChannel();
          port1.postMessage(input.buffer, [input.buffer]);
          port1.close();
          port2.close();
        }
        globalThis.gc();
        // Reuse the freed memory, so that reading it would show.
        const junk = Array.from({ length: 8 }, () => Buffer.alloc(photo.length, 0x5a));
        outcomes.push({ detached: input.length === 0, outcome: await job, junk: junk.length });
      }
      console.log(JSON.stringify(outcomes));
    `;
    // A fixed mmap threshold: each input's memory is unmapped when freed (glibc would otherwise raise
    // the threshold past 1 MB after the first free and recycle it on its heap).
    const env = { ...process.env, MALLOC_MMAP_THRESHOLD_: String(128 * 1024) };
    const { stdout } = await run(process.execPath, ['--expose-gc', '--input-type=module', '-e', script], { cwd: REPO_ROOT, env }).catch((err) => {
      throw new Error(`the child ended with ${err.signal ?? `code ${err.code}`}: ${err.stderr}`);
    });
    const outcomes = JSON.parse(stdout) as Array<{ detached: boolean; outcome: string }>;
    expect(outcomes.map(({ detached, outcome }) => ({ detached, outcome }))).toEqual(Array(4).fill({ detached: true, outcome: 'same' }));
  }, 120_000);
});
