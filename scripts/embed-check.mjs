#!/usr/bin/env node
/**
 * `npm run test:embed` (CI's `embed` suite): bgone as another project installs it.
 *   1. `npm pack` here (prepack builds the prebuild), and what the tarball holds;
 *   2. `npm install <tarball>` into a fresh project in a temporary folder, from the npm registry
 *      only, with no environment knob: the addon must come from prebuilds/ and nothing compile;
 *   3. only the default model installed, and a clear error naming `bgone models add` for another;
 *   4. tsc compiles test/embed/server.ts (docs/embedding.md's example) against the public types;
 *   5. that server answers a real 2 MP JPEG with the cut-out, and a text file with 415;
 *   6. in a second project that pins another libvips build, bgone's own (nested) is found.
 * Prints the install seconds, node_modules MB and the tarball's file count, then
 * `N passed, N failed` as its last line; exits 1 if any check failed.
 */
import { execFileSync, spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(join(root, 'package.json'));
const results = [];
const check = (name, ok, detail = '') => {
  results.push(ok);
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${name}${detail ? `: ${detail}` : ''}`);
};

/** The environment of a user's shell: none of the variables `npm run` adds for this script. */
const cleanEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_|^INIT_CWD$/i.test(k)));
const run = (cmd, args, cwd, env = cleanEnv) => execFileSync(cmd, args, { cwd, env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 << 20 });
const du = (dir) => Number(run('du', ['-sm', dir], root).split('\t')[0]);

const work = mkdtempSync(join(tmpdir(), 'bgone-embed-'));
let server;
try {
  // 1. The tarball.
  console.log('embed: npm pack (prepack builds the prebuild)');
  // The lifecycle scripts' output comes first on stdout; the JSON report is the last thing, from a "[" line.
  const packOutput = run('npm', ['pack', '--json', '--pack-destination', work], root, process.env);
  const packed = JSON.parse(packOutput.slice(packOutput.startsWith('[\n') ? 0 : packOutput.lastIndexOf('\n[\n') + 1))[0];
  const tarball = join(work, packed.filename);
  const files = packed.files.map((f) => f.path);
  const devFiles = files.filter((f) => /^(test|bench|\.ci|\.github)\//.test(f) || /^(vitest[^/]*|biome\.json|tsconfig\.json|\.clang-format)$/.test(f));
  check('the tarball holds no test, bench, CI or dev-config file', devFiles.length === 0, devFiles.slice(0, 5).join(', '));
  const prebuild = `prebuilds/${process.platform}-${process.arch}`;
  check(
    'the tarball holds the prebuilt addon and its ONNX Runtime',
    files.includes(`${prebuild}/bgone.glibc.node`) && files.includes(`${prebuild}/libonnxruntime.so.1`),
  );
  check('the tarball holds no model weights', !files.some((f) => f.endsWith('.onnx')));
  const withAvx2 = process.platform === 'linux' && process.arch === 'x64';
  if (withAvx2) check('the tarball holds the AVX2 build beside the addon', files.includes(`${prebuild}/bgone.glibc.avx2.addon`));

  // 2. The install, as a user would do it.
  const app = join(work, 'app');
  execFileSync('mkdir', [app]);
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'embed-check', private: true, type: 'module' }));
  const started = Date.now();
  let log = '';
  let installed = false;
  try {
    log = run('npm', ['install', '--foreground-scripts', '--no-audit', '--no-fund', tarball], app);
    installed = true;
  } catch (err) {
    log = `${err.stdout ?? ''}${err.stderr ?? ''}`;
  }
  const installSeconds = (Date.now() - started) / 1000;
  console.log(
    log
      .trim()
      .split('\n')
      .map((l) => `  | ${l}`)
      .join('\n'),
  );
  check('npm install <tarball> succeeds with the registry only', installed);
  const pkg = join(app, 'node_modules', 'bgone');
  check(
    'the addon came from prebuilds/: nothing compiled',
    /prebuilt: nothing to compile/.test(log) && !/compiling|gyp info|cmake/i.test(log) && !existsSync(join(pkg, 'build')),
  );
  const models = existsSync(join(pkg, 'models')) ? readdirSync(join(pkg, 'models')).filter((f) => f.endsWith('.onnx')) : [];
  check('only the default model is installed', models.length === 1 && models[0] === 'isnet-medium-int8.onnx', models.join(', '));

  // 3. Asking for a model that is not installed names the command that adds it.
  const missing = run(
    'node',
    [
      '--input-type=module',
      '-e',
      `
    import { removeBackground } from 'bgone';
    try { await removeBackground(Buffer.from([1]), { model: 'small' }); } catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message })); }`,
    ],
    app,
  );
  check('a missing model is an error naming `bgone models add`', /"code":"internal_error".*bgone models add small/.test(missing), missing.trim());

  // 4. The example compiles against the package's types.
  copyFileSync(join(root, 'test', 'embed', 'server.ts'), join(app, 'server.ts'));
  writeFileSync(
    join(app, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'ES2022',
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        strict: true,
        outDir: 'dist',
        types: ['node'],
        typeRoots: [join(root, 'node_modules', '@types')],
      },
      files: ['server.ts'],
    }),
  );
  let compiled = true;
  try {
    run(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', 'tsconfig.json'], app);
  } catch (err) {
    compiled = false;
    console.log(err.stdout);
  }
  check('tsc compiles the embedding example against the public types', compiled);

  // 5. The example serves a real 2 MP photo.
  const sharp = require('sharp');
  const photo = await sharp(join(root, 'test', 'photos', 'images', 'davis_blackswan_00025.jpg'))
    .resize(1920, 1080)
    .jpeg({ quality: 90 })
    .toBuffer();
  server = spawn(process.execPath, ['dist/server.js'], { cwd: app, env: cleanEnv, stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise((resolve, reject) => {
    server.stdout.on('data', (d) => {
      const m = /listening on (\d+)/.exec(String(d));
      if (m) resolve(Number(m[1]));
    });
    server.on('exit', (code) => reject(new Error(`the example exited with ${code}`)));
  });
  const t0 = Date.now();
  const res = await fetch(`http://127.0.0.1:${port}/`, { method: 'POST', body: photo });
  const body = Buffer.from(await res.arrayBuffer());
  const meta = res.ok ? await sharp(body).metadata() : {};
  check(
    'removeBackground on a 2 MP JPEG answers a 1920x1080 RGBA PNG',
    res.status === 200 && meta.format === 'png' && meta.width === 1920 && meta.height === 1080 && meta.channels === 4,
    `${res.status} in ${Date.now() - t0} ms`,
  );
  const bad = await fetch(`http://127.0.0.1:${port}/`, { method: 'POST', body: 'not an image' });
  check('a text file is 415 unsupported_media_type', bad.status === 415 && (await bad.json()).error.code === 'unsupported_media_type');

  // 6. libvips nested: an app that pins another libvips build keeps it at the top, so npm nests
  // bgone's own under node_modules/bgone/node_modules, which the addon's RUNPATH must find too.
  const nestedApp = join(work, 'nested');
  execFileSync('mkdir', [nestedApp]);
  writeFileSync(join(nestedApp, 'package.json'), JSON.stringify({ name: 'embed-check-nested', private: true, type: 'module' }));
  run('npm', ['install', '--no-audit', '--no-fund', '@img/sharp-libvips-linux-x64@1.3.3', tarball], nestedApp);
  const nestedLib = join(nestedApp, 'node_modules', 'bgone', 'node_modules', '@img', 'sharp-libvips-linux-x64');
  const nestedRun = run(
    'node',
    [
      '--input-type=module',
      '-e',
      `
    import { addonFileInUse, removeBackground, nativeVersions } from 'bgone';
    const png = Buffer.from(${JSON.stringify(readFileSync(join(root, 'test', 'photos', 'images', 'gc_teddy.jpg')).toString('base64'))}, 'base64');
    const r = await removeBackground(png, { size: 'preview' });
    console.log(JSON.stringify({ width: r.width, vips: nativeVersions().vips, addon: addonFileInUse() }));`,
    ],
    nestedApp,
  );
  check(
    'libvips nested under bgone (the app pins another build) is found by RUNPATH',
    existsSync(nestedLib) && /"width":284,"vips":"8\.18\.7"/.test(nestedRun),
    nestedRun.trim(),
  );
  if (withAvx2 && /^flags\s*:.*\bavx2\b/m.test(readFileSync('/proc/cpuinfo', 'utf8'))) {
    check(
      'on a CPU with AVX2 the prebuilt AVX2 build is the one loaded',
      /"addon":"[^"]*prebuilds[^"]*bgone\.glibc\.avx2\.addon"/.test(nestedRun),
      nestedRun.trim(),
    );
  }

  console.log(
    `embed: install ${installSeconds.toFixed(1)} s; node_modules ${du(join(app, 'node_modules'))} MB; tarball ${files.length} files, ${(packed.size / 1e6).toFixed(1)} MB packed, ${(packed.unpackedSize / 1e6).toFixed(1)} MB unpacked`,
  );
} catch (err) {
  check('the embed check ran to its end', false, err.stack);
} finally {
  server?.kill();
  rmSync(work, { recursive: true, force: true });
}
const failed = results.filter((ok) => !ok).length;
console.log(`${results.length - failed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
