/**
 * Installing models (scripts/models.mjs, behind `npm install` and `bgone models`): which names an
 * install asks for, refusals before anything is fetched, and the CLI over a real models folder (the
 * repository's, where the test setup has installed every model).
 */
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain ESM script without type declarations
import { addModels, listModels, requestedModels } from '../../scripts/models.mjs';
import { runCli } from '../helpers/cli-process.js';
import { REPO_ROOT } from '../helpers/paths.js';

const modelsDir = join(REPO_ROOT, 'models');
const manifest = JSON.parse(readFileSync(join(modelsDir, 'manifest.json'), 'utf8')) as { default: string; models: Record<string, { file: string }> };
const scratch = mkdtempSync(join(tmpdir(), 'bgone-models-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('requestedModels: what npm install installs', () => {
  it('the default model when BGONE_MODELS is unset or empty', () => {
    expect(requestedModels(manifest, {})).toEqual(['medium']);
    expect(requestedModels(manifest, { BGONE_MODELS: ' , ' })).toEqual(['medium']);
  });
  it('the names BGONE_MODELS lists, or every model for "all"', () => {
    expect(requestedModels(manifest, { BGONE_MODELS: 'small, medium-fp32' })).toEqual(['small', 'medium-fp32']);
    expect(requestedModels(manifest, { BGONE_MODELS: 'all' })).toEqual(Object.keys(manifest.models));
  });
});

describe('addModels', () => {
  it('refuses an unknown name before fetching anything', () => {
    const dir = join(scratch, 'empty');
    mkdirSync(dir);
    cpSync(join(modelsDir, 'manifest.json'), join(dir, 'manifest.json'));
    expect(() => addModels(['medium', 'large'], { dir })).toThrow(/unknown model large: the manifest lists medium, medium-fp32, medium-fp16, small/);
    expect(listModels(dir).filter((m: { installed: boolean }) => m.installed)).toEqual([]);
  });
  it('does nothing for models already installed (checked by sha256)', () => {
    expect(addModels(Object.keys(manifest.models), { dir: modelsDir })).toEqual([]);
  });
});

describe('bgone models', () => {
  it('list --json: every model of the manifest, installed, with the default marked', async () => {
    const run = await runCli(scratch, ['models', 'list', '--json']);
    expect(run.code).toBe(0);
    const listed = JSON.parse(run.stdout) as Array<{ name: string; installed: boolean; isDefault: boolean }>;
    expect(listed.map((m) => [m.name, m.installed, m.isDefault])).toEqual([
      ['medium', true, true],
      ['medium-fp32', true, false],
      ['medium-fp16', true, false],
      ['small', true, false],
    ]);
  });
  it('add of installed models says so; add of an unknown one is a usage error (exit 2) naming the known ones', async () => {
    const again = await runCli(scratch, ['models', 'add', 'small']);
    expect([again.code, again.stdout.trim()]).toEqual([0, 'already installed: small']);
    const unknown = await runCli(scratch, ['models', 'add', 'large']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('unknown model large (the manifest lists medium, medium-fp32, medium-fp16, small)');
    const none = await runCli(scratch, ['models', 'add']);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('models add needs at least one model name');
  });
});
