import { inject, injectable } from 'tsyringe';
import { isOutputEvent, type BatchCounts, type BatchRecord, type GenerationEvent, type GenerationRecord, type WebhookEventType } from '../domain/types.js';
import { asError, childLogger } from '../logger.js';
import type { Logger } from '../ports/logger.js';
import type { FeedPage, GenerationStore } from '../ports/store.js';
import type { NewDelivery, WebhookEndpoint, WebhookEndpointRecord, WebhookStore } from '../ports/webhooks.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';
import { Views } from '../use-cases/views.js';
import { outboxEntries, type Receiver } from './webhook-messages.js';
import { WebhookSender } from './webhook-sender.js';
import { openAiVideoDeliveries } from '../openai/video-webhooks.js';
import { FEED_PAGE } from './event-feed.js';

const CURSOR = 'webhooks';

/**
 * The producers of the webhook outbox, all writing through `outboxEntries` (one message id for all): a generation's
 * events, read from the log past one cursor shared by every instance (`fromLog`); its deletion (`deleted`: its log is
 * gone with it); a batch's completion (`batchCompleted`). Ids are deterministic, so instances racing on the same
 * message write it once. At least once: a receiver may see a message twice (same `webhook-id`) but never miss one that
 * was committed, across restarts. Whatever is written is handed to the sender at once.
 */
@injectable()
export class WebhookOutbox {
  private readonly logger: Logger;

  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(TOKENS.Store) private readonly store: GenerationStore,
    @inject(TOKENS.WebhookStore) private readonly hooks: WebhookStore,
    @inject(Views) private readonly views: Views,
    @inject(WebhookSender) private readonly sender: WebhookSender,
    @inject(TOKENS.Logger) logger: Logger,
  ) {
    this.logger = childLogger(logger, { component: 'webhooks' });
  }

  /**
   * One page of the log into the outbox; true when there may be more. `read` reads the page after a cursor
   * (`EventFeed.page`, which shares one read among the readers of one wake-up; a page of `FEED_PAGE` events at most).
   */
  async fromLog(read: (from: string) => Promise<FeedPage>): Promise<boolean> {
    const from = await this.hooks.getCursor(CURSOR);
    const { events, cursor } = await read(from);
    if (events.length === 0) return false;
    const deliveries = await this.forEvents(events);
    if (deliveries.length > 0) await this.hooks.addDeliveries(deliveries);
    const advanced = await this.hooks.advanceCursor(CURSOR, from, cursor);
    if (deliveries.length > 0) this.sender.deliver();
    // Another instance moved the cursor first: its deliveries have the same ids, so just read on from where it is.
    return advanced ? events.length === FEED_PAGE : true;
  }

  /**
   * While no webhook is in use: the outbox cursor moved to the feed's head, reading no event. The head is read before
   * the flag (see `WebhookUse`): true (nothing moved) when the flag turned out set, and the log must be read.
   */
  async idlePass(use: { refresh(): Promise<boolean> }): Promise<boolean> {
    const head = await this.store.feedHead();
    if (await use.refresh()) return true;
    const from = await this.hooks.getCursor(CURSOR);
    if (from !== head) await this.hooks.advanceCursor(CURSOR, from, head);
    return false;
  }

  private async forEvents(events: GenerationEvent[]): Promise<NewDelivery[]> {
    const records = new Map<string, GenerationRecord | null>();
    const defaults = new Map<string, WebhookEndpoint[]>();
    const registered = new Map<string, WebhookEndpointRecord[]>();
    const out: NewDelivery[] = [];
    const now = this.options.clock.now();
    for (const e of events) {
      // Partial output is for the stream's watchers: it is never a webhook.
      if (e.type === 'created' || isOutputEvent(e.type)) continue;
      const type = `generation.${e.type}` as WebhookEventType;
      if (!records.has(e.generationId)) records.set(e.generationId, await this.store.getById(e.generationId));
      const rec = records.get(e.generationId);
      if (!rec) continue; // deleted by retention before the outbox got to it
      if (!defaults.has(rec.ownerId)) defaults.set(rec.ownerId, await this.defaultEndpoints(rec.ownerId));
      if (!registered.has(rec.ownerId)) registered.set(rec.ownerId, await this.hooks.listEndpoints(rec.ownerId));
      out.push(...openAiVideoDeliveries(this.options, e, rec, defaults.get(rec.ownerId)!, now));
      const urls = this.receivers(rec, defaults.get(rec.ownerId)!, registered.get(rec.ownerId)!, type);
      if (urls.length === 0) continue;
      const payload = JSON.stringify({ type, timestamp: new Date(e.at).toISOString(), data: this.views.pushItem(rec) });
      out.push(...outboxEntries({ subject: rec.id, idSeq: e.seq, seq: e.seq, ownerId: rec.ownerId, type, payload, at: now, traceparent: rec.traceparent }, urls));
    }
    return out;
  }

  /**
   * Writes `generation.deleted` for a generation that was just deleted (its record and log are gone, so the outbox
   * cannot read it from the log): to its own webhook and the owner's default endpoints that list the event. `seq` is
   * the number its deletion would have had in the log, so it is delivered after the generation's other messages.
   */
  async deleted(rec: GenerationRecord, seq: number, at: number): Promise<void> {
    const type = 'generation.deleted';
    const urls = this.receivers(rec, await this.defaultEndpoints(rec.ownerId), await this.hooks.listEndpoints(rec.ownerId), type);
    if (urls.length === 0) return;
    // Only what identifies it: its settings, result and labels were deleted with it.
    const payload = JSON.stringify({ type, timestamp: new Date(at).toISOString(), data: { generationId: rec.id, modelId: rec.modelId, status: 'deleted' } });
    await this.write(outboxEntries({ subject: rec.id, idSeq: seq, seq, ownerId: rec.ownerId, type, payload, at, traceparent: rec.traceparent }, urls));
  }

  /**
   * Writes `batch.completed` to the batch's own webhook (given at `POST /v1/batches`): once, when its last generation
   * finished. The delivery is keyed by the batch id, so a second call (another instance) adds nothing.
   */
  async batchCompleted(batch: BatchRecord, totals: BatchCounts, at: number): Promise<void> {
    if (!batch.webhook) return;
    const type = 'batch.completed';
    const payload = JSON.stringify({ type, timestamp: new Date(at).toISOString(), data: { batchId: batch.id, status: 'completed', counts: totals.counts, price: totals.price } });
    await this.write(outboxEntries({ subject: batch.id, idSeq: 0, seq: 1, ownerId: batch.ownerId, type, payload, at }, [batch.webhook.url]));
  }

  private async write(deliveries: NewDelivery[]): Promise<void> {
    await this.hooks.addDeliveries(deliveries);
    this.sender.deliver();
  }

  /**
   * Where a generation's message of this type goes: its own webhook and the owner's default endpoints (by URL, once
   * each), and the owner's registered endpoints that are enabled (each with its own secret), that list it.
   */
  private receivers(rec: GenerationRecord, defaults: readonly WebhookEndpoint[], registered: readonly WebhookEndpointRecord[], type: WebhookEventType): Receiver[] {
    const urls = new Set<string>();
    if (rec.webhook?.events.includes(type)) urls.add(rec.webhook.url);
    for (const ep of defaults) if (ep.events.includes(type)) urls.add(ep.url);
    const endpoints = registered.filter((ep) => ep.disabledAt === undefined && ep.events.includes(type)).map((ep) => ({ url: ep.url, endpointId: ep.id }));
    return [...urls, ...endpoints];
  }

  private async defaultEndpoints(userId: string): Promise<WebhookEndpoint[]> {
    const fn = this.options.webhooks.endpoints;
    if (!fn) return [];
    try {
      return (await fn(userId)) ?? [];
    } catch (err) {
      this.logger.error({ err: asError(err), userId }, 'webhooks.endpoints failed; only per-generation webhooks are sent');
      return [];
    }
  }
}
