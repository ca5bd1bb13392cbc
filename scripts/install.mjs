// `npm install` entry point: fetch the published model weights, derive our models from them, then make sure a native addon loads,
// compiling it only when no prebuild (or earlier build) matches this platform.

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildNative } from './build-native.mjs';
import { deriveModels, sourcesOf } from './derive-models.mjs';
import { fetchModels } from './fetch-models.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);

const manifest = JSON.parse(readFileSync(join(root, 'models', 'manifest.json'), 'utf8'));
const only = process.env.BGONE_MODELS ? process.env.BGONE_MODELS.split(',') : undefined;
fetchModels({ only: only && sourcesOf(manifest, only) });
deriveModels({ only });

let loadable = false;
if (!process.env.BGONE_FORCE_BUILD) {
  try {
    require('node-gyp-build').path(root);
    loadable = true;
  } catch {
    loadable = false;
  }
}
if (!loadable) buildNative();
