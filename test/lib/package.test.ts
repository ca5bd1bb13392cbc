/**
 * The library run straight from its TypeScript sources (src/lib/index.ts), as vitest, tsx or
 * ts-node do, must find its native addon and its models like the compiled package does
 * (src/lib/package-root.ts locates the package root from its own file, in src/lib/ or dist/src/lib/).
 */
import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PHOTOS } from '../helpers/constants.js';
import { REPO_ROOT, readPhoto } from '../helpers/paths.js';

describe('running from source', () => {
  it('src/lib/index.ts loads the addon and the default model and removes a background', async () => {
    const src = await import('../../src/lib/index.js');
    const result = await src.removeBackground(readPhoto(PHOTOS.teddy), { size: 'preview' });
    expect({ width: result.width, height: result.height, channels: result.channels }).toEqual({ width: 284, height: 398, channels: 4 });
  });
});

describe('installed without a native build', () => {
  it('every call answers BgoneError internal_error saying how to fix it, and the process keeps running', () => {
    // The compiled library (global setup builds dist/) copied into a package of its own, which has
    // no build/Release and no prebuilds/: what a failed install leaves. Its dependencies resolve from
    // the repository's node_modules.
    const pkg = mkdtempSync(join(REPO_ROOT, 'dist', 'no-addon-'));
    try {
      cpSync(join(REPO_ROOT, 'dist', 'src', 'lib'), join(pkg, 'src', 'lib'), { recursive: true });
      writeFileSync(join(pkg, 'package.json'), JSON.stringify({ name: 'bgone-no-addon', type: 'module' }));
      const script = `
        const lib = await import(${JSON.stringify(join(pkg, 'src', 'lib', 'index.js'))});
        lib.configure({ modelsDir: ${JSON.stringify(join(REPO_ROOT, 'models'))} });
        const seen = [];
        const record = (e) => seen.push({ bgone: e instanceof lib.BgoneError, code: e.code, message: e.message, detail: e.detail });
        await lib.removeBackground(Buffer.from([0xff, 0xd8, 0xff])).catch(record);
        await lib.preloadModel().catch(record);
        try { lib.nativeVersions(); } catch (e) { record(e); }
        console.log(JSON.stringify({ seen, alive: true }));
      `;
      const out = JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' })) as {
        seen: Array<{ bgone: boolean; code: string; message: string; detail: string }>;
        alive: boolean;
      };
      expect(out.alive).toBe(true);
      expect(out.seen).toHaveLength(3);
      for (const error of out.seen) {
        expect(error).toMatchObject({
          bgone: true,
          code: 'internal_error',
          message: 'The bgone native core could not be loaded: reinstall the package or rebuild it with "npm run build:native".',
        });
        expect(error.detail).toMatch(/No native build was found/);
      }
    } finally {
      rmSync(pkg, { recursive: true, force: true });
    }
  });
});
