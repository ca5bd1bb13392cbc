import { describe, it } from 'vitest';
import { MODEL_FAMILIES, type ModelFamily } from '../../src/lib/model-families.js';
import { expectGeneratedSection } from '../helpers/generated-docs.js';

const IMAGENET_MEAN = [0.485, 0.456, 0.406];
const IMAGENET_STD = [0.229, 0.224, 0.225];
const same = (a: readonly number[], b: readonly number[]) => a.every((v, i) => v === b[i]);
const cell = (text: string) => text.replaceAll('|', '\\|');

/** The tensor a family's exports take, in words: sides, normalisation, batch. */
function inputWords(family: ModelFamily): string {
  const { sides, dynamicSide, scale, mean, std, batch } = family.input;
  const fixed = sides.map((s) => `${s}²`).join(' or ');
  const symbolic = `symbolic: runs at ${dynamicSide}²${family.input.smallerSides.length > 0 ? ' (smaller for small outputs)' : ''}`;
  const v = scale === 1 ? 'v' : `v / ${scale}`;
  const norm =
    same(mean, IMAGENET_MEAN) && same(std, IMAGENET_STD)
      ? `ImageNet mean/std on \`${v}\``
      : mean.every((m) => m === mean[0]) && std.every((s) => s === std[0])
        ? `\`(${v} - ${mean[0]}) / ${std[0]}\``
        : `\`(${v} - [${mean.join(', ')}]) / [${std.join(', ')}]\``;
  return `${fixed}, or ${symbolic}; ${norm}${batch === 'symbolic' ? ', batch symbolic' : ''}`;
}

function outputWords(family: ModelFamily): string {
  const { index, minCount, matte } = family.output;
  return `output ${index}${minCount > 1 ? ` of ${minCount}` : ''}, ${matte === 'as-is' ? 'as is' : matte}`;
}

function familiesMarkdown(): string {
  const rows = Object.values(MODEL_FAMILIES).map(
    (f) => `| \`${f.name}\` | ${cell(f.models)} | ${cell(inputWords(f))} | ${outputWords(f)} | ${cell(f.reference)} | ${cell(f.weights)} |`,
  );
  return ['| family | models | input | matte | reference code | weights published at |', '|---|---|---|---|---|---|', ...rows, ''].join('\n');
}

function exportsMarkdown(): string {
  const rows = Object.values(MODEL_FAMILIES).map((f) => {
    const { int8, fp16, fp32 } = f.precisions;
    return `| \`${f.name}\` | ${f.input.sides.map((s) => `${s}²`).join(', ')}, symbolic | ${cell(fp32)} | ${cell(fp16)} | ${cell(int8)} | \`npx bgone models add FILE --family ${f.name}\` |`;
  });
  return ['| family | sides | float32 | float16 | int8 | add it with |', '|---|---|---|---|---|---|', ...rows, ''].join('\n');
}

describe('docs/models.md', () => {
  it.each([
    ['families', familiesMarkdown()],
    ['exports', exportsMarkdown()],
  ])('the %s table is generated from the family table', (name, table) => {
    expectGeneratedSection('models.md', name, 'src/lib/model-families.ts', table, 'test/unit/model-docs.test.ts');
  });
});
