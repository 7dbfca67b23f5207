import { inject, injectable } from 'tsyringe';
import { childLogger } from '../logger.js';
import { Maintenance } from './maintenance.js';
import type { JobQueue } from '../ports/queue.js';
import type { Logger } from '../ports/logger.js';
import { EventFeed } from '../push/event-feed.js';
import { LiveStatus } from '../push/live-status.js';
import { Webhooks } from '../push/webhooks.js';
import { ModelRegistry } from '../domain/registry.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { Runner } from './runner.js';
import type { ServiceStats } from '../service-types.js';
import { Telemetry } from '../telemetry.js';
import { TOKENS } from '../tokens.js';

/**
 * The service's background work, started and stopped together: the event feed, the runner on its queue (unless
 * `runner.enabled` is off), maintenance (recovery, retention) and webhook delivery.
 */
@injectable()
export class Background {
  private started = false;
  private stopping: Promise<void> | undefined;
  private readonly logger: Logger;

  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(ModelRegistry) private readonly registry: ModelRegistry,
    @inject(Runner) private readonly runner: Runner,
    @inject(TOKENS.Queue) private readonly queue: JobQueue,
    @inject(Maintenance) private readonly maintenance: Maintenance,
    @inject(EventFeed) private readonly feed: EventFeed,
    @inject(LiveStatus) private readonly live: LiveStatus,
    @inject(Webhooks) private readonly webhooks: Webhooks,
    @inject(Telemetry) telemetry: Telemetry,
    @inject(TOKENS.Logger) logger: Logger,
  ) {
    this.logger = childLogger(logger, { component: 'genservice' });
    telemetry.observeStreams(() => this.live.openStreams);
  }

  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    this.stopping = undefined;
    await this.feed.start();
    const { runner } = this.options;
    if (runner.enabled) {
      await this.queue.start((job, signal) => this.runner.run(job, signal), {
        concurrency: runner.concurrency,
        leaseMs: runner.leaseMs,
        modelConcurrency: (id) => this.registry.get(id)?.definition.concurrency,
        logger: this.logger,
      });
    }
    await this.maintenance.start();
    this.webhooks.start();
  }

  stop(options: { timeoutMs?: number } = {}): Promise<void> {
    if (!this.started) return this.stopping ?? Promise.resolve();
    this.started = false;
    this.maintenance.stop();
    this.stopping = Promise.all([this.queue.stop({ timeoutMs: options.timeoutMs ?? 10_000 }), this.webhooks.stop()]).then(() => this.feed.stop());
    return this.stopping;
  }

  stats(): ServiceStats {
    return { openStreams: this.live.openStreams, watchers: this.feed.size };
  }
}
