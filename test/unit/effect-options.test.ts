/**
 * The outline's and the background's options (outline_color, outline_width, outline_blur, bg_blur,
 * bg_blur_mode, bg_fit; src/lib/options.ts effectsOf): what each gives the native core, and every
 * refusal, a validation_error naming the field, never an option ignored. Pure TypeScript: the
 * pictures are in test/lib/outline-blur.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { expectThrowsBgone } from '../helpers/assert.js';
import { type BgoneError, normaliseOptions } from '../helpers/bgone.js';

function rejects(options: Record<string, unknown>, field: string): BgoneError {
  const error = expectThrowsBgone(() => normaliseOptions(options as never), 'validation_error');
  expect(error.details?.field).toBe(field);
  expect(error.message).toContain(field);
  return error;
}

const native = (options: Record<string, unknown>) => normaliseOptions(options as never).native;
const png = Buffer.from([0x89, 0x50, 0x4e, 0x47]);

describe('the effects are off unless asked', () => {
  it('no outline, no blurred background, the background image covering', () => {
    expect(native({})).toMatchObject({ outline: null, outlineWidth: 0.03, outlineBlur: 0, bgBlur: 'none', bgBlurRadius: 0, bgFit: 'cover' });
  });

  it('left out and empty are the same', () => {
    for (const empty of [undefined, null, '']) {
      expect(native({ outlineColor: empty, outlineWidth: empty, outlineBlur: empty, bgBlur: empty, bgBlurMode: empty, bgFit: empty })).toEqual(native({}));
    }
  });
});

describe('outline_color, outline_width, outline_blur', () => {
  it('the colour in the forms of bg_color, the width and blur as fractions (number or text) with their defaults', () => {
    expect(native({ outlineColor: '#ff000080' })).toMatchObject({ outline: [255, 0, 0, 128], outlineWidth: 0.03, outlineBlur: 0 });
    expect(native({ outlineColor: 'white', outlineWidth: '0.1', outlineBlur: 0.025 })).toMatchObject({
      outline: [255, 255, 255, 255],
      outlineWidth: 0.1,
      outlineBlur: 0.025,
    });
    expect(native({ outlineColor: 'black', outlineWidth: 0, outlineBlur: '.01' })).toMatchObject({ outlineWidth: 0, outlineBlur: 0.01 });
  });

  it.each(['nope', '#12', 'rgb(300, 0, 0)'])('outline_color %j: refused, naming it', (outlineColor) => {
    const error = rejects({ outlineColor }, 'outline_color');
    expect(error.details?.allowed).toBeDefined();
  });

  it('outline_color that is not text: refused, naming it', () => {
    rejects({ outlineColor: 12 }, 'outline_color');
  });

  it.each([0.11, -0.01, '3%', '0.5', 'wide', '1', Number.NaN, true])('outline_width %j: refused, naming it', (outlineWidth) => {
    rejects({ outlineColor: 'white', outlineWidth }, 'outline_width');
  });

  it.each([0.026, -0.001, '2%', 'soft', Number.POSITIVE_INFINITY])('outline_blur %j: refused, naming it', (outlineBlur) => {
    rejects({ outlineColor: 'white', outlineBlur }, 'outline_blur');
  });

  it('outline_width or outline_blur without outline_color: refused, naming it', () => {
    rejects({ outlineWidth: 0.05 }, 'outline_width');
    rejects({ outlineBlur: 0.01 }, 'outline_blur');
  });

  it('outline_color with channels=alpha (a mask is the subject alone): refused, naming outline_color', () => {
    const error = rejects({ outlineColor: 'white', channels: 'alpha' }, 'outline_color');
    expect(error.details?.fields).toEqual(['outline_color', 'channels']);
  });
});

describe('bg_blur, bg_blur_mode', () => {
  it('a radius above 0 and at most 0.05; gaussian unless bokeh is asked', () => {
    expect(native({ bgBlur: '0.01' })).toMatchObject({ bgBlur: 'gaussian', bgBlurRadius: 0.01 });
    expect(native({ bgBlur: 0.05, bgBlurMode: 'BOKEH' })).toMatchObject({ bgBlur: 'bokeh', bgBlurRadius: 0.05 });
    expect(native({ bgBlur: 0.001, bgBlurMode: 'gaussian' })).toMatchObject({ bgBlur: 'gaussian', bgBlurRadius: 0.001 });
  });

  it.each([0, '0', 0.051, '0.06', -0.01, '1%', 'soft', Number.NaN])('bg_blur %j: refused, naming it', (bgBlur) => {
    rejects({ bgBlur }, 'bg_blur');
  });

  it('bg_blur_mode other than gaussian or bokeh: refused, naming it', () => {
    const error = rejects({ bgBlur: 0.01, bgBlurMode: 'box' }, 'bg_blur_mode');
    expect(error.details?.allowed).toEqual(['gaussian', 'bokeh']);
  });

  it('bg_blur_mode without bg_blur: refused, naming it', () => {
    rejects({ bgBlurMode: 'bokeh' }, 'bg_blur_mode');
  });

  it.each([
    [{ bgColor: '#fff' }, 'bg_color'],
    [{ bgImageFile: png }, 'bg_image_file'],
    [{ bgImageUrl: 'https://example.com/b.jpg' }, 'bg_image_url'],
  ])('bg_blur with %j (two backgrounds): refused, naming both', (other, name) => {
    const error = rejects({ bgBlur: 0.01, ...other }, 'bg_blur');
    expect(error.details?.fields).toEqual(['bg_blur', name]);
    expect(error.message).toContain(name);
  });

  it('bg_blur with channels=alpha: refused, naming bg_blur', () => {
    rejects({ bgBlur: 0.01, channels: 'alpha' }, 'bg_blur');
  });
});

describe('bg_fit', () => {
  it('cover (the default) or contain, with a background image', () => {
    expect(native({ bgImageFile: png, bgFit: 'contain' })).toMatchObject({ bgFit: 'contain' });
    expect(native({ bgImageUrl: 'https://example.com/b.jpg', bgFit: 'Cover' })).toMatchObject({ bgFit: 'cover' });
    expect(native({ bgImageFile: png, bgFit: 'cover' })).toEqual(native({ bgImageFile: png }));
  });

  it('without a background image (none, or a colour): refused, naming it', () => {
    rejects({ bgFit: 'contain' }, 'bg_fit');
    rejects({ bgFit: 'cover', bgColor: 'white' }, 'bg_fit');
  });

  it('other values: refused, naming it', () => {
    rejects({ bgImageFile: png, bgFit: 'stretch' }, 'bg_fit');
  });
});
