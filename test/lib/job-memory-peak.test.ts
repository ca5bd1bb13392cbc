/**
 * The memory estimate a job's plan makes (src/lib/job-memory.ts) against what the job held at its
 * peak: the process's peak resident size during the job (VmHWM, reset through /proc/self/clear_refs
 * as the job starts), above its resident size then. For a
 * 2048² graph (BiRefNet HR's side; a tiny graph of the family, its working memory measured by the
 * proving run of `bgone models add`, as that command records it) and for the default model, on a
 * 2 MP photo. Each job runs in a process of its own, after its model's load (whose warm-up hands
 * the native core's blocks back).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ModelEntry } from '../../src/lib/models.js';
import { DEFAULT_SETTINGS } from '../helpers/bgone.js';
import { PHOTOS } from '../helpers/constants.js';
import { writeFamilyGraph } from '../helpers/family-graph.js';
import { REPO_ROOT, readPhoto } from '../helpers/paths.js';

const dir = mkdtempSync(join(tmpdir(), 'bgone-peak-'));

/** What the proving run of `bgone models add` measures for a file: its working memory per pixel. */
function provedRunBytes(file: string, side: number): number {
  const request = { path: join(dir, file), family: 'birefnet', dynamic: false, side, memoryBytes: 8 * 2 ** 30, inferenceTimeout: 120 };
  const child = spawnSync(process.execPath, [join(REPO_ROOT, 'dist', 'src', 'cli', 'prove-model.js'), JSON.stringify(request)], {
    encoding: 'utf8',
    timeout: 240_000,
  });
  const answer = JSON.parse(child.stdout.trim().split('\n').pop() ?? '{}') as { ok?: boolean; runBytesPerPixel?: number; problem?: string };
  expect(answer, child.stderr).toMatchObject({ ok: true });
  return answer.runBytesPerPixel!;
}

/**
 * The job's estimate and its measured peak for `model` of the models folder `modelsDir`, in a
 * process of its own that loads the model, then runs the one job.
 */
function estimateAndPeak(modelsDir: string, model: string | undefined): { estimate: number; peak: number } {
  const lib = pathToFileURL(join(REPO_ROOT, 'dist', 'src', 'lib', 'index.js')).href;
  const models = pathToFileURL(join(REPO_ROOT, 'dist', 'src', 'lib', 'models.js')).href;
  const script = `
    import { readFileSync, writeFileSync } from 'node:fs';
    import { configure, nativeMemoryStats, prepareJob, removeBackground } from ${JSON.stringify(lib)};
    import { acquireModel } from ${JSON.stringify(models)};
    configure({ modelsDir: ${JSON.stringify(modelsDir)} });
    const model = ${JSON.stringify(model ?? null)} ?? undefined;
    const lease = await acquireModel(model);
    const job = prepareJob(readFileSync(${JSON.stringify(join(dir, 'photo.jpg'))}), { model });
    const kb = (field) => Number(new RegExp(field + ':\\\\s+(\\\\d+)').exec(readFileSync('/proc/self/status', 'utf8'))[1]) * 1024;
    const before = nativeMemoryStats();
    writeFileSync('/proc/self/clear_refs', '5');
    const rss = kb('VmRSS');
    await removeBackground(job);
    const peak = kb('VmHWM') - rss;
    lease.release();
    process.stdout.write(JSON.stringify({ estimate: job.memoryBytes, reset: before.inUse === 0 && before.cached === 0, peak }));
  `;
  const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 240_000 });
  expect(child.status, child.stderr).toBe(0);
  const answer = JSON.parse(child.stdout) as { estimate: number; reset: boolean; peak: number };
  // The model's warm-up handed its blocks back: the job starts from none.
  expect(answer.reset).toBe(true);
  return answer;
}

beforeAll(async () => {
  // A 2 MP photo: 1,680 x 1,190.
  writeFileSync(join(dir, 'photo.jpg'), await sharp(readPhoto(PHOTOS.llama)).resize(1680, 1190, { fit: 'fill' }).jpeg({ quality: 90 }).toBuffer());
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe("a job's memory estimate is within 25 % of its measured peak", () => {
  it('a 2048² graph (BiRefNet HR): its working memory as `bgone models add` records it', async () => {
    writeFamilyGraph(join(dir, 'hr.onnx'), { inputName: 'input_image', side: 2048, batch: 1, k: [1, -0.5, 0.25], bias: 0.1, decoys: 0 });
    const runBytesPerPixel = provedRunBytes('hr.onnx', 2048);
    const entry: ModelEntry = {
      file: 'hr.onnx',
      sha256: '',
      bytes: statSync(join(dir, 'hr.onnx')).size,
      license: 'test',
      family: 'birefnet',
      side: 2048,
      runBytesPerPixel,
    };
    writeFileSync(join(dir, 'manifest.json'), JSON.stringify({ default: 'hr', models: { hr: entry } }));
    const { estimate, peak } = estimateAndPeak(dir, 'hr');
    expect(estimate / peak, `estimate ${(estimate / 2 ** 20).toFixed(0)} MiB, peak ${(peak / 2 ** 20).toFixed(0)} MiB`).toBeGreaterThan(0.75);
    expect(estimate / peak).toBeLessThan(1.25);
  }, 240_000);

  it("the default model: its manifest's working memory", async () => {
    const { estimate, peak } = estimateAndPeak(DEFAULT_SETTINGS.modelsDir, undefined);
    expect(estimate / peak, `estimate ${(estimate / 2 ** 20).toFixed(0)} MiB, peak ${(peak / 2 ** 20).toFixed(0)} MiB`).toBeGreaterThan(0.75);
    expect(estimate / peak).toBeLessThan(1.25);
  }, 240_000);
});
