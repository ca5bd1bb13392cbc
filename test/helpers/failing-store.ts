/**
 * A real store with faults injected: every call goes to the real implementation, except the
 * methods named in `faults`, which throw (or reject) the error given for them until cleared. For
 * the fault tests only: nothing is mocked, the store under it is the real SQLite one.
 */
import type { Store } from '../../src/store/index.js';

/** `group.method`, e.g. 'credits.commit', 'batches.finish', 'rateLimits.take'; or a method of the store itself ('ping'). */
export type StoreMethod = string;

export interface FaultyStore {
  store: Store;
  /** Makes `method` reject with `error` (default: a plain Error, i.e. a bug-like failure → 500). */
  fail(method: StoreMethod, error?: Error): void;
  clear(): void;
  /** How many calls each failing method got. */
  calls: Map<StoreMethod, number>;
}

export function withFaults(real: Store): FaultyStore {
  const faults = new Map<StoreMethod, Error>();
  const calls = new Map<StoreMethod, number>();
  const groups = new Map<string, unknown>();
  const wrapGroup = (name: string, group: object) =>
    new Proxy(group, {
      get(target, prop, receiver) {
        const value = Reflect.get(target, prop, receiver);
        if (typeof value !== 'function') return value;
        const key = `${name}.${String(prop)}`;
        return (...args: unknown[]) => {
          const fault = faults.get(key);
          if (fault) {
            calls.set(key, (calls.get(key) ?? 0) + 1);
            return Promise.reject(fault);
          }
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
  const store = new Proxy(real, {
    get(target, prop) {
      // Read on the real store itself: its getters (isOpen) use private fields, which a proxy lacks.
      const value = Reflect.get(target, prop);
      if (typeof value === 'object' && value !== null && typeof prop === 'string' && !(value instanceof Date)) {
        if (!groups.has(prop)) groups.set(prop, wrapGroup(prop, value));
        return groups.get(prop);
      }
      if (typeof value === 'function') {
        const key = String(prop);
        return (...args: unknown[]) => {
          const fault = faults.get(key);
          if (fault) {
            calls.set(key, (calls.get(key) ?? 0) + 1);
            return Promise.reject(fault);
          }
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      }
      return value;
    },
  });
  return {
    store,
    fail: (method, error = new Error(`injected failure of ${method}`)) => faults.set(method, error),
    clear: () => faults.clear(),
    calls,
  };
}
