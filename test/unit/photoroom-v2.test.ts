/**
 * Photoroom's /v2/edit dialect without a server: every name of Photoroom's document has its row,
 * each row reads its values, the translation into bgone's options (and its refusals, named in
 * Photoroom's words) against the option table as it is, and docs/compatibility.md's v2 table,
 * generated from the rows.
 */
import { describe, expect, it } from 'vitest';
import { queryForm, readValue, refusedName, renderPhotoroomV2Error, V2_PARAMS, type V2Param, v2Options, v2Param } from '../../src/api/dialects/photoroom-v2.js';
import { HttpError } from '../../src/http/errors.js';
import { optionByName } from '../../src/lib/option-table.js';
import { ApiError } from '../../src/service/errors.js';
import { expectGeneratedSection } from '../helpers/generated-docs.js';

/** The names of Photoroom's OpenAPI document for /v2/edit (tryAGI/Photoroom's openapi.yaml): its 87 GET parameters and POST's 3 file parts. */
const PHOTOROOM_NAMES = `background.blur.mode background.blur.radius background.color background.expandPrompt background.guidance.imageFile
background.guidance.imageUrl background.guidance.scale background.imageUrl background.negativePrompt background.prompt background.scaling
background.seed beautify.mode beautify.onSubjectMismatch beautify.seed colorSpace describeAnyChange.mode describeAnyChange.prompt
describeAnyChange.seed editWithAI.additionalImages.{key}.imageUrl editWithAI.mode editWithAI.prompt editWithAI.seed expand.mode expand.seed
export.dpi export.format flatLay.mode flatLay.prompt flatLay.size ghostMannequin.mode ghostMannequin.prompt ghostMannequin.size
horizontalAlignment ignorePaddingAndSnapOnCroppedSides imageFromPrompt.prompt imageFromPrompt.seed imageFromPrompt.size imageUrl ironing.mode
keepExistingAlphaChannel layers lighting.mode margin marginBottom marginLeft marginRight marginTop maxHeight maxWidth outline.blurRadius
outline.color outline.width outputSize padding paddingBottom paddingLeft paddingRight paddingTop preserveMetadata referenceBox
removeBackground scaling segmentation.mode segmentation.negativePrompt segmentation.prompt shadow.directionOverride shadow.intensityOverride
shadow.mode shadow.softnessOverride shadow.spreadOverride shadow.subjectPoseOverride templateId textRemoval.mode uncrop.mode uncrop.seed
upscale.downscaleIfNeeded upscale.mode verticalAlignment virtualModel.additionalProductImages virtualModel.mode virtualModel.model
virtualModel.pose virtualModel.prompt virtualModel.quality virtualModel.scene virtualModel.size imageFile background.imageFile
editWithAI.additionalImages.{key}.imageFile`.split(/\s+/);

const REFUSED_GROUPS = [
  'shadow.',
  'lighting.',
  'expand.',
  'uncrop.',
  'upscale.',
  'beautify.',
  'editWithAI.',
  'describeAnyChange.',
  'imageFromPrompt.',
  'flatLay.',
  'ghostMannequin.',
  'ironing.',
  'virtualModel.',
  'textRemoval.',
  'segmentation.',
  'background.prompt',
  'background.negativePrompt',
  'background.expandPrompt',
  'background.seed',
  'background.guidance.',
];

/** A concrete name of a row (a pattern row's `{key}` filled in). */
const concrete = (name: string) =>
  name.replace('{key}', 'ref1').replace('{model,scene,additionalProductImages}.*', 'model.preset.name').replace('.*', '.hero.image.imageUrl');

/** The thrown HttpError of `fn` (fails when nothing is thrown). */
function thrown(fn: () => unknown): HttpError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(HttpError);
    return err as HttpError;
  }
  throw new Error('nothing was thrown');
}

const get = (fields: Record<string, string>) => v2Options({ fields: { imageUrl: 'https://example.com/p.jpg', ...fields }, files: {} }, 'GET');
/** The fields of a request bgone can answer as it is now: an exact canvas, no snapping. */
const EXACT = { outputSize: '1000x1000', ignorePaddingAndSnapOnCroppedSides: 'false' };

describe('the table', () => {
  it("has a row for every name of Photoroom's document, and only those (names appear once)", () => {
    for (const name of PHOTOROOM_NAMES) expect(v2Param(concrete(name)), name).toBeDefined();
    const names = V2_PARAMS.map((p) => p.name);
    expect(new Set(names).size).toBe(names.length);
    const extra = V2_PARAMS.filter((p) => !PHOTOROOM_NAMES.includes(p.name) && !p.pattern);
    // background.expandPrompt's object form ({mode}), as a form or query string carries it.
    expect(extra.map((p) => p.name)).toEqual(['background.expandPrompt.mode']);
    expect(PHOTOROOM_NAMES).toHaveLength(90);
  });

  it('every generative group and the templates are refused, and nothing else is', () => {
    for (const p of V2_PARAMS) {
      const generative = REFUSED_GROUPS.some((g) => p.name.startsWith(g));
      const template = p.name === 'templateId' || p.name.startsWith('layers');
      expect(p.refused, p.name).toBe(generative ? 'generative' : template ? 'template' : p.refused === 'unsupported value' ? 'unsupported value' : undefined);
      if (!p.refused) expect(p.option, p.name).not.toBe('');
    }
  });

  it("each row's default is one of its own values", () => {
    for (const p of V2_PARAMS.filter((row) => row.default !== '' && !row.refused?.match(/generative|template/))) {
      expect(readValue(p, p.default), p.name).toBe(p.default);
    }
  });
});

describe('reading values', () => {
  const row = (name: string) => v2Param(name) as V2Param;
  it('enums in any case, in the document spelling; booleans true/false only', () => {
    expect(readValue(row('referenceBox'), 'ORIGINALIMAGE')).toBe('originalImage');
    expect(readValue(row('removeBackground'), 'True')).toBe('true');
    expect(thrown(() => readValue(row('removeBackground'), '1')).message).toBe('removeBackground must be boolean (true or false).');
    expect(thrown(() => readValue(row('scaling'), 'stretch')).details).toEqual({ field: 'scaling', allowed: ['fit', 'fill'] });
  });

  it('sizes: a fraction up to 0.49, a percentage up to 49 %, pixels', () => {
    expect(['0.3', '.25', '30%', '100px', '0'].map((v) => readValue(row('padding'), v))).toEqual(['0.3', '0.25', '30%', '100px', '0']);
    for (const bad of ['0.5', '50%', '30', '-1px', '10pt']) expect(thrown(() => readValue(row('margin'), bad)).details?.field).toBe('margin');
  });

  it('numbers within their range: blur radius above 0, dpi 72..1200, maxWidth whole', () => {
    expect(readValue(row('background.blur.radius'), '0.02')).toBe('0.02');
    expect(thrown(() => readValue(row('background.blur.radius'), '0')).message).toMatch(/from 0 \(excluded\) to 0.05/);
    expect(thrown(() => readValue(row('export.dpi'), '71')).details?.field).toBe('export.dpi');
    expect(thrown(() => readValue(row('maxWidth'), '10.5')).details?.field).toBe('maxWidth');
  });

  it("colours: Photoroom's hex without # (3, 6, 8 digits), with #, names, transparent", () => {
    const colour = row('background.color');
    expect(['FF0000', 'f00', 'FF000080', '#00ff00', 'Red', 'transparent'].map((v) => readValue(colour, v))).toEqual([
      '#ff0000',
      '#f00',
      '#ff000080',
      '#00ff00',
      'red',
      'transparent',
    ]);
    expect(thrown(() => readValue(colour, 'FF00')).details?.field).toBe('background.color');
    expect(thrown(() => readValue(colour, 'notacolour')).details?.field).toBe('background.color');
  });

  it('outputSize: auto, originalImage, croppedSubject, WxH', () => {
    expect(['auto', 'originalimage', 'croppedSubject', '200x400'].map((v) => readValue(row('outputSize'), v))).toEqual([
      'auto',
      'originalImage',
      'croppedSubject',
      '200x400',
    ]);
    expect(thrown(() => readValue(row('outputSize'), '0x10')).details?.field).toBe('outputSize');
  });
});

describe('names a request may not carry', () => {
  it('generative and template names, patterns included, refused naming them', () => {
    expect(refusedName('shadow.mode', 'GET')?.message).toMatch(/^shadow\.mode is a generative feature/);
    expect(refusedName('editWithAI.additionalImages.front.imageFile', 'POST')?.message).toMatch(/generative/);
    expect(refusedName('virtualModel.model.preset.name', 'POST')?.details).toEqual({ field: 'virtualModel.model.preset.name' });
    expect(refusedName('layers.logo.image.imageUrl', 'GET')?.message).toMatch(/templates/);
    expect(refusedName('templateId', 'GET')?.message).toMatch(/templates/);
  });

  it('an unknown name, photoroom-cli names with what to send instead, a name of the other method', () => {
    expect(refusedName('colour', 'GET')?.message).toBe("colour is not a parameter of Photoroom's /v2/edit.");
    expect(refusedName('sizeWidth', 'POST')?.message).toBe("sizeWidth is not a parameter of Photoroom's /v2/edit: send outputSize=WxH (Photoroom ignores it).");
    expect(refusedName('imageFile', 'GET')?.message).toMatch(/file part of POST/);
    expect(refusedName('imageUrl', 'POST')?.message).toMatch(/GET \/v2\/edit only/);
    expect(refusedName('outputSize', 'POST')).toBeUndefined();
  });

  it('the query string: each name once, refused names by their row', () => {
    expect(queryForm('imageUrl=https%3A%2F%2Fx%2Fa.jpg&background.color=FFF')).toEqual({
      fields: { imageUrl: 'https://x/a.jpg', 'background.color': 'FFF' },
      files: {},
    });
    expect(thrown(() => queryForm('imageUrl=a&imageUrl=b')).message).toBe('imageUrl is given twice.');
    expect(thrown(() => queryForm('lighting.mode=ai.auto')).message).toMatch(/generative/);
    expect(thrown(() => queryForm('imageFile=x')).details).toEqual({ field: 'imageFile' });
  });
});

describe('the translation, against the option table as it is', () => {
  it('outputSize=WxH without placement options: the crop box (the subject, no margin) fitted into the canvas', () => {
    expect(get(EXACT)).toEqual({ image_url: 'https://example.com/p.jpg', output_size: '1000x1000', crop: 'true', padding: '0px' });
  });

  it('alignments are position, and each turns snapping off on its axis', () => {
    expect(get({ outputSize: '1000x500', horizontalAlignment: 'left', verticalAlignment: 'bottom' })).toMatchObject({ position: '0% 100%', crop: 'true' });
    expect(get({ ...EXACT, horizontalAlignment: 'right' }).position).toBe('100% 50%');
  });

  it('background.color as bg_color; transparent sets nothing; export.format jpeg is jpg', () => {
    expect(get({ ...EXACT, 'background.color': 'FF000080', 'export.format': 'JPEG' })).toMatchObject({ bg_color: '#ff000080', format: 'jpg' });
    expect(get({ ...EXACT, 'background.color': 'transparent' }).bg_color).toBeUndefined();
    expect(get({ ...EXACT, 'export.format': 'webp' }).format).toBe('webp');
  });

  it("defaults and values that are bgone's own defaults set nothing", () => {
    const named = get({
      ...EXACT,
      removeBackground: 'true',
      scaling: 'fit',
      referenceBox: 'subjectBox',
      padding: '0',
      margin: '0%',
      keepExistingAlphaChannel: 'never',
    });
    expect(named).toEqual(get(EXACT));
  });

  // Each of these needs an option or a value the option table does not have: refused, naming the
  // parameter, until the row exists (then the same translation applies).
  const needing: Array<[Record<string, string>, string, string, string]> = [
    [{}, 'outputSize', 'output_size', 'original'],
    [{ outputSize: 'croppedSubject' }, 'outputSize', 'output_size', 'subject'],
    [{ outputSize: '1000x1000' }, 'ignorePaddingAndSnapOnCroppedSides', 'snap', 'both'],
    [{ outputSize: '1000x1000', verticalAlignment: 'top' }, 'ignorePaddingAndSnapOnCroppedSides', 'snap', 'horizontal'],
    [{ ...EXACT, padding: '0.1' }, 'padding', 'area_padding', '0.1 0.1 0.1 0.1'],
    [{ ...EXACT, padding: '0.1', paddingTop: '20%' }, 'padding', 'area_padding', '20% 0.1 0.1 0.1'],
    [{ ...EXACT, marginLeft: '10px' }, 'marginLeft', 'margin', '0 0 0 10px'],
    [{ ...EXACT, scaling: 'fill' }, 'scaling', 'fit', 'cover'],
    [{ ...EXACT, maxWidth: '200', outputSize: 'originalImage' }, 'outputSize', 'output_size', 'original'],
    [{ ...EXACT, referenceBox: 'originalImage' }, 'referenceBox', 'reference_box', 'image'],
    [{ ...EXACT, removeBackground: 'false', ignorePaddingAndSnapOnCroppedSides: '' }, 'removeBackground', 'remove_background', 'false'],
    [{ ...EXACT, keepExistingAlphaChannel: 'auto' }, 'keepExistingAlphaChannel', 'keep_alpha', 'auto'],
    [{ ...EXACT, 'background.imageUrl': 'https://example.com/b.jpg', 'background.scaling': 'fit' }, 'background.scaling', 'bg_fit', 'contain'],
    [{ ...EXACT, 'background.blur.mode': 'gaussian' }, 'background.blur.mode', 'bg_blur', '0.01'],
    [{ ...EXACT, 'background.blur.mode': 'bokeh', 'background.blur.radius': '0.03' }, 'background.blur.radius', 'bg_blur', '0.03'],
    [{ ...EXACT, 'outline.color': 'FFFFFF' }, 'outline.color', 'outline_color', '#ffffff'],
    [{ ...EXACT, 'export.format': 'avif' }, 'export.format', 'format', 'avif'],
    [{ ...EXACT, 'export.dpi': '300' }, 'export.dpi', 'dpi', '300'],
  ];
  // Each needs an option, or a value, that the option table may not have: while it has not, a 400
  // naming the Photoroom parameter; once it has, the same translation gives the option.
  it.each(needing)('%o: %s becomes %s=%s, or a 400 naming it while the option table lacks that', (fields, name, option, value) => {
    const row = optionByName(option);
    let live = row !== undefined;
    try {
      row?.parse(value);
    } catch {
      live = false;
    }
    if (!live) {
      const err = thrown(() => get(fields));
      expect(err.status).toBe(400);
      expect(err.details?.field).toBe(name);
      expect(err.message).toMatch(/is not supported by this server/);
      expect(err.message).toContain(option);
      return;
    }
    try {
      expect(get(fields)[option]).toBe(value);
    } catch (err) {
      if (!(err instanceof HttpError)) throw err;
      expect(err.details?.field, err.message).not.toBe(name); // another parameter's option is missing
    }
  });

  it("Photoroom's defaults become bgone's placement: the photo's size, both axes snapping", () => {
    expect(get({})).toEqual({ image_url: 'https://example.com/p.jpg', output_size: 'original', snap: 'both' });
    expect(get({ outputSize: '1000x1000', padding: '0.1', horizontalAlignment: 'left' })).toEqual({
      image_url: 'https://example.com/p.jpg',
      output_size: '1000x1000',
      area_padding: '0.1 0.1 0.1 0.1',
      snap: 'vertical',
      position: '0% 50%',
    });
  });

  it("preserveMetadata and colorSpace: bgone's metadata and color_space", () => {
    expect(get({ preserveMetadata: 'never' }).metadata).toBeUndefined();
    expect(get({ preserveMetadata: 'xmp' }).metadata).toBe('xmp');
    expect(get({ preserveMetadata: 'exifSubset' }).metadata).toBe('exif_subset');
    expect(get({ preserveMetadata: 'exifSubsetWithXmpCompatibility' }).metadata).toBe('exif_subset_xmp');
    expect(get({ colorSpace: 'sRGB' }).color_space).toBeUndefined();
    expect(get({ colorSpace: 'original', 'export.format': 'png', preserveMetadata: 'xmp' })).toMatchObject({ color_space: 'original', metadata: 'xmp' });
  });

  it("Photoroom's rules between parameters, each a 400 naming the parameter", () => {
    const cases: Array<[Record<string, string>, string]> = [
      [{ ...EXACT, maxWidth: '200' }, 'maxWidth'],
      [{ ...EXACT, 'background.scaling': 'fill' }, 'background.scaling'],
      [{ ...EXACT, 'background.blur.radius': '0.02' }, 'background.blur.radius'],
      [{ ...EXACT, 'outline.width': '0.05' }, 'outline.width'],
      [{ ...EXACT, 'background.color': 'red', 'background.imageUrl': 'https://example.com/b.jpg' }, 'background.color'],
      [{ ...EXACT, removeBackground: 'false' }, 'ignorePaddingAndSnapOnCroppedSides'],
      [{ ...EXACT, preserveMetadata: 'all' }, 'preserveMetadata'],
      [{ ...EXACT, colorSpace: 'original' }, 'outputSize'],
      [{ colorSpace: 'original', imageUrl: 'https://example.com/a.jpg', 'export.dpi': '300' }, 'export.dpi'],
      [{ colorSpace: 'original', imageUrl: 'https://example.com/a.jpg', 'export.format': 'webp' }, 'export.format'],
      [{ colorSpace: 'original', imageUrl: 'https://example.com/a.jpg', preserveMetadata: 'exifSubset' }, 'preserveMetadata'],
      [{ colorSpace: 'original', imageUrl: 'https://example.com/a.jpg', keepExistingAlphaChannel: 'auto' }, 'keepExistingAlphaChannel'],
    ];
    for (const [fields, name] of cases) expect(thrown(() => get(fields)).details?.field, JSON.stringify(fields)).toBe(name);
  });

  it('the image: GET needs imageUrl, POST needs a non-empty imageFile', () => {
    expect(thrown(() => v2Options({ fields: EXACT, files: {} }, 'GET')).code).toBe('missing_image');
    const empty = { fields: EXACT, files: { imageFile: [{ filename: 'a.jpg', data: Buffer.alloc(0) }] } };
    expect(thrown(() => v2Options(empty, 'POST')).details).toEqual({ field: 'imageFile' });
    const image = Buffer.from([1, 2, 3]);
    expect(v2Options({ fields: EXACT, files: { imageFile: [{ filename: 'a.jpg', data: image }] } }, 'POST').image_file).toBe(image);
  });
});

describe('the errors', () => {
  it("Photoroom's v2 bodies; a URL refused or not downloaded is 400; messages in Photoroom's names", () => {
    expect(renderPhotoroomV2Error(new ApiError('payment_required'), 'r')).toEqual({ status: 402, body: { error: { detail: expect.any(String) } } });
    expect(renderPhotoroomV2Error(new ApiError('authentication_error'), 'r').status).toBe(403);
    expect(renderPhotoroomV2Error(new ApiError('internal_server_error'), 'r')).toEqual({ status: 500, body: { error: { message: expect.any(String) } } });
    const download = renderPhotoroomV2Error(new ApiError('failed_image_download', 'The image URL answered HTTP 404.', { field: 'bg_image_url' }), 'r');
    expect(download).toEqual({ status: 400, body: { error: { message: 'background.imageUrl: The image URL answered HTTP 404.' } } });
    const both = renderPhotoroomV2Error(new ApiError('validation_error', 'bg_color and bg_image_file were both given.', { field: 'bg_color' }), 'r');
    expect(both.body).toEqual({ error: { message: 'background.color and background.imageFile were both given.' } });
  });
});

/** The docs' words for how a row's value is read. */
function readAs(p: V2Param): string {
  switch (p.read) {
    case 'enum':
      return p.values!.map((v) => `\`${v}\``).join(', ');
    case 'number':
      return `number, ${p.range![0]}${p.exclusiveMin ? ' (excluded)' : ''} to ${p.range![1]}${p.integer ? ', whole' : ''}`;
    case 'bool':
      return '`true`, `false`';
    case 'size':
      return '`0.3` (0 to 0.49), `30%` (0 to 49), `100px`';
    case 'colour':
      return 'hex without `#` (`FF0000`, `FF0000EE`, `F00`), a colour name, `transparent`';
    case 'dimensions':
      return '`auto`, `originalImage`, `croppedSubject`, `WxH`';
    case 'url':
      return 'an http or https URL';
    case 'file':
      return 'a file part';
    default:
      return '—';
  }
}

function v2Markdown(): string {
  const lines = ['| parameter | GET / POST | read as | Photoroom default | bgone | what bgone does |', '|---|---|---|---|---|---|'];
  for (const p of V2_PARAMS) {
    const methods = p.methods === 'both' ? 'both' : p.methods;
    const bgone = p.refused
      ? `refused: ${p.refused}`
      : p.option
          .split(',')
          .map((o) => `\`${o}\``)
          .join(', ');
    lines.push(
      `| \`${p.name}\` | ${methods} | ${p.refused === 'generative' || p.refused === 'template' ? '—' : readAs(p)} | ${p.default === '' ? '—' : `\`${p.default}\``} | ${bgone} | ${p.does} |`,
    );
  }
  return `${lines.join('\n')}\n`;
}

describe('docs/compatibility.md', () => {
  it('the photoroom-v2 table is generated from the dialect', () => {
    expectGeneratedSection('compatibility.md', 'photoroom-v2-params', 'src/api/dialects/photoroom-v2.ts', v2Markdown(), 'test/unit/photoroom-v2.test.ts');
  });
});
