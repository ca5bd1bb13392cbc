/**
 * What a model's run may not do to the process (native/run_deadline.h, native/model.cc): a run past
 * the inferenceTimeout setting is stopped and fails its job with internal_error, while a job of
 * another model runs beside it and is answered; a matte that is NaN fails its job instead of reaching
 * the pipeline; stopRuns stops a run that has no limit. The hostile graphs are made by
 * test/helpers/hostile-graph.ts.
 */
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { native, stopRuns } from '../../src/lib/native.js';
import { configure, DEFAULT_SETTINGS, type Manifest, removeBackground } from '../helpers/bgone.js';
import { PHOTOS } from '../helpers/constants.js';
import { writeHostileGraph } from '../helpers/hostile-graph.js';
import { REPO_ROOT, readPhoto } from '../helpers/paths.js';
import { waitFor } from '../helpers/server.js';

const dir = mkdtempSync(join(tmpdir(), 'bgone-deadline-'));
const teddy = readPhoto(PHOTOS.teddy);
const white = native().encodePng(Buffer.alloc(256 * 256 * 3, 255), 256, 256, 3, 1);

beforeAll(() => {
  const shipped = JSON.parse(readFileSync(join(REPO_ROOT, 'models', 'manifest.json'), 'utf8')) as Manifest;
  const medium = shipped.models[shipped.default]!;
  symlinkSync(join(REPO_ROOT, 'models', medium.file), join(dir, medium.file));
  const models: Record<string, unknown> = { [shipped.default]: medium };
  for (const kind of ['endless-loop', 'bright-nan'] as const) {
    writeHostileGraph(join(dir, `${kind}.onnx`), kind);
    models[kind] = { file: `${kind}.onnx`, sha256: '', bytes: 0, license: 'test', family: 'isnet' };
  }
  writeFileSync(join(dir, 'manifest.json'), JSON.stringify({ default: shipped.default, models }));
  configure({ modelsDir: dir, inferenceTimeout: 6 });
});
afterAll(() => {
  configure({ modelsDir: DEFAULT_SETTINGS.modelsDir, inferenceTimeout: DEFAULT_SETTINGS.inferenceTimeout });
  rmSync(dir, { recursive: true, force: true });
});

describe('a run past its limit', () => {
  it('an endless Loop: stopped at the limit, its job fails with internal_error; a job of the default model beside it is answered', async () => {
    const looping = removeBackground(teddy, { model: 'endless-loop', size: 'preview' }).then(
      () => 'answered',
      (err: unknown) => err,
    );
    await waitFor(() => native().runsInProgress() > 0, 'the loop to run');
    const beside = await removeBackground(teddy, { size: 'preview' });
    expect(beside.data.length).toBeGreaterThan(0);
    expect(await looping).toMatchObject({ code: 'internal_error', detail: expect.stringMatching(/passed its limit of 6000 ms \(inferenceTimeout\)/) });
    // The places it held are free again.
    expect(native().runsInProgress()).toBe(0);
    expect((await removeBackground(teddy, { size: 'preview' })).data.length).toBeGreaterThan(0);
  }, 120_000);
});

describe('a matte that is not a number', () => {
  it('NaN on a white image: the job fails with internal_error naming it; on a photo the same model answers', async () => {
    await expect(removeBackground(white, { model: 'bright-nan', size: 'preview' })).rejects.toMatchObject({
      code: 'internal_error',
      detail: expect.stringMatching(/matte has 1048576 of 1048576 values that are not finite numbers/),
    });
    expect((await removeBackground(teddy, { model: 'bright-nan', size: 'preview', channels: 'alpha' })).data.length).toBeGreaterThan(0);
  }, 120_000);
});

describe('stopRuns', () => {
  it('stops a run that has no limit (the process is ending), and every run after it', async () => {
    configure({ inferenceTimeout: 0 });
    const looping = removeBackground(teddy, { model: 'endless-loop', size: 'preview' }).then(
      () => 'answered',
      (err: unknown) => err,
    );
    await waitFor(() => native().runsInProgress() > 0, 'the loop to run');
    expect(stopRuns()).toBe(1);
    expect(await looping).toMatchObject({ code: 'internal_error', detail: expect.stringMatching(/the model's run was stopped: the process is ending/) });
    await expect(removeBackground(teddy, { size: 'preview' })).rejects.toMatchObject({ code: 'internal_error' });
  }, 120_000);
});
