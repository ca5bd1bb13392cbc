/**
 * An ONNX Runtime core built without CUDA: com.github.asus4.onnxruntime@0.4.9's Linux x64 1.29
 * library, the core of `bgone gpu install` (src/cli/gpu.ts), where the native core loads the CUDA
 * provider as a plugin (native/providers.cc). The package is the one the build takes its headers
 * from, so npm's cache has it; the two files are kept in test/.fixtures/ after the first call.
 */
import { copyFileSync, existsSync, mkdirSync, renameSync } from 'node:fs';
import { join } from 'node:path';
// @ts-expect-error: a plain .mjs build script without types.
import { packAndExtract } from '../../scripts/npm-pack.mjs';
import { REPO_ROOT } from './paths.js';

const SPEC = 'com.github.asus4.onnxruntime@0.4.9';
const IN_PACKAGE = 'Plugins/Linux/x64';
const FILES = ['libonnxruntime.so', 'libonnxruntime_providers_shared.so'];

/** The folder holding the 1.29 core and its libonnxruntime_providers_shared.so. */
export function cpuOnlyOrtFolder(): string {
  const dir = join(REPO_ROOT, 'test', '.fixtures', 'ort-1.29-cpu');
  if (FILES.every((f) => existsSync(join(dir, f)))) return dir;
  const pkg: { dir: string; cleanup(): void } = packAndExtract(
    SPEC,
    FILES.map((f) => `${IN_PACKAGE}/${f}`),
  );
  try {
    mkdirSync(dir, { recursive: true });
    // Renamed into place: the test projects run side by side and may fetch at once.
    for (const f of FILES) {
      const part = join(dir, `${f}.${process.pid}`);
      copyFileSync(join(pkg.dir, IN_PACKAGE, f), part);
      renameSync(part, join(dir, f));
    }
  } finally {
    pkg.cleanup();
  }
  return dir;
}
