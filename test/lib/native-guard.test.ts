/**
 * Every export of the addon runs inside one guard (native/addon.cc): a C++ exception thrown in it,
 * of any kind, reaches JavaScript as an error with its code, never as an abort of the process.
 * failNextCall makes the next call throw inside that guard, before the export's own work.
 */
import { describe, expect, it } from 'vitest';
import { native } from '../../src/lib/native.js';
import { PHOTOS } from '../helpers/constants.js';
import { readPhoto } from '../helpers/paths.js';

const teddy = readPhoto(PHOTOS.teddy);
const KINDS = [
  { kind: 'contract', name: 'TypeError', code: undefined },
  { kind: 'pipeline', name: 'Error', code: 'invalid_image' },
  { kind: 'bad_alloc', name: 'Error', code: 'internal_error' },
  { kind: 'std', name: 'Error', code: 'internal_error' },
  { kind: 'unknown', name: 'Error', code: 'internal_error' },
] as const;

/** Each export with arguments it accepts (the failure comes first, so they are never used). */
const CALLS: Record<string, (addon: ReturnType<typeof native>) => unknown> = {
  init: (a) => a.init({ onnxruntime: '/nonexistent' }),
  loadModel: (a) => a.loadModel({} as never),
  removeBackground: (a) => a.removeBackground(teddy, {} as never, {} as never, null),
  availableProviders: (a) => a.availableProviders(),
  webgpuDevice: (a) => a.webgpuDevice(),
  probe: (a) => a.probe(teddy, 6000),
  memoryStats: (a) => a.memoryStats(),
  encodePng: (a) => a.encodePng(Buffer.alloc(3), 1, 1, 3, 1),
  resampleForModel: (a) => a.resampleForModel(Buffer.alloc(3), 1, 1, 3, 1, 1),
  lockBytes: (a) => a.lockBytes(0, 0, 1, false),
  lockedByte: (a) => a.lockedByte(0, 0, 1),
  releaseModel: (a) => a.releaseModel(undefined as never),
  modelMemory: (a) => a.modelMemory(undefined as never),
  modelMatte: (a) => a.modelMatte(undefined as never, Buffer.alloc(3), 1, 1),
  limitMemory: (a) => a.limitMemory(2 ** 40),
  stopRuns: (a) => a.stopRuns(),
  runsInProgress: (a) => a.runsInProgress(),
};

describe('the guard around every export', () => {
  it('covers every export the addon has (sanity check of this test)', () => {
    const exported = Object.keys(native()).filter((name) => name !== 'failNextCall');
    expect(exported.sort()).toEqual(Object.keys(CALLS).sort());
  });

  for (const [exportName, call] of Object.entries(CALLS)) {
    it.each(KINDS)(`${exportName}: a thrown $kind becomes a JavaScript $name`, ({ kind, name, code }) => {
      const addon = native();
      addon.failNextCall(kind);
      let thrown: unknown;
      try {
        call(addon);
      } catch (err) {
        thrown = err;
      }
      expect(thrown, 'the call threw').toBeInstanceOf(Error);
      expect((thrown as Error).constructor.name).toBe(name);
      expect((thrown as { code?: string }).code).toBe(code);
    });
  }

  it('the process is unaffected: a probe answers as usual after them', () => {
    expect(native().probe(teddy, 6000)).toEqual({ format: 'jpg', width: 284, height: 398 });
  });
});
