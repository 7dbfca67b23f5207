import type { ResolvedServiceOptions } from '../resolved-options.js';
import { COMMON, errors, json, op, ref, schema, type Json } from './common.js';
import {
  cancelResponseSchema,
  createResponseSchema,
  LIST_LIMITS,
  modelsResponseSchema,
  quoteResponseSchema,
  webhookDeliveriesSchema,
  webhookSecretSchema,
} from '../http/schemas.js';

const idParam = { name: 'id', in: 'path', required: true, description: 'The generationId', schema: { type: 'string', pattern: '^[A-Za-z0-9_-]{22}$' } };
export const listSchema = {
  type: 'object',
  properties: {
    data: { type: 'array', items: ref('GenerationDetails') },
    nextCursor: { anyOf: [{ type: 'string' }, { type: 'null' }], description: 'Pass as `cursor` for the next page; null on the last page' },
  },
  required: ['data', 'nextCursor'],
  additionalProperties: false,
};
const preferWait = { name: 'Prefer', in: 'header', required: false, description: 'RFC 7240 `wait=N` (seconds, at most 60): a long-poll', schema: { type: 'string' } };
const waitApplied = { 'Preference-Applied': { description: 'The wait that was honoured', schema: { type: 'string' } } };

/** The paths of models, generations (create, read, list, live status, cancel, delete), webhooks and quotes. */
export function generationPaths(createBody: Json, options: ResolvedServiceOptions): Json {
  return {

  '/v1/models': {
    get: op({
      operationId: 'listModels',
      summary: 'List the models',
      description: 'Every model with its result type, estimated time and settings descriptors.',
      tag: 'Models',
      responses: { '200': { description: 'The models', content: json(schema(modelsResponseSchema)) }, ...errors(...COMMON) },
    }),
  },
  '/v1/generations': {
    post: op({
      operationId: 'createGeneration',
      summary: 'Start a generation',
      description: 'Validates the settings, reserves the price and starts the work in the background; answers at once.',
      tag: 'Generations',
      parameters: [
        {
          name: 'Idempotency-Key',
          in: 'header',
          required: false,
          description: 'Repeat a create safely: the same key and body answer the first generation again',
          schema: { type: 'string', maxLength: options.limits.idempotencyKeyLength },
        },
      ],
      requestBody: { required: true, content: json(createBody) },
      responses: {
        '201': { description: 'Started', content: json(schema(createResponseSchema)) },
        ...errors(400, 402, 403, 404, 409, 413, 415, 422, ...COMMON),
      },
    }),
    get: op({
      operationId: 'listGenerations',
      summary: 'List your generations',
      description: 'Newest first, a page at a time (keyset cursor).',
      tag: 'Generations',
      parameters: [
        { name: 'limit', in: 'query', required: false, description: 'Items per page', schema: { type: 'integer', minimum: 1, maximum: LIST_LIMITS.max, default: LIST_LIMITS.default } },
        { name: 'cursor', in: 'query', required: false, description: 'The nextCursor of the previous page', schema: { type: 'string' } },
        { name: 'status', in: 'query', required: false, description: 'Only this status', schema: { type: 'string', enum: ['pending', 'processing', 'completed', 'failed'] } },
        { name: 'modelId', in: 'query', required: false, description: 'Only this model', schema: { type: 'string' } },
      ],
      responses: { '200': { description: 'A page', content: json(listSchema) }, ...errors(400, ...COMMON) },
    }),
  },
  '/v1/generations/{id}': {
    get: op({
      operationId: 'getGeneration',
      summary: 'Read a generation',
      description:
        'The contract\u2019s exact shape for its state (the richer view is GET /v1/generations/{id}/details). With `Prefer: wait=N`, answers when its status changes or after N seconds.',
      tag: 'Generations',
      parameters: [idParam, preferWait],
      responses: {
        '200': { description: 'Status and result', headers: waitApplied, content: json(ref('Generation')) },
        ...errors(400, 404, ...COMMON),
      },
    }),
    delete: op({
      operationId: 'deleteGeneration',
      summary: 'Delete a generation',
      description:
        'A pending or processing generation is cancelled first (charged as a cancel). Its result files, settings, result, metadata, events and webhook deliveries are deleted; the charge stays in the ledger. Afterwards every read of it answers 404. Sends `generation.deleted` to webhooks that list it. No body.',
      tag: 'Generations',
      parameters: [idParam],
      responses: {
        '204': { description: 'Deleted' },
        ...errors(400, 404, ...COMMON),
      },
    }),
  },
  '/v1/generations/{id}/details': {
    get: op({
      operationId: 'getGenerationDetails',
      summary: 'Read a generation with its details',
      description:
        'Timestamps, progress, metadata, the partial output streamed so far (processing) and the reason of a failure, in one shape per status. With `Prefer: wait=N`, answers when its status changes, when new partial output arrives, or after N seconds.',
      tag: 'Generations',
      parameters: [idParam, preferWait],
      responses: {
        '200': { description: 'The generation with its details', headers: waitApplied, content: json(ref('GenerationDetails')) },
        ...errors(400, 404, ...COMMON),
      },
    }),
  },
  '/v1/generations/{id}/events': {
    get: op({
      operationId: 'streamGeneration',
      summary: 'Follow a generation live',
      description:
        'Server-Sent Events: the current state, then one message per transition (id = event seq, event = type, data = GenerationDetails), a keep-alive comment every 15 s, ending after the terminal event. Partial output comes as `event: output` (data `{"delta": "..."}`, text to append) and `event: preview` (data `{"url", "mimeType"}`, a signed file URL); on connecting, the output so far comes after the state. Resume with Last-Event-ID.',
      tag: 'Live status',
      parameters: [idParam, { name: 'Last-Event-ID', in: 'header', required: false, description: 'Resume after this event', schema: { type: 'string' } }],
      responses: {
        '200': { description: 'The event stream', content: { 'text/event-stream': { schema: { type: 'string' } } } },
        ...errors(404, ...COMMON),
      },
    }),
  },
  '/v1/generations/{id}/cancel': {
    post: op({
      operationId: 'cancelGeneration',
      summary: 'Cancel a generation',
      description: 'Free while pending; the model\u2019s failure fee once it is processing. A finished one is unchanged.',
      tag: 'Generations',
      parameters: [idParam],
      responses: {
        '200': { description: 'Cancelled, or already finished', content: json(schema(cancelResponseSchema)) },
        ...errors(404, ...COMMON),
      },
    }),
  },
  '/v1/generations/{id}/webhook-deliveries': {
    get: op({
      operationId: 'listWebhookDeliveries',
      summary: 'See a generation\u2019s webhook deliveries',
      description: 'Every delivery with each attempt: time, status or error, and the next retry.',
      tag: 'Webhooks',
      parameters: [idParam],
      responses: { '200': { description: 'The deliveries', content: json(schema(webhookDeliveriesSchema)) }, ...errors(404, ...COMMON) },
    }),
  },
  '/v1/webhooks/secret': {
    get: op({
      operationId: 'getWebhookSecret',
      summary: 'Your webhook signing secret',
      description: 'Made on first use. Verify deliveries with it (Standard Webhooks).',
      tag: 'Webhooks',
      responses: { '200': { description: 'The secret', content: json(schema(webhookSecretSchema)) }, ...errors(...COMMON) },
    }),
  },
  '/v1/webhooks/secret/rotate': {
    post: op({
      operationId: 'rotateWebhookSecret',
      summary: 'Rotate your webhook signing secret',
      description: 'A new secret; for 24 hours deliveries carry signatures with both.',
      tag: 'Webhooks',
      responses: { '200': { description: 'The new secret', content: json(schema(webhookSecretSchema)) }, ...errors(...COMMON) },
    }),
  },
  '/v1/quotes': {
    post: op({
      operationId: 'quoteGeneration',
      summary: 'Price a generation before starting it',
      description: 'Checks the body exactly like a create, reserves and stores nothing.',
      tag: 'Account',
      requestBody: { required: true, content: json(createBody) },
      responses: { '200': { description: 'Price and balance', content: json(schema(quoteResponseSchema)) }, ...errors(400, 404, 413, 415, ...COMMON) },
    }),
  },
  };
}
