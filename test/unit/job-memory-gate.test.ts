/** Admission by estimated memory (src/service/job-memory-gate.ts): fits go at once, others wait in order, no starvation, timeouts, aborts. */
import { describe, expect, it } from 'vitest';
import { normaliseOptions } from '../../src/lib/options.js';
import {
  effectBytes,
  estimateJobBytes,
  extraInferenceBytes,
  JobMemoryGate,
  JobMemoryGateTimeout,
  jobMemoryEstimate,
} from '../../src/service/job-memory-gate.js';

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

describe('estimateJobBytes', () => {
  it('grows with the pixels, doubles the decode for 16-bit, and counts an extended canvas', () => {
    const small = estimateJobBytes(640, 480);
    const large = estimateJobBytes(6000, 6000);
    expect(large).toBeGreaterThan(small * 8);
    expect(estimateJobBytes(6000, 6000, { bitsPerSample: 16 }) - large).toBe(6000 * 6000 * 4);
    expect(estimateJobBytes(1000, 1000, { outputScale: 4 }) - estimateJobBytes(1000, 1000)).toBe(3 * 1000 * 1000 * 8);
  });

  it("counts the work at the planned inference side: a 2048² model's four times a 1024² one's, an 896² job's less", () => {
    const at = (side: number) => estimateJobBytes(640, 480, { inferenceSide: side }) - estimateJobBytes(640, 480, { inferenceSide: 0 });
    expect(at(1024)).toBe(48 * 2 ** 20);
    expect(at(2048)).toBe(4 * at(1024));
    expect(at(896)).toBeLessThan(at(1024));
  });
});

describe('jobMemoryEstimate', () => {
  const jpeg = Buffer.from([0xff, 0xd8, 0xff]);
  const plain = normaliseOptions({}).native;
  const image = { width: 2000, height: 1000 };

  it('an exact canvas counts its own pixels where it is larger than the image', () => {
    const canvas = { ...plain, canvasWidth: 4000, canvasHeight: 4000 };
    expect(jobMemoryEstimate(jpeg, image, canvas)).toBe(estimateJobBytes(2000, 1000, { outputScale: 8 }));
    expect(jobMemoryEstimate(jpeg, image, { ...plain, canvasWidth: 100, canvasHeight: 100 })).toBe(estimateJobBytes(2000, 1000));
  });

  it('effort=best adds the mirrored answer, a float plane at the inference side', () => {
    const best = normaliseOptions({ effort: 'best' }).native;
    expect(best.mirrorWeight).toBeGreaterThan(0);
    expect(jobMemoryEstimate(jpeg, image, best) - jobMemoryEstimate(jpeg, image, plain)).toBe(extraInferenceBytes(best));
    expect(extraInferenceBytes(best)).toBeGreaterThanOrEqual(4 * best.inferenceSize ** 2);
    expect(extraInferenceBytes(plain)).toBe(0);
    // A second side: its input, tensor and answer, and the answer resampled to the inference side.
    expect(extraInferenceBytes({ mirrorWeight: 0, secondSide: 512, inferenceSize: 1024 })).toBe(19 * 512 * 512 + 4 * 1024 * 1024);
  });

  it('the effects add their working memory: the interior marks at the inference side, a coarse grid for a shadow and for despill', () => {
    expect(effectBytes(plain)).toBe(0);
    const opaque = normaliseOptions({ semitransparency: false }).native;
    expect(effectBytes(opaque)).toBe(9 * 1024 * 1024);
    const all = normaliseOptions({ semitransparency: false, shadow: 'drop', despill: true }).native;
    expect(jobMemoryEstimate(jpeg, image, all) - jobMemoryEstimate(jpeg, image, plain)).toBe(effectBytes(all));
    expect(effectBytes(all)).toBe(9 * 1024 * 1024 + 2 * 8 * 1024 * 1024);
  });

  it('a background image adds its decode (shrunk on load to at most twice the covering size per side) and its canvas-sized RGBA', () => {
    const canvas = { ...plain, canvasWidth: 1000, canvasHeight: 1000 };
    const base = jobMemoryEstimate(jpeg, image, canvas);
    // 6000 x 6000 covering 1000 x 1000: a scale of 1/6, decoded at most at 2/6 per side.
    const large = jobMemoryEstimate(jpeg, image, canvas, { width: 6000, height: 6000 }) - base;
    expect(large).toBeCloseTo(6000 * 6000 * (4 / 36) * 8 + 1000 * 1000 * 4, -1);
    // A small background is enlarged: decoded whole.
    expect(jobMemoryEstimate(jpeg, image, canvas, { width: 100, height: 50 }) - base).toBe(100 * 50 * 8 + 1000 * 1000 * 4);
    // Without an exact canvas, the canvas is the image (no crop, never upscaled).
    expect(jobMemoryEstimate(jpeg, image, plain, { width: 2000, height: 1000 }) - jobMemoryEstimate(jpeg, image, plain)).toBe(
      2000 * 1000 * 8 + 2000 * 1000 * 4,
    );
  });
});
