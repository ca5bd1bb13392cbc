/**
 * preloadModel warms the model it loads (WARM_UP_RUNS runs on a blank input, native Model::warm_up)
 * and gives the memory of those runs back at once; a model loaded by a job's own first call is not
 * warmed (that call would wait for it). Each case is a fresh process: a process loads a model once.
 * How much faster the first jobs get is measured in the benchmark, not asserted here.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import type { NativeMemoryStats } from '../../src/lib/native.js';
import { PHOTOS } from '../helpers/constants.js';
import { photoPath, REPO_ROOT } from '../helpers/paths.js';

const run = promisify(execFile);
const DIST = join(REPO_ROOT, 'dist', 'src', 'lib');

/** Runs `body` (an ES module's statements, with `lib` and `models` imported) in a fresh process; returns what it printed as JSON. */
async function inChild<T>(body: string): Promise<T> {
  const script = `
    const lib = await import(${JSON.stringify(join(DIST, 'index.js'))});
    const models = await import(${JSON.stringify(join(DIST, 'models.js'))});
    ${body}`;
  const { stdout } = await run(process.execPath, ['--expose-gc', '--input-type=module', '-e', script], { cwd: REPO_ROOT });
  return JSON.parse(stdout) as T;
}

describe('warming the model', () => {
  it('preloadModel runs the model before it returns, and the memory of those runs is already given back', async () => {
    const warmed = await inChild<NativeMemoryStats>('await lib.preloadModel(); console.log(JSON.stringify(lib.nativeMemoryStats()));');
    const loadedOnly = await inChild<NativeMemoryStats>('await models.getModel(); console.log(JSON.stringify(lib.nativeMemoryStats()));');
    // The runs mapped the model's working memory (the load alone maps none of it)...
    expect(loadedOnly.mapped).toBe(0);
    expect(warmed.mapped).toBeGreaterThan(0);
    // ...and none of it is held once preloadModel has returned.
    expect(warmed).toMatchObject({ inUse: 0, cached: 0 });
  }, 60_000);

  it('a warmed model serves jobs as usual', async () => {
    const result = await inChild<{ width: number; height: number }>(`
      await lib.preloadModel();
      const { readFileSync } = await import('node:fs');
      const r = await lib.removeBackground(readFileSync(${JSON.stringify(photoPath(PHOTOS.teddy))}), { size: 'preview' });
      console.log(JSON.stringify({ width: r.width, height: r.height }));`);
    expect(result).toEqual({ width: 284, height: 398 });
  }, 60_000);
});

describe("the model's weights", () => {
  it('are mapped apart (2 MiB-aligned, advised for huge pages) while the model is loaded, and unmapped once it is dropped', async () => {
    const stats = await inChild<{ loaded: number; dropped: number }>(`
      await lib.preloadModel();
      const loaded = lib.nativeMemoryStats().lasting;
      models.forgetModels(); // the session's last reference; the addon's finaliser then destroys it
      for (let i = 0; i < 100 && lib.nativeMemoryStats().lasting > 0; i++) {
        globalThis.gc();
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      console.log(JSON.stringify({ loaded, dropped: lib.nativeMemoryStats().lasting }));`);
    // The default model's weights, prepacked for the kernels, are about 41 MB, in 2 MiB pages.
    expect(stats.loaded).toBeGreaterThanOrEqual(32 * 2 ** 20);
    expect(stats.loaded % (2 * 2 ** 20)).toBe(0);
    // Every block came back when the session was released, so the arena gave its mappings back.
    expect(stats.dropped).toBe(0);
  }, 60_000);
});
