import { afterEach, beforeEach } from 'vitest';

/**
 * Makes a fresh subject before each test and closes it after, and hands the tests a getter. A getter rather than a
 * variable so each `it` reads the subject of its own run.
 */
export function useFresh<T extends { close(): Promise<void> }>(make: () => Promise<T>): () => T {
  let current: T | undefined;
  beforeEach(async () => {
    current = await make();
  });
  afterEach(async () => {
    const subject = current;
    current = undefined;
    await subject?.close();
  });
  return () => {
    if (!current) throw new Error('The subject is only available inside a test');
    return current;
  };
}

/** A fixed epoch so lease arithmetic in the suites is readable; stores take `now` from the caller. */
export const T0 = 1_700_000_000_000;

let counter = 0;
/** Unique per call and per run, so the suites also work against a backend that keeps data between tests. */
export function uid(prefix: string): string {
  counter += 1;
  return `${prefix}-${counter}-${Math.random().toString(36).slice(2, 10)}`;
}

/** Settles every promise and says which fulfilled, so a race's losers may reject or return a falsy value. */
export async function settleAll<T>(promises: Array<Promise<T>>): Promise<Array<{ ok: true; value: T } | { ok: false; error: unknown }>> {
  const results = await Promise.allSettled(promises);
  return results.map((r) => (r.status === 'fulfilled' ? { ok: true, value: r.value } : { ok: false, error: r.reason }));
}

/**
 * Whether `needle` can be reached from `root` by following own data properties, array items, Map and Set entries
 * and byte buffers. Getters are never called and prototypes are not followed, so walking has no side effects.
 * Bounded, because a store may hold a driver with a large object graph.
 */
export function holdsString(root: unknown, needle: string, maxNodes = 50_000): boolean {
  const needleBytes = Buffer.from(needle, 'utf8');
  const seen = new Set<unknown>();
  const stack: unknown[] = [root];
  while (stack.length > 0 && seen.size < maxNodes) {
    const value = stack.pop();
    if (typeof value === 'string') {
      if (value.includes(needle)) return true;
      continue;
    }
    if (value === null || (typeof value !== 'object' && typeof value !== 'function')) continue;
    if (seen.has(value)) continue;
    seen.add(value);
    if (ArrayBuffer.isView(value)) {
      if (Buffer.from(value.buffer, value.byteOffset, value.byteLength).includes(needleBytes)) return true;
      continue;
    }
    if (value instanceof Map) {
      for (const [k, v] of value) stack.push(k, v);
    } else if (value instanceof Set) {
      for (const v of value) stack.push(v);
    }
    for (const key of Reflect.ownKeys(value)) {
      if (typeof key === 'string' && key.includes(needle)) return true;
      const descriptor = Object.getOwnPropertyDescriptor(value, key);
      if (descriptor && 'value' in descriptor) stack.push(descriptor.value);
    }
  }
  return false;
}
