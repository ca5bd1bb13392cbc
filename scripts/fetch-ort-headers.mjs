// Fetches the ONNX Runtime C API headers at build time. The runtime library comes from
// onnxruntime-node, which ships no headers; the only registry package found with them is
// com.github.asus4.onnxruntime (MIT). They go to deps/ (ignored by git), never into the tree.
import { cpSync, existsSync, mkdirSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { packAndExtract } from './npm-pack.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
export const ortIncludeDir = join(root, 'deps', 'onnxruntime', 'include');
const SPEC = 'com.github.asus4.onnxruntime@0.4.9';
const HEADERS_IN_PACKAGE = 'Plugins/iOS~/onnxruntime.xcframework/ios-arm64/onnxruntime.framework/Headers';

export function fetchOrtHeaders() {
  if (existsSync(join(ortIncludeDir, 'onnxruntime_c_api.h'))) return ortIncludeDir;
  console.log(`bgone: fetching ONNX Runtime headers from ${SPEC}`);
  const pkg = packAndExtract(SPEC);
  try {
    const from = join(pkg.dir, HEADERS_IN_PACKAGE);
    mkdirSync(ortIncludeDir, { recursive: true });
    for (const name of readdirSync(from)) if (name.endsWith('.h')) cpSync(join(from, name), join(ortIncludeDir, name));
    cpSync(join(pkg.dir, 'LICENSE'), join(ortIncludeDir, 'LICENSE'));
  } finally {
    pkg.cleanup();
  }
  return ortIncludeDir;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) fetchOrtHeaders();
