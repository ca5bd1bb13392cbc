/**
 * The models npm install derives (scripts/derive-models.mjs): the installed files are the ones the
 * manifest records, and deriving them again from the published model gives the same bytes, so every
 * install runs the model that bench:quality measured.
 */
import { createHash } from 'node:crypto';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain ESM script without type declarations
import { deriveModels } from '../../scripts/derive-models.mjs';
import { REPO_ROOT } from '../helpers/paths.js';

const modelsDir = join(REPO_ROOT, 'models');
const manifest = JSON.parse(readFileSync(join(modelsDir, 'manifest.json'), 'utf8')) as {
  default: string;
  models: Record<string, { file: string; sha256: string; derive?: { from: string; steps: string[] }; family: string; dynamic?: boolean }>;
};
const derived = Object.entries(manifest.models).filter(([, m]) => m.derive);
const sha256 = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');
const scratch = mkdtempSync(join(tmpdir(), 'bgone-derive-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('derived models', () => {
  it('the default is the int8 model, derived from the published float16 one, with a dynamic input size', () => {
    const entry = manifest.models[manifest.default]!;
    expect(entry.derive).toEqual(
      expect.objectContaining({ from: 'medium-fp16', steps: expect.arrayContaining(['float32', 'matte-only', 'int8', 'dynamic-size']) }),
    );
    expect(entry.dynamic).toBe(true);
    expect(entry.family).toBe('isnet');
  });

  it.each(derived)('%s: the installed file has the sha256 the manifest records', (_, entry) => {
    expect(sha256(join(modelsDir, entry.file))).toBe(entry.sha256);
  });

  it('deriving again from the published model gives the same bytes', () => {
    mkdirSync(join(scratch, 'calibration'));
    cpSync(join(modelsDir, 'manifest.json'), join(scratch, 'manifest.json'));
    cpSync(join(modelsDir, 'calibration'), join(scratch, 'calibration'), { recursive: true });
    for (const from of new Set(derived.map(([, entry]) => entry.derive!.from))) {
      const file = manifest.models[from]!.file;
      symlinkSync(join(modelsDir, file), join(scratch, file));
    }
    deriveModels({ dir: scratch, only: derived.map(([name]) => name) });
    for (const [, entry] of derived) expect(sha256(join(scratch, entry.file))).toBe(entry.sha256);
  });
});
