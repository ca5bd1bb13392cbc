/**
 * ONNX graphs with ISNet's contract (input `input` [1,3,1024,1024], matte `output` [1,1,1024,1024],
 * the matte the channels' mean + 0.5) that also do something a model must not: a giant Expand, a
 * convolution of 174,000 channels, a Loop that never ends, or a matte that is NaN (or one value)
 * whenever the image is bright. Made with the repository's graph tools (scripts/model-tools).
 */
import { writeFileSync } from 'node:fs';
// @ts-expect-error: plain ESM scripts without type declarations
import { FLOAT, INT64, makeTensor, onnx } from '../../scripts/model-tools/onnx-graph.mjs';

export type Hostile = 'giant-expand' | 'huge-conv' | 'endless-loop' | 'bright-nan' | 'bright-constant';

const SIDE = 1024;
const BOOL = 9;

const valueInfo = (name: string, elemType: number, dims: number[]) =>
  onnx.ValueInfoProto.create({ name, type: { tensorType: { elemType, shape: { dim: dims.map((d) => ({ dimValue: d })) } } } });
const node = (opType: string, input: string[], output: string[], attribute: unknown[] = []) =>
  onnx.NodeProto.create({ opType, input, output, name: output[0], attribute });
const ints = (name: string, values: number[]) => onnx.AttributeProto.create({ name, type: onnx.AttributeProto.AttributeType.INTS, ints: values });
const graphAttr = (name: string, g: unknown) => onnx.AttributeProto.create({ name, type: onnx.AttributeProto.AttributeType.GRAPH, g });
const scalar = (name: string, v: number) => makeTensor(name, FLOAT, [], Float32Array.of(v));

/** Writes the hostile graph `kind` to `path`. */
export function writeHostileGraph(path: string, kind: Hostile): void {
  // The matte: the mean of the three channels, + 0.5; then `extra`, a scalar, is added to it.
  const nodes = [node('ReduceMean', ['input'], ['mean'], [ints('axes', [1]), onnx.AttributeProto.create({ name: 'keepdims', type: 2, i: 1 })])];
  const initializer = [scalar('half', 0.5), scalar('zero', 0)];
  nodes.push(node('Add', ['mean', 'half'], ['plain']));
  let matte = 'plain';
  switch (kind) {
    case 'giant-expand':
      // 2^31 x 2^31 floats: 2^64 bytes.
      initializer.push(makeTensor('giant_shape', INT64, [2], BigInt64Array.of(2n ** 31n, 2n ** 31n)));
      nodes.push(
        node('Expand', ['zero', 'giant_shape'], ['giant']),
        node('ReduceSum', ['giant'], ['giant_sum'], [onnx.AttributeProto.create({ name: 'keepdims', type: 2, i: 0 })]),
      );
      nodes.push(node('Mul', ['giant_sum', 'zero'], ['extra']));
      break;
    case 'huge-conv':
      initializer.push(makeTensor('huge_w', FLOAT, [174_000, 3, 1, 1], new Float32Array(174_000 * 3)));
      nodes.push(
        node('Conv', ['input', 'huge_w'], ['huge']),
        node('ReduceMean', ['huge'], ['huge_mean'], [onnx.AttributeProto.create({ name: 'keepdims', type: 2, i: 0 })]),
      );
      nodes.push(node('Mul', ['huge_mean', 'zero'], ['extra']));
      break;
    case 'endless-loop': {
      // A counter that counts to 2^63 - 1, one Add a turn.
      initializer.push(makeTensor('trips', INT64, [], BigInt64Array.of(2n ** 63n - 1n)));
      initializer.push(onnx.TensorProto.create({ name: 'keep_going', dataType: BOOL, dims: [], rawData: Buffer.of(1) }));
      const body = onnx.GraphProto.create({
        name: 'turn',
        node: [node('Identity', ['cond_in'], ['cond_out']), node('Add', ['count_in', 'one'], ['count_out'])],
        initializer: [scalar('one', 1)],
        input: [valueInfo('i', INT64, []), valueInfo('cond_in', BOOL, []), valueInfo('count_in', FLOAT, [])],
        output: [valueInfo('cond_out', BOOL, []), valueInfo('count_out', FLOAT, [])],
      });
      nodes.push(node('Loop', ['trips', 'keep_going', 'zero'], ['count'], [graphAttr('body', body)]));
      nodes.push(node('Mul', ['count', 'zero'], ['extra']));
      break;
    }
    case 'bright-nan':
    case 'bright-constant': {
      // The image's mean, normalised as ISNet's input is ((v - 128) / 256): above 0.4 it is bright.
      initializer.push(scalar('bright', 0.4));
      nodes.push(node('ReduceMean', ['input'], ['brightness'], [onnx.AttributeProto.create({ name: 'keepdims', type: 2, i: 0 })]));
      if (kind === 'bright-nan') {
        nodes.push(node('Sub', ['bright', 'brightness'], ['margin']), node('Sqrt', ['margin'], ['root']), node('Mul', ['root', 'zero'], ['extra']));
      } else {
        nodes.push(node('Greater', ['brightness', 'bright'], ['is_bright']), node('Where', ['is_bright', 'half', 'plain'], ['chosen']));
        matte = 'chosen';
      }
      break;
    }
  }
  if (kind !== 'bright-constant') nodes.push(node('Add', [matte, 'extra'], ['output']));
  else nodes.push(node('Identity', [matte], ['output']));
  const graph = onnx.GraphProto.create({
    name: kind,
    node: nodes,
    initializer,
    input: [valueInfo('input', FLOAT, [1, 3, SIDE, SIDE])],
    output: [valueInfo('output', FLOAT, [1, 1, SIDE, SIDE])],
  });
  const model = onnx.ModelProto.create({ irVersion: 8, opsetImport: [{ domain: '', version: 13 }], graph });
  writeFileSync(path, onnx.ModelProto.encode(model).finish());
}
