/**
 * The layers, read from the sources (every file, subfolders too, so a new file is checked as well):
 * - what the routes' folders may use of src/http: its types, errors, the router and the exchange,
 *   nothing else (not the backends, their selection, the multipart parser or the request id's
 *   module), so src/http stays replaceable behind that small face;
 * - src/http imports nothing above it (the service, the API, the library, the store...): only
 *   itself and src/config; src/config imports only itself and src/lib;
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
const CHECKED = ['api', 'batches', 'cluster', 'dashboard'];

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

describe('src/http seen from the routes', () => {
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

  const files = CHECKED.flatMap((folder) => sources(join(SRC, folder)));

  it('reads the folders it checks', () => {
    expect(files.map((file) => relative(SRC, file))).toEqual(expect.arrayContaining(['api/metered-removal.ts', 'batches/batch-runner.ts']));
  });

  it.each(files.map((file) => [relative(SRC, file), file]))('%s imports nothing of src/http but its types, errors, router and exchange', (_name, file) => {
    expect(forbiddenHttpImports(file, readFileSync(file, 'utf8'))).toEqual([]);
  });
});

/** The folders of src/ that `file` imports from (relative imports only), e.g. ['config', 'http']. */
function importedFolders(file: string): string[] {
  return specifiers(readFileSync(file, 'utf8'))
    .filter((specifier) => specifier.startsWith('.'))
    .map((specifier) => relative(SRC, resolve(dirname(file), specifier)).split('/')[0]!);
}

describe('layers', () => {
  const LAYERS: Record<string, string[]> = { http: ['http', 'config'], config: ['config', 'lib'] };

  it('the check sees an import up a layer (sanity check of this test)', () => {
    expect(importedFolders(join(HTTP, 'router.ts'))).toContain('config');
    expect(importedFolders(join(HTTP, 'exchange.ts'))).toContain('http');
  });

  for (const [layer, allowed] of Object.entries(LAYERS)) {
    const files = sources(join(SRC, layer));
    it.each(files.map((file) => [relative(SRC, file), file]))(`%s imports only from ${allowed.join(' and ')}`, (_name, file) => {
      expect(importedFolders(file).filter((folder) => !allowed.includes(folder))).toEqual([]);
    });
  }
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
