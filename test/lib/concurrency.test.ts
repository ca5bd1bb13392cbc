/**
 * Jobs running side by side must not affect each other: four different photos, each with
 * different options, give byte-identical results whether processed one after another or all at
 * once (through the default limiter of 2 jobs in the native core, and with 4 at once).
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { queueSize, type RemoveBackgroundOptions, type RemoveBackgroundResult, removeBackground, setConcurrency } from '../helpers/bgone.js';
import { readPhoto } from '../helpers/paths.js';

const JOBS: Array<{ photo: string; options: RemoveBackgroundOptions; size: (w: number, h: number) => boolean }> = [
  { photo: 'gc_book.jpg', options: {}, size: (w, h) => w === 640 && h === 480 },
  { photo: 'gc_llama.jpg', options: { format: 'webp', bgColor: '#336699' }, size: (w, h) => w === 513 && h === 371 },
  { photo: 'davis_camel_00045.jpg', options: { crop: true, format: 'jpg' }, size: (w, h) => w < 854 && h < 480 },
  { photo: 'am_GT05.png', options: { channels: 'alpha', size: 'preview' }, size: (w, h) => w * h <= 250_000 && Math.abs(w / h - 800 / 552) < 0.01 },
];
const inputs = JOBS.map((job) => readPhoto(job.photo));
let sequential: RemoveBackgroundResult[];

beforeAll(async () => {
  sequential = [];
  for (let i = 0; i < JOBS.length; i++) sequential.push(await removeBackground(inputs[i]!, JOBS[i]!.options));
});

function expectSameAsSequential(parallel: RemoveBackgroundResult[]) {
  for (let i = 0; i < JOBS.length; i++) {
    const [a, b] = [sequential[i]!, parallel[i]!];
    expect(JOBS[i]!.size(b.width, b.height), `${JOBS[i]!.photo}: ${b.width}x${b.height}`).toBe(true);
    expect({ photo: JOBS[i]!.photo, width: b.width, height: b.height, channels: b.channels, format: b.format }).toEqual({
      photo: JOBS[i]!.photo,
      width: a.width,
      height: a.height,
      channels: a.channels,
      format: a.format,
    });
    expect(b.data.equals(a.data), `${JOBS[i]!.photo}: bytes differ`).toBe(true);
  }
}

describe('parallel = sequential', () => {
  it('the sequential results are what each job asked for', () => {
    for (let i = 0; i < JOBS.length; i++) expect(JOBS[i]!.size(sequential[i]!.width, sequential[i]!.height), JOBS[i]!.photo).toBe(true);
  });

  it('4 jobs at once through the default limiter give byte-identical results', async () => {
    const pending = JOBS.map((job, i) => removeBackground(inputs[i]!, job.options));
    // A moment later all four are in flight (two in the native core, two waiting): they really overlap.
    await new Promise((resolve) => setImmediate(resolve));
    expect(queueSize()).toBe(JOBS.length);
    expectSameAsSequential(await Promise.all(pending));
    expect(queueSize()).toBe(0);
  });

  it('with 4 jobs inside the native core at once, still byte-identical', async () => {
    setConcurrency(4);
    try {
      expectSameAsSequential(await Promise.all(JOBS.map((job, i) => removeBackground(inputs[i]!, job.options))));
    } finally {
      setConcurrency(2);
    }
  });
});
