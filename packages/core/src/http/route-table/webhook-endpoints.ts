import { z } from 'zod';
import { jsonBody, noBody } from '../bodies.js';
import { querySchema } from '../query.js';
import { fail, Refusal } from '../respond.js';
import { type PathParam, type QueryParam, type RouteEntry, route } from '../route.js';
import {
  endpointDeliveriesSchema,
  endpointDeliverySchema,
  newWebhookEndpointSchema,
  webhookEndpointChangeSchema,
  webhookEndpointSchema,
  webhookEndpointWithSecretSchema,
} from '../schemas.js';
import { jsonOf, noContent } from './shared.js';

/**
 * Webhook endpoints as objects (issue 41): a user registers receivers, each with its own secret and events, reads
 * their delivery log and replays a delivery. Reads need the `read` scope; changes, like rotating the account's webhook
 * secret, `generate`.
 */

export const ENDPOINT_ID: PathParam = {
  doc: { name: 'id', in: 'path', required: true, description: 'The endpoint’s id', schema: { type: 'string', pattern: '^we_[A-Za-z0-9_-]{22}$' } },
  notFound: 'Webhook endpoint not found.',
};
export const DELIVERY_ID: PathParam = {
  doc: { name: 'deliveryId', in: 'path', required: true, description: 'The delivery’s id (its webhook-id)', schema: { type: 'string' } },
  notFound: 'Delivery not found.',
};

/** `limit` of an endpoint's deliveries: 1 to 100, default 50. */
export const deliveryLimit: QueryParam<number> = {
  doc: { name: 'limit', in: 'query', required: false, description: 'Most deliveries to answer, newest first', schema: { type: 'integer', minimum: 1, maximum: 100, default: 50 } },
  parse(value) {
    const n = /^[0-9]{1,3}$/.test(value) ? Number(value) : 0;
    if (n < 1 || n > 100) {
      const message = 'limit must be an integer from 1 to 100';
      throw new Refusal(fail('invalid_request', `${message}.`, [{ field: 'limit', code: 'invalid_value', message }]));
    }
    return n;
  },
};

const TAG = 'Webhooks';

export const webhookEndpointRoutes: RouteEntry[] = [
  route({
    name: 'createWebhookEndpoint',
    method: 'POST',
    path: '/v1/webhook-endpoints',
    auth: 'user',
    scope: 'generate',
    rate: 'read',
    body: jsonBody(newWebhookEndpointSchema),
    answers: { 201: { description: 'The endpoint and its secret', schema: webhookEndpointWithSecretSchema } },
    errors: [400, 413, 415],
    doc: {
      operationId: 'createWebhookEndpoint',
      tag: TAG,
      summary: 'Register a webhook endpoint',
      description:
        'Every event it lists, of every generation of yours, is delivered to it (Standard Webhooks, signed with its own secret, retried on the schedule). The secret is in this answer only. The URL is checked as a create’s webhook is.',
    },
    handle: (call, s) => s.webhookEndpoints.create(call.userId, call.body() as never).then((e) => jsonOf(201, e)),
  }),
  route({
    name: 'listWebhookEndpoints',
    method: 'GET',
    path: '/v1/webhook-endpoints',
    auth: 'user',
    scope: 'read',
    rate: 'read',
    answers: { 200: { description: 'Your endpoints, oldest first', schema: z.object({ data: z.array(webhookEndpointSchema) }) } },
    doc: { operationId: 'listWebhookEndpoints', tag: TAG, summary: 'List your webhook endpoints', description: 'Oldest first; never a secret.' },
    handle: (call, s) => s.webhookEndpoints.list(call.userId).then((data) => jsonOf(200, { data })),
  }),
  route({
    name: 'getWebhookEndpoint',
    method: 'GET',
    path: '/v1/webhook-endpoints/{id}',
    auth: 'user',
    scope: 'read',
    rate: 'read',
    params: { id: ENDPOINT_ID },
    answers: { 200: { description: 'The endpoint', schema: webhookEndpointSchema } },
    errors: [404],
    doc: { operationId: 'getWebhookEndpoint', tag: TAG, summary: 'Get a webhook endpoint', description: 'Never its secret.' },
    handle: (call, s) => s.webhookEndpoints.get(call.userId, call.param('id')).then((e) => jsonOf(200, e)),
  }),
  route({
    name: 'updateWebhookEndpoint',
    method: 'PATCH',
    path: '/v1/webhook-endpoints/{id}',
    auth: 'user',
    scope: 'generate',
    rate: 'read',
    params: { id: ENDPOINT_ID },
    body: jsonBody(webhookEndpointChangeSchema),
    answers: { 200: { description: 'The endpoint, changed', schema: webhookEndpointSchema } },
    errors: [400, 404, 413, 415],
    doc: {
      operationId: 'updateWebhookEndpoint',
      tag: TAG,
      summary: 'Change a webhook endpoint',
      description: 'Only the fields given change. `disabled: false` enables a disabled endpoint; `disabled: true` disables it and gives up its pending deliveries.',
    },
    handle: (call, s) => s.webhookEndpoints.update(call.userId, call.param('id'), call.body() as never).then((e) => jsonOf(200, e)),
  }),
  route({
    name: 'deleteWebhookEndpoint',
    method: 'DELETE',
    path: '/v1/webhook-endpoints/{id}',
    auth: 'user',
    scope: 'generate',
    rate: 'read',
    params: { id: ENDPOINT_ID },
    body: noBody,
    answers: { 204: { description: 'Deleted' } },
    errors: [400, 404],
    doc: { operationId: 'deleteWebhookEndpoint', tag: TAG, summary: 'Delete a webhook endpoint', description: 'Its pending deliveries are dropped.' },
    handle: (call, s) => {
      call.body();
      return s.webhookEndpoints.delete(call.userId, call.param('id')).then(noContent);
    },
  }),
  route({
    name: 'rotateWebhookEndpointSecret',
    method: 'POST',
    path: '/v1/webhook-endpoints/{id}/rotate-secret',
    auth: 'user',
    scope: 'generate',
    rate: 'read',
    params: { id: ENDPOINT_ID },
    answers: { 200: { description: 'The endpoint and its new secret', schema: webhookEndpointWithSecretSchema } },
    errors: [404],
    doc: {
      operationId: 'rotateWebhookEndpointSecret',
      tag: TAG,
      summary: 'Rotate a webhook endpoint’s secret',
      description: 'A new secret, shown in this answer only; until `previousSecretExpiresAt` (24 h by default) deliveries carry signatures with both.',
    },
    handle: (call, s) => s.webhookEndpoints.rotateSecret(call.userId, call.param('id')).then((e) => jsonOf(200, e)),
  }),
  route({
    name: 'webhookEndpointDeliveries',
    method: 'GET',
    path: '/v1/webhook-endpoints/{id}/deliveries',
    auth: 'user',
    scope: 'read',
    rate: 'read',
    params: { id: ENDPOINT_ID },
    query: querySchema({ limit: deliveryLimit }, 'refused'),
    answers: { 200: { description: 'Its deliveries, newest first', schema: endpointDeliveriesSchema } },
    errors: [400, 404],
    doc: {
      operationId: 'listWebhookEndpointDeliveries',
      tag: TAG,
      summary: 'See a webhook endpoint’s deliveries',
      description: 'Newest first: the event type, the generation, each attempt (time, status code or error, latency) and the next attempt.',
    },
    handle: (call, s) => s.webhookEndpoints.deliveries(call.userId, call.param('id'), call.query().limit ?? 50).then((data) => jsonOf(200, { data })),
  }),
  route({
    name: 'replayWebhookDelivery',
    method: 'POST',
    path: '/v1/webhook-endpoints/{id}/deliveries/{deliveryId}/replay',
    auth: 'user',
    scope: 'generate',
    rate: 'read',
    params: { id: ENDPOINT_ID, deliveryId: DELIVERY_ID },
    answers: { 202: { description: 'The delivery, due now', schema: endpointDeliverySchema } },
    errors: [404, 409],
    doc: {
      operationId: 'replayWebhookDelivery',
      tag: TAG,
      summary: 'Send a delivery again',
      description:
        'One more attempt of the same message (same webhook-id and body), signed with the endpoint’s secret, whatever its state. 409 while an attempt is in flight, or when the endpoint is disabled.',
    },
    handle: (call, s) => s.webhookEndpoints.replay(call.userId, call.param('id'), call.param('deliveryId')).then((d) => jsonOf(202, d)),
  }),
];
