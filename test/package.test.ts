/**
 * The library run straight from its TypeScript sources (src/index.ts), as vitest, tsx or ts-node
 * do, must find its native addon and its models like the compiled package does (src/native.ts
 * locates the package root from its own file, whether it lives in src/ or dist/src/).
 */
import { describe, expect, it } from 'vitest';
import { PHOTOS } from './helpers/constants.js';
import { readPhoto } from './helpers/paths.js';

describe('running from source', () => {
  it('src/index.ts loads the addon and the default model and removes a background', async () => {
    const src = await import('../src/index.js');
    const result = await src.removeBackground(readPhoto(PHOTOS.teddy), { size: 'preview' });
    expect({ width: result.width, height: result.height, channels: result.channels }).toEqual({ width: 284, height: 398, channels: 4 });
  });
});
