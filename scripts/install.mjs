// `npm install` entry point, both in a clone and as another project's dependency:
// 1. the models in use: the manifest's default, or the names in BGONE_MODELS (comma-separated),
//    fetched from the npm registry and derived (scripts/models.mjs); `bgone models add` adds more;
// 2. the native addon: the prebuild shipped in prebuilds/ when it loads on this platform, else a
//    compile from source, which the output says, with why.
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildNative } from './build-native.mjs';
import { addModels, readManifest, requestedModels } from './models.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);

addModels(requestedModels(readManifest()));

/** The addon node-gyp-build would load, if it loads here (libvips found, this libc); else why not. */
function loadableAddon() {
  let path;
  try {
    path = require('node-gyp-build').path(root);
  } catch {
    return { why: `no prebuilt addon for ${process.platform}-${process.arch} in prebuilds/` };
  }
  try {
    require(path);
    return { path };
  } catch (err) {
    return { why: `${relative(root, path)} does not load here (${err.message.split('\n')[0]})` };
  }
}

const found = process.env.BGONE_FORCE_BUILD ? { why: 'BGONE_FORCE_BUILD is set' } : loadableAddon();
if (found.path) {
  const from = relative(root, found.path);
  console.log(`bgone: native addon ${from}${from.startsWith('prebuilds') ? ' (prebuilt: nothing to compile)' : ''}`);
} else {
  console.log(`bgone: compiling the native addon from source (cmake, a C++17 compiler): ${found.why}`);
  buildNative();
  console.log(`bgone: native addon ${relative(root, join(dirname(require('node-gyp-build').path(root))))}/ compiled`);
}
