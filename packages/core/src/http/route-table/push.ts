import { header } from '../respond.js';
import { type RouteEntry, route } from '../route.js';
import { webhookDeliveriesSchema, webhookSecretSchema } from '../schemas.js';
import { GENERATION_ID, jsonOf } from './shared.js';

/** Following a generation without polling: its event stream, its webhook deliveries, the webhook signing secret. */

export const pushRoutes: RouteEntry[] = [
  route({
    name: 'events',
    method: 'GET',
    path: '/v1/generations/{id}/events',
    auth: 'user',
    scope: 'read',
    rate: 'stream',
    params: { id: GENERATION_ID },
    headers: [{ name: 'Last-Event-ID', in: 'header', required: false, description: 'Resume after this event', schema: { type: 'string' } }],
    answers: { 200: { description: 'The event stream', content: { 'text/event-stream': { schema: { type: 'string' } } } } },
    errors: [404],
    doc: {
      operationId: 'streamGeneration',
      tag: 'Live status',
      summary: 'Follow a generation live',
      description:
        'Server-Sent Events: the current state, then one message per transition (id = event seq, event = type, data = GenerationDetails), a keep-alive comment every 15 s, ending after the terminal event. Partial output comes as `event: output` (data `{"delta": "..."}`, text to append) and `event: preview` (data `{"url", "mimeType"}`, a signed file URL); on connecting, the output so far comes after the state. While it waits in the queue, the state carries `queue` (`{position, aheadOfYou, etaSeconds}`) and `event: queue` (data the same object) follows whenever it moves up. Resume with Last-Event-ID.',
    },
    async handle(call, s) {
      const id = call.param('id');
      const lastId = header(call.req, 'last-event-id');
      const after = lastId !== undefined && /^\d{1,15}$/.test(lastId.trim()) ? Number(lastId.trim()) : undefined;
      const stream = await s.live.stream(call.userId, id, after, call.req.baseUrl);
      return {
        status: 200,
        headers: {
          'content-type': 'text/event-stream; charset=utf-8',
          'cache-control': 'no-store',
          'x-content-type-options': 'nosniff',
          // nginx and similar buffer responses unless told not to: a buffered event stream is not live.
          'x-accel-buffering': 'no',
        },
        body: stream,
      };
    },
  }),
  route({
    name: 'deliveries',
    method: 'GET',
    path: '/v1/generations/{id}/webhook-deliveries',
    auth: 'user',
    scope: 'read',
    rate: 'read',
    params: { id: GENERATION_ID },
    answers: { 200: { description: 'The deliveries', schema: webhookDeliveriesSchema } },
    errors: [404],
    doc: {
      operationId: 'listWebhookDeliveries',
      tag: 'Webhooks',
      summary: 'See a generation\u2019s webhook deliveries',
      description: 'Every delivery with each attempt: time, status or error, and the next retry.',
    },
    handle: (call, s) => s.webhooks.deliveries(call.userId, call.param('id')).then((data) => jsonOf(200, { data })),
  }),
  route({
    name: 'webhookSecret',
    method: 'GET',
    path: '/v1/webhooks/secret',
    auth: 'user',
    scope: 'read',
    rate: 'read',
    answers: { 200: { description: 'The secret', schema: webhookSecretSchema } },
    doc: {
      operationId: 'getWebhookSecret',
      tag: 'Webhooks',
      summary: 'Your webhook signing secret',
      description: 'Made on first use. Verify deliveries with it (Standard Webhooks).',
    },
    handle: (call, s) => s.webhooks.secret(call.userId).then((key) => jsonOf(200, { key })),
  }),
  route({
    name: 'rotateWebhookSecret',
    method: 'POST',
    path: '/v1/webhooks/secret/rotate',
    auth: 'user',
    scope: 'generate',
    rate: 'read',
    answers: { 200: { description: 'The new secret', schema: webhookSecretSchema } },
    doc: {
      operationId: 'rotateWebhookSecret',
      tag: 'Webhooks',
      summary: 'Rotate your webhook signing secret',
      description: 'A new secret; for 24 hours deliveries carry signatures with both.',
    },
    handle: (call, s) => s.webhooks.rotate(call.userId).then((key) => jsonOf(200, { key })),
  }),
];
