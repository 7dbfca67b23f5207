import { inject, injectable } from 'tsyringe';
import { z } from 'zod';
import { DomainError } from '../domain/errors.js';
import { newWebhookEndpointId, WEBHOOK_ENDPOINT_ID_PATTERN } from '../domain/ids.js';
import { DEFAULT_ENDPOINT_EVENTS, ENDPOINT_EVENT_TYPES } from '../domain/webhook-endpoints.js';
import type { AuditLog } from '../ports/audit.js';
import type { DeliveryWithAttempts, EndpointEventType, WebhookEndpointChange, WebhookEndpointRecord, WebhookStore } from '../ports/webhooks.js';
import { deliveryView, newWebhookSecret, type DeliveryView, type WebhookUrlCheck } from '../push/webhook-messages.js';
import { WebhookSender } from '../push/webhook-sender.js';
import { WebhookUse } from '../push/webhook-use.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';
import { check, invalid } from './account-input.js';

/** No control characters: a description ends up in logs and the console. */
const PRINTABLE = /^[^\u0000-\u001f\u007f]+$/;
/** A UTF-16 half without its other half: no store keeps it as given (as `isStorableText` of the HTTP layer). */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const storable = (v: string): boolean => !v.includes('\u0000') && !LONE_SURROGATE.test(v);
const STORABLE = 'must not contain NUL characters or lone surrogates';

const eventsSchema = z
  .array(z.enum(ENDPOINT_EVENT_TYPES))
  .min(1)
  .max(ENDPOINT_EVENT_TYPES.length)
  .refine((e) => new Set(e).size === e.length, 'must not repeat an event');
const urlSchema = z.string().min(1).max(2048).refine(storable, STORABLE);
const descriptionSchema = z.string().min(1).max(500).regex(PRINTABLE).refine(storable, STORABLE);

const newEndpointSchema = z.strictObject({ url: urlSchema, events: eventsSchema.optional(), description: descriptionSchema.optional() });
const endpointChangeSchema = z.strictObject({
  url: urlSchema.optional(),
  events: eventsSchema.optional(),
  description: descriptionSchema.nullable().optional(),
  disabled: z.boolean().optional(),
});

export type NewWebhookEndpointInput = z.input<typeof newEndpointSchema>;
export type WebhookEndpointChangeInput = z.input<typeof endpointChangeSchema>;

/** A registered endpoint as its owner reads it: never its secret (that is in the answers of create and rotate only). */
export interface WebhookEndpointView {
  id: string;
  url: string;
  events: EndpointEventType[];
  description: string | null;
  /** `disabled` after failing every attempt for `webhooks.disableEndpointAfterMs`, or when its owner said so. */
  status: 'enabled' | 'disabled';
  /** ISO 8601. */
  disabledAt: string | null;
  createdAt: string;
  updatedAt: string;
}

/** The answer of create and rotate: the view and the signing secret, shown this once. */
export interface WebhookEndpointWithSecret extends WebhookEndpointView {
  secret: string;
  /** After a rotation: until when (ISO 8601) deliveries also carry a signature with the previous secret. */
  previousSecretExpiresAt?: string;
}

/** One delivery to an endpoint, with the generation it is about (null for `webhook_endpoint.disabled`). */
export interface EndpointDeliveryView extends DeliveryView {
  generationId: string | null;
  createdAt: string;
}

/**
 * Webhook endpoints as objects a user registers over the API: each has its own secret (rotated with an overlap),
 * events, and a delivery log with replay. Deliveries to them are written by the same outbox and sent by the same sender
 * as every other webhook (push/). Every read and change is owner-scoped: another user's endpoint is a 404.
 */
@injectable()
export class WebhookEndpoints {
  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(TOKENS.WebhookStore) private readonly hooks: WebhookStore,
    @inject(TOKENS.WebhookUrlCheck) private readonly urlCheck: WebhookUrlCheck,
    @inject(WebhookSender) private readonly sender: WebhookSender,
    @inject(WebhookUse) private readonly use: WebhookUse,
    @inject(TOKENS.AuditLog) private readonly audit: AuditLog,
  ) {}

  /** Registers an endpoint; the answer is the only time its secret is shown. */
  async create(userId: string, input: NewWebhookEndpointInput): Promise<WebhookEndpointWithSecret> {
    const spec = check(newEndpointSchema, input);
    await this.checkUrl(spec.url);
    const max = this.options.webhooks.maxEndpointsPerUser;
    const full = (): DomainError => invalid([{ field: 'url', code: 'invalid_value', message: `you have ${max} webhook endpoints, the most allowed; delete one first` }]);
    if ((await this.hooks.listEndpoints(userId)).length >= max) throw full();
    const now = this.options.clock.now();
    const record: WebhookEndpointRecord = {
      id: newWebhookEndpointId(),
      ownerId: userId,
      url: spec.url,
      events: spec.events ?? [...DEFAULT_ENDPOINT_EVENTS],
      ...(spec.description !== undefined ? { description: spec.description } : {}),
      secret: newWebhookSecret(),
      createdAt: now,
      updatedAt: now,
    };
    // Webhooks are in use from now on (`WebhookUse`): the outbox is written from the log for this endpoint's events.
    await this.use.mark();
    await this.hooks.createEndpoint(record);
    // Checked again once stored: creates racing past the check above all counted the same endpoints. One that then
    // sees more than the cap takes itself back, so the cap holds however many race (they may all be refused).
    if ((await this.hooks.listEndpoints(userId)).length > max) {
      await this.hooks.deleteEndpoint(record.id, userId);
      throw full();
    }
    return { ...endpointView(record), secret: record.secret };
  }

  /** The user's endpoints, oldest first. */
  async list(userId: string): Promise<WebhookEndpointView[]> {
    return (await this.hooks.listEndpoints(userId)).map(endpointView);
  }

  async get(userId: string, id: string): Promise<WebhookEndpointView> {
    return endpointView(await this.owned(userId, id));
  }

  /**
   * Changes the fields given. `disabled: false` enables a disabled endpoint (its failure streak starts again);
   * `disabled: true` disables it, and its pending deliveries are given up.
   */
  async update(userId: string, id: string, input: WebhookEndpointChangeInput): Promise<WebhookEndpointView> {
    const spec = check(endpointChangeSchema, input);
    const before = await this.owned(userId, id);
    if (spec.url !== undefined) await this.checkUrl(spec.url);
    const now = this.options.clock.now();
    const change: WebhookEndpointChange = { updatedAt: now };
    if (spec.url !== undefined) change.url = spec.url;
    if (spec.events !== undefined) change.events = spec.events;
    if (spec.description !== undefined) change.description = spec.description;
    if (spec.disabled === false && before.disabledAt !== undefined) change.disabledAt = null;
    if (spec.disabled === true && before.disabledAt === undefined) change.disabledAt = now;
    const after = await this.hooks.updateEndpoint(before.id, userId, change);
    if (!after) throw notFound();
    return endpointView(after);
  }

  /** Deletes it; its pending deliveries are dropped, the ones made stay in its generations' delivery lists. */
  async delete(userId: string, id: string): Promise<void> {
    if (!WEBHOOK_ENDPOINT_ID_PATTERN.test(id) || !(await this.hooks.deleteEndpoint(id, userId))) throw notFound();
  }

  /** A new secret; for `webhooks.rotationOverlapMs` (24 h) deliveries carry signatures with both. */
  async rotateSecret(userId: string, id: string): Promise<WebhookEndpointWithSecret> {
    await this.owned(userId, id);
    const now = this.options.clock.now();
    const e = await this.hooks.rotateEndpointSecret(id, userId, newWebhookSecret(), now, this.options.webhooks.rotationOverlapMs);
    if (!e) throw notFound();
    return {
      ...endpointView(e),
      secret: e.secret,
      ...(e.previousSecret ? { previousSecretExpiresAt: new Date(e.previousSecret.expiresAt).toISOString() } : {}),
    };
  }

  /** The endpoint's deliveries, newest first, each with its attempts. */
  async deliveries(userId: string, id: string, limit: number): Promise<EndpointDeliveryView[]> {
    await this.owned(userId, id);
    return (await this.hooks.endpointDeliveries(id, userId, limit)).map(endpointDeliveryView);
  }

  /**
   * Sends a delivery again: the same message (`webhook-id`, body), signed with the endpoint's secret at the time of
   * the attempt, as one more attempt. 409 while an attempt is in flight or the endpoint is disabled. With an `actor`
   * (an admin replaying a user's delivery) it is audited, as every admin action is; the user's own replay is not.
   */
  async replay(userId: string, id: string, deliveryId: string, options: { actor?: string } = {}): Promise<EndpointDeliveryView> {
    const endpoint = await this.owned(userId, id);
    if (endpoint.disabledAt !== undefined) throw new DomainError('conflict', 'The endpoint is disabled; enable it (PATCH disabled: false) before a replay.');
    const now = this.options.clock.now();
    const d = deliveryId.length <= 64 ? await this.hooks.replayDelivery(deliveryId, id, now) : null;
    if (d === null) throw new DomainError('not_found', 'Delivery not found.');
    if (d === 'busy') throw new DomainError('conflict', 'The delivery is being attempted now; replay it when that attempt is over.');
    if (options.actor !== undefined) {
      await this.audit.append({ at: now, actor: options.actor, action: 'webhook_delivery.replay', userId, details: { endpointId: id, deliveryId } });
    }
    this.sender.deliver();
    const view = (await this.hooks.deliveriesOf(d.generationId)).find((x) => x.id === deliveryId);
    return endpointDeliveryView(view ?? { ...d, history: [] });
  }

  private async owned(userId: string, id: string): Promise<WebhookEndpointRecord> {
    const e = WEBHOOK_ENDPOINT_ID_PATTERN.test(id) ? await this.hooks.getEndpoint(id, userId) : null;
    if (!e) throw notFound();
    return e;
  }

  private async checkUrl(url: string): Promise<void> {
    try {
      await this.urlCheck(url);
    } catch (err) {
      const why = err instanceof Error ? err.message : String(err);
      throw new DomainError('invalid_request', `url is not allowed: ${why}`, { details: [{ field: 'url', code: 'invalid_url', message: why }] });
    }
  }
}

function notFound(): DomainError {
  return new DomainError('not_found', 'Webhook endpoint not found.');
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

export function endpointView(e: WebhookEndpointRecord): WebhookEndpointView {
  return {
    id: e.id,
    url: e.url,
    events: [...e.events],
    description: e.description ?? null,
    status: e.disabledAt === undefined ? 'enabled' : 'disabled',
    disabledAt: e.disabledAt === undefined ? null : iso(e.disabledAt),
    createdAt: iso(e.createdAt),
    updatedAt: iso(e.updatedAt),
  };
}

function endpointDeliveryView(d: DeliveryWithAttempts): EndpointDeliveryView {
  return { ...deliveryView(d), generationId: d.type.startsWith('generation.') ? d.generationId : null, createdAt: iso(d.createdAt) };
}
