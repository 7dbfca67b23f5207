/**
 * How a run is aborted (timeout, lost lease, cancel, the queue stopping). Most providers never read `ctx.signal` and
 * most runs are never aborted, so a `JobAbort` keeps the aborted flag and reason itself and makes the run's own
 * AbortSignal only when someone asks for it (a provider reading `ctx.signal`, a retry's backoff sleep), already
 * aborted if the run was (what that saves: bench/notes.md).
 *
 * The runner makes one per run, following the AbortSignal its queue handed out. Internal to core: not exported from
 * any entry point.
 */
export class JobAbort {
  aborted = false;
  reason: unknown = undefined;
  private controller: AbortController | undefined = undefined;
  private listeners: Array<() => void> | undefined = undefined;

  /** A real AbortSignal that follows this abort, made on first use. */
  get signal(): AbortSignal {
    let c = this.controller;
    if (c === undefined) {
      c = new AbortController();
      this.controller = c;
      if (this.aborted) c.abort(this.reason);
    }
    return c.signal;
  }

  /** Aborts once (later calls are ignored), with `reason` or an AbortError as AbortController.abort() would. */
  abort(reason?: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason === undefined ? new DOMException('This operation was aborted', 'AbortError') : reason;
    this.controller?.abort(this.reason);
    const ls = this.listeners;
    this.listeners = undefined;
    if (ls) for (const l of ls) l();
  }

  /** Calls `listener` once when this aborts (at once if it has); returns a function that removes it. */
  onAbort(listener: () => void): () => void {
    if (this.aborted) {
      listener();
      return () => {};
    }
    (this.listeners ??= []).push(listener);
    return () => {
      const ls = this.listeners;
      if (!ls) return;
      const i = ls.indexOf(listener);
      if (i !== -1) ls.splice(i, 1);
    };
  }

  /** A JobAbort that follows `signal` (a distributed queue's), and the function that stops following it. */
  static following(signal: AbortSignal): { abort: JobAbort; unfollow: () => void } {
    const abort = new JobAbort();
    if (signal.aborted) {
      abort.abort(signal.reason);
      return { abort, unfollow: () => {} };
    }
    const onAbort = (): void => abort.abort(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    return { abort, unfollow: () => signal.removeEventListener('abort', onAbort) };
  }
}
