/** Assertions shared by the server-*.test.ts files. */
import { expect } from 'vitest';
import { checkResponse, type OpenApiDocument } from './http-openapi.js';
import { get, type HttpResult } from './server.js';

export const REQUEST_ID = /^req_[0-9a-f]+$/;

let cachedDoc: OpenApiDocument | undefined;

/** The service's OpenAPI document, as served by GET /api/v1/openapi.json. */
export async function openApi(url: string): Promise<OpenApiDocument> {
  if (!cachedDoc) {
    const res = await get(url, '/api/v1/openapi.json');
    expect(res.status).toBe(200);
    cachedDoc = res.json as OpenApiDocument;
  }
  return cachedDoc;
}

/** The response conforms to the OpenAPI document (status, headers, media type, JSON body). */
export function expectConforms(doc: OpenApiDocument, method: string, path: string, res: HttpResult): void {
  expect(checkResponse(doc, method, path, res), `${method} ${path} → ${res.status} against openapi.json`).toEqual([]);
}

/**
 * An error response of the contract: the status, Content-Type application/json, and a body
 * { code, message, request_id (= X-Request-ID), details? } with nothing else. Returns the body.
 */
export function expectError(
  res: HttpResult,
  status: number,
  code: string,
): { code: string; message: string; request_id: string; details?: Record<string, unknown> } {
  const summary = { status: res.status, code: res.json?.code, message: res.json?.message, details: res.json?.details };
  expect(summary, 'status and code').toMatchObject({ status, code });
  expect(res.headers.get('content-type')).toMatch(/^application\/json\b/);
  const body = res.json;
  expect(
    Object.keys(body).filter((k) => !['code', 'message', 'request_id', 'details'].includes(k)),
    'unexpected body properties',
  ).toEqual([]);
  expect(typeof body.message).toBe('string');
  expect(body.message.length).toBeGreaterThan(0);
  expect(body.request_id).toMatch(REQUEST_ID);
  expect(res.headers.get('x-request-id')).toBe(body.request_id);
  if (body.details !== undefined)
    expect(typeof body.details === 'object' && body.details !== null && !Array.isArray(body.details), 'details is an object').toBe(true);
  return body;
}

/**
 * Records exceptions nobody handled in this process (the server runs in the test process: such an
 * exception would kill a real `bgone serve`). `check()` waits a moment for late ones, then fails
 * the current test with what was thrown, and forgets them.
 */
export function trackUncaught(): { check(): Promise<void> } {
  const seen: string[] = [];
  const record = (err: unknown) =>
    seen.push(err instanceof Error ? `${err.name}: ${err.message}\n${err.stack?.split('\n').slice(1, 4).join('\n')}` : String(err));
  process.on('uncaughtException', record);
  process.on('unhandledRejection', record);
  return {
    async check() {
      await new Promise((resolve) => setTimeout(resolve, 50));
      const counts = new Map<string, number>();
      for (const e of seen.splice(0)) counts.set(e, (counts.get(e) ?? 0) + 1);
      const found = [...counts].map(([e, n]) => `${n}x ${e}`);
      expect(found, 'exceptions nobody handled (a real `bgone serve` process would have crashed)').toEqual([]);
    },
  };
}
