import { inject, injectable } from 'tsyringe';
import { DEFAULT_WEBHOOK_EVENTS, type WebhookEventType } from '../domain/types.js';
import { DomainError } from '../domain/errors.js';
import { GENERATION_ID_PATTERN } from '../domain/ids.js';
import type { GenerationStore } from '../ports/store.js';
import type { WebhookStore } from '../ports/webhooks.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';
import { deliveryView, newWebhookSecret, type DeliveryView, type WebhookUrlCheck } from './webhook-messages.js';
import { WebhookUse } from './webhook-use.js';

export {
  deliveryView,
  newWebhookSecret,
  retryAfterMs,
  retryDelay,
  type DeliveryView,
  type WebhookRequest,
  type WebhookResponse,
  type WebhookTransport,
  type WebhookUrlCheck,
} from './webhook-messages.js';

/**
 * Webhooks as their owners see them: per-user signing secrets, the check of a create's webhook, and the deliveries
 * of a generation. The outbox is written by `WebhookOutbox` (webhook-outbox.ts), delivered by `WebhookSender`
 * (webhook-sender.ts), both run by `WebhookPump` (webhook-pump.ts).
 */
@injectable()
export class Webhooks {
  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(TOKENS.Store) private readonly store: GenerationStore,
    @inject(TOKENS.WebhookStore) private readonly hooks: WebhookStore,
    @inject(TOKENS.WebhookUrlCheck) private readonly urlCheck: WebhookUrlCheck,
    @inject(WebhookUse) private readonly use: WebhookUse,
  ) {}

  /** The user's signing secret, made on first use. */
  async secret(userId: string): Promise<string> {
    const now = this.options.clock.now();
    const have = await this.hooks.getSecrets(userId, now);
    return have?.current ?? this.hooks.ensureSecret(userId, newWebhookSecret(), now);
  }

  /** A new secret; deliveries carry both signatures for `webhooks.rotationOverlapMs` (24 h). */
  async rotate(userId: string): Promise<string> {
    await this.secret(userId);
    const next = await this.hooks.rotateSecret(userId, newWebhookSecret(), this.options.clock.now(), this.options.webhooks.rotationOverlapMs);
    return next.current;
  }

  /** Checks a create's webhook; throws invalid_request naming the field. */
  async check(webhook: { url: string; events?: WebhookEventType[] }): Promise<{ url: string; events: WebhookEventType[] }> {
    try {
      await this.urlCheck(webhook.url);
    } catch (err) {
      const why = err instanceof Error ? err.message : String(err);
      throw new DomainError('invalid_request', `webhook.url is not allowed: ${why}`, {
        details: [{ field: 'webhook.url', code: 'invalid_url', message: why }],
      });
    }
    return { url: webhook.url, events: webhook.events ? [...new Set(webhook.events)] : [...DEFAULT_WEBHOOK_EVENTS] };
  }

  /** A create's webhook, checked as `check` does; webhooks are then in use (`WebhookUse`) before it is stored. */
  async forCreate(webhook: { url: string; events?: WebhookEventType[] }): Promise<{ url: string; events: WebhookEventType[] }> {
    const checked = await this.check(webhook);
    await this.use.mark();
    return checked;
  }

  /** Every attempt at delivering this generation's webhooks, for its owner. */
  async deliveries(userId: string, generationId: string): Promise<DeliveryView[]> {
    const rec = GENERATION_ID_PATTERN.test(generationId) ? await this.store.get(generationId, userId) : null;
    if (!rec) throw new DomainError('not_found', 'Generation not found.');
    return (await this.hooks.deliveriesOf(generationId)).map(deliveryView);
  }
}
