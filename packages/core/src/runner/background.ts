import { inject, injectable } from 'tsyringe';
import { Maintenance, type RecoveryReport } from './maintenance.js';
import { EventFeed } from '../push/event-feed.js';
import { LiveStatus } from '../push/live-status.js';
import { WebhookPump } from '../push/webhook-pump.js';
import { Telemetry } from '../telemetry.js';
import { Workers } from './workers.js';

/** Live counters of this instance, for operators and tests. */
export interface ServiceStats {
  /** Event streams open (`GET /v1/generations/:id/events`). */
  openStreams: number;
  /** Streams and long-polls waiting for a generation's next event. */
  watchers: number;
}

/**
 * The service's background work, started and stopped together: the event feed, the workers (the runner on its
 * queue), maintenance (recovery, retention) and webhooks (the outbox and its delivery).
 */
@injectable()
export class Background {
  private started = false;
  private stopping: Promise<void> | undefined;

  constructor(
    @inject(EventFeed) private readonly feed: EventFeed,
    @inject(Workers) private readonly workers: Workers,
    @inject(Maintenance) private readonly maintenance: Maintenance,
    @inject(WebhookPump) private readonly webhooks: WebhookPump,
    @inject(LiveStatus) private readonly live: LiveStatus,
    @inject(Telemetry) telemetry: Telemetry,
  ) {
    telemetry.observeStreams(() => this.live.openStreams);
  }

  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    this.stopping = undefined;
    await this.feed.start();
    await this.workers.start();
    await this.maintenance.start();
    this.webhooks.start();
  }

  stop(options: { timeoutMs?: number } = {}): Promise<void> {
    if (!this.started) return this.stopping ?? Promise.resolve();
    this.started = false;
    this.maintenance.stop();
    // Open event streams end once the runs are over (their clients reconnect elsewhere), so a server can close.
    this.stopping = Promise.all([this.workers.stop(options.timeoutMs ?? 10_000), this.webhooks.stop()]).then(() => {
      this.live.closeAll();
      return this.feed.stop();
    });
    return this.stopping;
  }

  stats(): ServiceStats {
    return { openStreams: this.live.openStreams, watchers: this.feed.size };
  }

  /** One recovery pass now. */
  recover(): Promise<RecoveryReport> {
    return this.maintenance.recover();
  }

  /** One retention sweep now. */
  sweep(): Promise<number> {
    return this.maintenance.sweep();
  }
}
