#!/usr/bin/env node
// prebuildify only knows how to drive node-gyp: it calls `<node-gyp> rebuild --target=... --release`.
// This stand-in answers that call with a cmake-js rebuild of the addon (build/Release/bgone.node),
// which prebuildify then copies into prebuilds/<platform>-<arch>/.
import { buildNative } from './build-native.mjs';

if (process.argv[2] !== 'rebuild') {
  console.error(`node-gyp-shim: only "rebuild" is supported (got ${process.argv.slice(2).join(' ')})`);
  process.exit(1);
}
buildNative({ rebuild: true });
