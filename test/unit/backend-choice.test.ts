/**
 * Which HTTP backend BGONE_HTTP's choices give (src/http/backend-select.ts): node:http by default,
 * because uWebSockets.js 20.30 drops header bytes >= 0x80 at the ends of a value (docs/api.md,
 * "HTTP backends"); uWebSockets.js only when asked for by name, where its binary loads.
 */
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { loadBackend } from '../../src/http/backend-select.js';

describe('the default HTTP backend', () => {
  it('is node:http when BGONE_HTTP is unset or auto, whatever uWebSockets.js binary loads', () => {
    for (const env of [{}, { BGONE_HTTP: 'auto' }]) {
      const choice = loadConfig(env).http;
      expect(choice).toBe('auto');
      const chosen = loadBackend(choice);
      expect(chosen.backend.name).toBe('node');
      expect(chosen.reason).toMatch(/node:http, the default/);
    }
    expect(loadBackend('auto', { abi: '999' }).backend.name).toBe('node');
  });

  it.runIf(process.versions.modules === '115')('is uWebSockets.js with BGONE_HTTP=uws under Node 20', () => {
    expect(loadBackend(loadConfig({ BGONE_HTTP: 'uws' }).http).backend.name).toBe('uws');
  });
});
