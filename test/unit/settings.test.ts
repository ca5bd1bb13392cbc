/**
 * configure() and the library's settings (src/lib/settings.ts): defaults in one place, validation
 * naming the field, nothing read from the environment. No addon, no model.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { CPU_NATIVE_CONCURRENCY, GPU_NATIVE_CONCURRENCY, nativeConcurrencyFor, type ProviderName } from '../../src/lib/settings.js';
import { expectThrowsBgone } from '../helpers/assert.js';
import { concurrencyInUse, configure, DEFAULT_SETTINGS, librarySettings, setConcurrency } from '../helpers/bgone.js';
import { REPO_ROOT } from '../helpers/paths.js';

afterEach(() => {
  configure(DEFAULT_SETTINGS);
});

describe('defaults', () => {
  it("the package models folder, ONNX Runtime threads one per core (0), the jobs in the native core chosen for the provider (0), the CPU, TensorRT's engines cached in the package folder, no WebGPU on a CPU Vulkan device, onnxruntime-node's runtime, the addon build the CPU runs best, no downloads from private addresses", () => {
    expect(librarySettings()).toEqual({
      modelsDir: join(REPO_ROOT, 'models'),
      inferenceThreads: 0,
      nativeConcurrency: 0,
      executionProvider: 'cpu',
      cudaMemLimitMb: 0,
      tensorrtCacheDir: join(REPO_ROOT, '.tensorrt-cache'),
      webgpuCpuAdapter: false,
      onnxRuntimeLibrary: undefined,
      addonBuild: 'auto',
      fetchAllowPrivate: false,
      fetchAllow: [],
      modelIdleSeconds: 600,
      modelsMemoryMb: 0,
      inferenceTimeout: 60,
    });
    expect(DEFAULT_SETTINGS).toEqual(librarySettings());
  });

  it('are not taken from the environment, at import or later', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'bgone-settings-'));
    vi.stubEnv('BGONE_MODELS_DIR', dir);
    vi.stubEnv('BGONE_INFERENCE_THREADS', '3');
    vi.stubEnv('BGONE_NATIVE_CONCURRENCY', '5');
    vi.stubEnv('BGONE_EXECUTION_PROVIDER', 'cuda');
    vi.stubEnv('BGONE_ORT_LIBRARY', join(REPO_ROOT, 'package.json'));
    vi.stubEnv('BGONE_ADDON_BUILD', 'baseline');
    try {
      vi.resetModules();
      const fresh = await import('../../src/lib/index.js');
      expect(fresh.librarySettings()).toEqual(DEFAULT_SETTINGS);
      fresh.configure({});
      expect(fresh.librarySettings()).toEqual(DEFAULT_SETTINGS);
    } finally {
      vi.unstubAllEnvs();
      rmSync(dir, { recursive: true });
    }
  });
});

describe('configure', () => {
  it('sets the fields given and keeps the others; undefined keeps the current value', () => {
    expect(configure({ inferenceThreads: 2 })).toEqual({ ...DEFAULT_SETTINGS, inferenceThreads: 2 });
    expect(configure({ nativeConcurrency: 4, inferenceThreads: undefined })).toEqual({ ...DEFAULT_SETTINGS, inferenceThreads: 2, nativeConcurrency: 4 });
    expect(librarySettings()).toEqual({ ...DEFAULT_SETTINGS, inferenceThreads: 2, nativeConcurrency: 4 });
    expect(configure({})).toEqual(librarySettings());
  });

  it('resolves a relative modelsDir against the working directory', () => {
    const dir = mkdtempSync(join(tmpdir(), 'bgone-settings-'));
    try {
      expect(configure({ modelsDir: relative(process.cwd(), dir) }).modelsDir).toBe(dir);
    } finally {
      rmSync(dir, { recursive: true });
    }
  });

  it('the settings in effect cannot be changed by mutating what it returns', () => {
    const settings = configure({ inferenceThreads: 1 });
    expect(() => {
      (settings as { inferenceThreads: number }).inferenceThreads = 7;
    }).toThrow(TypeError);
    expect(librarySettings().inferenceThreads).toBe(1);
  });

  it('the execution provider: cpu, cuda[:<device id>], tensorrt[:<device id>], webgpu or a fall-back list, with an optional GPU memory limit', () => {
    expect(configure({ executionProvider: 'cuda' })).toEqual({ ...DEFAULT_SETTINGS, executionProvider: 'cuda' });
    expect(configure({ executionProvider: 'cuda:3', cudaMemLimitMb: 4096 })).toMatchObject({ executionProvider: 'cuda:3', cudaMemLimitMb: 4096 });
    expect(configure({ executionProvider: 'tensorrt:1' }).executionProvider).toBe('tensorrt:1');
    expect(configure({ executionProvider: 'webgpu' }).executionProvider).toBe('webgpu');
    expect(configure({ executionProvider: ' webgpu, cuda:2 ,cpu' }).executionProvider).toBe('webgpu,cuda:2,cpu');
    expect(configure({ executionProvider: 'cpu', cudaMemLimitMb: 0 })).toEqual(DEFAULT_SETTINGS);
  });

  it("tensorrtCacheDir: a folder resolved to an absolute path, not made until a TensorRT load; '' turns the cache off", () => {
    const dir = mkdtempSync(join(tmpdir(), 'bgone-settings-'));
    const absent = join(dir, 'not', 'yet');
    expect(configure({ tensorrtCacheDir: absent }).tensorrtCacheDir).toBe(absent);
    expect(existsSync(absent)).toBe(false);
    expect(configure({ tensorrtCacheDir: relative(process.cwd(), dir) }).tensorrtCacheDir).toBe(dir);
    expect(configure({ tensorrtCacheDir: '' }).tensorrtCacheDir).toBe('');
  });

  it('fetchAllow: host names, wildcards, networks and addresses, kept normalised and frozen; [] empties it', () => {
    const settings = configure({ fetchAllow: [' Images.Internal. ', '*.Corp.Internal', '10.1.2.3/32', 'FD00:EC2::254', '10.0.0.0/8'] });
    expect(settings.fetchAllow).toEqual(['images.internal', '*.corp.internal', '10.1.2.3', 'fd00:ec2::254', '10.0.0.0/8']);
    expect(Object.isFrozen(settings.fetchAllow)).toBe(true);
    expect(configure({ fetchAllow: [] }).fetchAllow).toEqual([]);
  });

  it('setConcurrency(n) is configure({ nativeConcurrency: n })', () => {
    setConcurrency(3);
    expect(librarySettings().nativeConcurrency).toBe(3);
    expect(expectThrowsBgone(() => setConcurrency(-1), 'validation_error').details?.field).toBe('nativeConcurrency');
    expect(librarySettings().nativeConcurrency).toBe(3);
    expect(concurrencyInUse()).toBe(3);
    setConcurrency(0);
    expect(concurrencyInUse()).toBe(CPU_NATIVE_CONCURRENCY);
  });

  it('nativeConcurrency 0: 2 jobs on the CPU, one per core from 4 to 16 on a GPU provider; a number set wins', () => {
    const auto = { ...DEFAULT_SETTINGS, nativeConcurrency: 0 };
    const gpu = Math.min(16, Math.max(4, availableParallelism()));
    expect([undefined, 'cpu', 'cuda', 'tensorrt', 'webgpu'].map((p) => nativeConcurrencyFor(auto, p as ProviderName | undefined))).toEqual([
      2,
      2,
      gpu,
      gpu,
      gpu,
    ]);
    expect(GPU_NATIVE_CONCURRENCY).toEqual({ min: 4, max: 16 });
    expect(nativeConcurrencyFor({ ...auto, nativeConcurrency: 7 }, 'cuda')).toBe(7);
    expect(nativeConcurrencyFor({ ...auto, nativeConcurrency: 7 }, 'cpu')).toBe(7);
  });
});

describe('a bad value is a validation_error naming the field, and changes nothing', () => {
  it.each([
    ['modelsDir', ''],
    ['modelsDir', '   '],
    ['modelsDir', 42],
    ['modelsDir', null],
    ['modelsDir', '/no/such/folder/for/bgone'],
    ['modelsDir', join(REPO_ROOT, 'package.json')],
    ['inferenceThreads', -1],
    ['inferenceThreads', 1.5],
    ['inferenceThreads', '2'],
    ['inferenceThreads', Number.NaN],
    ['inferenceThreads', 1025],
    ['inferenceThreads', null],
    ['nativeConcurrency', -1],
    ['nativeConcurrency', -2],
    ['nativeConcurrency', 2.5],
    ['nativeConcurrency', '4'],
    ['nativeConcurrency', Number.POSITIVE_INFINITY],
    ['nativeConcurrency', true],
    ['executionProvider', 'gpu'],
    ['executionProvider', 'cuda:'],
    ['executionProvider', 'cuda:256'],
    ['executionProvider', 'cuda:01'],
    ['executionProvider', 'cpu:0'],
    ['executionProvider', 'webgpu:0'],
    ['executionProvider', ''],
    ['executionProvider', 'webgpu,'],
    ['executionProvider', 'cpu,cuda'],
    ['executionProvider', 'webgpu,webgpu'],
    ['executionProvider', 0],
    ['executionProvider', null],
    ['cudaMemLimitMb', -1],
    ['cudaMemLimitMb', 1.5],
    ['cudaMemLimitMb', '512'],
    ['cudaMemLimitMb', 1_048_577],
    ['tensorrtCacheDir', 7],
    ['tensorrtCacheDir', null],
    ['tensorrtCacheDir', join(REPO_ROOT, 'package.json')],
    ['webgpuCpuAdapter', 'true'],
    ['webgpuCpuAdapter', 1],
    ['webgpuCpuAdapter', null],
    ['onnxRuntimeLibrary', ''],
    ['onnxRuntimeLibrary', 7],
    ['onnxRuntimeLibrary', '/no/such/libonnxruntime.so.1'],
    ['onnxRuntimeLibrary', REPO_ROOT],
    ['addonBuild', 'avx2'],
    ['addonBuild', 'AUTO'],
    ['addonBuild', ''],
    ['addonBuild', null],
    ['addonBuild', 1],
    ['fetchAllow', 'images.internal'],
    ['fetchAllow', ['10.1.0.0/8']],
    ['fetchAllow', ['images.internal', '']],
    ['fetchAllow', ['[::1]']],
    ['fetchAllow', [7]],
    ['fetchAllow', null],
  ])('%s = %j', (field, value) => {
    configure({ inferenceThreads: 1 });
    const before = librarySettings();
    // Together with a valid field: the whole call is refused.
    const error = expectThrowsBgone(() => configure({ nativeConcurrency: 3, [field]: value } as never), 'validation_error');
    expect(error.details?.field).toBe(field);
    expect(error.message).toContain(field);
    expect(librarySettings()).toBe(before);
  });

  it('an unknown field (a typo) is refused, not ignored', () => {
    const error = expectThrowsBgone(() => configure({ modelDir: '/tmp' } as never), 'validation_error');
    expect(error.details?.field).toBe('modelDir');
    expect(error.message).toMatch(
      /modelsDir, inferenceThreads, nativeConcurrency, executionProvider, cudaMemLimitMb, tensorrtCacheDir, webgpuCpuAdapter, onnxRuntimeLibrary, addonBuild/,
    );
  });

  it.each([null, 'models', 3, [1]])('settings %j is not an object', (settings) => {
    expect(expectThrowsBgone(() => configure(settings as never), 'validation_error').details?.field).toBe('settings');
  });

  it('the message says what is expected', () => {
    expect(expectThrowsBgone(() => configure({ inferenceThreads: -1 }), 'validation_error').message).toBe(
      'inferenceThreads must be an integer from 0 to 1024 (0: one per core), got -1.',
    );
    expect(expectThrowsBgone(() => configure({ modelsDir: '/no/such/folder/for/bgone' }), 'validation_error').message).toBe(
      'modelsDir /no/such/folder/for/bgone is not an existing folder.',
    );
    expect(expectThrowsBgone(() => configure({ executionProvider: 'gpu' as never }), 'validation_error').message).toBe(
      'executionProvider must be one provider or an ordered fall-back list (e.g. webgpu,cpu) of cpu, cuda[:<device id>], ' +
        'tensorrt[:<device id>] and webgpu, got "gpu": "gpu" is not a provider.',
    );
    expect(expectThrowsBgone(() => configure({ onnxRuntimeLibrary: '/no/such/libonnxruntime.so.1' }), 'validation_error').message).toBe(
      'onnxRuntimeLibrary /no/such/libonnxruntime.so.1 is not an existing file.',
    );
    expect(expectThrowsBgone(() => configure({ addonBuild: 'avx2' as never }), 'validation_error').message).toBe(
      'addonBuild must be auto or baseline, got "avx2".',
    );
  });
});
