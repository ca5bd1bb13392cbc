/**
 * The bench's wait for another process to stop using the CPU (bench/helpers/child-quiet.ts), on
 * real child processes: one that keeps a core busy for a while after it said it was done (as
 * onnxruntime-node's spinning threads do after a run), one that is idle, one that has exited.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import { processCpuMs, waitUntilQuiet } from '../../bench/helpers/child-quiet.js';

const linux = process.platform === 'linux';
const children: ChildProcess[] = [];

/** A node child that prints "ready", then runs `busyMs` of busy loop, then idles until killed. */
async function child(busyMs: number): Promise<ChildProcess> {
  const script = `process.stdout.write('ready\\n'); const end = Date.now() + ${busyMs}; while (Date.now() < end); setInterval(() => {}, 1000);`;
  const c = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(c);
  await once(c.stdout!, 'data');
  return c;
}

afterEach(() => {
  for (const c of children.splice(0)) c.kill();
});

describe.runIf(linux)('waitUntilQuiet', () => {
  it('waits out a child that keeps a core busy after answering, and it is quiet afterwards', async () => {
    const busy = await child(300);
    const waited = await waitUntilQuiet(busy.pid);
    expect(waited).toBeGreaterThanOrEqual(200);
    const after = processCpuMs(busy.pid!)!;
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(processCpuMs(busy.pid!)! - after).toBeLessThan(5);
  });

  it('returns within a few windows for an idle child', async () => {
    const idle = await child(0);
    await new Promise((resolve) => setTimeout(resolve, 200)); // its start-up is over
    expect(await waitUntilQuiet(idle.pid)).toBeLessThan(250); // the limit is 500
  });

  it("reads a busy child's CPU time as it grows", async () => {
    const busy = await child(400);
    const before = processCpuMs(busy.pid!)!;
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(processCpuMs(busy.pid!)! - before).toBeGreaterThan(20); // a busy core, even on a loaded machine
  });

  it('stops waiting after its limit for a child that never goes quiet', async () => {
    const spinning = await child(5000);
    const waited = await waitUntilQuiet(spinning.pid);
    // Its 500 ms limit on a quiet machine; sooner where a loaded one starves the child for a window.
    expect(waited).toBeGreaterThanOrEqual(20);
    expect(waited).toBeLessThan(1500);
  });

  it('gives up on a process that has exited, or one that never started: the fixed wait, no error', async () => {
    const gone = await child(0);
    gone.kill();
    await once(gone, 'exit');
    expect(processCpuMs(gone.pid!)).toBeUndefined();
    expect(await waitUntilQuiet(gone.pid)).toBeLessThan(200);
    expect(await waitUntilQuiet(undefined)).toBeGreaterThanOrEqual(45);
  });
});
