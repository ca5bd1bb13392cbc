/**
 * The model manifest and model lookup (src/lib/models.ts) in a models folder set with configure():
 * an unknown model is a validation_error; a missing or malformed manifest and a missing model file
 * are internal_error naming the file. Nothing here loads the addon or a model (those failures are
 * in test/lib/errors.test.ts).
 */
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { expectBgoneError, expectThrowsBgone } from '../helpers/assert.js';
import { configure, DEFAULT_SETTINGS, type Manifest, modelNames, preloadModel, readManifest, removeBackground } from '../helpers/bgone.js';
import { REPO_ROOT } from '../helpers/paths.js';

const shipped = JSON.parse(readFileSync(join(REPO_ROOT, 'models', 'manifest.json'), 'utf8')) as Manifest;
const root = mkdtempSync(join(tmpdir(), 'bgone-models-'));
let folders = 0;

/** A models folder holding `manifest` (an object, or raw text) and nothing else. */
function modelsDir(manifest: unknown): string {
  const dir = join(root, String(folders++));
  mkdirSync(dir);
  writeFileSync(join(dir, 'manifest.json'), typeof manifest === 'string' ? manifest : JSON.stringify(manifest));
  return dir;
}

afterEach(() => {
  configure(DEFAULT_SETTINGS);
});
afterAll(() => {
  rmSync(root, { recursive: true });
});

describe('the manifest follows the configured models folder', () => {
  it('the shipped folder lists medium (the default, int8), its float32 and published float16 forms, and small', () => {
    expect(readManifest().default).toBe('medium');
    expect(modelNames().sort()).toEqual(['medium', 'medium-fp16', 'medium-fp32', 'small']);
  });

  it('another folder, then back', () => {
    const only = { default: 'tiny', models: { tiny: { ...shipped.models.small!, file: 'tiny.onnx' } } };
    configure({ modelsDir: modelsDir(only) });
    expect(modelNames()).toEqual(['tiny']);
    configure(DEFAULT_SETTINGS);
    expect(modelNames().sort()).toEqual(['medium', 'medium-fp16', 'medium-fp32', 'small']);
  });
});

describe('an unknown model name: validation_error listing the models of the folder', () => {
  it.each(['no-such-model', 'constructor', '__proto__'])('%j', async (model) => {
    const error = await expectBgoneError(preloadModel(model), 'validation_error');
    expect(error.details).toEqual({ field: 'model', allowed: ['medium', 'medium-fp32', 'medium-fp16', 'small'] });
  });
});

describe('a listed model whose file is missing: internal_error naming the model and the file', () => {
  it('preloadModel and removeBackground', async () => {
    const dir = modelsDir({ default: 'medium', models: { medium: shipped.models.medium } });
    configure({ modelsDir: dir });
    const path = join(dir, shipped.models.medium!.file);
    for (const attempt of [preloadModel(), removeBackground(Buffer.from([0xff, 0xd8, 0xff]))]) {
      const error = await expectBgoneError(attempt, 'internal_error');
      expect(error.message).toBe(`Model medium is not installed: ${path} does not exist. Install it with "npx bgone models add medium".`);
      expect(error.details).toEqual({ component: 'models', model: 'medium', path });
    }
  });
});

describe('a missing or malformed manifest: internal_error naming the manifest', () => {
  const medium = shipped.models.medium!;
  it.each([
    ['not JSON', '{"default": "medium",', /could not be read as JSON/],
    ['no models', { default: 'medium' }, /has no "models" object/],
    ['a default that is not listed', { default: 'large', models: { medium } }, /"default" is not one of the listed models/],
    ['a file with a path', { default: 'medium', models: { medium: { ...medium, file: '../isnet.onnx' } } }, /models\.medium\.file/],
    ['no family', { default: 'medium', models: { medium: { ...medium, family: undefined } } }, /models\.medium\.family/],
    ['an unknown family', { default: 'medium', models: { medium: { ...medium, family: 'sam' } } }, /models\.medium\.family/],
    ['a dynamic flag that is not a boolean', { default: 'medium', models: { medium: { ...medium, dynamic: 'yes' } } }, /models\.medium\.dynamic/],
  ])('%s', async (_, manifest, problem) => {
    const dir = modelsDir(manifest);
    configure({ modelsDir: dir });
    const error = expectThrowsBgone(() => readManifest(), 'internal_error');
    expect(error.message).toContain(join(dir, 'manifest.json'));
    expect(error.message).toMatch(problem);
    await expectBgoneError(preloadModel(), 'internal_error');
    await expectBgoneError(removeBackground(Buffer.from([0xff, 0xd8, 0xff])), 'internal_error');
  });

  it('a folder without manifest.json', async () => {
    const dir = join(root, 'empty');
    mkdirSync(dir);
    configure({ modelsDir: dir });
    const error = await expectBgoneError(preloadModel(), 'internal_error');
    expect(error.message).toBe(`The model manifest ${join(dir, 'manifest.json')} could not be read as JSON.`);
    expect(error.detail).toMatch(/ENOENT/);
  });

  it('a failed read is not remembered: a manifest fixed in place is read on the next call', () => {
    const dir = modelsDir('oops');
    configure({ modelsDir: dir });
    expectThrowsBgone(() => readManifest(), 'internal_error');
    copyFileSync(join(REPO_ROOT, 'models', 'manifest.json'), join(dir, 'manifest.json'));
    expect(modelNames().sort()).toEqual(['medium', 'medium-fp16', 'medium-fp32', 'small']);
  });
});
