import { asError } from '../logger.js';
import type { Clock, ClockTimer } from '../ports/clock.js';
import type { Logger } from '../ports/logger.js';

/** At most one progress event per generation per this many ms; the latest value in between is written at its end. */
export const PROGRESS_INTERVAL_MS = 1000;

/** Where a run's progress goes: the Lifecycle's `progress` transition. */
export type ProgressSink = (generationId: string, fraction: number, message?: string) => Promise<unknown>;

/**
 * `ctx.progress` of one run, throttled: the first report is written at once, later ones at most one per
 * PROGRESS_INTERVAL_MS (the latest value wins), and none after the run ends. Holds nothing until the first report.
 */
export class ProgressReporter {
  private lastAt = 0;
  private pending: { fraction: number; message?: string } | undefined = undefined;
  private timer: ClockTimer | undefined = undefined;
  private stopped = false;
  private writing: Promise<unknown> | undefined = undefined;

  constructor(
    private readonly sink: ProgressSink,
    private readonly id: string,
    private readonly log: Logger,
    private readonly clock: Clock,
  ) {}

  readonly report = (fraction: number, message?: string): void => {
    if (this.stopped || typeof fraction !== 'number') return;
    const p = message === undefined ? { fraction } : { fraction, message };
    const wait = this.lastAt + PROGRESS_INTERVAL_MS - this.clock.now();
    if (wait <= 0 && !this.timer) return this.write(p);
    this.pending = p;
    this.timer ??= this.clock.setTimeout(() => {
      this.timer = undefined;
      if (!this.stopped && this.pending) this.write(this.pending);
      this.pending = undefined;
    }, Math.max(0, wait));
  };

  stop(): void {
    this.stopped = true;
    if (this.timer) this.clock.clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** Before the lease is let go (a parked remote job): what was reported is written now, while it may still be. */
  async flush(): Promise<void> {
    if (this.timer) {
      this.clock.clearTimeout(this.timer);
      this.timer = undefined;
      if (this.pending) this.write(this.pending);
      this.pending = undefined;
    }
    await this.writing;
  }

  private write(p: { fraction: number; message?: string }): void {
    this.lastAt = this.clock.now();
    this.writing = this.sink(this.id, p.fraction, p.message).catch((err: unknown) => this.log.warn({ err: asError(err) }, 'progress not recorded'));
  }
}
