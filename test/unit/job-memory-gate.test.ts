/** Admission by estimated memory (src/service/job-memory-gate.ts): fits go at once, others wait in order, no starvation, timeouts, aborts. */
import { describe, expect, it } from 'vitest';
import { JobMemoryGate, JobMemoryGateTimeout } from '../../src/service/job-memory-gate.js';

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('JobMemoryGate', () => {
  it('lets jobs in while they fit, and the next in order when memory comes back', async () => {
    const gate = new JobMemoryGate({ budgetBytes: 100, maxWaitMs: 10_000 });
    const a = await gate.acquire(60);
    const order: string[] = [];
    const b = gate.acquire(50).then((release) => {
      order.push('b');
      return release;
    });
    await tick();
    expect({ used: gate.used, waiting: gate.waiting }).toEqual({ used: 60, waiting: 1 });
    a();
    (await b)();
    expect(order).toEqual(['b']);
    expect(gate.used).toBe(0);
  });

  it('a small job passes a large one that does not fit, but only maxPasses times', async () => {
    const gate = new JobMemoryGate({ budgetBytes: 100, maxWaitMs: 10_000, maxPasses: 2 });
    const first = await gate.acquire(70);
    let largeIn = false;
    const large = gate.acquire(90).then((r) => {
      largeIn = true;
      return r;
    });
    const s1 = await gate.acquire(10); // passes (1)
    const s2 = await gate.acquire(10); // passes (2)
    let thirdIn = false;
    const s3 = gate.acquire(5).then((r) => {
      thirdIn = true;
      return r;
    });
    await tick();
    expect(thirdIn).toBe(false); // the large one now holds the line
    first();
    s1();
    s2();
    await tick();
    expect(largeIn).toBe(true);
    expect(thirdIn).toBe(true); // 90 + 5 fit once everything else is back
    (await large)();
    (await s3)();
    expect(gate.used).toBe(0);
  });

  it('an estimate over the whole budget runs alone instead of being refused', async () => {
    const gate = new JobMemoryGate({ budgetBytes: 100, maxWaitMs: 10_000 });
    const huge = await gate.acquire(10_000);
    expect(gate.used).toBe(100);
    huge();
    huge(); // idempotent
    expect(gate.used).toBe(0);
  });

  it('refuses after maxWaitMs, and withdraws a waiter whose client went away', async () => {
    const gate = new JobMemoryGate({ budgetBytes: 100, maxWaitMs: 30 });
    const held = await gate.acquire(100);
    await expect(gate.acquire(1)).rejects.toBeInstanceOf(JobMemoryGateTimeout);
    const controller = new AbortController();
    const waiting = gate.acquire(1, controller.signal);
    controller.abort(new Error('client left'));
    await expect(waiting).rejects.toThrow('client left');
    expect(gate.waiting).toBe(0);
    held();
  });
});
