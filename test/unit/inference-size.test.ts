import { describe, expect, it } from 'vitest';
import { inferenceSide, withInferenceSize } from '../../src/lib/inference-size.js';
import { normaliseOptions } from '../../src/lib/options.js';

const options = (size: string) => normaliseOptions({ size }).native;

describe('the inference size follows the output (preview and medium only)', () => {
  it('small outputs: 896, larger ones: 1024', () => {
    expect(inferenceSide(250_000)).toBe(896);
    expect(inferenceSide(600_000)).toBe(896);
    expect(inferenceSide(600_001)).toBe(1024);
    expect(inferenceSide(16_000_000)).toBe(1024);
  });

  it('preview of a 12 MP photo (0.25 MP output): 896, with the guided radius scaled (6 -> 5)', () => {
    const job = withInferenceSize(options('preview'), 4000, 3000);
    expect(job).toMatchObject({ inferenceSize: 896, guidedRadius: 5 });
  });

  it('medium of a 0.4 MP photo (the photo is the output): 896', () => {
    expect(withInferenceSize(options('medium'), 800, 500).inferenceSize).toBe(896);
  });

  it('medium of a 12 MP photo (1.5 MP output): 1024, options unchanged', () => {
    const normalised = options('medium');
    expect(withInferenceSize(normalised, 4000, 3000)).toBe(normalised);
  });

  it('a region of interest of up to 0.6 MP decides by its own pixels, whatever the preset', () => {
    const full = options('full');
    expect(withInferenceSize({ ...full, roi: [0, 0, 960, 540] }, 1920, 1080).inferenceSize).toBe(896);
    expect(withInferenceSize({ ...full, roi: [0, 0, 1920, 540] }, 1920, 1080).inferenceSize).toBe(1024);
    expect(withInferenceSize({ ...options('preview'), roi: [0, 0, 4000, 3000] }, 4000, 3000).inferenceSize).toBe(896);
  });

  it('an exact canvas decides by its own pixels, not the preset', () => {
    const large = { ...options('preview'), canvasWidth: 2000, canvasHeight: 2000 };
    expect(withInferenceSize(large, 4000, 3000)).toBe(large);
    const small = { ...options('medium'), canvasWidth: 500, canvasHeight: 500 };
    expect(withInferenceSize(small, 4000, 3000).inferenceSize).toBe(896);
  });

  it.each(['full', 'hd'])('%s keeps 1024 even for a small photo', (size) => {
    const normalised = options(size);
    expect(withInferenceSize(normalised, 640, 480)).toBe(normalised);
  });

  it('never raises a smaller inference size that was asked for, and never changes its input', () => {
    const asked = { ...options('preview'), inferenceSize: 512 };
    expect(withInferenceSize(asked, 4000, 3000)).toBe(asked);
    const normalised = options('preview');
    withInferenceSize(normalised, 640, 480);
    expect(normalised.inferenceSize).toBe(1024);
  });
});
