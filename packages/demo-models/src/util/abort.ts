/** The error to throw when a signal fired: its own reason when that is an Error, as `AbortSignal.throwIfAborted` does. */
export function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('This operation was aborted', 'AbortError');
}

/** Sleeps `ms`, rejecting with the signal's reason as soon as it fires, so a cancelled run frees its slot at once. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.reject(abortReason(signal));
  if (ms <= 0) return Promise.resolve();
  return new Promise<void>((resolve, reject) => {
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(abortReason(signal as AbortSignal));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * Spreads a model's artificial delay over its work, so that a run takes about `totalMs` in all (the model's
 * `estimatedGenerationTime`), however fast the real work was, and an abort is noticed between steps.
 */
export class Pacer {
  private readonly started = Date.now();

  constructor(
    private readonly totalMs: number,
    private readonly signal: AbortSignal,
    /** The run's progress report (`ctx.progress`): told each step short of the end, so clients see the run move. */
    private readonly report?: (fraction: number) => void,
  ) {}

  /** Waits until `fraction` (0..1) of the budget has passed since the pacer was made, then reports it as progress. */
  async reach(fraction: number): Promise<void> {
    if (this.signal.aborted) throw abortReason(this.signal);
    const share = Math.min(1, Math.max(0, fraction));
    await sleep(this.started + this.totalMs * share - Date.now(), this.signal);
    if (share < 1) this.report?.(share);
  }
}
