import { describe, expect, it } from 'vitest';
import { BGONE_FIELDS } from '../../src/api/dialects/bgone.js';
import { type DialectErrorRow, type DialectField, errorRow, translateFields, wantsJson } from '../../src/api/dialects/engine.js';
import { PHOTOROOM_ERRORS, PHOTOROOM_FIELDS, renderPhotoroomAccountError, renderPhotoroomError } from '../../src/api/dialects/photoroom.js';
import { REMOVEBG_ERRORS, REMOVEBG_FIELDS, renderRemoveBgError } from '../../src/api/dialects/removebg.js';
import { HttpError } from '../../src/http/errors.js';
import { optionByName } from '../../src/lib/option-table.js';
import { ApiError, HTTP_STATUS, type HttpErrorCode } from '../../src/service/errors.js';
import { expectGeneratedSection } from '../helpers/generated-docs.js';

const DIALECTS: Record<string, readonly DialectField[]> = { bgone: BGONE_FIELDS, removebg: REMOVEBG_FIELDS, photoroom: PHOTOROOM_FIELDS };

const form = (fields: Record<string, string>) => ({ files: {}, fields });

describe('the field tables', () => {
  it.each(Object.entries(DIALECTS))('%s: each field sets an option a form carries, of its own part', (_, fields) => {
    for (const field of fields) {
      if (field.option === null) continue;
      const row = optionByName(field.option);
      expect(row, `${field.name} → ${field.option}`).toBeDefined();
      expect(row!.carriers).toContain('form');
      expect(row!.part, field.name).toBe(field.part);
    }
    expect(new Set(fields.map((f) => f.name)).size).toBe(fields.length);
  });

  it("a field with a value map maps only to its option's values", () => {
    // Each target value of a map is one the option's parser takes.
    for (const fields of Object.values(DIALECTS)) {
      for (const field of fields) {
        if (!field.values || !field.option || field.translate) continue;
        const row = optionByName(field.option)!;
        for (const value of new Set(Object.values(field.values))) expect(() => row.parse(value), `${field.name}=${value}`).not.toThrow();
      }
    }
  });
});

describe('translateFields: the one loop', () => {
  it('an empty or blank field is absent, and takes the default', () => {
    expect(translateFields(REMOVEBG_FIELDS, form({ size: '', crop: '  ', roi: '' }))).toEqual({ size: 'preview', format: 'auto', padding: '0px' });
    expect(translateFields(PHOTOROOM_FIELDS, form({ format: '' }), { padding: '0px' })).toMatchObject({ format: 'png', size: 'full', padding: '0px' });
  });

  it('values in any case and in the spellings clients send', () => {
    for (const [sent, crop] of [
      ['True', 'true'],
      ['FALSE', 'false'],
      ['1', 'true'],
      ['0', 'false'],
      ['yes', 'true'],
      ['off', 'false'],
    ]) {
      expect(translateFields(REMOVEBG_FIELDS, form({ crop: sent! })).crop).toBe(crop);
    }
    expect(translateFields(REMOVEBG_FIELDS, form({ size: 'REGULAR', format: 'JPEG' }))).toMatchObject({ size: 'preview', format: 'jpg' });
  });

  it("remove.bg's bare numbers: roi and crop_margin in px, scale and position in %", () => {
    expect(translateFields(REMOVEBG_FIELDS, form({ roi: '0 0 100% 100%', crop_margin: '10 5%', scale: '50', position: '40 60' }))).toMatchObject({
      roi: '0px 0px 100% 100%',
      padding: '10px 5%',
      scale: '50%',
      position: '40% 60%',
    });
  });

  it('shadows: add_shadow with shadow_type and shadow_opacity; without add_shadow nothing is set', () => {
    expect(translateFields(REMOVEBG_FIELDS, form({ add_shadow: 'true' }))).toMatchObject({ shadow: 'drop' });
    expect(translateFields(REMOVEBG_FIELDS, form({ add_shadow: '1', shadow_type: '3D', shadow_opacity: '70' }))).toMatchObject({
      shadow: 'contact',
      shadow_opacity: '70%',
    });
    const off = translateFields(REMOVEBG_FIELDS, form({ add_shadow: 'false', shadow_type: 'car', shadow_opacity: '70' }));
    expect(off.shadow).toBeUndefined();
    expect(off.shadow_opacity).toBeUndefined();
  });

  it('a value outside the map is refused, naming the field and its values', () => {
    let thrown: unknown;
    try {
      translateFields(REMOVEBG_FIELDS, form({ type_level: '3' }));
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(HttpError);
    expect((thrown as HttpError).details).toEqual({ field: 'type_level', allowed: ['1', '2', 'none', 'latest'] });
  });

  it('an empty file part is absent', () => {
    const named = translateFields(REMOVEBG_FIELDS, {
      files: { image_file: [{ filename: '', data: Buffer.alloc(0) }] },
      fields: { image_url: 'http://x/y.jpg' },
    });
    expect(named.image_file).toBeUndefined();
    expect(named.image_url).toBe('http://x/y.jpg');
  });

  it("bgone's own fields pass through as sent", () => {
    expect(translateFields(BGONE_FIELDS, form({ format: 'WebP ', padding: '10px' }))).toEqual({ format: 'WebP ', padding: '10px' });
  });
});

describe('the error tables', () => {
  const codes = Object.keys(HTTP_STATUS) as HttpErrorCode[];

  it("remove.bg: 403 for a key, 400 for every bad input, the contract's other statuses kept; titles are messages", () => {
    const badInput = ['missing_image', 'validation_error', 'image_too_large', 'unsupported_media_type', 'invalid_image', 'foreground_not_found'];
    const urls = ['invalid_image_url', 'failed_image_download', 'invalid_roi', 'model_unavailable'];
    // Batch results are never asked for under /v1.0/.
    for (const code of codes.filter((c) => c !== 'result_not_ready' && c !== 'result_expired')) {
      const { status, body } = renderRemoveBgError(new ApiError(code), 'req_1') as { status: number; body: { errors: Array<{ title: string; code: string }> } };
      const expected = code === 'authentication_error' || code === 'permission_denied' ? 403 : [...badInput, ...urls].includes(code) ? 400 : HTTP_STATUS[code];
      expect(status, code).toBe(expected);
      expect(body.errors).toHaveLength(1);
      expect(body.errors[0]!.title.length, code).toBeGreaterThan(3);
    }
    const missing = renderRemoveBgError(new ApiError('authentication_error', 'x', { reason: 'missing' }), 'r').body as { errors: Array<{ title: string }> };
    expect(missing.errors[0]!.title).toBe('Missing API Key');
    const download = renderRemoveBgError(new ApiError('failed_image_download', 'x', { field: 'image_url', reason: 'status', status: 404 }), 'r').body as {
      errors: Array<{ title: string; code: string }>;
    };
    expect(download.errors[0]).toMatchObject({ code: 'failed_image_download', title: 'Failed to download image from given image_url: HTTP Status 404' });
    const dims = renderRemoveBgError(new ApiError('invalid_image', 'x', { reason: 'dimensions' }), 'r').body as { errors: Array<{ code: string }> };
    expect(dims.errors[0]!.code).toBe('invalid_dimensions');
    expect(renderRemoveBgError(new HttpError(431, 'validation_error', 'x'), 'r').status).toBe(431);
  });

  it('Photoroom: 403 for a key, 400 for bad input, its body on /v1/segment and on the account endpoints', () => {
    expect(renderPhotoroomError(new ApiError('authentication_error'), 'r')).toEqual({
      status: 403,
      body: { detail: expect.any(String), status_code: 403, type: 'authentication_error' },
    });
    expect(renderPhotoroomError(new ApiError('invalid_image'), 'r').status).toBe(400);
    expect(renderPhotoroomAccountError(new ApiError('payment_required'), 'r')).toEqual({ status: 402, body: { error: { detail: expect.any(String) } } });
    expect(renderPhotoroomAccountError(new ApiError('not_found'), 'r')).toEqual({ status: 404, body: { error: { message: 'No such endpoint.' } } });
  });

  it('every row is reachable: none is shadowed by an earlier one for the error it documents', () => {
    const samples: Array<[readonly DialectErrorRow[], HttpError, string]> = [
      [REMOVEBG_ERRORS, new ApiError('validation_error', 'x', { field: 'padding' }), 'invalid_crop_margin'],
      [REMOVEBG_ERRORS, new ApiError('validation_error', 'x', { fields: ['bg_color', 'bg_image_file'] }), 'multiple_bg_sources'],
      [REMOVEBG_ERRORS, new ApiError('validation_error', 'x', { fields: ['image_url', 'image_file'] }), 'multiple_sources'],
      [REMOVEBG_ERRORS, new ApiError('invalid_roi', 'x', { field: 'roi', image: { width: 1, height: 1 } }), 'roi_exceeds_bounds'],
      [REMOVEBG_ERRORS, new ApiError('invalid_roi', 'x', { field: 'roi' }), 'roi_region_empty'],
      [REMOVEBG_ERRORS, new ApiError('invalid_roi', 'x', { field: 'roi', allowed: [] }), 'invalid_roi'],
      [REMOVEBG_ERRORS, new ApiError('image_too_large', 'x', { max_side: 6000 }), 'resolution_too_high'],
      [REMOVEBG_ERRORS, new ApiError('invalid_image_url', 'x', { field: 'bg_image_url' }), 'invalid_bg_image_url'],
      [REMOVEBG_ERRORS, new ApiError('failed_image_download', 'x', { field: 'bg_image_url' }), 'failed_bg_download'],
      [REMOVEBG_ERRORS, new ApiError('validation_error', 'x', { field: 'Idempotency-Key' }), 'invalid_idempotency_key'],
      [REMOVEBG_ERRORS, new ApiError('validation_error', 'x', { field: 'colour' }), 'invalid_parameters'],
    ];
    for (const [rows, err, code] of samples) expect(errorRow(rows, err).code).toBe(code);
  });
});

describe('wantsJson: the media range the client prefers', () => {
  it.each([
    ['application/json', true],
    ['application/json; charset=utf-8', true],
    ['image/png, application/json', false],
    ['application/json, text/plain, */*', true],
    ['*/*', false],
    ['', false],
    ['image/*;q=0.5, application/json', true],
    ['application/json;q=0', false],
  ])('Accept: %s → %s', (accept, json) => expect(wantsJson(accept)).toBe(json));
});

/** The docs' table of a dialect's fields. */
function fieldsMarkdown(fields: readonly DialectField[]): string {
  const values = (field: DialectField): string => {
    if (field.accepts) return field.accepts;
    if (!field.values) return '—';
    const byTarget = new Map<string, string[]>();
    for (const [value, target] of Object.entries(field.values)) byTarget.set(target, [...(byTarget.get(target) ?? []), value]);
    const groups = [...byTarget.entries()].map(([target, sent]) =>
      sent.length === 1 && sent[0] === target ? `\`${target}\`` : `${sent.map((s) => `\`${s}\``).join(', ')} → ${target}`,
    );
    return groups.join(groups.some((g) => g.includes('→')) ? '; ' : ', ');
  };
  const lines = ['| field | bgone option | values taken | default | what bgone does |', '|---|---|---|---|---|'];
  for (const field of fields) {
    const option = field.option ? `\`${field.option}\`` : '—';
    const part = field.part === 'file' ? ' (file part)' : '';
    lines.push(
      `| \`${field.name}\`${part} | ${option} | ${values(field)} | ${field.default === undefined ? '—' : `\`${field.default}\``} | ${field.note ?? (field.option ? `sets \`${field.option}\`` : '—')} |`,
    );
  }
  return `${lines.join('\n')}\n`;
}

/** The docs' table of a dialect's errors. */
function errorsMarkdown(rows: readonly DialectErrorRow[], titles: boolean): string {
  const lines = titles ? ['| status | code | title | when |', '|---|---|---|---|'] : ['| status | type | when |', '|---|---|---|'];
  for (const row of rows) {
    const title = typeof row.title === 'function' ? row.title(new ApiError('failed_image_download', '<the cause>')) : row.title;
    lines.push(titles ? `| ${row.status} | \`${row.code}\` | ${title} | ${row.when} |` : `| ${row.status} | \`${row.code}\` | ${row.when} |`);
  }
  return `${lines.join('\n')}\n`;
}

describe('docs/compatibility.md', () => {
  const tables: Array<[string, string]> = [
    ['removebg-fields', fieldsMarkdown(REMOVEBG_FIELDS)],
    ['removebg-errors', errorsMarkdown(REMOVEBG_ERRORS, true)],
    ['photoroom-fields', fieldsMarkdown(PHOTOROOM_FIELDS)],
    ['photoroom-errors', errorsMarkdown(PHOTOROOM_ERRORS, false)],
  ];
  it.each(tables)('the %s table is generated from its dialect', (name, table) => {
    expectGeneratedSection('compatibility.md', name, 'src/api/dialects/', table, 'test/unit/dialects.test.ts');
  });
});
