import { MAX_BATCH_SIZE } from '../../domain/batches.js';
import { generationPageDoc } from '../../openapi/common.js';
import { batchCancelSchema, batchCreatedSchema, batchSchema } from '../batch-schemas.js';
import { batchBody } from '../bodies.js';
import { pageCursor, pageLimit, querySchema } from '../query.js';
import { type PathParam, type RouteEntry, route } from '../route.js';
import { idempotencyKeyHeader, jsonOf } from './shared.js';

/** Batches: many generations started, reserved and followed as one. */

const BATCH_ID: PathParam = {
  doc: { name: 'id', in: 'path', required: true, description: 'The batchId', schema: { type: 'string', pattern: '^batch_[A-Za-z0-9_-]{22}$' } },
  notFound: 'Batch not found.',
};

export const batchRoutes: RouteEntry[] = [
  route({
    name: 'createBatch',
    method: 'POST',
    path: '/v1/batches',
    auth: 'user',
    scope: 'generate',
    rate: 'create',
    headers: [idempotencyKeyHeader('A retry with the same key and body answers the same batch')],
    body: batchBody,
    answers: { 201: { description: 'Created', schema: batchCreatedSchema } },
    errors: [400, 402, 403, 409, 413, 415, 422],
    doc: {
      operationId: 'createBatch',
      tag: 'Batches',
      summary: 'Start many generations as one batch',
      description: `Up to ${MAX_BATCH_SIZE} requests, validated as a whole (a 400 names each bad request by its index; nothing is created) and reserved as a whole (a 402 when the balance or the key\u2019s budget cannot cover the total; nothing is held). Each becomes a generation of its own, run as its owner\u2019s work. Idempotent with \`Idempotency-Key\`. \`batch.completed\` goes to \`webhook.url\` when the last one finished.`,
    },
    handle(call, s) {
      const input = call.body();
      return s.batches.create(call.principal, input, call.idempotencyKey(), call.req.baseUrl).then((created) => jsonOf(201, created));
    },
  }),
  route({
    name: 'getBatch',
    method: 'GET',
    path: '/v1/batches/{id}',
    auth: 'user',
    scope: 'read',
    rate: 'read',
    params: { id: BATCH_ID },
    answers: { 200: { description: 'The batch', schema: batchSchema } },
    errors: [404],
    doc: {
      operationId: 'getBatch',
      tag: 'Batches',
      summary: 'Read a batch',
      description: 'Running while any of its generations is pending or processing; its generations by status and the tokens charged so far.',
    },
    handle: (call, s) => s.batches.get(call.userId, call.param('id')).then((batch) => jsonOf(200, batch)),
  }),
  route({
    name: 'batchGenerations',
    method: 'GET',
    path: '/v1/batches/{id}/generations',
    auth: 'user',
    scope: 'read',
    rate: 'read',
    params: { id: BATCH_ID },
    query: querySchema({ limit: pageLimit, cursor: pageCursor }, 'first'),
    answers: { 200: { description: 'A page', schema: generationPageDoc } },
    errors: [400, 404],
    doc: {
      operationId: 'listBatchGenerations',
      tag: 'Batches',
      summary: 'List a batch\u2019s generations',
      description: 'Its generations with their details, a page at a time (the order and cursor of GET /v1/generations).',
    },
    handle(call, s) {
      const id = call.param('id');
      return s.batches.list(call.userId, id, call.query(), call.req.baseUrl).then((page) => jsonOf(200, page));
    },
  }),
  route({
    name: 'cancelBatch',
    method: 'POST',
    path: '/v1/batches/{id}/cancel',
    auth: 'user',
    scope: 'generate',
    rate: 'read',
    params: { id: BATCH_ID },
    answers: { 200: { description: 'The batch after the cancel', schema: batchCancelSchema } },
    errors: [404],
    doc: {
      operationId: 'cancelBatch',
      tag: 'Batches',
      summary: 'Cancel a batch',
      description: 'Cancels each of its generations that has not finished, charged as single cancels (free while pending).',
    },
    handle: (call, s) => s.batches.cancel(call.userId, call.param('id')).then((batch) => jsonOf(200, batch)),
  }),
];
