/**
 * The library takes the option table's rows under their keys: the image inside the options (bytes,
 * base64 or a URL downloaded from a loopback server with fetchAllowPrivate, or with the host or its
 * network on the fetchAllow list), exactly one source, an
 * option it does not know refused by name, and the idempotency fingerprint moved by every option
 * that changes the output.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requestFingerprint } from '../../src/api/metered-removal.js';
import { OPTION_TABLE } from '../../src/lib/option-table.js';
import { expectBgoneError } from '../helpers/assert.js';
import { configure, prepareJob, removeBackground } from '../helpers/bgone.js';
import { PHOTOS } from '../helpers/constants.js';
import { readPhoto } from '../helpers/paths.js';

const teddy = readPhoto(PHOTOS.teddy); // 284x398
let photos: Server;
let url: string;

beforeAll(async () => {
  photos = createServer((_, res) => res.end(teddy));
  await new Promise<void>((resolve) => photos.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(photos.address() as AddressInfo).port}/teddy.jpg`;
});

afterAll(async () => {
  configure({ fetchAllowPrivate: false, fetchAllow: [] });
  await new Promise((resolve) => photos.close(resolve));
});

describe('the image inside the options', () => {
  it('imageFile, imageFileB64 and imageUrl run to the bytes of removeBackground(bytes)', async () => {
    const direct = await removeBackground(teddy, { size: 'preview', format: 'auto' });
    expect(direct.format).toBe('png');
    const inside = await removeBackground({ imageFile: teddy, size: 'preview', format: 'auto' });
    const b64 = await removeBackground({ imageFileB64: `data:image/jpeg;base64,${teddy.toString('base64')}`, size: 'preview', format: 'auto' });
    configure({ fetchAllowPrivate: true });
    const byUrl = await removeBackground({ imageUrl: url, size: 'preview', format: 'auto' });
    for (const result of [inside, b64, byUrl]) expect(result.data.equals(direct.data)).toBe(true);
  });

  it('refuses a loopback URL unless fetchAllowPrivate is set', async () => {
    configure({ fetchAllowPrivate: false });
    const err = await removeBackground({ imageUrl: url }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect((err as { code?: string }).code).toMatch(/^(invalid_image_url|failed_image_download)$/);
  });

  it('takes exactly one source: none is missing_image, two a validation_error naming both', async () => {
    await expectBgoneError(removeBackground({ size: 'preview' }), 'missing_image');
    const two = await removeBackground(teddy, { imageFileB64: teddy.toString('base64') }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect((two as { details?: unknown }).details).toEqual({ field: 'image_file', fields: ['image_file', 'image_file_b64'] });
    expect(() => prepareJob(undefined, { imageUrl: url })).toThrow(/downloaded by removeBackground/);
  });

  it('refuses an option it does not know, by its name', async () => {
    const err = await removeBackground(teddy, { sharpness: 'high' } as never).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ code: 'validation_error', details: { field: 'sharpness' } });
  });
});

describe('imageUrl through the allow list (fetchAllow)', () => {
  const byName = () => url.replace('127.0.0.1', 'localhost');
  const refusal = async (imageUrl: string) => (await expectBgoneError(removeBackground({ imageUrl, size: 'preview' }), 'failed_image_download')).details;

  it('localhost listed by name downloads; its address then is refused until its network is listed, and the name is refused then', async () => {
    configure({ fetchAllowPrivate: false, fetchAllow: ['localhost'] });
    const direct = await removeBackground(teddy, { size: 'preview', format: 'auto' });
    const named = await removeBackground({ imageUrl: byName(), size: 'preview', format: 'auto' });
    expect(named.data.equals(direct.data)).toBe(true);
    expect(await refusal(url)).toEqual({ field: 'image_url', reason: 'blocked_address' });
    configure({ fetchAllow: ['127.0.0.0/8'] });
    const byAddress = await removeBackground({ imageUrl: url, size: 'preview', format: 'auto' });
    expect(byAddress.data.equals(direct.data)).toBe(true);
    expect(await refusal(byName())).toEqual({ field: 'image_url', reason: 'blocked_address' });
  });

  it('a metadata address stays refused inside a listed network, for bgImageUrl too', async () => {
    configure({ fetchAllowPrivate: false, fetchAllow: ['169.254.0.0/16', '127.0.0.0/8'] });
    expect(await refusal('http://169.254.169.254/latest/meta-data/')).toEqual({ field: 'image_url', reason: 'blocked_address' });
    const background = await expectBgoneError(
      removeBackground({ imageUrl: url, bgImageUrl: 'http://169.254.170.2/v2/credentials', size: 'preview' }),
      'failed_image_download',
    );
    expect(background.details).toEqual({ field: 'bg_image_url', reason: 'blocked_address' });
  });
});

describe('the idempotency fingerprint', () => {
  const base = requestFingerprint(prepareJob(teddy, {}));

  it.each(
    OPTION_TABLE.filter((row) => row.carriers.includes('form') && row.part === 'field' && !row.name.startsWith('image_') && row.name !== 'bg_image_url').map(
      (row) => [row.name, row] as const,
    ),
  )('%s changes it', (_, row) => {
    // Options that mean something only beside another: padding with a crop, the opacity with a shadow,
    // a canvas's bounds with a canvas made from the image, the outline's shape with its colour, the
    // blur's kernel with the blur, the fit with a background image, a quality with a lossy format.
    const besides: Record<string, Record<string, unknown>> = {
      padding: { crop: 'true' },
      shadow_opacity: { shadow: 'drop' },
      max_width: { outputSize: 'original' },
      max_height: { outputSize: 'original' },
      outline_width: { outlineColor: 'white' },
      outline_blur: { outlineColor: 'white' },
      bg_blur_mode: { bgBlur: '0.01' },
      bg_fit: { bgImageFile: teddy },
      quality: { format: 'jpg' },
    };
    const extra = besides[row.name] ?? {};
    const withOption = requestFingerprint(prepareJob(teddy, { ...extra, [row.key]: row.example }));
    const without = requestFingerprint(prepareJob(teddy, extra));
    expect(withOption).not.toBe(without);
  });

  it('spelling a default out, or a padding without a crop, changes nothing', () => {
    expect(requestFingerprint(prepareJob(teddy, { format: 'png', size: 'full', padding: '25%' }))).toBe(base);
  });

  it('a background image changes it', () => {
    expect(requestFingerprint(prepareJob(teddy, { bgImageFile: teddy }))).not.toBe(base);
  });
});
