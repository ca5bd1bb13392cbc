/**
 * The execution provider through the service: /readyz says where inference runs (the provider in
 * use, the configured list, those skipped, the providers of the loaded ONNX Runtime), conforming to
 * the OpenAPI document, and /metrics names it. On this machine's runtime (onnxruntime-node, no CUDA
 * provider library beside it, no Vulkan loader and no GPU adapter), `bgone serve` with cuda or
 * webgpu alone does not start: the model fails to load at start with a message naming what is
 * missing, before it listens; with webgpu,cpu it starts on the CPU and says so in its log, /readyz
 * and /metrics. On the 1.29 core of `bgone gpu install`, built without CUDA, cuda takes the plugin
 * route, refused when the provider library is absent or does not load, and tensorrt is refused as
 * needing a core built with it. Over SwiftShader (a CPU Vulkan), webgpu is refused unless
 * BGONE_WEBGPU_CPU_ADAPTER allows it, and then serves what the CPU serves. A bad value of the
 * variables is refused like any other configuration error. Real servers, real child processes, real ONNX Runtime libraries.
 */
import { copyFileSync, existsSync, mkdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, ServeProcess, useCliFolder } from '../helpers/cli-process.js';
import { PHOTOS } from '../helpers/constants.js';
import { cpuOnlyOrtFolder } from '../helpers/cpu-only-ort.js';
import { type FamilyGraph, writeFamilyGraph } from '../helpers/family-graph.js';
import { expectConforms, openApi } from '../helpers/http-assert.js';
import { readPhoto } from '../helpers/paths.js';
import { get, postImage, startTestServer, type TestServer } from '../helpers/server.js';

const dir = useCliFolder('bgone-provider-');
/** Debian's chromium: its Vulkan loader and SwiftShader's Vulkan driver. */
const SWIFTSHADER = ['libvulkan.so.1', 'libvk_swiftshader.so', 'vk_swiftshader_icd.json'].every((f) => existsSync(join('/usr/lib/chromium', f)));

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
    expect(ready.json.inference).toMatchObject({ provider: 'cpu', device_id: null, device: null, configured: 'cpu', skipped: [], native_concurrency: 2 });
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

  it('BGONE_ORT_LIBRARY naming a file that is no ONNX Runtime: exits 1, saying the ONNX Runtime library is the problem, not the addon', async () => {
    const notALibrary = join(dir, 'not-onnxruntime.so');
    writeFileSync(notALibrary, 'not a shared library');
    const run = await runCli(dir, ['serve'], { BGONE_DB: join(dir, 'bad-ort', 'db.sqlite'), BGONE_PORT: '0', BGONE_ORT_LIBRARY: notALibrary });
    expect(run.code, run.stderr).toBe(1);
    expect(run.stderr).toContain(`The ONNX Runtime library ${notALibrary} could not be used (BGONE_ORT_LIBRARY`);
    expect(run.stderr).not.toContain('native core could not be loaded');
    expect(run.stdout).not.toMatch(/listening/);
  });

  it('BGONE_EXECUTION_PROVIDER=webgpu without a GPU adapter: exits 1 at start, naming the Vulkan loader or the missing adapter', async () => {
    const run = await runCli(dir, ['serve'], { BGONE_DB: join(dir, 'webgpu', 'db.sqlite'), BGONE_PORT: '0', BGONE_EXECUTION_PROVIDER: 'webgpu' });
    expect(run.code, run.stderr).toBe(1);
    // The default model's float variant is what WebGPU runs.
    expect(run.stderr).toMatch(/^bgone: cannot start: Model medium-fp32 could not be loaded on the execution provider webgpu: /m);
    expect(run.stderr).toContain('could not start its WebGPU execution provider');
    expect(run.stderr).toMatch(
      /The Vulkan loader \(libvulkan\.so\.1\) is not installed|The Vulkan loader found no driver|The Vulkan loader lists no device|The Vulkan loader lists only CPU devices/,
    );
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

  /**
   * WebGPU over a CPU Vulkan: SwiftShader, which Debian's chromium ships with its own Vulkan loader
   * in /usr/lib/chromium (.ci/run installs it before the suites). Dawn takes a SwiftShader device, so
   * bgone refuses one unless BGONE_WEBGPU_CPU_ADAPTER allows it; allowed, the whole WebGPU route runs
   * (a tiny generated graph: the real model takes many minutes on a CPU Vulkan) and answers what the
   * CPU answers.
   */
  describe.skipIf(!SWIFTSHADER)("on a CPU Vulkan (SwiftShader, from Debian's chromium)", () => {
    const models = join(dir, 'tiny-models');
    const graph: FamilyGraph = { inputName: 'input', side: 1024, batch: 1, decoys: 2, k: [1, 0.5, 0.25], bias: 0.5 };
    beforeAll(() => {
      mkdirSync(models, { recursive: true });
      writeFamilyGraph(join(models, 'tiny.onnx'), graph);
      const bytes = statSync(join(models, 'tiny.onnx')).size;
      writeFileSync(
        join(models, 'manifest.json'),
        JSON.stringify({ default: 'tiny', models: { tiny: { file: 'tiny.onnx', sha256: '', bytes, license: 'test', family: 'isnet' } } }),
      );
    });
    const onSwiftShader = (name: string, provider: string, extra: Record<string, string> = {}) => ({
      BGONE_DB: join(dir, name, 'db.sqlite'),
      BGONE_PORT: '0',
      BGONE_MODELS_DIR: models,
      BGONE_EXECUTION_PROVIDER: provider,
      LD_LIBRARY_PATH: '/usr/lib/chromium',
      VK_DRIVER_FILES: '/usr/lib/chromium/vk_swiftshader_icd.json',
      ...extra,
    });

    it('webgpu: exits 1, naming the CPU device and the setting that would allow it', async () => {
      const run = await runCli(dir, ['serve'], onSwiftShader('swiftshader-refused', 'webgpu'));
      expect(run.code, run.stderr).toBe(1);
      expect(run.stderr).toMatch(/^bgone: cannot start: Model tiny could not be loaded on the execution provider webgpu: /m);
      expect(run.stderr).toMatch(/The Vulkan loader lists only CPU devices \(SwiftShader Device[^)]*\) \(CPU\)\)/);
      expect(run.stderr).toContain('BGONE_WEBGPU_CPU_ADAPTER=true');
      expect(run.stdout).not.toMatch(/listening/);
    });

    it("webgpu with BGONE_WEBGPU_CPU_ADAPTER=true: serves on webgpu, and its cut-out is the CPU's", async () => {
      const gpu = new ServeProcess(dir, onSwiftShader('swiftshader-allowed', 'webgpu', { BGONE_WEBGPU_CPU_ADAPTER: 'true' }));
      const cpu = new ServeProcess(dir, onSwiftShader('swiftshader-cpu', 'cpu'));
      try {
        const alphas: Buffer[] = [];
        for (const [serve, provider] of [
          [gpu, 'webgpu'],
          [cpu, 'cpu'],
        ] as const) {
          const url = `http://127.0.0.1:${await serve.port()}`;
          const ready = await get(url, '/readyz');
          expect(ready.json.inference).toMatchObject({ provider, configured: provider });
          // webgpu names the Vulkan device it runs on: here SwiftShader's CPU one.
          if (provider === 'webgpu') expect(ready.json.inference.device).toMatch(/^SwiftShader Device/);
          else expect(ready.json.inference.device).toBeNull();
          expectConforms(await openApi(url), 'GET', '/readyz', ready);
          const key = serve.stdout.match(/rb-sk_[A-Za-z0-9_-]{43}/)![0];
          const res = await postImage(url, key, { channels: 'alpha', format: 'png', size: 'full' }, readPhoto(PHOTOS.teddy));
          expect(res.status, res.body.toString()).toBe(200);
          alphas.push(await sharp(res.body).extractChannel(0).raw().toBuffer());
        }
        expect(gpu.logs().find((l) => typeof l.msg === 'string' && l.msg.startsWith('inference on '))?.msg).toMatch(
          /^inference on webgpu \(SwiftShader Device[^,]*\), model tiny, [0-9]+ jobs at once$/,
        );
        const [onGpu, onCpu] = alphas as [Buffer, Buffer];
        expect(onGpu.length).toBe(onCpu.length);
        let differing = 0;
        let most = 0;
        for (let i = 0; i < onCpu.length; i++) {
          const d = Math.abs(onGpu[i]! - onCpu[i]!);
          if (d > 0) differing++;
          most = Math.max(most, d);
        }
        expect(most).toBeLessThanOrEqual(1);
        expect(differing / onCpu.length).toBeLessThan(0.001);
        // The matte is not flat: a wrong output would not match above.
        expect(Math.max(...onCpu.subarray(0, 65536)) - Math.min(...onCpu.subarray(0, 65536))).toBeGreaterThan(64);
      } finally {
        for (const serve of [gpu, cpu]) serve.child.kill('SIGTERM');
        await Promise.all([gpu.exited, cpu.exited]);
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
