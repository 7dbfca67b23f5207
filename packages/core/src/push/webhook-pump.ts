import { inject, injectable } from 'tsyringe';
import { asError, childLogger } from '../logger.js';
import type { ClockTimer } from '../ports/clock.js';
import type { Logger } from '../ports/logger.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';
import { EventFeed } from './event-feed.js';
import { WebhookOutbox } from './webhook-outbox.js';
import { WebhookSender } from './webhook-sender.js';
import { WebhookUse } from './webhook-use.js';

/**
 * Webhooks as background work: the outbox is written from the log on every wake-up of the event feed (a transition
 * here, or another instance's) and every `webhooks.pollIntervalMs`, when due deliveries are claimed too. Started and
 * stopped with the service. It reads the log through the feed (`EventFeed.page`), so a wake-up that also reads for
 * streams and long-polls reads it once.
 *
 * Only while webhooks are in use (`WebhookUse`: default endpoints configured, or some create carried a webhook): until
 * then a wake-up does nothing, and each poll makes an idle pass instead, which reads the feed's head, then the flag,
 * and moves the outbox cursor to that head while the flag is unset (no event read, no record looked up: issue 36).
 */
@injectable()
export class WebhookPump {
  private readonly logger: Logger;
  private timer: ClockTimer | undefined;
  private pumping: Promise<void> | undefined;
  private pumpAgain = false;
  private unsubscribe: (() => void) | undefined;
  private running = false;

  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(EventFeed) private readonly feed: EventFeed,
    @inject(WebhookOutbox) private readonly outbox: WebhookOutbox,
    @inject(WebhookSender) private readonly sender: WebhookSender,
    @inject(WebhookUse) private readonly use: WebhookUse,
    @inject(TOKENS.Logger) logger: Logger,
  ) {
    this.logger = childLogger(logger, { component: 'webhooks' });
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.sender.start();
    this.unsubscribe = this.feed.onWake(() => {
      if (this.use.inUse) this.pump();
    });
    this.timer = this.options.clock.setInterval(() => {
      // Its own trigger: this pass reads no page begun before it (EventFeed.page).
      this.feed.nextTurn();
      this.pump();
      this.sender.deliver();
    }, this.options.webhooks.pollIntervalMs);
    this.timer.unref?.();
    this.feed.nextTurn();
    this.pump();
  }

  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    this.unsubscribe?.();
    this.options.clock.clearInterval(this.timer);
    const sending = this.sender.stop();
    await this.pumping;
    await sending;
  }

  /** The outbox reads the log through the feed: the page the feed reads for this wake-up's watchers, read once. */
  private readonly read = (from: string) => this.feed.page(from);

  /** Writes the outbox from the log past the shared cursor. Calls during a pass make one more pass after it. */
  pump(): void {
    if (!this.running) return;
    if (this.pumping) {
      this.pumpAgain = true;
      return;
    }
    this.pumping = (async () => {
      do {
        this.pumpAgain = false;
        try {
          if (this.use.inUse || (await this.outbox.idlePass(this.use))) {
            while (this.running && (await this.outbox.fromLog(this.read))) {
              // another page
            }
          }
        } catch (err) {
          this.logger.warn({ err: asError(err) }, 'writing the webhook outbox failed; retried on the next wake-up');
        }
      } while (this.pumpAgain && this.running);
    })().finally(() => {
      this.pumping = undefined;
    });
  }
}
