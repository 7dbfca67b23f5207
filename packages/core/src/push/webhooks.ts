import { createHash, randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { inject, injectable } from 'tsyringe';
import { DEFAULT_WEBHOOK_EVENTS, isOutputEvent, type BatchCounts, type BatchRecord, type GenerationEvent, type GenerationRecord, type WebhookEventType } from '../domain/types.js';
import { DomainError } from '../domain/errors.js';
import { GENERATION_ID_PATTERN } from '../domain/ids.js';
import { asError, childLogger } from '../logger.js';
import type { Logger } from '../ports/logger.js';
import type { GenerationStore } from '../ports/store.js';
import type { Delivery, DeliveryOutcome, NewDelivery, WebhookEndpoint, WebhookStore } from '../ports/webhooks.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { contextOfTraceparent, Telemetry } from '../telemetry.js';
import { TOKENS } from '../tokens.js';
import { ROOT_CONTEXT, SpanKind } from '@opentelemetry/api';
import { Views } from '../use-cases/views.js';
import { EventFeed } from './event-feed.js';
import { openAiVideoDeliveries } from '../openai/video-webhooks.js';
import type { ClockTimer } from '../ports/clock.js';

/** One POST to a receiver, as the transport is asked to make it. */
export interface WebhookRequest {
  url: string;
  headers: Record<string, string>;
  body: string;
  timeoutMs: number;
}

/** What came back: the receiver's status (and Retry-After), or why there was no answer, in words for the owner. */
export type WebhookResponse = { status: number; retryAfter?: string } | { error: string };

/**
 * Sends one delivery. The default goes through core's outbound guard: the address checked and pinned, no
 * redirects followed, bounded time and response size.
 */
export type WebhookTransport = (request: WebhookRequest) => Promise<WebhookResponse>;

/** Checks a webhook URL at create: throws a sentence saying what is wrong, or resolves. */
export type WebhookUrlCheck = (url: string) => Promise<void>;

export interface DeliveryView {
  id: string;
  type: Delivery['type'];
  url: string;
  state: Delivery['state'];
  attempts: Array<{ at: string; status?: number; error?: string; durationMs: number }>;
  /** ISO 8601, while a retry is due. */
  nextAttemptAt?: string;
}

const CURSOR = 'webhooks';
const PAGE = 500;
const DAY = 24 * 3600_000;

/** `whsec_` + 24 random bytes, base64 (the Standard Webhooks secret format). */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(24).toString('base64')}`;
}

/** Retry-After as seconds or an HTTP date, in ms from `now`; undefined when absent or unreadable. */
export function retryAfterMs(value: string | undefined, now: number): number | undefined {
  if (!value) return undefined;
  const v = value.trim();
  if (/^\d{1,9}$/.test(v)) return Number(v) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/**
 * The wait before a retry: the schedule's step with +-20 % jitter (`random` in [0, 1)), so receivers that come back
 * are not hit by every retry at once. A receiver's Retry-After may lengthen it (up to a day), never shorten it: a
 * receiver answering `Retry-After: 2` must not use up the whole schedule in seconds.
 */
export function retryDelay(step: number, retryAfter: number | undefined, random: number): number {
  const scheduled = Math.round(step * (0.8 + random * 0.4));
  return retryAfter === undefined ? scheduled : Math.max(scheduled, Math.min(retryAfter, DAY));
}

/**
 * Webhooks: per-user signing secrets, the outbox written from the event log, and delivery with retries.
 *
 * The outbox: every instance reads the log from one shared cursor and writes a delivery per (event, endpoint) under
 * a deterministic id, so instances racing on the same events write each delivery once. Delivery: instances claim due
 * deliveries under a lease, so each is attempted by one instance at a time, and a dead instance's are taken over
 * when its lease runs out. At least once: a receiver may see a message twice (same `webhook-id`) but never miss one
 * that was committed, across restarts.
 */
@injectable()
export class Webhooks {
  private readonly logger: Logger;
  private timer: ClockTimer | undefined;
  private pumping: Promise<void> | undefined;
  private pumpAgain = false;
  private delivering = 0;
  private deliveringLoop: Promise<void> | undefined;
  private deliverAgain = false;
  private readonly inFlight = new Set<Promise<void>>();
  private unsubscribe: (() => void) | undefined;
  private running = false;

  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(TOKENS.Store) private readonly store: GenerationStore,
    @inject(TOKENS.WebhookStore) private readonly hooks: WebhookStore,
    @inject(Views) private readonly views: Views,
    @inject(EventFeed) private readonly feed: EventFeed,
    @inject(TOKENS.WebhookTransport) private readonly transport: WebhookTransport,
    @inject(TOKENS.WebhookUrlCheck) private readonly urlCheck: WebhookUrlCheck,
    @inject(Telemetry) private readonly telemetry: Telemetry,
    @inject(TOKENS.Logger) logger: Logger,
  ) {
    this.logger = childLogger(logger, { component: 'webhooks' });
  }

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

  /** Every attempt at delivering this generation's webhooks, for its owner. */
  async deliveries(userId: string, generationId: string): Promise<DeliveryView[]> {
    const rec = GENERATION_ID_PATTERN.test(generationId) ? await this.store.get(generationId, userId) : null;
    if (!rec) throw new DomainError('not_found', 'Generation not found.');
    const all = await this.hooks.deliveriesOf(generationId);
    return all.map((d) => ({
      id: d.id,
      type: d.type,
      url: d.url,
      state: d.state,
      attempts: d.history.map((a) => ({
        at: new Date(a.at).toISOString(),
        ...(a.status !== undefined ? { status: a.status } : {}),
        ...(a.error !== undefined ? { error: a.error } : {}),
        durationMs: a.durationMs,
      })),
      ...(d.state === 'pending' ? { nextAttemptAt: new Date(d.nextAttemptAt).toISOString() } : {}),
    }));
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.unsubscribe = this.feed.onWake(() => this.pump());
    this.timer = this.options.clock.setInterval(() => {
      this.pump();
      this.deliver();
    }, this.options.webhooks.pollIntervalMs);
    this.timer.unref?.();
    this.pump();
  }

  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    this.unsubscribe?.();
    this.options.clock.clearInterval(this.timer);
    await this.pumping;
    await this.deliveringLoop;
    // Deliveries in flight finish (bounded by the request timeout); an interrupted one is retried when its lease ends.
    await Promise.allSettled([...this.inFlight]);
  }

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
          while (this.running && (await this.pumpPage())) {
            // another page
          }
        } catch (err) {
          this.logger.warn({ err: asError(err) }, 'writing the webhook outbox failed; retried on the next wake-up');
        }
      } while (this.pumpAgain && this.running);
    })().finally(() => {
      this.pumping = undefined;
    });
  }

  /** One page of the log into the outbox; true when there may be more. */
  private async pumpPage(): Promise<boolean> {
    const from = await this.hooks.getCursor(CURSOR);
    const { events, cursor } = await this.store.readFeed(from, PAGE);
    if (events.length === 0) return false;
    const deliveries = await this.deliveriesFor(events);
    if (deliveries.length > 0) await this.hooks.addDeliveries(deliveries);
    const advanced = await this.hooks.advanceCursor(CURSOR, from, cursor);
    if (deliveries.length > 0) this.deliver();
    // Another instance moved the cursor first: its deliveries have the same ids, so just read on from where it is.
    return advanced ? events.length === PAGE : true;
  }

  private async deliveriesFor(events: GenerationEvent[]): Promise<NewDelivery[]> {
    const records = new Map<string, GenerationRecord | null>();
    const defaults = new Map<string, WebhookEndpoint[]>();
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
      const urls = new Set<string>();
      if (rec.webhook && rec.webhook.events.includes(type)) urls.add(rec.webhook.url);
      for (const ep of defaults.get(rec.ownerId)!) if (ep.events.includes(type)) urls.add(ep.url);
      out.push(...openAiVideoDeliveries(this.options, e, rec, defaults.get(rec.ownerId)!, now));
      if (urls.size === 0) continue;
      const payload = JSON.stringify({ type, timestamp: new Date(e.at).toISOString(), data: this.item(rec) });
      for (const url of urls) {
        out.push({
          id: `msg_${createHash('sha256').update(`${e.generationId}\n${e.seq}\n${url}`).digest('base64url').slice(0, 24)}`,
          generationId: rec.id,
          ownerId: rec.ownerId,
          seq: e.seq,
          type,
          url,
          payload,
          nextAttemptAt: now,
          createdAt: now,
          ...(rec.traceparent !== undefined ? { traceparent: rec.traceparent } : {}),
        });
      }
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
    const urls = new Set<string>();
    if (rec.webhook?.events.includes(type)) urls.add(rec.webhook.url);
    for (const ep of await this.defaultEndpoints(rec.ownerId)) if (ep.events.includes(type)) urls.add(ep.url);
    if (urls.size === 0) return;
    // Only what identifies it: its settings, result and labels were deleted with it.
    const payload = JSON.stringify({ type, timestamp: new Date(at).toISOString(), data: { generationId: rec.id, modelId: rec.modelId, status: 'deleted' } });
    await this.hooks.addDeliveries(
      [...urls].map((url) => ({
        id: `msg_${createHash('sha256').update(`${rec.id}\n${seq}\n${url}`).digest('base64url').slice(0, 24)}`,
        generationId: rec.id,
        ownerId: rec.ownerId,
        seq,
        type,
        url,
        payload,
        nextAttemptAt: at,
        createdAt: at,
        ...(rec.traceparent !== undefined ? { traceparent: rec.traceparent } : {}),
      })),
    );
    this.deliver();
  }

  /**
   * Writes `batch.completed` to the batch's own webhook (given at `POST /v1/batches`): once, when its last generation
   * finished. The delivery is keyed by the batch id, so a second call (another instance) adds nothing.
   */
  async batchCompleted(batch: BatchRecord, totals: BatchCounts, at: number): Promise<void> {
    if (!batch.webhook) return;
    const url = batch.webhook.url;
    const type = 'batch.completed';
    const payload = JSON.stringify({ type, timestamp: new Date(at).toISOString(), data: { batchId: batch.id, status: 'completed', counts: totals.counts, price: totals.price } });
    await this.hooks.addDeliveries([
      {
        id: `msg_${createHash('sha256').update(`${batch.id}\n0\n${url}`).digest('base64url').slice(0, 24)}`,
        generationId: batch.id,
        ownerId: batch.ownerId,
        seq: 1,
        type,
        url,
        payload,
        nextAttemptAt: at,
        createdAt: at,
      },
    ]);
    this.deliver();
  }

  private item(rec: GenerationRecord): unknown {
    return this.views.pushItem(rec);
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

  /** Claims due deliveries up to the concurrency and sends them. */
  deliver(): void {
    if (!this.running || !this.options.webhooks.deliver) return;
    if (this.deliveringLoop) {
      this.deliverAgain = true;
      return;
    }
    this.deliveringLoop = (async () => {
      do {
        this.deliverAgain = false;
        try {
          const room = this.options.webhooks.concurrency - this.delivering;
          if (room <= 0) break;
          const { leaseMs, concurrencyPerEndpoint, concurrencyPerUser } = this.options.webhooks;
          const due = await this.hooks.claimDue(this.options.clock.now(), room, this.options.instanceId, leaseMs, {
            perEndpoint: concurrencyPerEndpoint,
            perOwner: concurrencyPerUser,
          });
          for (const d of due) {
            this.delivering++;
            const p = this.attempt(d)
              .catch((err: unknown) => this.logger.error({ err: asError(err), deliveryId: d.id }, 'delivery attempt failed'))
              .finally(() => {
                this.delivering--;
                this.inFlight.delete(p);
                this.deliver();
              });
            this.inFlight.add(p);
          }
          if (due.length === room) this.deliverAgain = true;
        } catch (err) {
          this.logger.warn({ err: asError(err) }, 'claiming webhook deliveries failed');
        }
      } while (this.deliverAgain && this.running);
    })().finally(() => {
      this.deliveringLoop = undefined;
    });
  }

  private async attempt(d: Delivery): Promise<void> {
    const started = this.options.clock.now();
    const secrets = (await this.hooks.getSecrets(d.ownerId, started)) ?? {
      current: await this.hooks.ensureSecret(d.ownerId, newWebhookSecret(), started),
    };
    const timestamp = new Date(started);
    const signatures = [secrets.current, ...(secrets.previous ? [secrets.previous.key] : [])].map((key) =>
      new Webhook(key).sign(d.id, timestamp, d.payload),
    );
    // The attempt continues the trace of the generation it is about (stored with the delivery), never the span that
    // happens to be active in the delivery loop; `batch.completed` has none, so each of its attempts is a trace's root.
    const response = await this.telemetry.inSpan('genservice.webhook.deliver', { 'genservice.delivery_id': d.id, 'genservice.attempt': d.attempts + 1 }, () => this.transport({
      url: d.url,
      headers: {
        'content-type': 'application/json',
        'user-agent': 'genservice-webhooks/1',
        'webhook-id': d.id,
        'webhook-timestamp': String(Math.floor(started / 1000)),
        'webhook-signature': signatures.join(' '),
      },
      body: d.payload,
      timeoutMs: this.options.webhooks.timeoutMs,
    }), contextOfTraceparent(d.traceparent) ?? ROOT_CONTEXT, SpanKind.CLIENT);
    const finished = this.options.clock.now();
    const attempts = d.attempts + 1;
    const outcome = this.outcome(response, attempts, finished);
    this.telemetry.webhookDelivery(outcome.state === 'pending' ? 'retry' : outcome.state, finished - started);
    const recorded = await this.hooks.recordAttempt(
      d.id,
      this.options.instanceId,
      { at: started, durationMs: finished - started, ...('status' in response ? { status: response.status } : { error: response.error }) },
      outcome,
    );
    if (!recorded) {
      this.logger.warn({ deliveryId: d.id }, 'delivery lease lost before its attempt was recorded; it will be tried again');
      return;
    }
    if (outcome.state === 'gone') {
      const stopped = await this.hooks.stopEndpoint(d.ownerId, d.url);
      this.logger.info({ url: d.url, ownerId: d.ownerId, stopped }, 'receiver answered 410 Gone: endpoint stopped');
    } else if (outcome.state === 'failed') {
      this.logger.warn({ deliveryId: d.id, url: d.url, attempts }, 'webhook delivery given up');
    }
  }

  private outcome(response: WebhookResponse, attempts: number, now: number): DeliveryOutcome {
    if ('status' in response) {
      if (response.status >= 200 && response.status < 300) return { state: 'delivered' };
      if (response.status === 410) return { state: 'gone' };
    }
    const schedule = this.options.webhooks.retrySchedule;
    if (attempts > schedule.length) return { state: 'failed' };
    const asked = 'status' in response && (response.status === 429 || response.status === 503) ? retryAfterMs(response.retryAfter, now) : undefined;
    return { state: 'pending', nextAttemptAt: now + retryDelay(schedule[attempts - 1]!, asked, Math.random()) };
  }
}
