/**
 * The execution provider setting against the real runtime of this machine: onnxruntime-node's
 * Linux build, which lists CUDAExecutionProvider but has none of its provider libraries beside it,
 * and holds the WebGPU provider, which finds no adapter here (no Vulkan loader, no GPU). So the CPU
 * path works; CUDA, TensorRT and WebGPU fail at model load with an internal_error that names the
 * provider, the runtime in use and what is missing, every time (a failed load is not cached),
 * without harming the process; a fall-back list skips them, says why, and runs on the CPU. The GPU
 * paths themselves cannot run here (docs/operations.md, "GPU deployment").
 */
import { mkdtempSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { defaultOnnxRuntimeLibrary } from '../../src/lib/native.js';
import { expectBgoneError, expectThrowsBgone } from '../helpers/assert.js';
import { configure, DEFAULT_SETTINGS, inferenceProviders, librarySettings, preloadModel, removeBackground } from '../helpers/bgone.js';
import { PHOTOS } from '../helpers/constants.js';
import { readPhoto } from '../helpers/paths.js';

const teddy = readPhoto(PHOTOS.teddy);

afterAll(() => {
  configure(DEFAULT_SETTINGS);
});

describe('the CPU (default)', () => {
  it("is the provider in effect; the runtime's list holds CPUExecutionProvider", () => {
    const providers = inferenceProviders();
    expect(providers).toMatchObject({ provider: 'cpu', deviceId: null, configured: 'cpu', skipped: [] });
    expect(providers.available).toContain('CPUExecutionProvider');
  });

  it('loads the model and removes a background', async () => {
    await preloadModel();
    expect((await removeBackground(teddy, { size: 'preview' })).width).toBe(284);
  });
});

describe('CUDA on a runtime without a usable CUDA provider', () => {
  it.each(['cuda', 'cuda:1'] as const)(
    '%s: preloadModel and removeBackground reject with a message naming CUDA and what it needs, every time',
    async (provider) => {
      configure({ executionProvider: provider, cudaMemLimitMb: 2048 });
      expect(inferenceProviders()).toMatchObject({ provider: 'cuda', deviceId: provider === 'cuda' ? 0 : 1 });
      for (let i = 0; i < 2; i++) {
        const error = await expectBgoneError(preloadModel(), 'internal_error');
        expect(error.message).toMatch(new RegExp(`^Model medium-fp32 could not be loaded on the execution provider ${provider}: `));
        expect(error.message).toMatch(/the loaded ONNX Runtime 1\.\d+\.\d+ \(([^)]+)\) has no usable CUDA execution provider/);
        expect(error.message).toContain(`(${defaultOnnxRuntimeLibrary()})`);
        expect(error.message).toContain(`libonnxruntime_providers_cuda.so is not in ${dirname(defaultOnnxRuntimeLibrary())}/`);
        expect(error.message).toContain('CUDA 13');
        expect(error.message).toContain('cuDNN 9');
        expect(error.message).toContain('BGONE_ORT_LIBRARY');
        expect(error.details).toMatchObject({ component: 'execution_provider', model: 'medium-fp32', provider });
        // ONNX Runtime's own reason: here, its CUDA provider libraries are not beside it.
        expect(error.detail).toMatch(/libonnxruntime_providers_(shared|cuda)\.so/);
        const job = await expectBgoneError(removeBackground(teddy, { size: 'preview' }), 'internal_error');
        expect(job.details).toMatchObject({ component: 'execution_provider', provider });
      }
    },
  );

  it('tensorrt: makes its engine cache folder, then rejects naming TensorRT, its provider library and what it needs', async () => {
    const cache = join(mkdtempSync(join(tmpdir(), 'bgone-trt-')), 'engines', 'medium');
    configure({ executionProvider: 'tensorrt', cudaMemLimitMb: 0, tensorrtCacheDir: cache });
    expect(inferenceProviders()).toMatchObject({ provider: 'tensorrt', deviceId: 0 });
    const error = await expectBgoneError(preloadModel(), 'internal_error');
    expect(error.message).toMatch(/^Model medium-fp32 could not be loaded on the execution provider tensorrt: /);
    expect(error.message).toContain('has no usable TensorRT execution provider');
    expect(error.message).toContain('libnvinfer.so.10');
    expect(error.details).toMatchObject({ component: 'execution_provider', provider: 'tensorrt' });
    expect(statSync(cache).isDirectory()).toBe(true);
  });

  it('tensorrt with an engine cache folder it cannot make: rejects naming the folder and the setting; a fall-back list goes on to the CPU', async () => {
    const blocker = join(mkdtempSync(join(tmpdir(), 'bgone-trt-')), 'a-file');
    writeFileSync(blocker, 'not a folder');
    const cache = join(blocker, 'engines');
    configure({ executionProvider: 'tensorrt', cudaMemLimitMb: 0, tensorrtCacheDir: cache });
    const error = await expectBgoneError(preloadModel(), 'internal_error');
    expect(error.message).toMatch(
      new RegExp(`^Model medium-fp32 could not be loaded on the execution provider tensorrt: the TensorRT engine cache folder ${cache} cannot be created \\(`),
    );
    expect(error.message).toContain('tensorrtCacheDir setting (BGONE_TENSORRT_CACHE_DIR)');
    expect(error.details).toMatchObject({ component: 'execution_provider', model: 'medium-fp32', provider: 'tensorrt' });

    configure({ executionProvider: 'tensorrt,cpu' });
    expect((await removeBackground(teddy, { size: 'preview' })).width).toBe(284);
    expect(inferenceProviders()).toMatchObject({
      provider: 'cpu',
      skipped: [{ provider: 'tensorrt', reason: expect.stringContaining(`the TensorRT engine cache folder ${cache} cannot be created`) }],
    });
    configure({ executionProvider: 'cpu', tensorrtCacheDir: DEFAULT_SETTINGS.tensorrtCacheDir });
  });

  it('back on the CPU, the same process loads the model and serves', async () => {
    configure({ executionProvider: 'cpu', cudaMemLimitMb: 0 });
    expect(inferenceProviders().provider).toBe('cpu');
    expect((await removeBackground(teddy, { size: 'preview' })).width).toBe(284);
  });
});

describe('onnxRuntimeLibrary', () => {
  it('the library in use may be named again, but not changed once the native core has started', () => {
    const inUse = defaultOnnxRuntimeLibrary();
    expect(configure({ onnxRuntimeLibrary: inUse }).onnxRuntimeLibrary).toBe(inUse);
    const error = expectThrowsBgone(() => configure({ onnxRuntimeLibrary: fileURLToPath(import.meta.url) }), 'validation_error');
    expect(error.details).toEqual({ field: 'onnxRuntimeLibrary' });
    expect(error.message).toBe(`onnxRuntimeLibrary cannot change once the native core has started (it uses ${inUse}).`);
    expect(librarySettings().onnxRuntimeLibrary).toBe(inUse);
  });
});

describe('WebGPU without a GPU adapter', () => {
  afterAll(() => {
    configure({ executionProvider: 'cpu', cudaMemLimitMb: 0 });
  });

  it('webgpu alone: loading rejects every time, naming WebGPU and what is missing, with the float model', async () => {
    configure({ executionProvider: 'webgpu', cudaMemLimitMb: 0 });
    expect(inferenceProviders()).toMatchObject({ provider: 'webgpu', deviceId: null, configured: 'webgpu', skipped: [] });
    for (let i = 0; i < 2; i++) {
      const error = await expectBgoneError(preloadModel(), 'internal_error');
      // int8 QDQ graphs are the CPU's: on WebGPU the default is its float variant.
      expect(error.message).toMatch(/^Model medium-fp32 could not be loaded on the execution provider webgpu: /);
      expect(error.message).toContain('could not start its WebGPU execution provider');
      expect(error.message).toMatch(
        /The Vulkan loader \(libvulkan\.so\.1\) is not installed|The Vulkan loader found no driver|The Vulkan loader lists (no device|only CPU devices)/,
      );
      expect(error.message).toContain("Debian's libvulkan1");
      expect(error.message).toContain('BGONE_EXECUTION_PROVIDER=webgpu,cpu');
      expect(error.details).toMatchObject({ component: 'execution_provider', model: 'medium-fp32', provider: 'webgpu' });
    }
  });

  it('a model named by the job is the one loaded, on WebGPU too', async () => {
    configure({ executionProvider: 'webgpu' });
    const error = await expectBgoneError(removeBackground(teddy, { size: 'preview', model: 'small' }), 'internal_error');
    expect(error.details).toMatchObject({ component: 'execution_provider', model: 'small', provider: 'webgpu' });
  });

  it('webgpu,cpu: WebGPU is skipped with its reason, the CPU runs the default model, and stays chosen', async () => {
    configure({ executionProvider: 'webgpu,cpu' });
    expect(inferenceProviders()).toMatchObject({ provider: null, configured: 'webgpu,cpu', skipped: [] });
    expect(await preloadModel()).toBe('medium');
    const providers = inferenceProviders();
    expect(providers).toMatchObject({ provider: 'cpu', deviceId: null, configured: 'webgpu,cpu' });
    expect(providers.skipped).toEqual([{ provider: 'webgpu', reason: expect.stringContaining('could not start its WebGPU execution provider') }]);
    expect((await removeBackground(teddy, { size: 'preview' })).width).toBe(284);
    expect(inferenceProviders().provider).toBe('cpu');
  });

  it("cuda,webgpu: the last entry's failure is the load's, after the first was skipped", async () => {
    configure({ executionProvider: 'cuda,webgpu' });
    const error = await expectBgoneError(preloadModel(), 'internal_error');
    expect(error.details).toMatchObject({ component: 'execution_provider', provider: 'webgpu' });
    expect(inferenceProviders()).toMatchObject({ provider: null, skipped: [] });
  });
});
