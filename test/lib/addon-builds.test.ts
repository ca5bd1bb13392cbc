/**
 * The native addon's two builds (CMakeLists.txt): bgone.node, which every CPU runs, and on x86-64
 * Linux bgone.avx2.addon, the same sources for AVX2, which the addonBuild setting's 'auto' (the
 * default) loads where /proc/cpuinfo lists avx2. The AVX2 build is compiled without fused
 * multiply-adds so that it rounds as the baseline does: both must give the same bytes, for every
 * path through the pipeline (shrink-on-load at 12 MP, blur fusion at a working resolution above
 * 1 MP, an upload's own alpha, crop, each format, no refine). A process starts one build for good, so the
 * baseline runs in a child process.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addonFile, addonFileInUse, cpuRunsAvx2 } from '../../src/lib/native.js';
import { expectThrowsBgone } from '../helpers/assert.js';
import { configure, DEFAULT_SETTINGS, removeBackground } from '../helpers/bgone.js';
import { PHOTOS } from '../helpers/constants.js';
import { fixturePath, photoPath, REPO_ROOT } from '../helpers/paths.js';

const run = promisify(execFile);
const LIBRARY = join(REPO_ROOT, 'dist', 'src', 'lib', 'index.js');
const AVX2_PLATFORM = process.platform === 'linux' && process.arch === 'x64';
const CPU_RUNS_AVX2 = cpuRunsAvx2();

/** Input file and options: one job of each path the two builds could compute differently. */
const JOBS: Array<[string, string, Record<string, unknown>]> = [
  ['12 MP JPEG (shrink-on-load), full size PNG', fixturePath('swan-12mp.jpg'), { format: 'png' }],
  ['5 MP JPEG (under twice the model side: one full decode), full size PNG', fixturePath('swan-big.jpg'), { format: 'png' }],
  ['small JPEG, PNG', photoPath(PHOTOS.teddy), { format: 'png' }],
  ['crop to the subject, WebP', photoPath(PHOTOS.llama), { crop: true, format: 'webp' }],
  ['an RGBA upload, its alpha kept', fixturePath('alpha.png'), { format: 'png' }],
  ['JPEG on a colour', photoPath(PHOTOS.book), { format: 'jpg', bgColor: '#00ff00' }],
  ['no refine, preview size', photoPath(PHOTOS.swan), { refine: false, size: 'preview' }],
  [
    'the effects: a drop shadow on a colour, the interior opaque, despill',
    photoPath(PHOTOS.book),
    {
      shadow: 'drop',
      semitransparency: false,
      despill: true,
      bgColor: '#ffffff',
    },
  ],
  ['a contact shadow, zip', photoPath(PHOTOS.llama), { shadow: 'contact', format: 'zip' }],
];

const sha1 = (data: Uint8Array) => createHash('sha1').update(data).digest('hex');

/** Runs JOBS in a fresh process under `addonBuild`: the addon file it loaded and each output's sha1. */
async function inChild(addonBuild: string): Promise<{ addon: string; hashes: string[] }> {
  const script = `
    import { readFileSync } from 'node:fs';
    import { createHash } from 'node:crypto';
    import { addonFileInUse, configure, removeBackground } from ${JSON.stringify(LIBRARY)};
    configure({ addonBuild: ${JSON.stringify(addonBuild)} });
    const hashes = [];
    for (const [, file, options] of ${JSON.stringify(JOBS)}) {
      const result = await removeBackground(readFileSync(file), options);
      hashes.push(createHash('sha1').update(result.data).digest('hex'));
    }
    console.log(JSON.stringify({ addon: addonFileInUse(), hashes }));`;
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: REPO_ROOT, maxBuffer: 1 << 20 });
  return JSON.parse(stdout) as { addon: string; hashes: string[] };
}

afterAll(() => configure(DEFAULT_SETTINGS));

describe.skipIf(!AVX2_PLATFORM)('on x86-64 Linux', () => {
  const hashes: string[] = [];

  beforeAll(async () => {
    for (const [, file, options] of JOBS) hashes.push(sha1((await removeBackground(readFileSync(file), options)).data));
  }, 120_000);

  it('the build holds both addons, side by side', () => {
    const baseline = addonFile('baseline');
    expect(baseline).toMatch(/bgone(\.glibc)?\.node$/);
    expect(existsSync(baseline.replace(/\.node$/, '.avx2.addon'))).toBe(true);
  });

  it(`'auto' (the default) loaded the ${CPU_RUNS_AVX2 ? 'AVX2' : 'baseline'} build, as this CPU's flags say`, () => {
    expect(addonFileInUse()).toBe(addonFile('auto'));
    expect(addonFileInUse()!.endsWith('.avx2.addon')).toBe(CPU_RUNS_AVX2);
  });

  it('the baseline build gives the same bytes for every job', async () => {
    const child = await inChild('baseline');
    expect(child.addon).toBe(addonFile('baseline'));
    expect(child.hashes).toEqual(hashes);
  }, 120_000);

  it('addonBuild cannot change once the native core has started, and the refusal changes nothing', () => {
    const inUse = addonFileInUse()!;
    const other = inUse.endsWith('.avx2.addon') ? 'baseline' : 'auto';
    if (addonFile(other) === inUse) return; // a CPU without AVX2: both choices name the same file
    const error = expectThrowsBgone(() => configure({ addonBuild: other }), 'validation_error');
    expect(error.details).toMatchObject({ field: 'addonBuild' });
    expect(error.message).toBe(`addonBuild cannot change once the native core has started (it uses ${inUse}).`);
    expect(addonFileInUse()).toBe(inUse);
  });
});
