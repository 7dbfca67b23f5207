import { generationPageDoc, ref } from '../../openapi/common.js';
import { z } from 'zod';
import { modelFilter, pageCursor, pageLimit, querySchema, statusFilter } from '../query.js';
import { fail, json, Refusal } from '../respond.js';
import { type PathParam, type QueryParam, type RouteEntry, route } from '../route.js';
import { adminQueueSchema, adminUserViewSchema, endpointDeliveriesSchema, endpointDeliverySchema, usageResponseSchema, webhookEndpointSchema } from '../schemas.js';
import type { HttpResponse } from '../types.js';
import { usageQuery } from './account.js';
import { GENERATION_ID } from './shared.js';
import { DELIVERY_ID, deliveryLimit, ENDPOINT_ID } from './webhook-endpoints.js';

/**
 * What the operator console reads (docs/console.md), to admin keys only: one user's account and keys, their usage
 * and generations (the user's own routes' shapes), one generation with its event log, their webhook endpoints with
 * their deliveries (and a replay), and the queue's health.
 */

const USER_ID: PathParam = {
  doc: { name: 'userId', in: 'path', required: true, description: 'The host\u2019s user id', schema: { type: 'string' } },
  notFound: 'No such user.',
};

function adminJson(status: number, value: unknown): HttpResponse {
  return json(status, JSON.stringify(value), { 'cache-control': 'no-store' });
}

const EVENT = {
  type: 'object',
  required: ['seq', 'type', 'at', 'data'],
  properties: {
    seq: { type: 'integer', description: '1, 2, 3, ... in the order they happened' },
    type: { type: 'string', description: 'created, started, progress, output, completed, failed, ...' },
    at: { type: 'string', description: 'ISO 8601' },
    data: { type: 'object' },
  },
};

/** `limit` of the user list: 1 to 200, default 50. */
const userLimit: QueryParam<number> = {
  doc: { name: 'limit', in: 'query', required: false, description: 'Users per page', schema: { type: 'integer', minimum: 1, maximum: 200, default: 50 } },
  parse(value) {
    const n = /^[0-9]{1,3}$/.test(value) ? Number(value) : 0;
    if (n < 1 || n > 200) {
      const message = 'limit must be an integer from 1 to 200';
      throw new Refusal(fail('invalid_request', `${message}.`, [{ field: 'limit', code: 'invalid_value', message }]));
    }
    return n;
  },
};

export const operationsRoutes: RouteEntry[] = [
  route({
    name: 'adminUsers',
    method: 'GET',
    path: '/v1/admin/users',
    auth: 'admin',
    query: querySchema({ limit: userLimit, cursor: pageCursor }, 'refused'),
    answers: {
      200: {
        description: 'A page of users',
        schema: z.object({
          data: z.array(adminUserViewSchema.pick({ userId: true, balance: true, reserved: true, settled: true })),
          nextCursor: z.string().nullable(),
        }),
      },
    },
    errors: [400, 404],
    doc: {
      operationId: 'adminListUsers',
      tag: 'Admin',
      summary: 'List users',
      description: 'Every account the ledger holds, with its balance, reserved and settled tokens, in the ledger\u2019s order, a page at a time. 404 when the ledger cannot list its accounts (a host\u2019s own ledger without `listAccounts`).',
    },
    handle: (call, s) => s.operations.users(call.query()).then((page) => adminJson(200, page)),
  }),
  route({
    name: 'adminUser',
    method: 'GET',
    path: '/v1/admin/users/{userId}',
    auth: 'admin',
    params: { userId: USER_ID },
    answers: { 200: { description: 'The account and keys', schema: adminUserViewSchema } },
    errors: [400, 404],
    doc: {
      operationId: 'adminGetUser',
      tag: 'Admin',
      summary: 'Read a user',
      description: 'The balance, reserved and settled tokens (zeros for a user without an account), and the keys (never a secret), each budgeted key with its spend in the current window.',
    },
    handle: (call, s) => s.operations.user(call.param('userId')).then((user) => adminJson(200, user)),
  }),
  route({
    name: 'adminUsage',
    method: 'GET',
    path: '/v1/admin/users/{userId}/usage',
    auth: 'admin',
    params: { userId: USER_ID },
    query: usageQuery(['day', 'model', 'key']),
    answers: { 200: { description: 'Usage', schema: usageResponseSchema } },
    errors: [400, 404],
    doc: {
      operationId: 'adminGetUsage',
      tag: 'Admin',
      summary: 'A user\u2019s usage',
      description: 'What `GET /v1/usage` answers that user: settled spend and counts per UTC day, model or key, from the ledger.',
    },
    handle: (call, s) => s.accounts.usage(call.param('userId'), call.query()).then((report) => adminJson(200, report)),
  }),
  route({
    name: 'adminGenerations',
    method: 'GET',
    path: '/v1/admin/users/{userId}/generations',
    auth: 'admin',
    params: { userId: USER_ID },
    query: querySchema({ limit: pageLimit, cursor: pageCursor, status: statusFilter, modelId: modelFilter }, 'refused'),
    answers: { 200: { description: 'A page', schema: generationPageDoc } },
    errors: [400, 404],
    doc: {
      operationId: 'adminListGenerations',
      tag: 'Admin',
      summary: 'A user\u2019s generations',
      description: 'What `GET /v1/generations` answers that user: newest first, a page at a time, by status and model.',
    },
    handle: (call, s) =>
      s.generations.list(call.param('userId'), { ...call.query(), baseUrl: call.req.baseUrl }).then((page) => adminJson(200, page)),
  }),
  route({
    name: 'adminGeneration',
    method: 'GET',
    path: '/v1/admin/users/{userId}/generations/{id}',
    auth: 'admin',
    params: { userId: USER_ID, id: GENERATION_ID },
    answers: {
      200: {
        description: 'The generation and its events',
        schema: { type: 'object', required: ['generation', 'events'], properties: { generation: ref('GenerationDetails'), events: { type: 'array', items: EVENT } } },
      },
    },
    errors: [400, 404],
    doc: {
      operationId: 'adminGetGeneration',
      tag: 'Admin',
      summary: 'A generation with its event log',
      description: 'The details view of one of that user\u2019s generations, and every event of its log, oldest first.',
    },
    handle: (call, s) => s.operations.generation(call.param('userId'), call.param('id'), call.req.baseUrl).then((g) => adminJson(200, g)),
  }),
  route({
    name: 'adminQueue',
    method: 'GET',
    path: '/v1/admin/queue',
    auth: 'admin',
    answers: { 200: { description: 'Queue health', schema: adminQueueSchema } },
    errors: [404],
    doc: {
      operationId: 'adminQueueHealth',
      tag: 'Admin',
      summary: 'Queue health',
      description:
        'Pending and running generations per model and its provider, the oldest one waiting, and the failures this instance saw in the last hour.',
    },
    handle: (_call, s) => s.queueHealth.read().then((q) => adminJson(200, q)),
  }),
  route({
    name: 'adminWebhookEndpoints',
    method: 'GET',
    path: '/v1/admin/users/{userId}/webhook-endpoints',
    auth: 'admin',
    params: { userId: USER_ID },
    answers: { 200: { description: 'The endpoints', schema: z.object({ data: z.array(webhookEndpointSchema) }) } },
    errors: [400, 404],
    doc: {
      operationId: 'adminListWebhookEndpoints',
      tag: 'Admin',
      summary: 'A user\u2019s webhook endpoints',
      description: 'What `GET /v1/webhook-endpoints` answers that user (never a secret).',
    },
    handle: (call, s) => s.webhookEndpoints.list(call.param('userId')).then((data) => adminJson(200, { data })),
  }),
  route({
    name: 'adminWebhookDeliveries',
    method: 'GET',
    path: '/v1/admin/users/{userId}/webhook-endpoints/{id}/deliveries',
    auth: 'admin',
    params: { userId: USER_ID, id: ENDPOINT_ID },
    query: querySchema({ limit: deliveryLimit }, 'refused'),
    answers: { 200: { description: 'Its deliveries, newest first', schema: endpointDeliveriesSchema } },
    errors: [400, 404],
    doc: {
      operationId: 'adminListWebhookDeliveries',
      tag: 'Admin',
      summary: 'A user\u2019s webhook deliveries',
      description: 'What `GET /v1/webhook-endpoints/{id}/deliveries` answers that user.',
    },
    handle: (call, s) =>
      s.webhookEndpoints.deliveries(call.param('userId'), call.param('id'), call.query().limit ?? 50).then((data) => adminJson(200, { data })),
  }),
  route({
    name: 'adminReplayWebhookDelivery',
    method: 'POST',
    path: '/v1/admin/users/{userId}/webhook-endpoints/{id}/deliveries/{deliveryId}/replay',
    auth: 'admin',
    params: { userId: USER_ID, id: ENDPOINT_ID, deliveryId: DELIVERY_ID },
    answers: { 202: { description: 'The delivery, due now', schema: endpointDeliverySchema } },
    errors: [404, 409],
    doc: {
      operationId: 'adminReplayWebhookDelivery',
      tag: 'Admin',
      summary: 'Send a user\u2019s delivery again',
      description: 'What `POST /v1/webhook-endpoints/{id}/deliveries/{deliveryId}/replay` does for that user: one more attempt of the same message. Audited.',
    },
    handle: (call, s) =>
      s.webhookEndpoints.replay(call.param('userId'), call.param('id'), call.param('deliveryId'), { actor: call.actor }).then((d) => adminJson(202, d)),
  }),
];
