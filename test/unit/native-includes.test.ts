/**
 * The native sources as modules (x.h with x.cc): which includes which, read from the files. No
 * module may reach itself through its includes: a cycle means two files that cannot be understood,
 * or changed, one without the other.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../helpers/paths.js';

const NATIVE = join(REPO_ROOT, 'native');
const files = readdirSync(NATIVE).filter((f) => /\.(cc|h)$/.test(f));
const moduleOf = (file: string) => file.replace(/\.(cc|h)$/, '');

/** Module -> the modules its files include (our own headers only, "x.h"). */
function includeGraph(): Map<string, Set<string>> {
  const graph = new Map<string, Set<string>>();
  for (const file of files) {
    const from = moduleOf(file);
    if (!graph.has(from)) graph.set(from, new Set());
    for (const [, header] of readFileSync(join(NATIVE, file), 'utf8').matchAll(/^#include "([^"]+)\.h"/gm)) {
      if (header !== from && files.includes(`${header}.h`)) graph.get(from)!.add(header!);
    }
  }
  return graph;
}

/** Every cycle's modules, in order, found by a depth-first walk. */
function cycles(graph: Map<string, Set<string>>): string[][] {
  const found: string[][] = [];
  const state = new Map<string, 'open' | 'done'>();
  const path: string[] = [];
  const visit = (node: string) => {
    state.set(node, 'open');
    path.push(node);
    for (const next of graph.get(node) ?? []) {
      if (state.get(next) === 'open') found.push([...path.slice(path.indexOf(next)), next]);
      else if (!state.has(next)) visit(next);
    }
    path.pop();
    state.set(node, 'done');
  };
  for (const node of graph.keys()) if (!state.has(node)) visit(node);
  return found;
}

describe('native/ includes', () => {
  it('are read (sanity check of this test): the pipeline includes the model, the model its spec', () => {
    const graph = includeGraph();
    expect(graph.get('pipeline')).toContain('model');
    expect(graph.get('model')).toContain('model_spec');
    expect(cycles(new Map([...graph, ['model_spec', new Set(['pipeline'])]])).length).toBeGreaterThan(0);
  });

  it('form no cycle between modules', () => {
    expect(cycles(includeGraph()).map((c) => c.join(' -> '))).toEqual([]);
  });
});
