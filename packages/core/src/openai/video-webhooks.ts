import { createHash } from 'node:crypto';
import type { GenerationEvent, GenerationRecord } from '../domain/types.js';
import type { NewDelivery, OpenAiWebhookEventType, WebhookEndpoint } from '../ports/webhooks.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { unixSeconds, videoId } from './shapes.js';

/**
 * The outbox's `video.completed` / `video.failed` messages (the OpenAI surface's webhooks): for a video model's
 * generation that finished, one delivery to each of the owner's default endpoints (`webhooks.endpoints`) that lists the
 * event, in OpenAI's event shape `{ id, object: 'event', created_at, type, data: { id } }`. Delivered and signed as
 * every other message (Standard Webhooks, the owner's secret), so `client.webhooks.unwrap` of OpenAI's SDK verifies
 * it. Ids are made from the generation, the event's seq and the URL, so instances writing the same event write the same
 * deliveries. Called by the outbox writer (`Webhooks`) for each event of the log it reads.
 */
export function openAiVideoDeliveries(options: ResolvedServiceOptions, e: GenerationEvent, rec: GenerationRecord, endpoints: readonly WebhookEndpoint[], now: number): NewDelivery[] {
  if (options.openai === undefined || (e.type !== 'completed' && e.type !== 'failed') || !options.openai.videoModels.has(rec.modelId)) return [];
  const type: OpenAiWebhookEventType = e.type === 'completed' ? 'video.completed' : 'video.failed';
  const urls = new Set(endpoints.filter((ep) => ep.events.includes(type)).map((ep) => ep.url));
  if (urls.size === 0) return [];
  const digest = (text: string): string => createHash('sha256').update(text).digest('base64url').slice(0, 24);
  const payload = JSON.stringify({ id: `evt_${digest(`${rec.id}\n${e.seq}\n${type}`)}`, object: 'event', created_at: unixSeconds(e.at), type, data: { id: videoId(rec.id) } });
  return [...urls].map((url) => ({
    id: `msg_${digest(`${rec.id}\n${e.seq}\n${url}\n${type}`)}`,
    generationId: rec.id,
    ownerId: rec.ownerId,
    seq: e.seq,
    type,
    url,
    payload,
    nextAttemptAt: now,
    createdAt: now,
    ...(rec.traceparent !== undefined ? { traceparent: rec.traceparent } : {}),
  }));
}
