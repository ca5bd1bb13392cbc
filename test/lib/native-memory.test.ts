/**
 * The native core's large blocks (native/buffers.h): a job's memory is kept warm for the next job,
 * goes back to the OS once the core is idle, never adds up to more than a job had in use at once,
 * and memory reused from one job never shows in another job's result.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { nativeMemoryStats, removeBackground } from '../helpers/bgone.js';
import { readFixture, readPhoto } from '../helpers/paths.js';

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
    expect(after.cached).toBeLessThanOrEqual(after.peak);
    const waited = await waitForRelease();
    expect(nativeMemoryStats()).toEqual({ inUse: 0, cached: 0, peak: 0 });
    expect(waited).toBeGreaterThan(100); // not at once: the next job would have found it warm
  });

  it('reuses the cache for a job of the same size without mapping more than the first one did', async () => {
    const input = readFixture('swan-big.jpg');
    await waitForRelease();
    await removeBackground(input);
    const first = nativeMemoryStats();
    for (let i = 0; i < 2; i++) await removeBackground(input);
    const later = nativeMemoryStats();
    expect(later.peak).toBe(first.peak);
    expect(later.cached).toBeLessThanOrEqual(later.peak);
  });

  it('a smaller job after a larger one never brings the total above the larger one peak', async () => {
    await removeBackground(readFixture('swan-big.jpg'));
    const big = nativeMemoryStats();
    await removeBackground(readPhoto('gc_teddy.jpg'), { size: 'preview' });
    await removeBackground(readPhoto('am_GT05.png'), { format: 'webp' });
    const after = nativeMemoryStats();
    expect(after.cached + after.inUse).toBeLessThanOrEqual(big.peak);
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
