/**
 * The layers, read from the sources (every file, subfolders too, so a new file is checked as well):
 * - what the other layers (all but the CLI, which chooses the backend) may use of src/http: its
 *   types, errors, the router and the exchange, nothing else (not the backends, their selection,
 *   the multipart parser or the request id's module), so src/http stays replaceable behind that
 *   small face;
 * - the layers of src/ in one order (LAYER_ORDER, bottom first): every import points down it or
 *   stays in its layer; src/http imports only itself and src/config, src/config only itself and
 *   src/lib, src/store only itself and src/lib;
 * - the HTTP layer's own error codes answer as the service's contract says.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { HTTP_LAYER_ERRORS } from '../../src/http/errors.js';
import { HTTP_MESSAGES, HTTP_STATUS } from '../../src/service/errors.js';
import { specifiers } from '../helpers/import-specifiers.js';
import { REPO_ROOT } from '../helpers/paths.js';

const SRC = join(REPO_ROOT, 'src');
const HTTP = join(SRC, 'http');
/** The modules of src/http that other folders may import. */
const ALLOWED = ['types.ts', 'errors.ts', 'router.ts', 'exchange.ts'].map((file) => join(HTTP, file));
/**
 * The layers of src/, bottom first, as the imports have them (README.md's map): a module may import
 * its own layer and the layers below it, never one above. Layers that do not import each other
 * (http and store; webhooks, batches and cluster; dashboard and server.ts) are in an order that no
 * import contradicts.
 */
const LAYER_ORDER = ['lib', 'config', 'http', 'store', 'service', 'webhooks', 'batches', 'cluster', 'api', 'dashboard', 'server.ts', 'cli'];
/** Finer rules on top of the order: these layers import only the ones named. */
const ONLY: Record<string, string[]> = { http: ['http', 'config'], config: ['config', 'lib'], store: ['store', 'lib'] };

/** The layer of a path under src/: its first folder, or the file itself (server.ts). */
function layerOf(path: string): string {
  return relative(SRC, path).replace(/\.js$/, '.ts').split('/')[0]!;
}

/** The layers held to src/http's small face: all but src/http itself and the CLI, which chooses the backend. */
const CHECKED = LAYER_ORDER.filter((layer) => layer !== 'http' && layer !== 'cli');

/** Every .ts file under `dir`, subfolders included. */
function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sources(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

/** The modules of src/http that `file` (with `source`) imports outside the allowed ones, as paths from src/. */
function forbiddenHttpImports(file: string, source: string): string[] {
  return specifiers(source)
    .filter((specifier) => specifier.startsWith('.'))
    .map((specifier) => resolve(dirname(file), specifier).replace(/\.js$/, '.ts'))
    .filter((target) => (target === HTTP || target.startsWith(`${HTTP}/`)) && !ALLOWED.includes(target))
    .map((target) => relative(SRC, target));
}

describe('src/http seen from the other layers', () => {
  it('the check finds a forbidden import, an allowed one, and an export-from (sanity check of this test)', () => {
    const file = join(SRC, 'api', 'example.ts');
    const source = [
      "import { MultipartParser } from '../http/multipart.js';",
      "import type { Exchange } from '../http/exchange.js';",
      "export { uwsBackend } from '../http/backends/uws.js';",
      "import { Admission } from '../service/admission.js';",
    ].join('\n');
    expect(forbiddenHttpImports(file, source)).toEqual(['http/multipart.ts', 'http/backends/uws.ts']);
    expect(forbiddenHttpImports(join(SRC, 'dashboard', 'pages', 'example.ts'), "import { loadBackend } from '../../http/backend-select.js';")).toEqual([
      'http/backend-select.ts',
    ]);
  });

  const files = sources(SRC).filter((file) => CHECKED.includes(layerOf(file)));

  it('reads the folders it checks', () => {
    expect(files.map((file) => relative(SRC, file))).toEqual(
      expect.arrayContaining(['api/metered-removal.ts', 'batches/batch-runner.ts', 'service/admission.ts', 'server.ts']),
    );
  });

  it.each(files.map((file) => [relative(SRC, file), file]))('%s imports nothing of src/http but its types, errors, router and exchange', (_name, file) => {
    expect(forbiddenHttpImports(file, readFileSync(file, 'utf8'))).toEqual([]);
  });
});

/** The layers that `file` (with `source`) imports from (relative imports only), e.g. ['config', 'http']. */
function importedLayers(file: string, source: string): string[] {
  return specifiers(source)
    .filter((specifier) => specifier.startsWith('.'))
    .map((specifier) => layerOf(resolve(dirname(file), specifier)));
}

/** The imports of `file` that break `order` (bottom first) or `only`, as 'from → to'. */
function layerViolations(file: string, source: string, order = LAYER_ORDER, only = ONLY): string[] {
  const from = layerOf(file);
  const rank = order.indexOf(from);
  return importedLayers(file, source)
    .filter((to) => rank < 0 || order.indexOf(to) < 0 || order.indexOf(to) > rank || (only[from] !== undefined && !only[from].includes(to)))
    .map((to) => `${from} → ${to}`);
}

describe('layers', () => {
  it('the check sees an upward import, an unknown layer and a finer rule, and passes a downward one (sanity check of this test)', () => {
    const service = join(SRC, 'service', 'example.ts');
    const source = [
      "import { Store } from '../store/index.js';",
      "import { mountApi } from '../api/routes.js';",
      "export { x } from './sibling.js';",
      "const cli = await import('../cli/main.js');",
      "import { thing } from '../nowhere/thing.js';",
      "import { readFileSync } from 'node:fs';",
    ].join('\n');
    expect(layerViolations(service, source)).toEqual(['service → api', 'service → cli', 'service → nowhere']);
    expect(layerViolations(join(SRC, 'cli', 'serve.ts'), "import { startServer } from '../server.js';")).toEqual([]);
    expect(layerViolations(join(SRC, 'server.ts'), "import { main } from './cli/main.js';")).toEqual(['server.ts → cli']);
    expect(layerViolations(join(SRC, 'dashboard', 'pages', 'kit.ts'), "import { mountApi } from '../../api/routes.js';")).toEqual([]);
    expect(layerViolations(join(SRC, 'api', 'dialects', 'engine.ts'), "import { main } from '../../cli/main.js';")).toEqual(['api → cli']);
    // Below in the order, yet not among the few src/http may import.
    expect(layerViolations(join(HTTP, 'router.ts'), "import { Limiter } from '../lib/limiter.js';")).toEqual(['http → lib']);
    expect(layerViolations(join(SRC, 'newfolder', 'a.ts'), "import { x } from '../lib/index.js';")).toEqual(['newfolder → lib']);
  });

  it('the order names every folder and file at the top of src/, each once', () => {
    const entries = readdirSync(SRC, { withFileTypes: true })
      .filter((entry) => entry.isDirectory() || entry.name.endsWith('.ts'))
      .map((entry) => entry.name);
    expect([...LAYER_ORDER].sort()).toEqual(entries.sort());
    expect(new Set(LAYER_ORDER).size).toBe(LAYER_ORDER.length);
  });

  const files = sources(SRC);

  it('reads every layer, subfolders included (sanity check of this test)', () => {
    expect(new Set(files.map(layerOf))).toEqual(new Set(LAYER_ORDER));
    expect(files.map((file) => relative(SRC, file))).toEqual(expect.arrayContaining(['store/sqlite/driver.ts', 'api/dialects/engine.ts']));
    expect(importedLayers(join(HTTP, 'router.ts'), readFileSync(join(HTTP, 'router.ts'), 'utf8'))).toContain('config');
  });

  it.each(files.map((file) => [relative(SRC, file), file]))('%s imports only its layer and those below it', (_name, file) => {
    expect(layerViolations(file, readFileSync(file, 'utf8'))).toEqual([]);
  });
});

describe("the HTTP layer's own errors", () => {
  it.each(Object.entries(HTTP_LAYER_ERRORS))(
    "%s: the status (and standard message, where it has one) of the service's contract",
    (code, { status, message }) => {
      expect(status).toBe(HTTP_STATUS[code as keyof typeof HTTP_STATUS]);
      const contract = HTTP_MESSAGES[code as keyof typeof HTTP_MESSAGES];
      if (contract !== undefined) expect(message).toBe(contract);
    },
  );
});
