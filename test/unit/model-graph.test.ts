/**
 * The checks of a graph before ONNX Runtime sees it (src/lib/model-graph.ts) on the hostile graphs of
 * test/helpers/hostile-graph.ts and on each family's plain contract graph: the shapes that would end
 * the process are named, operators outside the family's set are listed, and a plain graph passes.
 * The file's size is checked before it is read (src/lib/onnx-signature.ts).
 */
import { mkdtempSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { FAMILY_NAMES, MODEL_FAMILIES } from '../../src/lib/model-families.js';
import { graphOperators, graphProblems, unknownOperators } from '../../src/lib/model-graph.js';
import { MAX_MODEL_BYTES, readOnnxGraph } from '../../src/lib/onnx-signature.js';
import { writeFamilyGraph } from '../helpers/family-graph.js';
import { type Hostile, writeHostileGraph } from '../helpers/hostile-graph.js';

const dir = mkdtempSync(join(tmpdir(), 'bgone-model-graph-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function hostile(kind: Hostile) {
  const path = join(dir, `${kind}.onnx`);
  writeHostileGraph(path, kind);
  return readOnnxGraph(path);
}

describe('graphProblems', () => {
  it('a giant Expand: its constant shape named with the values it makes', () => {
    expect(graphProblems(hostile('giant-expand'))).toEqual([
      'node giant (Expand) makes a tensor of 2^62.0 values (its shape [2147483648, 2147483648]); bgone allows at most 2^28',
    ]);
  });

  it('a convolution of 174,000 channels: its weights named', () => {
    expect(graphProblems(hostile('huge-conv'))).toEqual(['node huge (Conv) has weights [174000, 3, 1, 1]: more than 16384 channels']);
  });

  it('a declared tensor past the bound, and an initializer that claims more values than a tensor may hold', () => {
    const graph = hostile('bright-nan');
    graph.output[0]!.type!.tensorType!.shape!.dim = [{ dimValue: 1 }, { dimValue: 1 }, { dimValue: 65536 }, { dimValue: 65536 }];
    graph.initializer.push({ name: 'claims', dataType: 1, dims: [2 ** 20, 2 ** 20], rawData: new Uint8Array(4) });
    expect(graphProblems(graph)).toEqual([
      'initializer claims has 2^40.0 values; bgone allows at most 2^28 in one tensor',
      'output is declared with 2^32.0 values; bgone allows at most 2^28 in one tensor',
    ]);
  });

  it.each(['endless-loop', 'bright-nan', 'bright-constant'] as const)('%s: no shape past the bounds (what it does shows only when it runs)', (kind) => {
    expect(graphProblems(hostile(kind))).toEqual([]);
  });

  it.each(FAMILY_NAMES)("%s's contract graph: no problem, no unknown operator", (name) => {
    const path = join(dir, `${name}.onnx`);
    writeFamilyGraph(path, { inputName: 'input', side: MODEL_FAMILIES[name].input.sides[0]!, batch: 1, k: [1, 1, 1], bias: 0, decoys: 6 });
    const graph = readOnnxGraph(path);
    expect(graphProblems(graph)).toEqual([]);
    expect(unknownOperators(graph, MODEL_FAMILIES[name])).toEqual([]);
  });
});

describe('unknownOperators', () => {
  it('a Loop (in the main graph) is outside every family: listed; what its body uses is read too', () => {
    const graph = hostile('endless-loop');
    expect(graphOperators(graph)).toEqual(['Add', 'Identity', 'Loop', 'Mul', 'ReduceMean']);
    for (const name of FAMILY_NAMES) expect(unknownOperators(graph, MODEL_FAMILIES[name])).toEqual(['Loop']);
  });

  it('an operator of another domain is named with its domain', () => {
    const graph = hostile('bright-nan');
    graph.node[0]!.domain = 'com.example';
    expect(unknownOperators(graph, MODEL_FAMILIES.isnet)).toEqual(['com.example:ReduceMean']);
  });
});

describe('readOnnxGraph', () => {
  it('a file over the size bound is refused from its size, before it is read (a sparse file of 1.5 GiB)', () => {
    const path = join(dir, 'large.onnx');
    writeFileSync(path, '');
    truncateSync(path, 1.5 * 2 ** 30);
    expect(MAX_MODEL_BYTES).toBe(2 ** 30);
    expect(() => readOnnxGraph(path)).toThrow(/is 1\.50 GiB; bgone reads ONNX files of at most 1 GiB/);
  });

  it('a folder, and bytes that are no ONNX model: refused saying so', () => {
    expect(() => readOnnxGraph(dir)).toThrow(/is not a regular file/);
    const path = join(dir, 'junk.onnx');
    writeFileSync(path, Buffer.from([0xff, 0xff, 0xff, 0xff, 0x0f]));
    expect(() => readOnnxGraph(path)).toThrow(/is not an ONNX model/);
  });
});
