/**
 * The execution provider through the service: /readyz says where inference runs (the configured
 * provider and the providers of the loaded ONNX Runtime), conforming to the OpenAPI document; and
 * `bgone serve` with BGONE_EXECUTION_PROVIDER=cuda on this machine's CPU-only runtime does not
 * start: the model fails to load at start (the same path as any model that cannot load), with a
 * message naming CUDA and what a GPU deployment needs, before it listens. A bad value of the
 * variables is refused like any other configuration error. Real servers, real child processes.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, useCliFolder } from '../helpers/cli-process.js';
import { expectConforms, openApi } from '../helpers/http-assert.js';
import { get, startTestServer, type TestServer } from '../helpers/server.js';

const dir = useCliFolder('bgone-provider-');

describe('/readyz', () => {
  let ts: TestServer;
  beforeAll(async () => {
    ts = await startTestServer();
  });
  afterAll(async () => {
    await ts?.close();
  });

  it('reports provider cpu and the runtime providers, CPUExecutionProvider among them, as documented', async () => {
    const ready = await get(ts.url, '/readyz');
    expect(ready.status).toBe(200);
    expect(ready.json.inference).toMatchObject({ provider: 'cpu', device_id: null });
    expect(ready.json.inference.available).toContain('CPUExecutionProvider');
    expectConforms(await openApi(ts.url), 'GET', '/readyz', ready);
  });
});

describe('bgone serve', () => {
  it('BGONE_EXECUTION_PROVIDER=cuda on a CPU-only ONNX Runtime: exits 1 at start, saying the runtime has no usable CUDA provider and what is needed', async () => {
    const run = await runCli(dir, ['serve'], { BGONE_DB: join(dir, 'cuda', 'db.sqlite'), BGONE_PORT: '0', BGONE_EXECUTION_PROVIDER: 'cuda:0' });
    expect(run.code, run.stderr).toBe(1);
    expect(run.stderr).toMatch(/^bgone: cannot start: Model medium could not be loaded on the execution provider cuda:0: /m);
    expect(run.stderr).toContain('has no usable CUDA execution provider');
    expect(run.stderr).toContain('A GPU deployment needs a GPU build of ONNX Runtime 1.30 for CUDA 12');
    expect(run.stderr).toContain('BGONE_ORT_LIBRARY');
    expect(run.stdout).not.toMatch(/listening/);
  });

  it.each([
    ['BGONE_EXECUTION_PROVIDER', 'gpu'],
    ['BGONE_CUDA_MEM_LIMIT_MB', '0'],
    ['BGONE_ORT_LIBRARY', '/no/such/libonnxruntime.so.1'],
  ])('%s=%s: exits 2 with an invalid-configuration message naming it, before touching the database', async (name, value) => {
    const db = join(dir, 'bad', 'db.sqlite');
    const run = await runCli(dir, ['serve'], { BGONE_DB: db, BGONE_PORT: '0', BGONE_EXECUTION_PROVIDER: 'cuda', [name]: value });
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(new RegExp(`^bgone: invalid configuration: ${name} must `, 'm'));
    expect(existsSync(db)).toBe(false);
  });
});
