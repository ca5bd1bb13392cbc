/**
 * The execution provider setting against the real runtime of this machine: onnxruntime-node's
 * Linux build, which lists CUDAExecutionProvider but ships none of its libraries (no GPU build of
 * ONNX Runtime comes from the npm registry). So the CPU path works, and CUDA fails at model load with
 * an internal_error that names CUDA, the runtime in use and what a GPU deployment needs, every time
 * (a failed load is not cached), without harming the process: back on the CPU, the same process
 * serves. The GPU path itself cannot run here (docs/operations.md, "GPU deployment").
 */
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
    expect(providers).toMatchObject({ provider: 'cpu', deviceId: null });
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
        expect(error.message).toMatch(new RegExp(`^Model medium could not be loaded on the execution provider ${provider}: `));
        expect(error.message).toContain(`the loaded ONNX Runtime (${defaultOnnxRuntimeLibrary()}) has no usable CUDA execution provider`);
        expect(error.message).toContain('A GPU deployment needs a GPU build of ONNX Runtime 1.30 for CUDA 12');
        expect(error.message).toContain('cuDNN 9');
        expect(error.message).toContain('BGONE_ORT_LIBRARY');
        expect(error.details).toMatchObject({ component: 'execution_provider', model: 'medium', provider });
        // ONNX Runtime's own reason: here, its CUDA provider libraries are not beside it.
        expect(error.detail).toMatch(/libonnxruntime_providers_(shared|cuda)\.so/);
        const job = await expectBgoneError(removeBackground(teddy, { size: 'preview' }), 'internal_error');
        expect(job.details).toMatchObject({ component: 'execution_provider', provider });
      }
    },
  );

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
