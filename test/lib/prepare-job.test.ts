/**
 * prepareJob: the checks of removeBackground on their own, with the real addon and model. A prepared
 * job runs to the same bytes as the same bytes and options given to removeBackground; the errors
 * are removeBackground's; a job not made by prepareJob is refused, and so are options that only
 * look normalised.
 */
import { describe, expect, it } from 'vitest';
import { jobMemoryEstimate } from '../../src/lib/job-memory.js';
import { modelContract, resolveModel } from '../../src/lib/models.js';
import { expectBgoneError, expectThrowsBgone } from '../helpers/assert.js';
import { configure, normaliseOptions, prepareJob, removeBackground } from '../helpers/bgone.js';
import { PHOTOS } from '../helpers/constants.js';
import { readPhoto } from '../helpers/paths.js';

const teddy = readPhoto(PHOTOS.teddy); // 284x398

describe('prepareJob', () => {
  it('on a GPU provider every job takes the full inference side (one input shape); on the CPU a small output takes less', () => {
    try {
      for (const [executionProvider, side] of [
        ['webgpu', 1024],
        ['cuda:1', 1024],
        ['cpu', 896],
      ] as const) {
        configure({ executionProvider });
        expect(prepareJob(teddy, { size: 'preview' }).options.inferenceSize).toBe(side);
      }
    } finally {
      configure({ executionProvider: 'cpu' });
    }
  });

  it("returns the probe, the options for this image, the model and the plan's memory estimate", () => {
    const job = prepareJob(teddy, { size: 'preview', format: 'webp' });
    expect(job.probe).toEqual({ format: 'jpg', width: 284, height: 398 });
    expect(job.options.format).toBe('webp');
    expect(job.options.inferenceSize).toBe(896); // a 0.11 MP preview: job-plan.ts
    expect(job.model).toBeUndefined();
    const contract = modelContract(resolveModel().entry);
    expect(job.memoryBytes).toBe(jobMemoryEstimate(teddy, job.probe, job.options, contract.runBytesPerPixel));
    // The default model's working memory at the planned side is part of it.
    expect(job.memoryBytes).toBeGreaterThan(contract.runBytesPerPixel * 896 ** 2);
  });

  it('runs to the same bytes as removeBackground(bytes, options), from public or normalised options', async () => {
    const options = { size: 'preview', crop: '1:1', bgColor: 'teal' };
    const direct = await removeBackground(teddy, options);
    const prepared = await removeBackground(prepareJob(teddy, options));
    const fromNormalised = await removeBackground(prepareJob(teddy, normaliseOptions(options)), { priority: 'background' });
    expect(prepared.data.equals(direct.data)).toBe(true);
    expect(fromNormalised.data.equals(direct.data)).toBe(true);
    expect([prepared.width, prepared.height, prepared.format]).toEqual([direct.width, direct.height, direct.format]);
  });

  it('throws the errors removeBackground throws, options before the header', async () => {
    expectThrowsBgone(() => prepareJob('not bytes' as never), 'missing_image');
    expectThrowsBgone(() => prepareJob(Buffer.alloc(0)), 'missing_image');
    expectThrowsBgone(() => prepareJob(Buffer.from('not an image'), { format: 'gif' }), 'validation_error');
    expectThrowsBgone(() => prepareJob(Buffer.from('not an image')), 'unsupported_media_type');
    expectThrowsBgone(() => prepareJob(teddy, { model: 'no-such-model' }), 'validation_error');
    expectThrowsBgone(() => prepareJob(teddy, { crop: '100:1', padding: '100%' }), 'validation_error');
    await expect(removeBackground(Buffer.from('not an image'))).rejects.toMatchObject({ code: 'unsupported_media_type' });
  });

  it('a look-alike of a prepared job is refused; look-alike normalised options are validated as public ones', async () => {
    const job = prepareJob(teddy, { size: 'preview' });
    // Taken as options: its fields are no options, the first of them named.
    await expect(removeBackground({ ...job } as never)).rejects.toMatchObject({ code: 'validation_error', details: { field: 'input' } });
    const lookAlike = { ...normaliseOptions({ size: 'preview' }) };
    expect(() => prepareJob(teddy, lookAlike as never)).toThrow(
      expect.objectContaining({ code: 'validation_error', details: expect.objectContaining({ field: 'native' }) }),
    );
    expect(Object.isFrozen(job) && Object.isFrozen(job.options)).toBe(true);
  });
});

describe('run options (the last argument of removeBackground)', () => {
  const bad: Array<[string, unknown, string]> = [
    ['a signal that is not an AbortSignal', { signal: 'abort' }, 'signal'],
    ['a signal that only looks like one', { signal: { aborted: false } }, 'signal'],
    ['an unknown priority', { priority: 'urgent' }, 'priority'],
    ['a priority of another type', { priority: 1 }, 'priority'],
    ['an unknown key', { priorty: 'background' }, 'priorty'],
    ['not an object', 'background', 'run'],
    ['null', null, 'run'],
  ];

  it.each(bad)('%s: validation_error naming the field, from bytes and from a prepared job', async (_, run, field) => {
    for (const call of [() => removeBackground(teddy, {}, run as never), () => removeBackground(prepareJob(teddy), run as never)]) {
      const error = await expectBgoneError(call(), 'validation_error');
      expect(error.details).toMatchObject({ field });
      expect(error.message).toContain(field);
    }
  });

  it('each allowed value still runs', async () => {
    const normal = await removeBackground(teddy, { size: 'preview' }, { priority: 'normal', signal: new AbortController().signal });
    const background = await removeBackground(prepareJob(teddy, { size: 'preview' }), { priority: 'background', signal: undefined });
    expect(background.data.equals(normal.data)).toBe(true);
  });
});

describe('the input belongs to the job', () => {
  it("changing or transferring the caller's bytes after prepareJob changes nothing, and the job's own cannot be transferred", async () => {
    const expected = await removeBackground(teddy, { size: 'preview' });
    const input = new Uint8Array(teddy);
    const job = prepareJob(input, { size: 'preview' });
    input.fill(0);
    structuredClone(input.buffer, { transfer: [input.buffer] });
    expect(input.length).toBe(0);
    try {
      structuredClone(job.input.buffer, { transfer: [job.input.buffer] });
    } catch {
      // Node 21 and later refuse to transfer it; Node 20 clones it instead.
    }
    expect(job.input.equals(teddy)).toBe(true);
    expect((await removeBackground(job)).data.equals(expected.data)).toBe(true);
  });
});
