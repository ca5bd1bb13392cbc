/**
 * What src/lib (the package's `import 'bgone'`) may depend on: nothing of the server, the store or
 * the configuration (no import leaving src/lib), and no environment variable (settings come from
 * configure()). Read from the sources, so a new file is checked too.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { specifiers } from '../helpers/import-specifiers.js';
import { REPO_ROOT } from '../helpers/paths.js';

const LIB = join(REPO_ROOT, 'src', 'lib');
const files = readdirSync(LIB).filter((f) => f.endsWith('.ts'));

describe('src/lib', () => {
  it('has its files (sanity check of this test)', () => {
    expect(files).toEqual(expect.arrayContaining(['index.ts', 'options.ts', 'settings.ts']));
    expect(specifiers(readFileSync(join(LIB, 'index.ts'), 'utf8'))).toContain('./settings.js');
  });

  it.each(files)('%s imports only its siblings, node: built-ins and packages', (file) => {
    for (const specifier of specifiers(readFileSync(join(LIB, file), 'utf8'))) {
      expect(specifier, `${file} imports ${specifier}`).not.toMatch(/^\.\.\//);
      expect(specifier, `${file} imports ${specifier}`).not.toMatch(/^\/|^src\//);
    }
  });

  it.each(files)('%s reads no environment variable', (file) => {
    expect(readFileSync(join(LIB, file), 'utf8')).not.toMatch(/process\.env|process\[['"]env/);
  });
});
