// The published "medium" ISNet stores its weights in float16 and casts around every op; ONNX Runtime's
// CPU kernels are float32, so it inserts more casts and keeps both copies. Rewriting the graph to
// float32 once, at install, removes every cast and lets the optimiser fuse and prepack freely.
import { attribute, FLOAT, FLOAT16, makeTensor, renameTensor, replaceUses, tensorValues } from './onnx-graph.mjs';

export function convertToFloat32(graph) {
  graph.initializer = graph.initializer.map((t) => (t.dataType === FLOAT16 ? makeTensor(t.name, FLOAT, t.dims, tensorValues(t)) : t));
  const outputs = new Set(graph.output.map((o) => o.name));
  const kept = [];
  for (const node of graph.node) {
    if (node.opType === 'Cast') {
      const to = Number(attribute(node, 'to').i);
      if (to === FLOAT16 || to === FLOAT) {
        // Every float tensor is float32 now: the cast is an identity. A graph output keeps its public
        // name, so there the cast's input is renamed instead.
        if (outputs.has(node.output[0])) renameTensor(graph, node.input[0], node.output[0]);
        else replaceUses(graph, node.output[0], node.input[0]);
        continue;
      }
    }
    if (node.opType === 'Constant') {
      const value = attribute(node, 'value');
      if (value?.t && value.t.dataType === FLOAT16) value.t = makeTensor(value.t.name, FLOAT, value.t.dims, tensorValues(value.t));
    }
    kept.push(node);
  }
  graph.node = kept;
  for (const info of [...graph.input, ...graph.output, ...graph.valueInfo]) {
    const tt = info.type?.tensorType;
    if (tt && tt.elemType === FLOAT16) tt.elemType = FLOAT;
  }
  return graph;
}
