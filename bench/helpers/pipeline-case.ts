/**
 * One size of bench/pipeline.ts in a fresh process, so that its peak RSS (maxRSS) is that size's
 * alone. It loads the library as the service does (configure(loadLibraryConfig())), preloads the
 * model, lets the process settle and reports its idle RSS; then bench/pipeline.ts drives it one job
 * at a time (line protocol, line-protocol.ts), running a pure inference in its other child between
 * two jobs. sharp is never loaded here: it would change libvips' process-wide settings, which the
 * addon shares.
 *
 *   node --expose-gc dist/bench/helpers/pipeline-case.js [--model <name>] [--settle-ms 500]
 *
 * Messages: {"type":"ready", model, provider, nativeConcurrency, loadMs, idleRssMB, maxRssMB, versions, settings} first; then
 *   {"cmd":"input","jpegBase64":...}     -> {"type":"ok", bytes}
 *   {"cmd":"run","format":"png"}         -> {"type":"result", ms, cpuMs, timings, output, rssBeforeMB, maxRssMB}
 *   {"cmd":"inflight","n":4,"jobs":8,...} -> {"type":"result", wallMs, cpuMs, ms[], timings[], rssBeforeMB, maxRssMB}:
 *     `jobs` jobs with n in flight (a new one starts when one ends); ms: each job's wall clock from
 *     its call, queueing included; cpuMs: the process's CPU over the whole window
 *   {"cmd":"variants","n":5,"names":[...]} -> {"type":"result", ms: { plain[], <name>[]... }}: the input as PNG
 *     through the addon directly (the options prepareJob gives), plain and each named variant
 *     interleaved: background = the input itself as the background image on an exact 1000 x 1000
 *     canvas; roi = the centre 50 % x 50 %; best = effort=best; product = a product layout: an exact
 *     1000 x 1000 canvas with margins and area padding, snapping, the photo blurred behind the
 *     subject and a white outline
 *   {"cmd":"settle","ms":1000}           -> {"type":"settled", rssMB, rssAfterGcMB, maxRssMB}
 *   {"cmd":"exit"}
 * rssBeforeMB is the RSS when the job is asked for, i.e. between two jobs (the previous one ended a
 * pure inference earlier); the job's own input and result buffers are dropped after each job. cpuMs
 * is the process's CPU time (user + system, every thread) over the call.
 */
import { basename } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadLibraryConfig } from '../../src/config/config.js';
import {
  addonFileInUse,
  concurrencyInUse,
  configure,
  inferenceProviders,
  nativeVersions,
  type OutputFormat,
  preloadModel,
  type RemoveBackgroundResult,
  readManifest,
  removeBackground,
} from '../../src/lib/index.js';
import { getModel } from '../../src/lib/models.js';
import { native } from '../../src/lib/native.js';
import { type PreparedJob, prepareJob } from '../../src/lib/prepare-job.js';
import { emit, serveLines } from './line-protocol.js';

const rssMB = (): number => process.memoryUsage().rss / 2 ** 20;
const maxRssMB = (): number => process.resourceUsage().maxRSS / 1024;
const gc = (globalThis as { gc?: () => void }).gc;

function parseArgs(argv: string[]): { model: string | undefined; settleMs: number } {
  const args = { model: undefined as string | undefined, settleMs: 500 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = argv[++i];
    if (v === undefined) throw new Error(`${a} needs a value`);
    if (a === '--model') args.model = v;
    else if (a === '--settle-ms') args.settleMs = Number(v);
    else throw new Error(`unknown argument ${a}`);
  }
  return args;
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const settings = configure(loadLibraryConfig()); // the service's own reading of BGONE_* settings
  const manifest = readManifest();
  const model = args.model ?? manifest.default;
  const entry = manifest.models[model];
  if (!entry) throw new Error(`unknown model ${model} (models: ${Object.keys(manifest.models).join(', ')})`);

  const loadStart = performance.now();
  await preloadModel(model);
  const loadMs = performance.now() - loadStart;
  const versions = nativeVersions();
  const provider = inferenceProviders().provider;
  await sleep(args.settleMs);
  const addon = basename(addonFileInUse() ?? '?');
  emit({
    type: 'ready',
    model,
    file: entry.file,
    addon,
    provider,
    nativeConcurrency: concurrencyInUse(),
    loadMs,
    idleRssMB: rssMB(),
    maxRssMB: maxRssMB(),
    versions,
    settings: { ...settings },
  });

  let input: Buffer | undefined;
  await serveLines(async (cmd) => {
    switch (cmd.cmd) {
      case 'input':
        input = Buffer.from(String(cmd.jpegBase64), 'base64');
        return { type: 'ok', bytes: input.length };
      case 'run': {
        if (!input) throw new Error('no input yet');
        const rssBeforeMB = rssMB();
        const format = (cmd.format ?? 'png') as OutputFormat;
        const cpuStart = process.cpuUsage();
        const start = performance.now();
        const result = await removeBackground(input, { format, model });
        const ms = performance.now() - start;
        const used = process.cpuUsage(cpuStart);
        // The whole process's CPU over the call (every thread; nothing else runs here), ms.
        const cpuMs = (used.user + used.system) / 1000;
        const output = { width: result.width, height: result.height, channels: result.channels, bytes: result.data.length };
        return { type: 'result', ms, cpuMs, timings: result.timings, output, rssBeforeMB, maxRssMB: maxRssMB() };
      }
      case 'inflight': {
        if (!input) throw new Error('no input yet');
        const data = input;
        const n = Number(cmd.n);
        const jobs = Number(cmd.jobs ?? n);
        const format = (cmd.format ?? 'png') as OutputFormat;
        const rssBeforeMB = rssMB();
        const ms: number[] = [];
        const timings: RemoveBackgroundResult['timings'][] = [];
        let started = 0;
        const cpuStart = process.cpuUsage();
        const start = performance.now();
        // n workers, each starting its next job as soon as its last one ends: n in flight until the
        // last jobs drain.
        await Promise.all(
          Array.from({ length: Math.min(n, jobs) }, async () => {
            while (started < jobs) {
              started++;
              const jobStart = performance.now();
              const result = await removeBackground(data, { format, model });
              ms.push(performance.now() - jobStart);
              timings.push(result.timings);
            }
          }),
        );
        const wallMs = performance.now() - start;
        const used = process.cpuUsage(cpuStart);
        const cpuMs = (used.user + used.system) / 1000;
        return { type: 'result', wallMs, cpuMs, ms, timings, rssBeforeMB, maxRssMB: maxRssMB() };
      }
      case 'variants': {
        if (!input) throw new Error('no input yet');
        // Each variant as prepareJob makes it (the inference size for it included), run on the addon directly.
        const handle = await getModel(model);
        const known: Record<string, () => PreparedJob> = {
          background: () => prepareJob(input, { format: 'png', model, outputSize: '1000x1000', bgImageFile: input }),
          roi: () => prepareJob(input, { format: 'png', model, roi: '25% 25% 75% 75%' }),
          best: () => prepareJob(input, { format: 'png', model, effort: 'best' }),
          product: () =>
            prepareJob(input, {
              format: 'png',
              model,
              outputSize: '1000x1000',
              margin: '0.05',
              areaPadding: '0.1',
              snap: 'both',
              bgBlur: '0.01',
              outlineColor: 'white',
              outlineWidth: '0.02',
            }),
        };
        const variants: Record<string, PreparedJob> = { plain: prepareJob(input, { format: 'png', model }) };
        for (const name of (cmd.names ?? []) as string[]) {
          const make = known[name];
          if (!make) throw new Error(`unknown variant ${name}`);
          variants[name] = make();
        }
        const ms: Record<string, number[]> = Object.fromEntries(Object.keys(variants).map((name) => [name, []]));
        for (let i = 0; i < Number(cmd.n); i++) {
          for (const [name, job] of Object.entries(variants)) {
            const start = performance.now();
            await native().removeBackground(job.input, job.options, handle, job.background);
            ms[name]!.push(performance.now() - start);
          }
        }
        return { type: 'result', ms };
      }
      case 'settle': {
        await sleep(Number(cmd.ms ?? args.settleMs));
        const settled = rssMB();
        let rssAfterGcMB: number | null = null;
        if (gc) {
          gc();
          await sleep(100);
          rssAfterGcMB = rssMB();
        }
        return { type: 'settled', rssMB: settled, rssAfterGcMB, maxRssMB: maxRssMB() };
      }
      default:
        throw new Error(`unknown command ${String(cmd.cmd)}`);
    }
  });
}

main().catch((err: unknown) => {
  process.stderr.write(`pipeline-case: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
