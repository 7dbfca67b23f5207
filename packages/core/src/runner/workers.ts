import { inject, injectable } from 'tsyringe';
import { ModelRegistry } from '../domain/registry.js';
import { childLogger } from '../logger.js';
import type { Logger } from '../ports/logger.js';
import type { JobQueue } from '../ports/queue.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';
import { Runner } from './runner.js';

/** This instance's workers: the job queue handing its jobs to the runner (unless `runner.enabled` is off). */
@injectable()
export class Workers {
  private readonly logger: Logger;

  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(ModelRegistry) private readonly registry: ModelRegistry,
    @inject(Runner) private readonly runner: Runner,
    @inject(TOKENS.Queue) private readonly queue: JobQueue,
    @inject(TOKENS.Logger) logger: Logger,
  ) {
    this.logger = childLogger(logger, { component: 'genservice' });
  }

  async start(): Promise<void> {
    const { runner } = this.options;
    if (!runner.enabled) return;
    await this.queue.start((job, signal) => this.runner.run(job, signal), {
      concurrency: runner.concurrency,
      leaseMs: runner.leaseMs,
      modelConcurrency: (id) => this.registry.get(id)?.definition.concurrency,
      laneOf: (id) => {
        const lane = this.registry.get(id)?.lane;
        return lane ? { lane: lane.lane, ...(lane.concurrency !== undefined ? { concurrency: lane.concurrency } : {}) } : undefined;
      },
      logger: this.logger,
    });
  }

  /** Stops taking jobs and waits up to `timeoutMs` for running ones. */
  stop(timeoutMs: number): Promise<void> {
    return this.queue.stop({ timeoutMs });
  }
}
