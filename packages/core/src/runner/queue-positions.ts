import { inject, injectable } from 'tsyringe';
import type { JobQueue } from '../ports/queue.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';
import { Telemetry } from '../telemetry.js';

/** Where a pending generation stands in the queue, as the details view and the event stream show it. */
export interface QueueInfo {
  /** 1 for the next job to start. */
  position: number;
  /** Waiting jobs that start before it if nothing else arrives. */
  aheadOfYou: number;
  /**
   * Seconds until it is expected to start: its position times the mean of this instance's recent run times, divided by
   * the runner's concurrency. Null while this instance has timed no run (an API-only instance, or just started).
   */
  etaSeconds: number | null;
}

/**
 * Queue positions of pending generations (the queue's `position`, when it has one) with an estimate of the wait, from
 * the run times of this instance's recent runs (the runner's telemetry times each: `Telemetry.running`).
 */
@injectable()
export class QueuePositions {
  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(TOKENS.Queue) private readonly queue: JobQueue,
    @inject(Telemetry) private readonly telemetry: Telemetry,
  ) {}

  /** The mean of the recent run times (ms); undefined before the first. */
  get meanRunMs(): number | undefined {
    return this.telemetry.recentRunMs;
  }

  /** Whether the queue can tell positions at all. */
  get available(): boolean {
    return typeof this.queue.position === 'function';
  }

  /** Where the generation waits; undefined when it is not waiting in the queue, or the queue cannot tell (or fails to). */
  async of(generationId: string): Promise<QueueInfo | undefined> {
    if (!this.queue.position) return undefined;
    let at: Awaited<ReturnType<NonNullable<JobQueue['position']>>>;
    try {
      at = await this.queue.position(generationId);
    } catch {
      // A position is a nicety: a queue that cannot answer now leaves it out rather than failing the read.
      return undefined;
    }
    if (!at) return undefined;
    const mean = this.meanRunMs;
    const lanes = Math.max(1, this.options.runner.concurrency);
    return {
      position: at.position,
      aheadOfYou: at.aheadOfYou,
      etaSeconds: mean === undefined ? null : Math.ceil((at.position * mean) / lanes / 1000),
    };
  }
}
