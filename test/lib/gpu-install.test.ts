/**
 * `bgone gpu install --dry-run` through the real CLI process: it prints the plan (src/cli/gpu.ts)
 * and downloads nothing. The plan and the placing of the libraries: test/unit/gpu-install.test.ts.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli-process.js';
import { REPO_ROOT } from '../helpers/paths.js';

const work = mkdtempSync(join(tmpdir(), 'bgone-gpu-cli-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('bgone gpu install --dry-run', () => {
  it('prints the plan and downloads nothing', async () => {
    const dir = join(work, 'dry');
    const run = await runCli(REPO_ROOT, ['gpu', 'install', '--dry-run', '--dir', dir]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain('bgone gpu install would (nothing is downloaded with --dry-run):');
    expect(run.stdout).toContain(`npm install --prefix ${dir} `);
    expect(run.stdout).toContain(`BGONE_ORT_LIBRARY=${join(dir, 'lib', 'libonnxruntime.so')} BGONE_EXECUTION_PROVIDER=cuda`);
    expect(existsSync(dir)).toBe(false);
  });
});
