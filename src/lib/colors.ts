/**
 * Parsing of bg_color: #RGB, #RRGGBB, #RRGGBBAA (with or without '#'), rgb(r, g, b) and the CSS
 * named colours, whose table comes from the color-name package (the CSS Color Module Level 4 list).
 */
import namedColors from 'color-name';
import { BgoneError } from './errors.js';

/** The accepted forms, as listed in validation errors (details.allowed). */
export const COLOR_FORMS = ['#RGB', '#RRGGBB', '#RRGGBBAA', 'rgb(r, g, b)', 'a CSS colour name'];

export type Rgba = [number, number, number, number];

/** Parses a bg_color value (or another colour option's, named by `field`; case- and surrounding-whitespace-insensitive) into RGBA bytes. */
export function parseColor(input: string, field = 'bg_color'): Rgba {
  const value = input.trim().toLowerCase();
  // Own keys only: the table is a plain object, and "constructor" is not a colour.
  if (Object.hasOwn(namedColors, value)) {
    const [r, g, b] = namedColors[value]!;
    return [r, g, b, 255];
  }
  const hex = /^#?([0-9a-f]{3}|[0-9a-f]{6}|[0-9a-f]{8})$/.exec(value);
  if (hex) {
    let digits = hex[1]!;
    if (digits.length === 3) digits = [...digits].map((d) => d + d).join('');
    return [0, 2, 4, 6].map((i) => (i < digits.length ? parseInt(digits.slice(i, i + 2), 16) : 255)) as Rgba;
  }
  const rgb = /^rgb\(\s*(\d{1,3})\s*,\s*(\d{1,3})\s*,\s*(\d{1,3})\s*\)$/.exec(value);
  if (rgb) {
    const channels = rgb.slice(1, 4).map(Number);
    if (channels.every((c) => c <= 255)) return [channels[0]!, channels[1]!, channels[2]!, 255];
  }
  throw new BgoneError('validation_error', `${field} must be ${COLOR_FORMS.join(', ')}.`, { field, allowed: COLOR_FORMS });
}
