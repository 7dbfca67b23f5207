import type { JobSignal } from '../ports/queue.js';

/**
 * How a run is aborted (timeout, lost lease, cancel, the queue stopping). Most providers never read `ctx.signal` and
 * most runs are never aborted, so a `JobAbort` keeps the aborted flag and reason itself and makes the run's own
 * AbortSignal only when someone asks for it (a provider reading `ctx.signal`, a retry's backoff sleep), already
 * aborted if the run was (what that saves: bench/notes.md).
 *
 * The in-process queue makes one per job and hands it out as the job's `JobSignal`, and the run follows it as its own
 * (no AbortController per job, no listener: issue 36); with another queue the runner makes one per run, following
 * the signal that queue handed out. Internal to core: not exported from any entry point.
 */
export class JobAbort implements JobSignal {
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

  /** As an AbortSignal's: `listener` runs once when this aborts, never when added after (see `onAbort`). */
  addEventListener(_type: 'abort', listener: () => void, _options?: { once?: boolean }): void {
    if (!this.aborted) (this.listeners ??= []).push(listener);
  }

  removeEventListener(_type: 'abort', listener: () => void): void {
    const ls = this.listeners;
    const i = ls ? ls.indexOf(listener) : -1;
    if (i !== -1) ls!.splice(i, 1);
  }

  /** The `unfollow` of a signal there is nothing to stop following (the in-process queue's own, or one already aborted). */
  static readonly nothingToUnfollow: () => void = NOTHING;

  /**
   * The run's abort for the signal its queue handed out, and the function that stops following it: the in-process
   * queue's own JobAbort is taken as it is; another queue's signal (an AbortSignal) is followed by a new one.
   */
  static following(signal: JobSignal): { abort: JobAbort; unfollow: () => void } {
    if (signal instanceof JobAbort) return { abort: signal, unfollow: NOTHING };
    const abort = new JobAbort();
    if (signal.aborted) {
      abort.abort(signal.reason);
      return { abort, unfollow: NOTHING };
    }
    const onAbort = (): void => abort.abort(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    return { abort, unfollow: () => signal.removeEventListener('abort', onAbort) };
  }
}

function NOTHING(): void {}
