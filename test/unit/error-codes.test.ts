/**
 * The closed list of error codes (src/lib/errors.ts) and the native core's list (native/errors.h)
 * stay one list: every code C++ can attach to an error is one TypeScript knows and has a message for.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BgoneError, ERROR_CODES } from '../helpers/bgone.js';
import { REPO_ROOT } from '../helpers/paths.js';

const header = readFileSync(join(REPO_ROOT, 'native', 'errors.h'), 'utf8');
const nativeCodes = [...header.matchAll(/case ErrorCode::\w+:\s*return "([a-z_]+)";/g)].map((m) => m[1]!);

describe('error codes', () => {
  it('native/errors.h names five codes (sanity check of this test)', () => {
    expect(nativeCodes.sort()).toEqual(['foreground_not_found', 'image_too_large', 'internal_error', 'invalid_image', 'unsupported_media_type']);
  });

  it.each(nativeCodes)('the native code %s is in ERROR_CODES', (code) => {
    expect(ERROR_CODES).toContain(code);
  });

  it.each([...ERROR_CODES])('%s has a message of its own', (code) => {
    const error = new BgoneError(code);
    expect(error.message).toMatch(/^[A-Z].+\.$/);
    expect(error.name).toBe('BgoneError');
    expect(error).toBeInstanceOf(Error);
  });

  it('the messages are distinct', () => {
    const messages = ERROR_CODES.map((code) => new BgoneError(code).message);
    expect(new Set(messages).size).toBe(messages.length);
  });
});
