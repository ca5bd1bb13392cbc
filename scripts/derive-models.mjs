// Builds the models that models/manifest.json lists with a "derive" recipe from the published model
// they name, with our own graph tooling (scripts/model-tools): float32 weights without the casts,
// only the matte output, a symbolic input size, and static int8 quantization with the committed
// calibration ranges. Deterministic: the same published file and recipe give the same bytes, whose
// sha256 the manifest records.
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { keepOutputs, loadModel, saveModel, symbolicSpatialInput } from './model-tools/onnx-graph.mjs';
import { quantizeStatic } from './model-tools/quantize.mjs';
import { convertToFloat32 } from './model-tools/to-fp32.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const defaultModelsDir = join(root, 'models');

const sha256 = (path) => createHash('sha256').update(readFileSync(path)).digest('hex');

/** The published models a derived one needs, for fetchModels' `only`. */
export function sourcesOf(manifest, names) {
  return names.flatMap((name) => [name, ...(manifest.models[name]?.derive ? [manifest.models[name].derive.from] : [])]);
}

function applyStep(model, step, recipe, modelsDir) {
  switch (step) {
    case 'float32':
      convertToFloat32(model.graph);
      return;
    case 'matte-only':
      // The matte is the graph's first output (family isnet, src/lib/model-families.ts).
      keepOutputs(model.graph, [model.graph.output[0].name]);
      return;
    case 'dynamic-size':
      symbolicSpatialInput(model.graph, model.graph.input[0].name);
      return;
    case 'int8': {
      const calibration = JSON.parse(readFileSync(join(modelsDir, recipe.calibration), 'utf8'));
      const ranges = Object.fromEntries(Object.entries(calibration.ranges).map(([name, r]) => [name, [r[0], r[1]]]));
      quantizeStatic(model, ranges, { floatTensors: recipe.keepFloat ?? [] });
      return;
    }
    default:
      throw new Error(`unknown derive step ${step}`);
  }
}

/** dir: the models folder (its manifest, calibration files and published models); only: model names. */
export function deriveModels({ only, dir = defaultModelsDir } = {}) {
  const modelsDir = dir;
  const manifest = JSON.parse(readFileSync(join(modelsDir, 'manifest.json'), 'utf8'));
  for (const [name, entry] of Object.entries(manifest.models)) {
    const recipe = entry.derive;
    if (!recipe || (only && !only.includes(name))) continue;
    const target = join(modelsDir, entry.file);
    if (existsSync(target) && sha256(target) === entry.sha256) continue;
    const from = manifest.models[recipe.from];
    if (!from) throw new Error(`model ${name} derives from ${recipe.from}, which the manifest does not list`);
    const started = Date.now();
    const model = loadModel(join(modelsDir, from.file));
    for (const step of recipe.steps) applyStep(model, step, recipe, modelsDir);
    model.producerName = 'bgone scripts/derive-models.mjs';
    const bytes = saveModel(model, target);
    const digest = sha256(target);
    // A different digest means the tooling or its inputs changed: the model still works, but the
    // manifest should record the new one (it is how an install knows the file is current).
    const note = digest === entry.sha256 ? 'sha256 ok' : `sha256 ${digest} differs from the manifest's ${entry.sha256}`;
    console.log(
      `bgone: model ${name} -> models/${entry.file} (${bytes} bytes from ${recipe.from}: ${recipe.steps.join(', ')}; ${Date.now() - started} ms; ${note})`,
    );
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) deriveModels();
