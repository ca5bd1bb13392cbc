/**
 * A table of the docs generated from a declaration in the code (the option table, the dialects, the
 * family table): the text between its markers in the doc must be the table, or the test fails; with
 * BGONE_WRITE_DOCS=1 it is rewritten instead.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { REPO_ROOT } from './paths.js';

/**
 * Checks the section `name` of docs/`doc` (between `<!-- name: generated from source -->` and
 * `<!-- name end -->`) against `table`; `testFile` is named in the failure, to rewrite it with.
 */
export function expectGeneratedSection(doc: string, name: string, source: string, table: string, testFile: string): void {
  const file = join(REPO_ROOT, 'docs', doc);
  const text = readFileSync(file, 'utf8');
  const start = `<!-- ${name}: generated from ${source} -->\n`;
  const end = `<!-- ${name} end -->`;
  const from = text.indexOf(start);
  const to = text.indexOf(end);
  expect(from, `docs/${doc} has the ${name} markers`).toBeGreaterThan(-1);
  const current = text.slice(from + start.length, to);
  if (current !== table && process.env.BGONE_WRITE_DOCS === '1') writeFileSync(file, text.slice(0, from + start.length) + table + text.slice(to));
  else expect(current, `rewrite it: BGONE_WRITE_DOCS=1 npx vitest run --project unit ${testFile}`).toBe(table);
}
