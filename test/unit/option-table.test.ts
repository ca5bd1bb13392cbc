import { describe, expect, it } from 'vitest';
import { batchForm, REMOVE_FORM } from '../../src/api/form-fields.js';
import { openApiDocument } from '../../src/api/openapi.js';
import { COMMANDS } from '../../src/cli/args.js';
import { REMOVE_FLAGS_HELP } from '../../src/cli/remove.js';
import { TRY_LEFT_OUT, tryOptions, tryPage } from '../../src/dashboard/views/try.js';
import { BgoneError } from '../../src/lib/errors.js';
import { cliFlag, OPTION_TABLE, type OptionRow, optionsFor, parseOptions } from '../../src/lib/option-table.js';
import { normaliseOptions } from '../../src/lib/options.js';
import { expectGeneratedSection } from '../helpers/generated-docs.js';

const names = (rows: readonly OptionRow[]) => rows.map((row) => row.name).sort();
const sorted = (list: Iterable<string>) => [...list].sort();

type Schema = { properties: Record<string, unknown> };
const schemas = (openApiDocument() as { components: { schemas: Record<string, Schema> } }).components.schemas;

describe('the option table', () => {
  it('names every option once, by its API name and by its library key', () => {
    expect(new Set(OPTION_TABLE.map((row) => row.name)).size).toBe(OPTION_TABLE.length);
    expect(new Set(OPTION_TABLE.map((row) => row.key)).size).toBe(OPTION_TABLE.length);
    for (const row of OPTION_TABLE) {
      expect(row.name, row.key).toMatch(/^[a-z][a-z0-9_]*$/);
      expect(row.key.toLowerCase(), row.name).toBe(row.name.replaceAll('_', '').toLowerCase());
      expect(row.description, row.name).toMatch(/^[A-Z].*\.$/);
    }
  });

  it.each(OPTION_TABLE.filter((row) => row.part === 'field' && row.key !== 'refine').map((row) => [row.name, row] as const))(
    '%s: its example parses',
    (_, row) => {
      expect(row.parse(row.example)).not.toBeUndefined();
    },
  );

  it.each(
    OPTION_TABLE.filter((row) => row.part === 'field' && !['model', 'image_url', 'bg_image_url'].includes(row.name)).map((row) => [row.name, row] as const),
  )('%s: a wrong value is its own code, naming the field', (_, row) => {
    let thrown: unknown;
    try {
      row.parse(row.key === 'refine' ? 'yes' : '#not a value#');
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(BgoneError);
    expect((thrown as BgoneError).code).toBe(row.code);
    expect((thrown as BgoneError).details?.field).toBe(row.name);
  });

  it('refuses an option it does not know, naming it (the library as the HTTP API)', () => {
    expect(() => parseOptions({ sharpness: 'high' })).toThrow(
      expect.objectContaining({ code: 'validation_error', details: expect.objectContaining({ field: 'sharpness' }) }),
    );
    expect(() => normaliseOptions({ bg_color: 'red' } as never)).toThrow(expect.objectContaining({ details: expect.objectContaining({ field: 'bg_color' }) }));
  });
});

describe('every list of the options agrees with the table', () => {
  it('the removal form: its text fields and file parts', () => {
    const rows = optionsFor('form');
    expect(sorted(Object.keys(REMOVE_FORM.fields))).toEqual(names(rows.filter((r) => r.part === 'field')));
    expect(sorted(Object.keys(REMOVE_FORM.files))).toEqual(names(rows.filter((r) => r.part === 'file')));
    // Each field takes its option's longest value; a URL, whose option counts characters (UTF-16
    // units) and refuses a longer one itself, its longest in UTF-8 bytes.
    for (const row of rows)
      if (row.part === 'field') expect(REMOVE_FORM.fields[row.name], row.name).toBe(row.name.endsWith('image_url') ? 3 * 2048 : row.maxLength);
  });

  it('the batch form: the batch options beside the images (what a batch stores)', () => {
    const form = batchForm(50, 1000);
    expect(sorted(Object.keys(form.fields))).toEqual(names(optionsFor('batch').filter((r) => r.part === 'field')));
    expect(sorted(Object.keys(form.files))).toEqual(
      sorted([
        'image_file',
        ...optionsFor('batch')
          .filter((r) => r.part === 'file')
          .map((r) => r.name),
      ]),
    );
  });

  it('the OpenAPI document: the multipart, JSON and batch request schemas', () => {
    expect(sorted(Object.keys(schemas.RemoveRequest!.properties))).toEqual(names(optionsFor('form')));
    expect(sorted(Object.keys(schemas.RemoveJsonRequest!.properties))).toEqual(names(optionsFor('json').filter((r) => r.part === 'field')));
    expect(sorted(Object.keys(schemas.BatchRequest!.properties))).toEqual(sorted(['image_file', ...names(optionsFor('batch'))]));
  });

  it("the CLI: bgone remove's flags and its help", () => {
    const flags = Object.keys(COMMANDS.remove!.options).filter((f) => f !== 'help' && f !== 'out');
    expect(sorted(flags)).toEqual(sorted(optionsFor('cli').map(cliFlag)));
    for (const row of optionsFor('cli')) expect(REMOVE_FLAGS_HELP).toContain(`--${cliFlag(row)} `);
  });

  it("the try-it page: a control for each of the form's options", () => {
    expect(TRY_LEFT_OUT.every((name) => optionsFor('form').some((row) => row.name === name))).toBe(true);
    expect(names(tryOptions())).toEqual(names(optionsFor('form').filter((row) => !TRY_LEFT_OUT.includes(row.name))));
    const page = tryPage({ viewer: { email: 'a@example.com', csrf: 'x', admin: false } as never, balance: { remaining: 1 } as never });
    const controls = sorted([...page.matchAll(/<(?:input|select) id="[^"]+" name="([^"]+)"/g)].map((m) => m[1]!));
    expect(controls).toEqual(names(tryOptions()));
    // And a curl line for each dialect the service speaks.
    for (const path of ['/api/v1/remove', '/v1.0/removebg', '/v1/segment', '/v2/edit']) expect(page).toContain(`$BGONE_URL${path}`);
  });

  it('docs/api.md: the options table', () => {
    expectGeneratedSection('api.md', 'options-table', 'src/lib/option-table.ts', optionsMarkdown(), 'test/unit/option-table.test.ts');
  });
});

/** The table of docs/api.md: one row per option the HTTP API takes. */
function optionsMarkdown(): string {
  const where = (row: OptionRow) =>
    [
      row.carriers.includes('form') ? (row.part === 'file' ? 'file part' : 'field') : '',
      row.carriers.includes('json') ? 'JSON' : '',
      row.carriers.includes('batch') ? 'batch' : '',
      row.carriers.includes('cli') ? `\`--${cliFlag(row)}\`` : '',
    ]
      .filter(Boolean)
      .join(', ');
  const lines = ['| option | values | default | what it does | example | taken by |', '|---|---|---|---|---|---|'];
  for (const row of OPTION_TABLE) {
    if (!row.carriers.includes('form') && !row.carriers.includes('cli')) continue;
    lines.push(`| \`${row.name}\` | ${row.values} | ${row.default || '—'} | ${row.description} | \`${row.example}\` | ${where(row)} |`);
  }
  return `${lines.join('\n')}\n`;
}
