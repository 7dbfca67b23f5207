import { inject, injectable } from 'tsyringe';
import type { WebhookStore } from '../ports/webhooks.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';

/** The webhook store's named cursor used as a durable flag: '' until some instance accepted a webhook. */
const IN_USE = 'webhooks.in-use';

/**
 * Whether any webhook can apply to a generation's events (issue 36, pay for what you use): the host configured default
 * endpoints (`webhooks.endpoints`), or some instance of the service accepted a create with its own webhook or
 * registered a webhook endpoint (`POST /v1/webhook-endpoints`). Until then
 * the outbox is not written from the log, so a service without webhooks makes no outbox reads per generation.
 *
 * The flag is durable (a named cursor in the webhook store, set once, never cleared), so every instance, and this one
 * after a restart, sees it. It is set before the generation that carries the webhook is inserted, so each event of
 * that generation is written after it: `WebhookPump`'s idle pass reads the feed's head BEFORE it reads the flag, and
 * moves the outbox cursor to that head only when the flag is still unset, so it never skips such an event.
 */
@injectable()
export class WebhookUse {
  private known: boolean;

  constructor(
    @inject(TOKENS.Options) options: ResolvedServiceOptions,
    @inject(TOKENS.WebhookStore) private readonly hooks: WebhookStore,
  ) {
    this.known = options.webhooks.endpoints !== undefined;
  }

  /** In use, as far as this instance knows without asking the store. */
  get inUse(): boolean {
    return this.known;
  }

  /** Asks the store (an idle pass); true once any instance marked it. */
  async refresh(): Promise<boolean> {
    if (!this.known && (await this.hooks.getCursor(IN_USE)) !== '') this.known = true;
    return this.known;
  }

  /** A create with a webhook, or an endpoint, is about to be stored: mark webhooks in use, durably, once per instance. */
  async mark(): Promise<void> {
    if (this.known) return;
    await this.hooks.advanceCursor(IN_USE, '', '1');
    this.known = true;
  }
}
