import { expect } from 'vitest';
import { BgoneError } from './bgone.js';

/** Awaits a promise that must reject with a BgoneError of the given code; returns the error. */
export async function expectBgoneError(promise: Promise<unknown>, code: string): Promise<BgoneError> {
  let settled: { ok: true; value: unknown } | { ok: false; error: unknown };
  try {
    settled = { ok: true, value: await promise };
  } catch (error) {
    settled = { ok: false, error };
  }
  if (settled.ok) {
    const v = settled.value as { width?: number; height?: number } | undefined;
    expect.fail(`expected BgoneError '${code}', but the call succeeded (${v?.width}x${v?.height})`);
  }
  const error = settled.error as BgoneError;
  expect(error, `expected a BgoneError, got ${String(error)}`).toBeInstanceOf(BgoneError);
  expect({ code: error.code, detail: error.detail }).toMatchObject({ code });
  expect(typeof error.message).toBe('string');
  expect(error.message.length).toBeGreaterThan(0);
  return error;
}

/** Synchronous variant for validation that throws before any promise exists. */
export function expectThrowsBgone(fn: () => unknown, code: string): BgoneError {
  try {
    fn();
  } catch (error) {
    expect(error, `expected a BgoneError, got ${String(error)}`).toBeInstanceOf(BgoneError);
    expect((error as BgoneError).code).toBe(code);
    return error as BgoneError;
  }
  return expect.fail(`expected BgoneError '${code}', nothing was thrown`);
}
