/**
 * Webhook messages as pure functions: the one message id of all three producers (a generation's events, its
 * deletion, a batch's completion), the outbox entry they all write, signing secrets, and the retry schedule.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { WebhookEventType } from '../domain/types.js';
import type { Delivery, DeliveryWithAttempts, NewDelivery } from '../ports/webhooks.js';

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
  type: NewDelivery['type'];
  url: string;
  state: Delivery['state'];
  attempts: Array<{ at: string; status?: number; error?: string; durationMs: number }>;
  /** ISO 8601, while a retry is due. */
  nextAttemptAt?: string;
}

/** A delivery as its owner reads it: attempts oldest first, times in ISO 8601. */
export function deliveryView(d: DeliveryWithAttempts): DeliveryView {
  return {
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
  };
}

const DAY = 24 * 3600_000;

/**
 * The `webhook-id` of a message: the same for every instance that writes it and on every retry, unique per (subject,
 * position, receiver). `subject` is the generation's id (or the batch's), `seq` the event's number in its log (a
 * deletion takes the next one; a batch's completion 0).
 */
export function webhookMessageId(subject: string, seq: number, url: string): string {
  return `msg_${createHash('sha256').update(`${subject}\n${seq}\n${url}`).digest('base64url').slice(0, 24)}`;
}

/** Where one message goes: a URL (a create's webhook, a host's default endpoint), or a registered endpoint. */
export type Receiver = string | { url: string; endpointId: string };

/**
 * One message about a subject, for each of `receivers`: the outbox entries every producer writes. `idSeq` is the
 * position its id is made from (`seq`, except a batch's completion: id from 0, stored as 1). A registered endpoint's
 * id is made from the endpoint's id, so two endpoints with one URL each get their own message (and signature).
 */
export function outboxEntries(
  message: { subject: string; idSeq: number; seq: number; ownerId: string; type: NewDelivery['type']; payload: string; at: number; traceparent?: string | undefined },
  receivers: Iterable<Receiver>,
): NewDelivery[] {
  return [...receivers].map((r) => ({
    ...(typeof r === 'string'
      ? { id: webhookMessageId(message.subject, message.idSeq, r), url: r }
      : { id: webhookMessageId(message.subject, message.idSeq, `endpoint:${r.endpointId}`), url: r.url, endpointId: r.endpointId }),
    generationId: message.subject,
    ownerId: message.ownerId,
    seq: message.seq,
    type: message.type,
    payload: message.payload,
    nextAttemptAt: message.at,
    createdAt: message.at,
    ...(message.traceparent !== undefined ? { traceparent: message.traceparent } : {}),
  }));
}

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
