/**
 * A model file's declared inputs and outputs against a family (checkGraph, what `bgone models add`
 * runs): every family accepts a graph with its reference export's contract, and each difference is
 * named. The graphs are tiny ones written by test/helpers/family-graph.ts.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkGraph, FAMILY_NAMES, MATTE_TRANSFORMS, MODEL_FAMILIES, nativeNormalisation } from '../../src/lib/model-families.js';
import { readGraphSignature } from '../../src/lib/onnx-signature.js';
import { type FamilyGraph, writeFamilyGraph } from '../helpers/family-graph.js';

const dir = mkdtempSync(join(tmpdir(), 'bgone-family-check-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;

function signature(g: Partial<FamilyGraph> & Pick<FamilyGraph, 'side' | 'batch'>) {
  const path = join(dir, `${files++}.onnx`);
  writeFamilyGraph(path, { inputName: 'input', k: [1, 1, 1], bias: 0, decoys: 0, ...g });
  return readGraphSignature(path);
}

describe('the families', () => {
  it('isnet, u2net, birefnet, rmbg14, ben2 and modnet, each citing its reference code', () => {
    expect(FAMILY_NAMES).toEqual(['isnet', 'u2net', 'birefnet', 'rmbg14', 'ben2', 'modnet']);
    for (const f of Object.values(MODEL_FAMILIES)) {
      expect(f.reference).toMatch(/\.(py|json|md)|README/);
      expect(f.input.sides.length).toBeGreaterThan(0);
      expect(f.input.dynamicSide % f.input.multiple).toBe(0);
    }
    expect(MODEL_FAMILIES.birefnet.input.sides).toEqual([1024, 2048]);
    expect(MATTE_TRANSFORMS).toEqual({ 'as-is': 0, sigmoid: 1, 'min-max': 2 });
  });

  it('the normalisation the native core applies: (v - mean) / std on 8-bit values', () => {
    expect(nativeNormalisation(MODEL_FAMILIES.isnet)).toEqual({ mean: [128, 128, 128], std: [256, 256, 256] });
    expect(nativeNormalisation(MODEL_FAMILIES.modnet)).toEqual({ mean: [127.5, 127.5, 127.5], std: [127.5, 127.5, 127.5] });
    expect(nativeNormalisation(MODEL_FAMILIES.rmbg14)).toEqual({ mean: [127.5, 127.5, 127.5], std: [255, 255, 255] });
    const { mean, std } = nativeNormalisation(MODEL_FAMILIES.birefnet);
    for (const [c, m] of [0.485, 0.456, 0.406].entries()) expect(mean[c]).toBeCloseTo(m * 255, 10);
    for (const [c, s] of [0.229, 0.224, 0.225].entries()) expect(std[c]).toBeCloseTo(s * 255, 10);
  });
});

describe('checkGraph', () => {
  it.each(FAMILY_NAMES)("%s accepts a graph of its reference export's contract", (name) => {
    const f = MODEL_FAMILIES[name];
    const decoys = f.output.minCount - 1;
    const fixed = checkGraph(signature({ side: f.input.sides[0]!, batch: f.input.batch, decoys }), f);
    expect(fixed).toEqual({ problems: [], dynamic: false });
    const symbolic = checkGraph(signature({ side: 'symbolic', batch: f.input.batch, decoys }), f);
    expect(symbolic).toEqual({ problems: [], dynamic: true });
  });

  it('birefnet takes its 2048² HR exports too', () => {
    expect(checkGraph(signature({ side: 2048, batch: 1 }), MODEL_FAMILIES.birefnet).problems).toEqual([]);
  });

  it('a fixed side the family is not exported at, named with the sides it is', () => {
    const { problems } = checkGraph(signature({ side: 1024, batch: 1, decoys: 6 }), MODEL_FAMILIES.u2net);
    expect(problems).toEqual(['input input is 1024x1024; family u2net is exported at 320x320, or symbolic']);
  });

  it("an ISNet-shaped graph (its matte alone) as u2net: the count of outputs is named (u2net's exports have 7)", () => {
    const { problems } = checkGraph(signature({ side: 'symbolic', batch: 1 }), MODEL_FAMILIES.u2net);
    expect(problems).toEqual(["the file has 1 outputs; family u2net's matte is output 0 of at least 7"]);
  });

  it('an ISNet-shaped graph (batch fixed at 1) as modnet: the batch dimension is named', () => {
    const { problems } = checkGraph(signature({ side: 'symbolic', batch: 1 }), MODEL_FAMILIES.modnet);
    expect(problems).toHaveLength(2);
    expect(problems[0]).toMatch(
      /^input input has batch dimension 1; family modnet's reference export \(ZHKKKe\/MODNet onnx\/export_onnx\.py.*\) has symbolic$/,
    );
    expect(problems[1]).toBe("output matte has batch dimension 1; family modnet's reference export has symbolic");
  });

  it('a float16 input, a matte of 3 channels: each named', () => {
    const { problems } = checkGraph(signature({ side: 1024, batch: 1, elemType: 10, matteChannels: 3 }), MODEL_FAMILIES.birefnet);
    expect(problems).toContain('input input has ONNX element type 10; bgone feeds float32 (type 1)');
    expect(problems).toContain("output matte is [1, 3, 1024, 1024]; family birefnet's matte is [batch, 1, height, width]");
  });

  it('a file that is no ONNX model: an Error saying so', () => {
    const path = join(dir, 'text.onnx');
    writeFileSync(path, 'version https://git-lfs.github.com/spec/v1\n');
    expect(() => readGraphSignature(path)).toThrow(/is not an ONNX model/);
  });
});
