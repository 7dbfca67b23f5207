/**
 * The one way tests wait for something to happen: poll a check until it holds.
 *
 * @example
 * ```ts
 * import { until } from '@genservice/testing';
 *
 * await until(() => gate.waiting === 2, 'both runs at the gate');
 * const done = await until(() => service.get('alice', id), { accept: (g) => g.status === 'completed', what: 'the generation' });
 * ```
 */
import { inspect } from 'node:util';

// Taken when this module loads, before any test can install vitest's fake timers: `until` waits on real time, so a
// test that fakes `Date`, `setTimeout` or `performance` can still wait for the real world (a check may move the fake
// clock itself).
const realSetTimeout = globalThis.setTimeout;
const realSetImmediate = globalThis.setImmediate;
const realNow = performance.now.bind(performance);

export interface UntilOptions<T = unknown> {
  /**
   * What is awaited, in words, for the error on timeout (a function is asked at the timeout, so it may tell what was
   * seen meanwhile). Default: the check's source text.
   */
  what?: string | (() => string);
  /**
   * How long to keep polling before giving up with an error. A safety net against a hang, never an assertion about
   * speed: pick it far above what the awaited event needs on a loaded machine. Default 20 000 ms; keep it below the
   * test's own timeout, so that the error naming what was awaited is the one reported.
   */
  timeoutMs?: number;
  /** Pause between two polls. Default 10 ms; `0` polls again on the next turn of the event loop. */
  intervalMs?: number;
  /**
   * When given, the check's value is accepted once `accept(value)` is true (and answered even when falsy, such as
   * `null`); without it, the first truthy value is.
   */
  accept?: (value: T) => boolean;
}

type Truthy<T> = Exclude<T, false | 0 | 0n | '' | null | undefined>;

/**
 * Polls `check` (sync or async) until it answers a truthy value (or one `options.accept` accepts), and answers that
 * value. After `timeoutMs` it rejects with an error naming what was awaited and the check's last value. An error
 * the check throws (a failed `expect`, a refused request) ends the wait at once and is passed on as is.
 *
 * `options` may be just the `what` string.
 */
export function until<T>(check: () => T | Promise<T>, options: UntilOptions<T> & { accept: (value: T) => boolean }): Promise<T>;
export function until<T>(check: () => T | Promise<T>, options?: string | UntilOptions<T>): Promise<Truthy<T>>;
export async function until<T>(check: () => T | Promise<T>, options: string | UntilOptions<T> = {}): Promise<T> {
  const { what, timeoutMs = 20_000, intervalMs = 10, accept } = typeof options === 'string' ? { what: options } : options;
  const deadline = realNow() + timeoutMs;
  for (;;) {
    const value = await check();
    if (accept ? accept(value) : value) return value;
    if (realNow() > deadline) {
      const said = typeof what === 'function' ? what() : what;
      const awaited = said ?? (accept ? `${describeCheck(accept)} to hold for ${describeCheck(check)}` : `${describeCheck(check)} to hold`);
      const last = inspect(value, { depth: 3, breakLength: Infinity }).slice(0, 500);
      throw new Error(`until: timed out after ${timeoutMs} ms waiting for ${awaited} (last value: ${last})`);
    }
    await new Promise<void>((resolve) => (intervalMs > 0 ? realSetTimeout(resolve, intervalMs) : realSetImmediate(resolve)));
  }
}

function describeCheck(check: (...args: never[]) => unknown): string {
  const source = String(check).replace(/\s+/g, ' ').trim();
  return source.length > 200 ? `${source.slice(0, 200)}...` : source;
}
