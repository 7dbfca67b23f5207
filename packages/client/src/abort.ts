// Small AbortSignal helpers. AbortSignal.any exists only from Node 20.3 and recent browsers, and its listeners on a
// long-lived parent signal are only released by GC; polling links a signal per request, so links are disposed
// explicitly instead.

export interface LinkedSignal {
  signal: AbortSignal;
  /** Detaches from the parents; call it when the work the signal guarded is over. */
  dispose(): void;
}

/** A signal that aborts (with the same reason) as soon as any of `signals` does. */
export function linkSignals(signals: ReadonlyArray<AbortSignal | undefined>): LinkedSignal {
  const controller = new AbortController();
  const cleanups: Array<() => void> = [];
  const dispose = (): void => {
    for (const cleanup of cleanups.splice(0)) cleanup();
  };
  for (const parent of signals) {
    if (!parent) continue;
    if (parent.aborted) {
      dispose();
      controller.abort(parent.reason);
      break;
    }
    const onAbort = (): void => {
      dispose();
      controller.abort(parent.reason);
    };
    parent.addEventListener('abort', onAbort, { once: true });
    cleanups.push(() => parent.removeEventListener('abort', onAbort));
  }
  return { signal: controller.signal, dispose };
}

/** Resolves after `ms`; rejects with `signal.reason` the moment the signal aborts, and frees the timer. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, Math.max(0, ms));
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Like `signal.throwIfAborted()`, which some older browsers lack. */
export function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw signal.reason;
}

/** A signal that aborts after `ms` with `reason`; `clear` stops the timer (so it never keeps a process alive). */
export function timeoutSignal(ms: number, reason: unknown): { signal: AbortSignal; clear(): void } {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(reason), Math.max(0, ms));
  return { signal: controller.signal, clear: () => clearTimeout(timer) };
}
