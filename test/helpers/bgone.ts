/** The library under test, from its TypeScript sources (vitest compiles them on the fly). */
export * from '../../src/lib/index.js';
