import { inject, injectable } from 'tsyringe';
import type { JobQueue } from '../ports/queue.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';

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

/** How many recent run times the estimate averages. */
const RECENT_RUNS = 50;

/**
 * Queue positions of pending generations (the queue's `position`, when it has one) with an estimate of the wait, from
 * the run times of this instance's recent runs (the runner times each).
 */
@injectable()
export class QueuePositions {
  private readonly recent: number[] = [];
  private next = 0;
  private total = 0;

  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(TOKENS.Queue) private readonly queue: JobQueue,
  ) {}

  /** Starts timing a run; call the answer when it ends. */
  timing(): () => void {
    const clock = this.options.clock;
    const from = clock.now();
    return () => this.record(clock.now() - from);
  }

  /** Records one run's time (ms). */
  record(ms: number): void {
    if (!(ms >= 0)) return;
    if (this.recent.length < RECENT_RUNS) {
      this.recent.push(ms);
    } else {
      this.total -= this.recent[this.next]!;
      this.recent[this.next] = ms;
      this.next = (this.next + 1) % RECENT_RUNS;
    }
    this.total += ms;
  }

  /** The mean of the recent run times (ms); undefined before the first. */
  get meanRunMs(): number | undefined {
    return this.recent.length === 0 ? undefined : this.total / this.recent.length;
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
