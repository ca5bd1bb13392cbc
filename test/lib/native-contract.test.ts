/**
 * The contract between src/lib and the addon (native/fields.h): TypeScript builds every object the
 * addon reads, with every field; the addon reads each field strictly and throws a TypeError for a
 * missing, mistyped, out-of-range or unknown field instead of falling back to a default. Real addon,
 * real model (a handle is needed to reach the options of removeBackground).
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { contractSpec, getModel, modelContract, readManifest } from '../../src/lib/models.js';
import { type ModelHandle, type NativeModelSpec, native } from '../../src/lib/native.js';
import { prepareJob } from '../helpers/bgone.js';
import { PHOTOS } from '../helpers/constants.js';
import { readPhoto } from '../helpers/paths.js';

const teddy = readPhoto(PHOTOS.teddy);
const options = prepareJob(teddy, { size: 'preview' }).options as unknown as Record<string, unknown>;
let model: ModelHandle;

beforeAll(async () => {
  model = await getModel();
});

function expectContractError(call: () => unknown, message: RegExp): void {
  let thrown: unknown;
  try {
    call();
  } catch (error) {
    thrown = error;
  }
  expect(thrown, 'expected a TypeError').toBeInstanceOf(TypeError);
  expect((thrown as TypeError).message).toMatch(/^bgone native contract: /);
  expect((thrown as TypeError).message).toMatch(message);
}

describe('removeBackground options', () => {
  it('the object prepareJob plans is accepted as it is (control)', async () => {
    const result = await native().removeBackground(teddy, options as never, model, null);
    expect({ width: result.width, height: result.height }).toEqual({ width: 284, height: 398 });
  });

  it.each(Object.keys(options))('without %s: TypeError naming it', (field) => {
    const { [field]: _, ...rest } = options;
    expectContractError(() => native().removeBackground(teddy, rest as never, model, null), new RegExp(`options\\.${field} must be present`));
  });

  it.each(Object.keys(options))('%s as an object: TypeError naming it', (field) => {
    expectContractError(() => native().removeBackground(teddy, { ...options, [field]: {} } as never, model, null), new RegExp(`options\\.${field} must be`));
  });

  it.each([
    ['channels', 'rgb', /options\.channels must be one of rgba, alpha/],
    ['crop', 'true', /options\.crop must be one of none, subject, aspect/],
    ['background', [255, 0, 0], /options\.background must be an array of 4 numbers/],
    ['background', [256, 0, 0, 255], /options\.background\[0\] must be an integer in \[0, 255\], got 256/],
    ['background', [1.5, 0, 0, 255], /options\.background\[0\] must be an integer/],
    ['aspectWidth', 0, /options\.aspectWidth must be an integer in \[1, 1000000\], got 0/],
    ['quality', 101, /options\.quality must be an integer in \[1, 100\]/],
    ['pngCompression', 10, /options\.pngCompression/],
    ['maxPixels', Number.NaN, /options\.maxPixels must be a number in/],
    ['maxSide', 6000.5, /options\.maxSide must be an integer/],
    ['refine', 1, /options\.refine must be a boolean/],
    ['paddingShare', 0.1, /options\.paddingShare must be an array of 4 numbers/],
    ['paddingShare', [0.1, 0.1, -0.1, 0.1], /options\.paddingShare\[2\] must be a number in \[0, 1000\]/],
    ['paddingPx', [0, 0, 0, 1.5], /options\.paddingPx\[3\] must be an integer/],
    ['format', 'jpeg', /options\.format must be one of png, jpg, webp, auto, avif/],
    ['scale', 1.5, /options\.scale must be a number in \[0, 1\]/],
    ['position', [0.5], /options\.position must be an array of 2 numbers/],
    ['canvasWidth', 100, /options\.canvasWidth and canvasHeight must be both 0 or both set/],
    ['roi', [10, 10, 10, 20], /options\.roi must not be empty/],
    ['mirrorWeight', 1.5, /options\.mirrorWeight must be a number in \[0, 1\]/],
    ['mirrorUnion', -0.5, /options\.mirrorUnion must be a number in \[0, 1\]/],
    ['secondSide', 512, /options\.secondSide and secondWeight must be set together/],
    ['secondWeight', 0.5, /options\.secondSide and secondWeight must be set together/],
    ['shadow', 'soft', /options\.shadow must be one of none, drop, contact/],
    ['shadow', true, /options\.shadow must be a string/],
    ['shadowOpacity', 1.5, /options\.shadowOpacity must be a number in \[0, 1\]/],
    ['shadowOpacity', '50%', /options\.shadowOpacity must be a number/],
    ['shadowOffsetX', 2, /options\.shadowOffsetX must be a number in \[-1, 1\]/],
    ['shadowOffsetY', Number.NaN, /options\.shadowOffsetY must be a number in \[-1, 1\]/],
    ['shadowBlur', -0.1, /options\.shadowBlur must be a number in \[0, 1\]/],
    ['contactBand', 1.5, /options\.contactBand must be a number in \[0, 1\]/],
    ['contactHeight', 0, /options\.contactHeight must be a number in \[0.001, 1\]/],
    ['contactBlur', Number.POSITIVE_INFINITY, /options\.contactBlur must be a number in \[0, 1\]/],
    ['opaqueInterior', 'true', /options\.opaqueInterior must be a boolean/],
    ['interiorMin', 0.6, /options\.interiorMin must be a number in \[0, 0.5\]/],
    ['interiorInset', -1, /options\.interiorInset must be a number in \[0, 0.5\]/],
    ['despill', 1, /options\.despill must be a boolean/],
    ['despillBand', 2, /options\.despillBand must be a number in \[0, 1\]/],
    ['despillKeyMargin', -0.5, /options\.despillKeyMargin must be a number in \[0, 1\]/],
    ['dpi', 1201, /options\.dpi must be an integer in \[0, 1200\]/],
    ['dpi', 71, /options\.dpi must be 0 or 72 to 1200/],
    ['dpi', 300.5, /options\.dpi must be an integer/],
    ['inference', 'false', /options\.inference must be a boolean/],
    ['keepAlpha', 0, /options\.keepAlpha must be a boolean/],
    ['metadata', 'all', /options\.metadata must be one of none, xmp, exif_subset, exif_subset_xmp/],
    ['colorSpace', 'p3', /options\.colorSpace must be one of srgb, original/],
  ])('%s = %j: TypeError', (field, value, message) => {
    expectContractError(() => native().removeBackground(teddy, { ...options, [field]: value } as never, model, null), message);
  });

  it.each([
    [{ zip: 1 }, /options\.zip must be a boolean/],
    [{ zip: true }, /options\.zip needs format jpg/],
    [{ zip: true, format: 'webp' }, /options\.zip needs format jpg/],
    [{ secondSide: 16, secondWeight: 0.5 }, /options\.secondSide must be 0 or at least 32/],
    [{ inference: false, keepAlpha: true }, /options\.keepAlpha needs inference/],
    [{ colorSpace: 'original', format: 'jpg' }, /options\.colorSpace original needs format png/],
    [{ colorSpace: 'original', dpi: 300 }, /options\.colorSpace original needs format png, no dpi/],
    [{ colorSpace: 'original', keepAlpha: true }, /options\.colorSpace original needs/],
    [{ colorSpace: 'original', metadata: 'exif_subset' }, /options\.colorSpace original needs/],
    [{ inference: false, despill: true }, /options\.inference false takes no opaqueInterior, despill/],
    [{ inference: false, opaqueInterior: true }, /options\.inference false takes no opaqueInterior/],
    [{ inference: false, mirrorWeight: 0.5 }, /options\.inference false takes no/],
    [{ inference: false }, /the model is null exactly when options\.inference is false/],
  ])('%j: TypeError', (fields, message) => {
    expectContractError(() => native().removeBackground(teddy, { ...options, ...fields } as never, model, null), message);
  });

  it('a null model: a TypeError with inference, a result without (no model runs)', async () => {
    expectContractError(() => native().removeBackground(teddy, options as never, null, null), /the model is null exactly when options\.inference is false/);
    const result = await native().removeBackground(teddy, { ...options, inference: false } as never, null, null);
    expect(result).toMatchObject({ width: 284, height: 398, channels: 4, uncertainty: 0 });
  });

  // The outline's and the background's effects (native/outline.h, bg_blur.h).
  it.each([
    [{ outline: [255, 0, 0] }, /options\.outline must be an array of 4 numbers/],
    [{ outline: [255, 0, 0, 256] }, /options\.outline\[3\] must be an integer in \[0, 255\]/],
    [{ outlineWidth: 0.2 }, /options\.outlineWidth must be a number in \[0, 0\.1\]/],
    [{ outlineBlur: -0.01 }, /options\.outlineBlur must be a number in \[0, 0\.025\]/],
    [{ bgBlur: 'box' }, /options\.bgBlur must be one of none, gaussian, bokeh/],
    [{ bgBlur: 'gaussian', bgBlurRadius: 0 }, /options\.bgBlurRadius must be above 0 with bgBlur gaussian or bokeh, and 0 with none/],
    [{ bgBlurRadius: 0.01 }, /options\.bgBlurRadius must be above 0 with bgBlur gaussian or bokeh, and 0 with none/],
    [{ bgBlur: 'bokeh', bgBlurRadius: 0.06 }, /options\.bgBlurRadius must be a number in \[0, 0\.05\]/],
    [{ bgFit: 'fill' }, /options\.bgFit must be one of cover, contain/],
    [{ outline: [0, 0, 0, 255], channels: 'alpha' }, /options\.outline and bgBlur need channels rgba/],
    [{ bgBlur: 'gaussian', bgBlurRadius: 0.01, channels: 'alpha' }, /options\.outline and bgBlur need channels rgba/],
    [{ bgBlur: 'gaussian', bgBlurRadius: 0.01, background: [0, 0, 0, 255] }, /options\.bgBlur and background are two backgrounds/],
  ])('%j: TypeError', (fields, message) => {
    expectContractError(() => native().removeBackground(teddy, { ...options, ...fields } as never, model, null), message);
  });

  it('bgBlur beside a background image: an internal error, no crash', async () => {
    const grey = await (await import('sharp'))
      .default({ create: { width: 8, height: 8, channels: 3, background: '#888' } })
      .png()
      .toBuffer();
    await expect(native().removeBackground(teddy, { ...options, bgBlur: 'gaussian', bgBlurRadius: 0.01 } as never, model, grey)).rejects.toMatchObject({
      code: 'internal_error',
    });
  });

  it('the outline and the blurred background on the edges of their ranges: a result, no crash', async () => {
    for (const fields of [
      { outline: [0, 0, 0, 0], outlineWidth: 0.1, outlineBlur: 0.025, bgBlur: 'bokeh', bgBlurRadius: 0.05, shadow: 'drop' },
      { outline: [255, 255, 255, 255], outlineWidth: 1e-6, outlineBlur: 0, bgBlur: 'gaussian', bgBlurRadius: 1e-6, format: 'jpg', zip: true },
      { outline: [9, 9, 9, 255], outlineWidth: 0.1, bgBlur: 'gaussian', bgBlurRadius: 0.05, canvasWidth: 3000, canvasHeight: 20, position: [0, 1] },
    ]) {
      const result = await native().removeBackground(teddy, { ...options, ...fields } as never, model, null);
      expect(result.width).toBeGreaterThan(0);
    }
  });

  it('zip: the colours as a JPEG with the alpha PNG beside them (with channels alpha too); without zip, alpha is null', async () => {
    const zipped = await native().removeBackground(teddy, { ...options, format: 'jpg', zip: true } as never, model, null);
    expect(zipped).toMatchObject({ format: 'jpg', channels: 3, width: 284, height: 398 });
    expect(zipped.alpha?.subarray(1, 4).toString('latin1')).toBe('PNG');
    const mask = await native().removeBackground(teddy, { ...options, format: 'jpg', zip: true, channels: 'alpha' } as never, model, null);
    expect(mask).toMatchObject({ format: 'jpg', channels: 3, width: 284, height: 398 });
    expect(mask.alpha?.subarray(1, 4).toString('latin1')).toBe('PNG');
    const plain = await native().removeBackground(teddy, options as never, model, null);
    expect(plain.alpha).toBeNull();
  });

  it('every effect at once, on the edges of its ranges: a result, no crash', async () => {
    const result = await native().removeBackground(
      teddy,
      {
        ...options,
        shadow: 'contact',
        shadowOpacity: 1,
        contactBand: 1,
        contactHeight: 1,
        contactBlur: 1,
        opaqueInterior: true,
        interiorMin: 0.5,
        interiorInset: 0.5,
        despill: true,
        despillBand: 1,
        despillKeyMargin: 0,
      } as never,
      model,
      null,
    );
    expect(result).toMatchObject({ width: 284, height: 398 });
    const drop = await native().removeBackground(
      teddy,
      { ...options, shadow: 'drop', shadowOpacity: 0, shadowOffsetX: -1, shadowOffsetY: 1, shadowBlur: 0, interiorInset: 0, opaqueInterior: true } as never,
      model,
      null,
    );
    expect(drop).toMatchObject({ width: 284, height: 398 });
  });

  it('a field the native core does not read: TypeError, not silently ignored', () => {
    expectContractError(
      () => native().removeBackground(teddy, { ...options, sharpen: true } as never, model, null),
      /options\.sharpen is not a field the native core reads/,
    );
  });

  it('options that are not a plain object: TypeError', () => {
    expectContractError(() => native().removeBackground(teddy, [] as never, model, null), /options must be a plain object/);
  });
});

describe('loadModel spec', () => {
  const contract = modelContract(readManifest().models.small!);
  const spec: NativeModelSpec = {
    path: '/nonexistent/model.onnx',
    ...contractSpec(contract),
    threads: 1,
    dynamicSize: false,
    provider: 'cpu',
    deviceId: 0,
    gpuMemLimitMb: 0,
    tensorrtCacheDir: '',
    webgpuCpuAdapter: false,
    warmUpRuns: 0,
    warmUpSide: 1024,
    runTimeoutMs: 0,
  };

  it('a complete spec is accepted; a bad path then fails later, as a rejected promise with a code (control)', async () => {
    await expect(native().loadModel(spec)).rejects.toMatchObject({ code: 'internal_error' });
  });

  it.each(Object.keys(spec))('without %s: TypeError naming it', (field) => {
    const { [field as keyof NativeModelSpec]: _, ...rest } = spec;
    expectContractError(() => native().loadModel(rest as never), new RegExp(`model spec\\.${field} must be present`));
  });

  it.each([
    ['width', '1024', /model spec\.width must be a number/],
    ['height', 0, /model spec\.height must be an integer in \[1, 16384\]/],
    ['mean', [128, 128], /model spec\.mean must be an array of 3 numbers/],
    ['std', [256, 0, 256], /model spec\.std\[1\] must be a number in/],
    ['threads', 0, /model spec\.threads must be an integer in \[1, 4096\]/],
    ['path', null, /model spec\.path must be a string/],
    ['provider', 'gpu', /model spec\.provider must be one of cpu, cuda/],
    ['provider', 'CUDAExecutionProvider', /model spec\.provider must be one of cpu, cuda/],
    ['deviceId', -1, /model spec\.deviceId must be an integer in \[0, 255\]/],
    ['deviceId', 0.5, /model spec\.deviceId must be an integer/],
    ['gpuMemLimitMb', -1, /model spec\.gpuMemLimitMb must be an integer in \[0, 1048576\]/],
    ['tensorrtCacheDir', 7, /model spec\.tensorrtCacheDir must be a string/],
    ['webgpuCpuAdapter', 1, /model spec\.webgpuCpuAdapter must be a boolean/],
    ['warmUpRuns', 9, /model spec\.warmUpRuns must be an integer in \[0, 8\]/],
    ['warmUpSide', 0, /model spec\.warmUpSide must be an integer in \[1, 16384\]/],
    ['runTimeoutMs', -1, /model spec\.runTimeoutMs must be an integer in \[0, 86400000\]/],
    ['matteTransform', 3, /model spec\.matteTransform must be an integer in \[0, 2\]/],
    ['outputIndex', -1, /model spec\.outputIndex must be an integer in \[0, 4096\]/],
  ])('%s = %j: TypeError', (field, value, message) => {
    expectContractError(() => native().loadModel({ ...spec, [field]: value } as never), message);
  });

  it('an unknown field: TypeError', () => {
    expectContractError(() => native().loadModel({ ...spec, optimisation: 'all' } as never), /model spec\.optimisation is not a field the native core reads/);
  });
});

describe('availableProviders', () => {
  it("lists the loaded runtime's execution providers, CPU among them", () => {
    const providers = native().availableProviders();
    expect(providers).toContain('CPUExecutionProvider');
    expect(providers.every((p) => typeof p === 'string' && p.endsWith('ExecutionProvider'))).toBe(true);
  });
});

describe('webgpuDevice', () => {
  it('on this runtime without a Vulkan loader on the library path: null', () => {
    expect(native().webgpuDevice()).toBeNull();
  });
});

describe('init', () => {
  it.each([
    [{}, /init options\.onnxruntime must be present/],
    [{ onnxruntime: 1 }, /init options\.onnxruntime must be a string/],
    [{ onnxruntime: '/x.so', vipsConcurrency: 2 }, /init options\.vipsConcurrency is not a field the native core reads/],
    [undefined, /init options must be a plain object/],
  ])('%j: TypeError', (argument, message) => {
    expectContractError(() => native().init(argument as never), message);
  });
});
