/**
 * parseColor (src/lib/colors.ts): every bg_color form docs/contract.md lists (#RGB, #RRGGBB, #RRGGBBAA with
 * or without '#', rgb(r, g, b), CSS colour names) and what is refused. Pure TypeScript, no model.
 */
import { describe, expect, it } from 'vitest';
import { expectThrowsBgone } from '../helpers/assert.js';
import { parseColor } from '../helpers/bgone.js';

describe('hexadecimal forms', () => {
  it.each([
    ['#abc', [0xaa, 0xbb, 0xcc, 255]],
    ['abc', [0xaa, 0xbb, 0xcc, 255]],
    ['#F0a', [0xff, 0x00, 0xaa, 255]],
    ['#aabbcc', [0xaa, 0xbb, 0xcc, 255]],
    ['aabbcc', [0xaa, 0xbb, 0xcc, 255]],
    ['#AABBCC', [0xaa, 0xbb, 0xcc, 255]],
    ['#000000', [0, 0, 0, 255]],
    ['#aabbcc80', [0xaa, 0xbb, 0xcc, 0x80]],
    ['aabbcc00', [0xaa, 0xbb, 0xcc, 0]],
    ['#FFFFFFFF', [255, 255, 255, 255]],
    ['  #FFF  ', [255, 255, 255, 255]],
  ])('%j is %j', (input, rgba) => {
    expect(parseColor(input)).toEqual(rgba);
  });

  it.each(['#', '#ab', '#abcd', '#abcde', '#aabbccd', '#aabbccddee', '#ggg', '##abc', '# abc', '0x123456'])('refuses %j', (input) => {
    expectThrowsBgone(() => parseColor(input), 'validation_error');
  });
});

describe('rgb(r, g, b)', () => {
  it.each([
    ['rgb(1, 2, 3)', [1, 2, 3, 255]],
    ['rgb(1,2,3)', [1, 2, 3, 255]],
    ['RGB( 255 , 0 , 255 )', [255, 0, 255, 255]],
    ['rgb(0, 0, 0)', [0, 0, 0, 255]],
    ['rgb(007, 08, 9)', [7, 8, 9, 255]],
  ])('%j is %j', (input, rgba) => {
    expect(parseColor(input)).toEqual(rgba);
  });

  it.each([
    'rgb(300,0,0)',
    'rgb(0, 256, 0)',
    'rgb(1, 2)',
    'rgb(1, 2, 3, 4)',
    'rgba(1, 2, 3, 0.5)',
    'rgb(-1, 0, 0)',
    'rgb(1.5, 2, 3)',
    'rgb(1 2 3)',
    'rgb(1000, 0, 0)',
  ])('refuses %j', (input) => {
    expectThrowsBgone(() => parseColor(input), 'validation_error');
  });
});

describe('CSS colour names (CSS Color Module Level 4)', () => {
  it.each([
    ['white', [255, 255, 255, 255]],
    ['black', [0, 0, 0, 255]],
    ['red', [255, 0, 0, 255]],
    ['lime', [0, 255, 0, 255]],
    ['green', [0, 128, 0, 255]],
    ['cornflowerblue', [100, 149, 237, 255]],
    ['rebeccapurple', [102, 51, 153, 255]],
    ['RebeccaPurple', [102, 51, 153, 255]],
    ['gray', [128, 128, 128, 255]],
    ['grey', [128, 128, 128, 255]],
    ['darkslategrey', [47, 79, 79, 255]],
    ['lightgoldenrodyellow', [250, 250, 210, 255]],
    ['yellowgreen', [154, 205, 50, 255]],
    [' Navy ', [0, 0, 128, 255]],
  ])('%j is %j', (input, rgba) => {
    expect(parseColor(input)).toEqual(rgba);
  });

  it('a name that is also hexadecimal digits is the name ("add" is not a colour, "bad" neither; "beige" is)', () => {
    expect(parseColor('beige')).toEqual([245, 245, 220, 255]);
    expect(parseColor('add')).toEqual([0xaa, 0xdd, 0xdd, 255]);
  });

  // "transparent" and "currentcolor" are CSS keywords, not named colours: refused, as before.
  it.each([
    'transparent',
    'currentcolor',
    'notacolor',
    'transparentish',
    'light blue',
    'hsl(0, 100%, 50%)',
    'constructor',
    'toString',
    '__proto__',
    'hasOwnProperty',
    '',
  ])('refuses %j', (input) => {
    expectThrowsBgone(() => parseColor(input), 'validation_error');
  });
});

describe('the error', () => {
  it('names bg_color and lists the accepted forms', () => {
    const error = expectThrowsBgone(() => parseColor('notacolor'), 'validation_error');
    expect(error.details).toEqual({ field: 'bg_color', allowed: ['#RGB', '#RRGGBB', '#RRGGBBAA', 'rgb(r, g, b)', 'a CSS colour name'] });
    expect(error.message).toBe('bg_color must be #RGB, #RRGGBB, #RRGGBBAA, rgb(r, g, b), a CSS colour name.');
  });
});
