/**
 * The native core's large blocks (native/buffers.h): a job's memory is kept warm for the next job
 * (which then maps nothing new), goes back to the OS once the core is idle, never adds up to more
 * than 1.75 times (BOUND) what jobs had in use at once, and memory reused from one job never shows in
 * another job's result.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { nativeMemoryStats, removeBackground } from '../helpers/bgone.js';
import { readFixture, readPhoto } from '../helpers/paths.js';

/** The most the blocks mapped may add up to, in times the most in use at once (kSlackQuarters in buffers.cc). */
const BOUND = 1.75;

/** The blocks `job` maps afresh (not taken from the cache). */
async function blocksMappedBy(job: () => Promise<unknown>): Promise<number> {
  const before = nativeMemoryStats().mapped;
  await job();
  return nativeMemoryStats().mapped - before;
}

/** The core gives its cache back about a second after the last job (kKeepWarm in buffers.cc). */
async function waitForRelease(limitMs = 5000): Promise<number> {
  const start = performance.now();
  while (nativeMemoryStats().cached > 0) {
    if (performance.now() - start > limitMs) break;
    await sleep(50);
  }
  return performance.now() - start;
}

describe('native memory', () => {
  it('keeps a finished job memory warm, then gives it all back once idle', async () => {
    await removeBackground(readPhoto('gc_book.jpg'));
    const after = nativeMemoryStats();
    expect(after.inUse).toBe(0);
    expect(after.cached).toBeGreaterThan(0);
    expect(after.cached).toBeLessThanOrEqual(BOUND * after.peak);
    const waited = await waitForRelease();
    expect(nativeMemoryStats()).toMatchObject({ inUse: 0, cached: 0, peak: 0 });
    expect(waited).toBeGreaterThan(100); // not at once: the next job would have found it warm
  });

  it('a job of the same size as the last ones runs on warm memory: next to no block mapped afresh', async () => {
    const input = readPhoto('gc_llama.jpg');
    await waitForRelease();
    const mappedBy = () => blocksMappedBy(() => removeBackground(input));
    const cold = await mappedBy();
    await mappedBy(); // the cache settles on this job's sizes
    const warm = await mappedBy();
    expect(cold).toBeGreaterThan(10);
    expect(warm).toBeLessThanOrEqual(1);
    expect(nativeMemoryStats().cached).toBeLessThanOrEqual(BOUND * nativeMemoryStats().peak);
  });

  it('a 12 MP job runs on warm memory too: the blocks of all its phases stay cached', async () => {
    // The full decode and the model's input shrunk on load, the model's run, then matting planes of
    // 12 MP: with a bound of 1.5 times the most in use at once, each such job mapped 10 blocks (about
    // 300 MB) afresh.
    const input = readFixture('swan-12mp.jpg');
    await waitForRelease();
    const mappedBy = () => blocksMappedBy(() => removeBackground(input, { format: 'png' }));
    await mappedBy();
    await mappedBy();
    expect(await mappedBy()).toBeLessThanOrEqual(1);
  });

  it(`jobs of other sizes never bring the mapped total above ${BOUND} times the most in use at once`, async () => {
    const jobs = [
      () => removeBackground(readFixture('swan-big.jpg')),
      () => removeBackground(readPhoto('gc_teddy.jpg'), { size: 'preview' }),
      () => removeBackground(readPhoto('am_GT05.png'), { format: 'webp' }),
      () => Promise.all([removeBackground(readPhoto('gc_book.jpg')), removeBackground(readFixture('swan-big.jpg'), { crop: true })]),
    ];
    for (const job of jobs) {
      await job();
      const after = nativeMemoryStats();
      expect(after.cached + after.inUse).toBeLessThanOrEqual(BOUND * after.peak);
    }
  });

  it('memory reused from another job never reaches a result: the same job gives the same bytes, cold or warm', async () => {
    const job = () => removeBackground(readPhoto('gc_llama.jpg'), { crop: true, bgColor: '#80808080' });
    await waitForRelease();
    const cold = await job();
    // Warm blocks now hold another photo's pixels, alpha and tensors.
    await removeBackground(readPhoto('davis_camel_00045.jpg'), { format: 'png' });
    await removeBackground(readPhoto('gc_book.jpg'), { channels: 'alpha' });
    const warm = await job();
    expect(nativeMemoryStats().cached).toBeGreaterThan(0);
    expect(warm.data.equals(cold.data)).toBe(true);
  });
});
