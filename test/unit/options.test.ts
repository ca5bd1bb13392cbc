/**
 * Option validation and normalisation (src/lib/options.ts): pure TypeScript, no addon, no model.
 * Every value outside the spec is a validation_error naming the offending field (details.field);
 * nothing is silently ignored. The colour forms themselves are in colors.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { openApiDocument } from '../../src/api/openapi.js';
import { expectBgoneError, expectThrowsBgone } from '../helpers/assert.js';
import { type BgoneError, ERROR_CODES, MAX_FILE_BYTES, MAX_SIDE, normaliseOptions, removeBackground, SIZE_PIXELS } from '../helpers/bgone.js';
import { PHOTOS } from '../helpers/constants.js';
import { readPhoto } from '../helpers/paths.js';

/** Expects normaliseOptions(options) to throw a validation_error for `field`. */
function rejects(options: Record<string, unknown>, field: string): BgoneError {
  const error = expectThrowsBgone(() => normaliseOptions(options as never), 'validation_error');
  expect(error.details?.field).toBe(field);
  expect(error.message).not.toBe('');
  return error;
}

const native = (options: Record<string, unknown>) => normaliseOptions(options as never).native;

describe('defaults', () => {
  it('an empty options object means png, rgba, full size, no crop, no background, refine on', () => {
    const { native: n, model } = normaliseOptions({});
    expect(n).toMatchObject({
      format: 'png',
      channels: 'rgba',
      maxPixels: 16_000_000,
      crop: 'none',
      paddingShare: [0.1, 0.1, 0.1, 0.1],
      paddingPx: [0, 0, 0, 0],
      scale: 0,
      position: null,
      canvasWidth: 0,
      canvasHeight: 0,
      roi: null,
      refine: true,
      maxSide: 6000,
    });
    expect(n.background).toBeNull();
    expect(model).toBeUndefined();
  });

  it("the request's part of the native core's object has every field set, the internal tuning included (C++ has no defaults); the job plan sets the rest", () => {
    const n = native({});
    expect(Object.keys(n).sort()).toEqual(
      [
        'aspectHeight',
        'aspectWidth',
        'background',
        'channels',
        'crop',
        'format',
        'maxPixels',
        'maxSide',
        'minSubject',
        'paddingShare',
        'paddingPx',
        'scale',
        'position',
        'canvasWidth',
        'canvasHeight',
        'placement',
        'maxCanvas',
        'marginShare',
        'marginPx',
        'areaShare',
        'areaPx',
        'cover',
        'snap',
        'referenceBox',
        'roi',
        'pngCompression',
        'quality',
        'refine',
        'zip',
        'shadow',
        'shadowOpacity',
        'shadowOffsetX',
        'shadowOffsetY',
        'shadowBlur',
        'contactBand',
        'contactHeight',
        'contactBlur',
        'opaqueInterior',
        'interiorMin',
        'interiorInset',
        'despill',
        'despillBand',
        'despillKeyMargin',
        'dpi',
        'inference',
        'keepAlpha',
        'metadata',
        'colorSpace',
        'outline',
        'outlineWidth',
        'outlineBlur',
        'bgBlur',
        'bgBlurRadius',
        'bgFit',
      ].sort(),
    );
    for (const [field, value] of Object.entries(n)) expect(value, field).not.toBeUndefined();
    expect(n).toMatchObject({
      minSubject: 1e-4,
      quality: 90,
      pngCompression: 1,
      shadow: 'none',
      shadowOpacity: 0.5,
      opaqueInterior: false,
      despill: false,
      dpi: 0,
      inference: true,
      keepAlpha: false,
      metadata: 'none',
      colorSpace: 'srgb',
    });
  });

  it("effort is carried to the job plan, which sets the family's runs for it: the request's native options do not differ; standard is the default", () => {
    expect(native({ effort: 'best' })).toEqual(native({}));
    expect(normaliseOptions({ effort: 'best' }).effort).toBe('best');
    expect(normaliseOptions({}).effort).toBe('standard');
  });

  it('normaliseOptions() without an argument is the same as {}', () => {
    expect(normaliseOptions()).toEqual(normaliseOptions({}));
  });

  it('undefined, null and empty-string values fall back to the defaults', () => {
    for (const empty of [undefined, null, '']) {
      expect(native({ format: empty, channels: empty, size: empty, crop: empty, padding: empty, bgColor: empty })).toEqual(native({}));
    }
  });

  it('exports the documented limits and the closed list of error codes', () => {
    expect(MAX_FILE_BYTES).toBe(20 * 1024 * 1024);
    expect(MAX_SIDE).toBe(6000);
    expect(SIZE_PIXELS).toEqual({ preview: 250_000, medium: 1_500_000, hd: 4_000_000, full: 16_000_000 });
    expect([...ERROR_CODES].sort()).toEqual(
      [
        'failed_image_download',
        'foreground_not_found',
        'image_too_large',
        'internal_error',
        'invalid_image',
        'invalid_image_url',
        'invalid_roi',
        'missing_image',
        'model_unavailable',
        'unsupported_media_type',
        'validation_error',
      ].sort(),
    );
  });
});

describe('format', () => {
  it.each(['png', 'jpg', 'webp', 'avif'])('accepts %s', (format) => {
    expect(native({ format }).format).toBe(format);
  });

  it('is case- and whitespace-insensitive', () => {
    expect(native({ format: ' PNG ' }).format).toBe('png');
    expect(native({ format: 'WebP' }).format).toBe('webp');
  });

  it.each(['jpeg', 'gif', 'tiff', 'heic', 'png8', 'p ng'])('rejects %j', (format) => {
    const error = rejects({ format }, 'format');
    expect(error.details?.allowed).toEqual(['png', 'jpg', 'webp', 'avif', 'zip', 'auto']);
  });

  it('zip is a JPEG of the colours with its alpha beside it, one native call', () => {
    expect(native({ format: 'zip' })).toMatchObject({ format: 'jpg', zip: true, channels: 'rgba' });
    expect(native({ format: 'jpg' }).zip).toBe(false);
    expect(native({}).zip).toBe(false);
  });

  it("zip with channels=alpha: the mask as the colours, at JPEG quality 100 (remove.bg's clients compose it with an opaque alpha)", () => {
    expect(native({ format: 'zip', channels: 'alpha' })).toMatchObject({ format: 'jpg', zip: true, channels: 'alpha', quality: 100 });
    expect(native({ format: 'zip' }).quality).toBe(90);
    expect(native({ format: 'jpg', channels: 'alpha' }).quality).toBe(90);
  });

  it.each([1, true, ['png'], { png: true }])('rejects the non-string %j', (format) => {
    rejects({ format }, 'format');
  });
});

describe('channels', () => {
  it.each(['rgba', 'alpha', 'ALPHA'])('accepts %s', (channels) => {
    expect(native({ channels }).channels).toBe(channels.toLowerCase());
  });

  it.each(['rgb', 'mask', 'a', 4])('rejects %j', (channels) => {
    rejects({ channels }, 'channels');
  });

  it('channels=alpha drops bg_color (a mask has no background)', () => {
    expect(native({ channels: 'alpha', bgColor: '#ff0000' }).background).toBeNull();
    expect(native({ channels: 'rgba', bgColor: '#ff0000' }).background).toEqual([255, 0, 0, 255]);
  });
});

describe('size', () => {
  it.each([
    ['preview', 250_000],
    ['medium', 1_500_000],
    ['hd', 4_000_000],
    ['full', 16_000_000],
  ])('%s is a budget of %i pixels', (size, pixels) => {
    expect(native({ size }).maxPixels).toBe(pixels);
  });

  it.each(['small', 'large', '4k', 'HD+', 'auto', 1024])('rejects %j', (size) => {
    const error = rejects({ size }, 'size');
    expect(error.details?.allowed).toEqual(['preview', 'medium', 'hd', 'full']);
  });
});

// Every colour form is tested in colors.test.ts; here, that the option carries parseColor's answer.
describe('bg_color', () => {
  it.each([
    ['#aabbcc80', [0xaa, 0xbb, 0xcc, 0x80]],
    ['rgb(1, 2, 3)', [1, 2, 3, 255]],
    ['cornflowerblue', [100, 149, 237, 255]],
  ])('passes %j to the native core as its RGBA', (input, rgba) => {
    expect(native({ bgColor: input }).background).toEqual(rgba);
  });

  it('is null (transparent, or white for JPEG) when not given', () => {
    expect(native({}).background).toBeNull();
  });

  it.each(['rgb(300,0,0)', '#abcd', 'notacolor'])('rejects %j naming bg_color with the accepted forms', (input) => {
    const error = rejects({ bgColor: input }, 'bg_color');
    expect(Array.isArray(error.details?.allowed)).toBe(true);
  });

  it.each([123, true, ['#fff'], { r: 1 }])('rejects the non-string %j', (bgColor) => {
    rejects({ bgColor }, 'bg_color');
  });
});

describe('crop', () => {
  it.each([
    [true, { crop: 'subject' }],
    ['true', { crop: 'subject' }],
    ['TRUE', { crop: 'subject' }],
    [false, { crop: 'none' }],
    ['false', { crop: 'none' }],
    ['16:9', { crop: 'aspect', aspectWidth: 16, aspectHeight: 9 }],
    ['1:1', { crop: 'aspect', aspectWidth: 1, aspectHeight: 1 }],
    ['4:5', { crop: 'aspect', aspectWidth: 4, aspectHeight: 5 }],
    [' 3:2 ', { crop: 'aspect', aspectWidth: 3, aspectHeight: 2 }],
    ['100:1', { crop: 'aspect', aspectWidth: 100, aspectHeight: 1 }],
    ['1:100', { crop: 'aspect', aspectWidth: 1, aspectHeight: 100 }],
  ])('accepts %j', (crop, expected) => {
    expect(native({ crop })).toMatchObject(expected);
  });

  it.each(['0:1', '1:0', '0:0', 'a:b', '16/9', '16:9:1', '-16:9', '1.5:1', ':', '16:', 'yes', '1', '101:1', '1:101', 1, 0, {}])('rejects %j', (crop) => {
    rejects({ crop }, 'crop');
  });
});

describe('padding', () => {
  it.each([
    ['10%', 0.1],
    ['0%', 0],
    ['100%', 1],
    ['12.5%', 0.125],
    [' 20% ', 0.2],
    ['0.25', 0.25],
    ['0', 0],
    ['1', 1],
    ['.5', 0.5],
    ['1.0', 1],
    ['100.00%', 1],
    ['050%', 0.5],
    [0.3, 0.3],
    [0, 0],
    [1, 1],
  ])('accepts %j as %d', (padding, fraction) => {
    for (const share of native({ crop: true, padding }).paddingShare) expect(share).toBeCloseTo(fraction, 10);
  });

  it('defaults to 10 % of the subject width', () => {
    expect(native({ crop: true }).paddingShare).toEqual([0.1, 0.1, 0.1, 0.1]);
    expect(native({ crop: '1:1' }).paddingShare).toEqual([0.1, 0.1, 0.1, 0.1]);
  });

  it('takes one, two or four values in CSS order, each %, px or a fraction', () => {
    expect(native({ crop: true, padding: '10px 20px 30px 40px' })).toMatchObject({ paddingPx: [10, 20, 30, 40], paddingShare: [0, 0, 0, 0] });
    expect(native({ crop: true, padding: '5% 8px' })).toMatchObject({ paddingPx: [0, 8, 0, 8], paddingShare: [0.05, 0, 0.05, 0] });
    expect(native({ crop: true, padding: '0.2 0 6000px 1%' })).toMatchObject({ paddingPx: [0, 0, 6000, 0], paddingShare: [0.2, 0, 0, 0.01] });
    for (const padding of ['1px 2px 3px', '1px 2px 3px 4px 5px', '6001px', '10PX', '-1px', '1.5px']) rejects({ crop: true, padding }, 'padding');
  });

  it.each([
    '150%',
    '101%',
    '100.5%',
    '1000%',
    '1.01',
    '-1',
    '-10%',
    '1.5',
    '2',
    'abc',
    '10 %',
    '%',
    '10%%',
    '0.1.2',
    '1e-1',
    1.5,
    -0.1,
    Number.NaN,
    Number.POSITIVE_INFINITY,
    true,
    [0.1],
  ])('rejects %j', (padding) => {
    rejects({ crop: true, padding }, 'padding');
  });

  it("the OpenAPI document's pattern is the one the parser applies: it accepts and refuses the same texts", () => {
    const doc = openApiDocument() as { components: { schemas: { RemoveRequest: { properties: { padding: { pattern: string } } } } } };
    const pattern = new RegExp(doc.components.schemas.RemoveRequest.properties.padding.pattern);
    for (const text of ['10%', '0%', '100%', '12.5%', '050%', '100.00%', '0.25', '0', '1', '1.0', '.5']) expect(pattern.test(text), text).toBe(true);
    for (const text of ['150%', '101%', '100.5%', '1000%', '1.01', '1.5', '-1', '10 %', '%', '1e-1']) expect(pattern.test(text), text).toBe(false);
  });
});

describe('shadow and shadow_opacity', () => {
  it.each(['none', 'drop', 'contact', 'DROP', ' contact '])('accepts %j', (shadow) => {
    expect(native({ shadow }).shadow).toBe(shadow.trim().toLowerCase());
  });

  it.each(['3d', 'car', 'true', 1, true])('rejects %j', (shadow) => {
    const error = rejects({ shadow }, 'shadow');
    expect(error.details?.allowed).toEqual(['none', 'drop', 'contact']);
  });

  it.each([
    ['0%', 0],
    ['50%', 0.5],
    ['100%', 1],
    ['12.5%', 0.125],
    ['0.3', 0.3],
    ['1', 1],
    [0.75, 0.75],
    [0, 0],
  ])('shadow_opacity %j is %d', (shadowOpacity, share) => {
    expect(native({ shadow: 'drop', shadowOpacity }).shadowOpacity).toBe(share);
  });

  it.each(['101%', '1.5', '-10%', 'half', '50', 1.01, -0.1, Number.NaN, true])('rejects shadow_opacity %j', (shadowOpacity) => {
    rejects({ shadow: 'drop', shadowOpacity }, 'shadow_opacity');
  });

  it('shadow_opacity without a shadow, or with none, is a validation_error naming it; 50 % by default', () => {
    expect(rejects({ shadowOpacity: '50%' }, 'shadow_opacity').details?.shadow).toBe('none');
    rejects({ shadow: 'none', shadowOpacity: 0.2 }, 'shadow_opacity');
    expect(native({ shadow: 'contact' }).shadowOpacity).toBe(0.5);
  });

  it('channels=alpha has no shadow (a mask is the subject alone), however asked', () => {
    expect(native({ channels: 'alpha', shadow: 'drop', shadowOpacity: '80%' }).shadow).toBe('none');
  });

  it("the OpenAPI document's pattern for shadow_opacity is the one the parser applies", () => {
    const doc = openApiDocument() as { components: { schemas: { RemoveRequest: { properties: { shadow_opacity: { pattern: string } } } } } };
    const pattern = new RegExp(doc.components.schemas.RemoveRequest.properties.shadow_opacity.pattern);
    for (const text of ['0%', '50%', '100%', '12.5%', '0', '0.5', '1', '1.0', '.5']) expect(pattern.test(text), text).toBe(true);
    for (const text of ['101%', '1.5', '-1', '50', '50 %', '%', '1e-1', '5px']) expect(pattern.test(text), text).toBe(false);
  });
});

describe('semitransparency and despill', () => {
  it.each([
    ['true', true],
    ['TRUE', true],
    [' False ', false],
    [true, true],
    [false, false],
  ])('take %j as %s (a form sends text, the library and JSON booleans)', (value, flag) => {
    expect(native({ semitransparency: value }).opaqueInterior).toBe(!flag);
    expect(native({ despill: value }).despill).toBe(flag);
  });

  it.each(['yes', '1', 0, 1, 'on'])('reject %j, naming the field', (value) => {
    rejects({ semitransparency: value }, 'semitransparency');
    rejects({ despill: value }, 'despill');
  });

  it('semitransparency=false applies to a mask too; despill does not (a mask has no colours)', () => {
    expect(native({ channels: 'alpha', semitransparency: false }).opaqueInterior).toBe(true);
    expect(native({ channels: 'alpha', despill: true }).despill).toBe(false);
  });
});

describe('refine, model and the options object', () => {
  it('refine accepts booleans only', () => {
    expect(native({ refine: false }).refine).toBe(false);
    expect(native({ refine: true }).refine).toBe(true);
    for (const refine of ['true', 1, 'no']) rejects({ refine }, 'refine');
  });

  it('model must be a string', () => {
    expect(normaliseOptions({ model: 'small' }).model).toBe('small');
    for (const model of [1, true, {}]) rejects({ model }, 'model');
  });

  it('options must be an object', () => {
    for (const options of [null, 'png', 42]) {
      const error = expectThrowsBgone(() => normaliseOptions(options as never), 'validation_error');
      expect(error.details?.field).toBe('options');
    }
  });
});

describe('removeBackground validates before doing any work', () => {
  const image = readPhoto(PHOTOS.teddy);

  it.each([
    [{ format: 'gif' }, 'format'],
    [{ channels: 'rgb' }, 'channels'],
    [{ size: 'huge' }, 'size'],
    [{ bgColor: 'notacolor' }, 'bg_color'],
    [{ crop: '0:1' }, 'crop'],
    [{ crop: true, padding: '150%' }, 'padding'],
    [{ refine: 'yes' }, 'refine'],
  ])('%j is a validation_error for %s', async (options, field) => {
    const error = await expectBgoneError(removeBackground(image, options as never), 'validation_error');
    expect(error.details?.field).toBe(field);
  });

  it('an unknown model name is a validation_error listing the installed models', async () => {
    const error = await expectBgoneError(removeBackground(image, { model: 'no-such-model' }), 'validation_error');
    expect(error.details?.field).toBe('model');
    expect(error.details?.allowed).toEqual(expect.arrayContaining(['medium', 'small']));
  });

  it('null options are a validation_error', async () => {
    const error = await expectBgoneError(removeBackground(image, null as never), 'validation_error');
    expect(error.details?.field).toBe('options');
  });
});

describe('export and cutout: quality, dpi, remove_background, keep_alpha', () => {
  it("quality: 1..100 for the lossy formats (a zip's color.jpg, auto's JPEG), default 90; it wins over the zip mask's 100", () => {
    for (const format of ['jpg', 'webp', 'avif', 'zip', 'auto']) expect(native({ format, quality: 42 }).quality, format).toBe(42);
    expect(native({ format: 'jpg', quality: '7' }).quality).toBe(7);
    expect(native({ format: 'avif' }).quality).toBe(90);
    expect(native({ format: 'zip', channels: 'alpha', quality: 80 }).quality).toBe(80);
    for (const quality of [1, 100]) expect(native({ format: 'webp', quality }).quality).toBe(quality);
  });

  it.each([0, 101, 50.5, '9x', 'high', true])('quality %j: validation_error naming quality', (quality) => {
    rejects({ format: 'jpg', quality }, 'quality');
  });

  it('quality with png (named, or the default format): validation_error naming quality', () => {
    expect(rejects({ format: 'png', quality: 80 }, 'quality').details).toMatchObject({ format: 'png' });
    rejects({ quality: 80 }, 'quality');
  });

  it('dpi: 72..1200 into the native field (0 when left out), with every format', () => {
    expect(native({}).dpi).toBe(0);
    for (const format of ['png', 'jpg', 'webp', 'avif', 'zip', 'auto']) expect(native({ format, dpi: 300 }).dpi, format).toBe(300);
    expect(native({ dpi: '72' }).dpi).toBe(72);
    expect(native({ dpi: 1200 }).dpi).toBe(1200);
  });

  it.each([71, 1201, 0, 299.5, '300dpi', '-300', false])('dpi %j: validation_error naming dpi', (dpi) => {
    rejects({ dpi }, 'dpi');
  });

  it('remove_background: true by default; false is a job without inference; keep_alpha auto sets keepAlpha where the model may run', () => {
    expect(native({})).toMatchObject({ inference: true, keepAlpha: false });
    expect(native({ removeBackground: 'false' })).toMatchObject({ inference: false, keepAlpha: false });
    expect(native({ removeBackground: true, keepAlpha: 'auto' })).toMatchObject({ inference: true, keepAlpha: true });
    expect(native({ keepAlpha: 'never' })).toMatchObject({ inference: true, keepAlpha: false });
    // With remove_background=false the image's own alpha is the matte anyway: keep_alpha=auto asks nothing more.
    expect(native({ removeBackground: false, keepAlpha: 'auto' })).toMatchObject({ inference: false, keepAlpha: false });
  });

  it.each([['maybe'], [1], ['no']])('remove_background %j: validation_error naming remove_background', (value) => {
    rejects({ removeBackground: value }, 'remove_background');
  });

  it.each([['always'], ['true'], [true]])('keep_alpha %j: validation_error naming keep_alpha', (value) => {
    rejects({ keepAlpha: value }, 'keep_alpha');
  });

  it.each([
    [{ shadow: 'drop' }, 'shadow'],
    [{ shadow: 'contact', shadowOpacity: '40%' }, 'shadow'],
    [{ despill: true }, 'despill'],
    [{ semitransparency: false }, 'semitransparency'],
    [{ refine: true }, 'refine'],
    [{ effort: 'best' }, 'effort'],
  ])("remove_background=false with %j: validation_error naming %s (it works on the model's matte)", (options, field) => {
    const error = rejects({ removeBackground: false, ...options }, field);
    expect(error.details).toMatchObject({ fields: [field, 'remove_background'] });
  });

  it('remove_background=false with what asks nothing of the matte: accepted', () => {
    expect(native({ removeBackground: false, shadow: 'none', despill: false, semitransparency: true, refine: false, effort: 'standard' })).toMatchObject({
      inference: false,
      shadow: 'none',
      despill: false,
      opaqueInterior: false,
    });
    expect(native({ removeBackground: false, crop: true, bgColor: 'red', outputSize: '500x500', channels: 'alpha' }).inference).toBe(false);
  });

  it.each([
    [{ despill: true }, 'despill'],
    [{ semitransparency: false }, 'semitransparency'],
  ])("keep_alpha=auto with %j: validation_error naming %s (an image kept as its own matte has no model's matte)", (options, field) => {
    const error = rejects({ keepAlpha: 'auto', ...options }, field);
    expect(error.details).toMatchObject({ fields: [field, 'keep_alpha'] });
  });

  it('keep_alpha=auto with a shadow, refine or effort=best: accepted (the shadow is made from whichever matte; the others apply when the model runs)', () => {
    expect(native({ keepAlpha: 'auto', shadow: 'drop', refine: false })).toMatchObject({ keepAlpha: true, shadow: 'drop', refine: false });
    expect(normaliseOptions({ keepAlpha: 'auto', effort: 'best' }).effort).toBe('best');
  });
});
