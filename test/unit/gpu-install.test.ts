/**
 * `bgone gpu install` (src/cli/gpu.ts) without the network: its plan (the two npm packages, the npm
 * command line, where each library goes, what to set) and the placing of the libraries from
 * packages laid out as the registry's are (files written here stand in for the 400 MB of
 * libraries). The dry run through the CLI: test/lib/gpu-install.test.ts.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DEFAULT_GPU_DIR, describePlan, gpuInstallPlan, placeLibraries } from '../../src/cli/gpu.js';

const work = mkdtempSync(join(tmpdir(), 'bgone-gpu-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('the plan', () => {
  it('installs the 1.29 core and its GPU providers, both 0.4.9, by npm into the folder, without install scripts', () => {
    const plan = gpuInstallPlan(join(work, 'a'));
    expect(plan.dir).toBe(join(work, 'a'));
    expect(plan.packages).toEqual(['com.github.asus4.onnxruntime@0.4.9', 'com.github.asus4.onnxruntime.linux-x64-gpu@0.4.9']);
    expect(plan.npmArgs.slice(0, 3)).toEqual(['install', '--prefix', join(work, 'a')]);
    expect(plan.npmArgs).toContain('--ignore-scripts');
    expect(plan.npmArgs).toContain('--no-save');
    expect(plan.npmArgs.slice(-2)).toEqual(plan.packages);
    expect(plan.env).toEqual({ BGONE_ORT_LIBRARY: join(work, 'a', 'lib', 'libonnxruntime.so'), BGONE_EXECUTION_PROVIDER: 'cuda' });
    // The core beside its providers, as ONNX Runtime looks for them.
    expect(new Set(plan.libraries.map((l) => dirname(l.to)))).toEqual(new Set([join(work, 'a', 'lib')]));
    expect(plan.libraries.map((l) => [l.to.split('/').pop(), l.required])).toEqual([
      ['libonnxruntime.so', true],
      ['libonnxruntime_providers_shared.so', true],
      ['libonnxruntime_providers_cuda.so', true],
    ]);
    expect(gpuInstallPlan().dir).toBe(DEFAULT_GPU_DIR);
    expect(describePlan(plan).at(-1)).toMatch(/CUDA 13 .*cuDNN 9/);
  });
});

describe('placeLibraries', () => {
  function packageFile(plan: ReturnType<typeof gpuInstallPlan>, index: number, text: string): void {
    const from = plan.libraries[index]!.from;
    mkdirSync(dirname(from), { recursive: true });
    writeFileSync(from, text);
  }

  it('puts the core and the CUDA provider in lib/, and a second run replaces them', () => {
    const plan = gpuInstallPlan(join(work, 'b'));
    for (const i of [0, 1, 2]) packageFile(plan, i, `library ${i}`);
    expect(placeLibraries(plan)).toEqual(plan.libraries.map((l) => l.to));
    for (const i of [0, 1, 2]) expect(readFileSync(plan.libraries[i]!.to, 'utf8')).toBe(`library ${i}`);
    // A reinstall.
    packageFile(plan, 2, 'cuda provider, again');
    expect(placeLibraries(plan)).toHaveLength(3);
    expect(statSync(plan.libraries[2]!.to).size).toBe('cuda provider, again'.length);
  });

  it('fails naming each required library the packages lack', () => {
    const plan = gpuInstallPlan(join(work, 'c'));
    packageFile(plan, 0, 'core');
    expect(() => placeLibraries(plan)).toThrow(`the installed packages lack ${plan.libraries[1]!.from}, ${plan.libraries[2]!.from}`);
    expect(existsSync(join(work, 'c', 'lib'))).toBe(false);
  });
});
