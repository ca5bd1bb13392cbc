/**
 * The execution provider through the service: /readyz says where inference runs (the provider in
 * use, the configured list, those skipped, the providers of the loaded ONNX Runtime), conforming to
 * the OpenAPI document, and /metrics names it. On this machine's runtime (onnxruntime-node, no CUDA
 * provider library beside it, no Vulkan loader and no GPU adapter), `bgone serve` with cuda or
 * webgpu alone does not start: the model fails to load at start with a message naming what is
 * missing, before it listens; with webgpu,cpu it starts on the CPU and says so in its log, /readyz
 * and /metrics. On the 1.29 core of `bgone gpu install`, built without CUDA, cuda takes the plugin
 * route, refused when the provider library is absent or does not load, and tensorrt is refused as
 * needing a core built with it. A bad value of the variables is refused like any other configuration
 * error. Real servers, real child processes, real ONNX Runtime libraries.
 */
import { copyFileSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, ServeProcess, useCliFolder } from '../helpers/cli-process.js';
import { cpuOnlyOrtFolder } from '../helpers/cpu-only-ort.js';
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
    expect(ready.json.inference).toMatchObject({ provider: 'cpu', device_id: null, configured: 'cpu', skipped: [], native_concurrency: 2 });
    expect(ready.json.inference.available).toContain('CPUExecutionProvider');
    expectConforms(await openApi(ts.url), 'GET', '/readyz', ready);
  });
});

describe('bgone serve', () => {
  it('BGONE_EXECUTION_PROVIDER=cuda on a CPU-only ONNX Runtime: exits 1 at start, saying the runtime has no usable CUDA provider and what is needed', async () => {
    const run = await runCli(dir, ['serve'], { BGONE_DB: join(dir, 'cuda', 'db.sqlite'), BGONE_PORT: '0', BGONE_EXECUTION_PROVIDER: 'cuda:0' });
    expect(run.code, run.stderr).toBe(1);
    expect(run.stderr).toMatch(/^bgone: cannot start: Model medium-fp32 could not be loaded on the execution provider cuda:0: /m);
    expect(run.stderr).toContain('has no usable CUDA execution provider');
    expect(run.stderr).toContain('libonnxruntime_providers_cuda.so');
    expect(run.stderr).toContain('CUDA 13');
    expect(run.stderr).toContain('cuDNN 9');
    expect(run.stderr).toContain('BGONE_ORT_LIBRARY');
    expect(run.stdout).not.toMatch(/listening/);
  });

  it('BGONE_EXECUTION_PROVIDER=webgpu without a GPU adapter: exits 1 at start, naming the Vulkan loader or the missing adapter', async () => {
    const run = await runCli(dir, ['serve'], { BGONE_DB: join(dir, 'webgpu', 'db.sqlite'), BGONE_PORT: '0', BGONE_EXECUTION_PROVIDER: 'webgpu' });
    expect(run.code, run.stderr).toBe(1);
    // The default model's float variant is what WebGPU runs.
    expect(run.stderr).toMatch(/^bgone: cannot start: Model medium-fp32 could not be loaded on the execution provider webgpu: /m);
    expect(run.stderr).toContain('could not start its WebGPU execution provider');
    expect(run.stderr).toMatch(/Vulkan loader \(libvulkan\.so\.1, Debian's libvulkan1\) is not installed|no GPU adapter answered/);
    expect(run.stderr).toContain('BGONE_EXECUTION_PROVIDER=webgpu,cpu');
    expect(run.stdout).not.toMatch(/listening/);
  });

  it('BGONE_EXECUTION_PROVIDER=webgpu,cpu without a GPU adapter: starts on the CPU, and its log, /readyz and /metrics say so', async () => {
    const serve = new ServeProcess(dir, { BGONE_DB: join(dir, 'fallback', 'db.sqlite'), BGONE_PORT: '0', BGONE_EXECUTION_PROVIDER: 'webgpu,cpu' });
    try {
      const url = `http://127.0.0.1:${await serve.port()}`;
      const logs = serve.logs();
      const skipped = logs.find((l) => l.provider === 'webgpu' && l.level === 40);
      expect(skipped?.msg).toBe('execution provider webgpu cannot start, falling back to the next of webgpu,cpu');
      expect(skipped?.reason).toContain('WebGPU');
      const inUse = logs.find((l) => typeof l.msg === 'string' && l.msg.startsWith('inference on '));
      expect(inUse).toMatchObject({
        msg: 'inference on cpu, model medium, 2 jobs at once',
        provider: 'cpu',
        native_concurrency: 2,
        configured: 'webgpu,cpu',
        model: 'medium',
      });

      const ready = await get(url, '/readyz');
      expect(ready.status).toBe(200);
      expect(ready.json.inference).toMatchObject({ provider: 'cpu', device_id: null, configured: 'webgpu,cpu' });
      expect(ready.json.inference.skipped).toEqual([{ provider: 'webgpu', reason: expect.stringContaining('WebGPU') }]);
      expectConforms(await openApi(url), 'GET', '/readyz', ready);

      const metricsLine = logs.find((l) => typeof l.msg === 'string' && l.msg.startsWith('metrics: '));
      const metrics = await fetch(metricsLine!.msg.slice('metrics: '.length));
      expect(metrics.status).toBe(200);
      expect(await metrics.text()).toContain('bgone_execution_provider_info{provider="cpu",device_id="",configured="webgpu,cpu"} 1');
    } finally {
      serve.child.kill('SIGTERM');
      await serve.exited;
    }
  });

  describe('on an ONNX Runtime built without CUDA (the 1.29 core of bgone gpu install)', () => {
    /**
     * A folder holding that core and its shared provider library, and `extra` files beside them, and
     * the environment of a `bgone serve` on that core with `provider`.
     */
    function onCore(name: string, provider: string, extra: Record<string, string> = {}) {
      const folder = join(dir, name);
      mkdirSync(folder, { recursive: true });
      for (const f of ['libonnxruntime.so', 'libonnxruntime_providers_shared.so']) copyFileSync(join(cpuOnlyOrtFolder(), f), join(folder, f));
      for (const [f, text] of Object.entries(extra)) writeFileSync(join(folder, f), text);
      const env = {
        BGONE_DB: join(folder, 'db.sqlite'),
        BGONE_PORT: '0',
        BGONE_ORT_LIBRARY: join(folder, 'libonnxruntime.so'),
        BGONE_EXECUTION_PROVIDER: provider,
      };
      return { folder, env };
    }

    it('cuda without libonnxruntime_providers_cuda.so beside it: exits 1, saying the core has no CUDA and the provider library is not there', async () => {
      const { folder, env } = onCore('no-provider', 'cuda');
      const run = await runCli(dir, ['serve'], env);
      expect(run.code, run.stderr).toBe(1);
      expect(run.stderr).toContain(`the loaded ONNX Runtime 1.29.0 (${join(folder, 'libonnxruntime.so')}) was built without the CUDA execution provider`);
      expect(run.stderr).toContain(`libonnxruntime_providers_cuda.so is not in ${folder}/`);
      expect(run.stdout).not.toMatch(/listening/);
    });

    it("cuda with a provider library that does not load: exits 1, naming the plugin registration and the loader's reason", async () => {
      const { folder, env } = onCore('bad-provider', 'cuda:0', { 'libonnxruntime_providers_cuda.so': 'not a shared library' });
      const provider = join(folder, 'libonnxruntime_providers_cuda.so');
      const run = await runCli(dir, ['serve'], env);
      expect(run.code, run.stderr).toBe(1);
      expect(run.stderr).toContain(`has no usable CUDA execution provider: RegisterExecutionProviderLibrary(${provider}) failed: `);
      expect(run.stderr).toContain(provider);
      expect(run.stderr).toMatch(/ELF|too short|invalid/i);
    });

    it('tensorrt: exits 1, saying TensorRT needs a core built with it', async () => {
      const { env } = onCore('tensorrt', 'tensorrt');
      const run = await runCli(dir, ['serve'], env);
      expect(run.code, run.stderr).toBe(1);
      expect(run.stderr).toContain('was built without the TensorRT execution provider');
      expect(run.stderr).toContain('TensorRT needs an ONNX Runtime built with it');
      expect(run.stderr).not.toContain('bgone gpu install');
    });

    it("cuda,cpu: starts on that core's CPU, the skipped reason in /readyz", async () => {
      const serve = new ServeProcess(dir, onCore('fallback', 'cuda,cpu').env);
      try {
        const url = `http://127.0.0.1:${await serve.port()}`;
        const ready = await get(url, '/readyz');
        expect(ready.status).toBe(200);
        expect(ready.json.inference).toMatchObject({ provider: 'cpu', configured: 'cuda,cpu' });
        expect(ready.json.inference.skipped).toEqual([{ provider: 'cuda', reason: expect.stringContaining('was built without the CUDA execution provider') }]);
      } finally {
        serve.child.kill('SIGTERM');
        await serve.exited;
      }
    });
  });

  it.each([
    ['BGONE_EXECUTION_PROVIDER', 'gpu'],
    ['BGONE_EXECUTION_PROVIDER', 'cpu,webgpu'],
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
