import type { z } from 'zod';
import { MAX_BATCH_SIZE } from '../lifecycle/lifecycle.js';
import { batchCancelSchema, batchCreatedSchema, batchRequestDocSchema, batchSchema } from '../http/batch-schemas.js';
import { LIST_LIMITS } from '../http/schemas.js';

type Json = Record<string, unknown>;

/** What the batch paths borrow from the document builder (openapi.ts). */
export interface DocHelpers {
  op: (o: { operationId: string; summary: string; description: string; tag: string; parameters?: Json[]; requestBody?: Json; responses: Json }) => Json;
  errors: (...statuses: number[]) => Json;
  schema: (s: z.ZodType, io?: 'input' | 'output') => Json;
  json: (s: Json) => Json;
  listSchema: Json;
  common: number[];
}

/** The four batch operations of the OpenAPI document. */
export function batchPaths(h: DocHelpers): Json {
  const idParam = { name: 'id', in: 'path', required: true, description: 'The batchId', schema: { type: 'string', pattern: '^batch_[A-Za-z0-9_-]{22}$' } };
  return {
    '/v1/batches': {
      post: h.op({
        operationId: 'createBatch',
        summary: 'Start many generations as one batch',
        description: `Up to ${MAX_BATCH_SIZE} requests, validated as a whole (a 400 names each bad request by its index; nothing is created) and reserved as a whole (a 402 when the balance or the key\u2019s budget cannot cover the total; nothing is held). Each becomes a generation of its own, run as its owner\u2019s work. Idempotent with \`Idempotency-Key\`. \`batch.completed\` goes to \`webhook.url\` when the last one finished.`,
        tag: 'Batches',
        parameters: [
          { name: 'Idempotency-Key', in: 'header', required: false, description: 'A retry with the same key and body answers the same batch', schema: { type: 'string', maxLength: 255 } },
        ],
        requestBody: { required: true, content: h.json(h.schema(batchRequestDocSchema, 'input')) },
        responses: {
          '201': { description: 'Created', content: h.json(h.schema(batchCreatedSchema)) },
          ...h.errors(400, 402, 403, 409, 413, 415, 422, ...h.common),
        },
      }),
    },
    '/v1/batches/{id}': {
      get: h.op({
        operationId: 'getBatch',
        summary: 'Read a batch',
        description: 'Running while any of its generations is pending or processing; its generations by status and the tokens charged so far.',
        tag: 'Batches',
        parameters: [idParam],
        responses: { '200': { description: 'The batch', content: h.json(h.schema(batchSchema)) }, ...h.errors(404, ...h.common) },
      }),
    },
    '/v1/batches/{id}/generations': {
      get: h.op({
        operationId: 'listBatchGenerations',
        summary: 'List a batch\u2019s generations',
        description: 'Its generations with their details, a page at a time (the order and cursor of GET /v1/generations).',
        tag: 'Batches',
        parameters: [
          idParam,
          { name: 'limit', in: 'query', required: false, description: 'Items per page', schema: { type: 'integer', minimum: 1, maximum: LIST_LIMITS.max, default: LIST_LIMITS.default } },
          { name: 'cursor', in: 'query', required: false, description: 'The nextCursor of the previous page', schema: { type: 'string' } },
        ],
        responses: { '200': { description: 'A page', content: h.json(h.listSchema) }, ...h.errors(400, 404, ...h.common) },
      }),
    },
    '/v1/batches/{id}/cancel': {
      post: h.op({
        operationId: 'cancelBatch',
        summary: 'Cancel a batch',
        description: 'Cancels each of its generations that has not finished, charged as single cancels (free while pending).',
        tag: 'Batches',
        parameters: [idParam],
        responses: { '200': { description: 'The batch after the cancel', content: h.json(h.schema(batchCancelSchema)) }, ...h.errors(404, ...h.common) },
      }),
    },
  };
}
