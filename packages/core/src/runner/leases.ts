import { inject, injectable } from 'tsyringe';
import { Lifecycle } from '../lifecycle/lifecycle.js';
import { asError, childLogger } from '../logger.js';
import type { ClockTimer } from '../ports/clock.js';
import type { Logger } from '../ports/logger.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';
import type { JobAbort } from './job-signal.js';

/**
 * The leases of the runs this instance holds: one timer renews them all, in one store call (as BullMQ's LockManager
 * extends all its locks at once), every third of `runner.leaseMs`; a run whose lease was not renewed (lost to another
 * worker after a stall, or finished by someone else) is aborted.
 */
@injectable()
export class LeaseKeeper {
  private readonly logger: Logger;
  /** Runs this worker holds, by generation id. */
  private readonly held = new Map<string, JobAbort>();
  private renewTimer: ClockTimer | undefined;

  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(Lifecycle) private readonly lifecycle: Lifecycle,
    @inject(TOKENS.Logger) logger: Logger,
  ) {
    this.logger = childLogger(logger, { component: 'runner' });
  }

  hold(generationId: string, abort: JobAbort): void {
    this.held.set(generationId, abort);
    this.keep();
  }

  release(generationId: string): void {
    this.held.delete(generationId);
  }

  private keep(): void {
    if (this.renewTimer) return;
    this.renewTimer = this.options.clock.setInterval(() => {
      if (this.held.size === 0) {
        this.options.clock.clearInterval(this.renewTimer);
        this.renewTimer = undefined;
        return;
      }
      // The runs asked about, not just their ids: by the answer a run may have ended (a remote job parked) and a new
      // run of the same generation claimed it again here, whose lease this renewal never saw.
      const runs = [...this.held];
      this.lifecycle.renewLeases(runs.map(([id]) => id)).then(
        (renewed) => {
          const still = new Set(renewed);
          for (const [id, run] of runs) {
            // Lost (a stall let it expire and another worker took it) or finished by someone else (cancelled).
            if (!still.has(id) && this.held.get(id) === run) run.abort(new Error('lease lost'));
          }
        },
        (err: unknown) => this.logger.warn({ err: asError(err), leases: runs.length }, 'lease renewal failed'),
      );
    }, Math.max(50, Math.floor(this.options.runner.leaseMs / 3)));
    this.renewTimer.unref?.();
  }
}
