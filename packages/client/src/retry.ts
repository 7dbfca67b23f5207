import { sleep as timerSleep } from './abort.js';
import { ConnectionError, GenServiceError } from './errors.js';

/**
 * How the client tries a safe request again: every GET, and a create (generation or batch) that carries an
 * Idempotency-Key (a repeat of it answers the first one's generation and charges once). Tried again after no response
 * (a network error, or none within `requestTimeoutMs`), a 502, 503 or 504, and a 429 that says when (`Retry-After`);
 * never after any other answer. The delays double from `baseDelayMs`; a `Retry-After` is waited for when it is longer.
 */
export interface RetryOptions {
  /** Tries in all, the first one included (1: never again). Default 3. */
  attempts?: number;
  /** The wait before the second try; each later one doubles it. Default 500. */
  baseDelayMs?: number;
  /** The longest wait between two tries; a `Retry-After` longer than this is not waited for (its error is thrown). Default 30 000. */
  maxDelayMs?: number;
  /**
   * How to wait `ms` (rejecting when `signal` aborts). Default: a timer. A test passes one that records the delays and
   * resolves at once.
   */
  sleep?: (ms: number, signal: AbortSignal | undefined) => Promise<void>;
}

/** The retry policy in force: `false` in the options turns it off (one try each). */
export interface RetryPolicy {
  attempts: number;
  baseDelayMs: number;
  maxDelayMs: number;
  sleep: (ms: number, signal: AbortSignal | undefined) => Promise<void>;
}

export function retryPolicy(options: RetryOptions | false | undefined): RetryPolicy {
  if (options === false) return { attempts: 1, baseDelayMs: 0, maxDelayMs: 0, sleep: timerSleep };
  const attempts = options?.attempts ?? 3;
  const baseDelayMs = options?.baseDelayMs ?? 500;
  const maxDelayMs = options?.maxDelayMs ?? 30_000;
  if (!(Number.isInteger(attempts) && attempts >= 1)) throw new TypeError('createClient: retry.attempts must be a whole number >= 1');
  if (!(baseDelayMs >= 0) || !(maxDelayMs >= 0)) throw new TypeError('createClient: retry.baseDelayMs and retry.maxDelayMs must be >= 0');
  return { attempts, baseDelayMs, maxDelayMs, sleep: options?.sleep ?? timerSleep };
}

/**
 * The wait before try `attempt + 1` after `error` ended try `attempt` (1-based), or undefined when it is not tried
 * again: the error is not one a retry can cure, the tries are used up, or its Retry-After is beyond `maxDelayMs`.
 */
export function retryDelay(policy: RetryPolicy, attempt: number, error: unknown): number | undefined {
  if (attempt >= policy.attempts) return undefined;
  let floor = 0;
  if (error instanceof GenServiceError) {
    const { status, retryAfterMs } = error;
    if (status === 429) {
      // A rate limit that does not say when is not worth hammering.
      if (retryAfterMs === undefined) return undefined;
    } else if (status !== 502 && status !== 503 && status !== 504) {
      return undefined;
    }
    floor = retryAfterMs ?? 0;
  } else if (!(error instanceof ConnectionError)) {
    return undefined;
  }
  if (floor > policy.maxDelayMs) return undefined;
  return Math.max(floor, Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (attempt - 1)));
}
