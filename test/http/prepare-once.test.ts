/**
 * A job's checks run once per path (src/lib/prepare-job.ts): one POST /api/v1/remove (with an
 * Idempotency-Key, whose fingerprint once normalised the options again) and one batch image each
 * normalise their options once and probe their header once, and estimate their memory once. The
 * counts come from spies on the library's own exported functions, which still run: a real server
 * on 127.0.0.1, the real model, a real SQLite file.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it, type MockInstance, vi } from 'vitest';
import * as jobMemory from '../../src/lib/job-memory.js';
import * as options from '../../src/lib/options.js';
import * as probe from '../../src/lib/probe.js';
import { PHOTOS } from '../helpers/constants.js';
import { readPhoto } from '../helpers/paths.js';
import { blob, get, postImage, startTestServer, type TestServer, toResult, waitFor } from '../helpers/server.js';

const teddy = readPhoto(PHOTOS.teddy);
let ts: TestServer;
let spies: { normalise: MockInstance; probe: MockInstance; estimate: MockInstance };

beforeAll(async () => {
  ts = await startTestServer({ credits: 10 });
});
afterAll(async () => {
  await ts?.close();
});
afterEach(() => {
  vi.restoreAllMocks();
});

function spyOnChecks(): void {
  spies = {
    normalise: vi.spyOn(options, 'normaliseOptions'),
    probe: vi.spyOn(probe, 'probeImage'),
    estimate: vi.spyOn(jobMemory, 'jobMemoryEstimate'),
  };
}

function counts(): { normalise: number; probe: number; estimate: number } {
  return { normalise: spies.normalise.mock.calls.length, probe: spies.probe.mock.calls.length, estimate: spies.estimate.mock.calls.length };
}

describe('each check runs once per job', () => {
  it('one /remove with an Idempotency-Key: one normalisation, one probe, one estimate', async () => {
    spyOnChecks();
    const res = await postImage(ts.url, ts.key, { size: 'preview', crop: 'true' }, teddy, { 'idempotency-key': 'prepare-once-1' });
    expect(res.status).toBe(200);
    expect(counts()).toEqual({ normalise: 1, probe: 1, estimate: 1 });
  });

  it('one batch image, from submission to its result: one normalisation, one probe, one estimate', async () => {
    spyOnChecks();
    const form = new FormData();
    form.append('size', 'preview');
    form.append('image_file', blob(teddy, 'image/jpeg'), 'teddy.jpg');
    const auth = { authorization: `Bearer ${ts.key}` };
    const res = await toResult(await fetch(`${ts.url}/api/v1/batches`, { method: 'POST', headers: auth, body: form }));
    expect(res.status).toBe(202);
    let batch: any;
    await waitFor(
      async () => {
        batch = (await get(ts.url, `/api/v1/batches/${res.json.id}`, { headers: auth })).json;
        return batch.status === 'completed';
      },
      'the batch to complete',
      90_000,
    );
    expect(batch.images.map((i: any) => i.status)).toEqual(['succeeded']);
    expect(counts()).toEqual({ normalise: 1, probe: 1, estimate: 1 });
  });
});
