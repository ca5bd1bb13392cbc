/**
 * "Images are processed in memory": no file may be created while processing, not even a temporary
 * one deleted afterwards. TMPDIR points at an empty directory of our own before the addon (and
 * libvips, which reads TMPDIR once) is loaded: this file runs in its own process (pool "forks"), and
 * the library and sharp are imported dynamically below, after the assignment. Both that directory
 * and the system temp directory are watched during the call, so files that come and go are caught.
 *
 * The first test covers start-up (loading the addon, ONNX Runtime and the model), with HOME also
 * pointed at an empty directory (a per-user cache is a disk write too); the second one covers the
 * processing of an image once started.
 *
 * The input is the largest accepted image, 6000 x 6000: 108 MB decoded, above the 100 MB beyond
 * which libvips by default decodes to a temporary file.
 */
import { existsSync, type FSWatcher, mkdtempSync, readdirSync, rmSync, unlinkSync, watch, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { HUGE } from '../helpers/constants.js';
import { readFixture } from '../helpers/paths.js';

const systemTmp = existsSync('/tmp') ? '/tmp' : tmpdir(); // where libvips would put vips-*.v by default
const ownTmp = mkdtempSync(join(tmpdir(), 'bgone-no-disk-'));
const ownHome = mkdtempSync(join(tmpdir(), 'bgone-no-disk-home-'));
process.env.TMPDIR = ownTmp;
process.env.HOME = ownHome;
delete process.env.XDG_CACHE_HOME;
// Behave like a production server, not like a CI job: ONNX Runtime's telemetry stays silent when it
// detects CI (or its own unit tests) from these variables, which would hide what it writes in
// production. ORT_DISABLE_TELEMETRY is removed too: the library must not rely on the operator
// setting it.
for (const name of [
  'CI',
  'TF_BUILD',
  'GITHUB_ACTIONS',
  'GITLAB_CI',
  'JENKINS_URL',
  'TRAVIS',
  'CIRCLECI',
  'BUILDKITE',
  'TEAMCITY_VERSION',
  'APPVEYOR',
  'CODEBUILD_BUILD_ID',
  'BITBUCKET_BUILD_NUMBER',
  'SYSTEM_TEAMFOUNDATIONCOLLECTIONURI',
  'ORT_RUNNING_UNIT_TESTS',
  'ORT_DISABLE_TELEMETRY',
]) {
  delete process.env[name];
}

afterAll(() => {
  rmSync(ownTmp, { recursive: true, force: true });
  rmSync(ownHome, { recursive: true, force: true });
});

/** Every file and directory under `dir`, relative to it. */
function listTree(dir: string): string[] {
  return (readdirSync(dir, { recursive: true }) as string[]).map(String).sort();
}

/** Records every name created or removed in `dir` (inotify) until stopped. */
function record(dir: string, filter: (name: string) => boolean = () => true): { seen: string[]; watcher: FSWatcher } {
  const seen: string[] = [];
  const watcher = watch(dir, (_event, name) => {
    if (name && filter(String(name))) seen.push(String(name));
  });
  return { seen, watcher };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 200));
const isVips = (name: string) => /^vips-/.test(name);

it('loading the library (libvips, ONNX Runtime, the model) writes no file: nothing in TMPDIR, nothing in HOME', async () => {
  const own = record(ownTmp);
  const { preloadModel, nativeVersions } = await import('../helpers/bgone.js');
  nativeVersions();
  await preloadModel();
  await settle();
  own.watcher.close();
  expect(own.seen).toEqual([]);
  expect(listTree(ownTmp)).toEqual([]);
  expect(listTree(ownHome)).toEqual([]);
});

it('processing a 6000 x 6000 JPEG creates no file, not even a temporary one', async () => {
  const input = readFixture('book-huge.jpg');
  const { removeBackground } = await import('../helpers/bgone.js');
  // Whatever the start-up wrote (the test above checks that) is not this test's concern.
  await removeBackground(readFixture('orient-1.jpg'), { size: 'preview' });
  const ownBefore = readdirSync(ownTmp);
  const vipsBefore = readdirSync(systemTmp).filter(isVips);

  const own = record(ownTmp);
  const system = record(systemTmp, isVips);
  // The watchers work: a probe file is seen (so an empty list below means something).
  writeFileSync(join(ownTmp, 'probe'), 'x');
  unlinkSync(join(ownTmp, 'probe'));
  await settle();
  expect(own.seen).toContain('probe');
  own.seen.length = 0;

  const result = await removeBackground(input, { format: 'jpg' });
  await settle();
  own.watcher.close();
  system.watcher.close();

  expect(own.seen).toEqual([]);
  expect(system.seen).toEqual([]);
  expect(readdirSync(ownTmp)).toEqual(ownBefore);
  expect(readdirSync(systemTmp).filter(isVips)).toEqual(vipsBefore);

  // And the job did run at full size: 36 MP scaled into the 16 MP of size=full, square.
  expect(HUGE.width * HUGE.height).toBeGreaterThan(16_000_000);
  expect(result.width).toBe(result.height);
  expect(result.width * result.height).toBeLessThanOrEqual(16_000_000);
  expect(result.width * result.height).toBeGreaterThanOrEqual(0.99 * 16_000_000);
  const sharp = (await import('sharp')).default;
  expect(await sharp(result.data).metadata()).toMatchObject({ format: 'jpeg', width: result.width, height: result.height });
});
