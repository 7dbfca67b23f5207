import { z } from 'zod';
import type { ModelRegistry } from '../registry.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { batchPaths } from './openapi-batches.js';
import {
  adminAuditSchema,
  adminCreatedKeySchema,
  adminCreditSchema,
  adminKeySchema,
  adminNewKeySchema,
  adminNewUserSchema,
  adminUserSchema,
  balanceResponseSchema,
  cancelResponseSchema,
  createRequestSchema,
  createResponseSchema,
  ERROR_CODES,
  errorResponseSchema,
  generationDetailsSchemas,
  LIST_LIMITS,
  metadataSchema,
  modelsResponseSchema,
  quoteResponseSchema,
  usageResponseSchema,
  webhookDeliveriesSchema,
  webhookRequestSchema,
  webhookSecretSchema,
} from './schemas.js';

type Json = Record<string, unknown>;

function schema(s: z.ZodType, io: 'input' | 'output' = 'output'): Json {
  const out = z.toJSONSchema(s, { target: 'draft-2020-12', unrepresentable: 'any', io }) as Json;
  delete out.$schema;
  return out;
}

const ref = (name: string): Json => ({ $ref: `#/components/schemas/${name}` });
const json = (s: Json): Json => ({ 'application/json': { schema: s } });

const RETRY_AFTER = { description: 'Seconds to wait before trying again', schema: { type: 'integer', minimum: 0 } };

/** Every error status the handler can answer, with its headers: one table, used by every operation. */
const ERROR_STATUSES: Record<number, { description: string; headers?: Json }> = {
  400: { description: 'Invalid JSON, request, settings or parameters' },
  401: {
    description: 'Missing, malformed or unknown API key',
    headers: { 'WWW-Authenticate': { description: 'Always `Bearer`', schema: { type: 'string' } } },
  },
  402: { description: 'The balance has too few tokens for the price (`insufficient_funds`), or the key\u2019s budget for its period would be passed (`budget_exceeded`, naming the period and when it resets)' },
  403: { description: 'The API key lacks the scope this request needs (`forbidden`)' },
  404: { description: 'Not found, or another user\u2019s (answered alike)' },
  405: { description: 'Method not allowed here', headers: { Allow: { description: 'The methods this path serves', schema: { type: 'string' } } } },
  408: {
    description: 'The request body did not arrive within the time limit (limits.bodyTimeoutMs); the connection is closed',
    headers: { Connection: { description: 'Always `close`', schema: { type: 'string' } } },
  },
  409: { description: 'A request with the same Idempotency-Key is still in progress, or (admin) the user already exists' },
  413: { description: 'The body is larger than the limit' },
  415: { description: 'The body is not declared JSON, or is compressed (Content-Encoding)' },
  422: { description: 'The Idempotency-Key was used with a different body' },
  429: {
    description: 'Too many requests (rate limit), or too many generations in flight',
    headers: {
      'Retry-After': RETRY_AFTER,
      RateLimit: { description: 'Remaining quota (draft-ietf-httpapi-ratelimit-headers), when rate limits are on', schema: { type: 'string' } },
      'RateLimit-Policy': { description: 'The quota policy, when rate limits are on', schema: { type: 'string' } },
    },
  },
  500: { description: 'Internal error (never shows internals)' },
  503: { description: 'A backing service is unavailable', headers: { 'Retry-After': RETRY_AFTER } },
};

function errors(...statuses: number[]): Json {
  return Object.fromEntries(
    statuses.map((s) => {
      const e = ERROR_STATUSES[s]!;
      return [String(s), { description: e.description, ...(e.headers ? { headers: e.headers } : {}), content: json(ref('Error')) }];
    }),
  );
}

const ADMIN = [{ adminBearer: [] }];
const USER_PARAM = { name: 'userId', in: 'path', required: true, description: 'The host\u2019s user id', schema: { type: 'string' } };

/** Statuses every authenticated operation can answer (408: any request whose body is too slow). */
const COMMON = [401, 405, 408, 429, 500, 503];

interface Op {
  operationId: string;
  summary: string;
  description: string;
  tag: string;
  security?: unknown[];
  parameters?: Json[];
  requestBody?: Json;
  responses: Json;
}

function op(o: Op): Json {
  return {
    operationId: o.operationId,
    summary: o.summary,
    description: o.description,
    tags: [o.tag],
    ...(o.security ? { security: o.security } : {}),
    ...(o.parameters ? { parameters: o.parameters } : {}),
    ...(o.requestBody ? { requestBody: o.requestBody } : {}),
    responses: o.responses,
  };
}

/**
 * The OpenAPI 3.1 document of this service, generated from the zod schemas the handler validates with, and
 * from each model's compiled settings schema, so it cannot drift from what is enforced.
 */
export function buildOpenApiDocument(registry: ModelRegistry, options: ResolvedServiceOptions): Json {
  const extras = {
    metadata: schema(metadataSchema, 'input'),
    webhook: schema(webhookRequestSchema, 'input'),
  };
  const perModel = registry.all().map((m) => {
    const s = schema(
      z.object({
        modelId: z.literal(m.info.modelId),
        settings: m.definition.settings.some((d) => d.required) ? m.schema : m.schema.optional(),
      }),
      'input',
    );
    const props = (s.properties ?? {}) as Json;
    return { ...s, title: m.info.title, properties: { ...props, ...extras } };
  });
  const createBody = perModel.length > 0 ? { oneOf: perModel } : schema(createRequestSchema, 'input');
  const idParam = { name: 'id', in: 'path', required: true, description: 'The generationId', schema: { type: 'string', pattern: '^[A-Za-z0-9_-]{22}$' } };
  const status = (name: string, props: string[], required: string[]): Json => ({
    type: 'object',
    title: name,
    properties: Object.fromEntries(
      props.map((p) => [
        p,
        p === 'status'
          ? { type: 'string', const: name }
          : p === 'result'
            ? { type: 'string', description: 'The text, or the URL of the file' }
            : { type: 'number', description: 'Tokens charged' },
      ]),
    ),
    required,
    additionalProperties: false,
  });
  const errorSchema = schema(errorResponseSchema);
  const listSchema = {
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
  return {
    openapi: '3.1.0',
    info: {
      title: 'Generation Service',
      version: '1.0.0',
      description:
        'Asynchronous generation jobs: list models, start a generation that runs in the background, poll it or follow it live, pay for it in tokens, and see only your own.',
      license: { name: 'MIT', identifier: 'MIT' },
      contact: { name: 'genservice' },
    },
    servers: [{ url: options.publicUrl ?? '/', description: options.publicUrl ? 'This service' : 'Relative to where this document was served' }],
    tags: [
      { name: 'Models', description: 'What can be generated, and with which settings' },
      { name: 'Generations', description: 'Starting, reading, listing, cancelling and deleting generations' },
      { name: 'Live status', description: 'Following a generation without polling' },
      { name: 'Webhooks', description: 'Signed notifications to your own receiver' },
      { name: 'Batches', description: 'Many generations started, reserved and followed as one' },
      { name: 'Account', description: 'Your balance and prices' },
      { name: 'Files', description: 'Result files at signed, expiring URLs' },
      { name: 'Meta', description: 'This document' },
      { name: 'Admin', description: 'Users, credits, keys and the audit log, for the host\u2019s admin (served only with the `admin` option)' },
    ],
    components: {
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'Your API key' },
        adminBearer: { type: 'http', scheme: 'bearer', description: 'An admin key (the `admin.apiKeys` option); a user\u2019s key is refused here' },
      },
      schemas: {
        Error: { ...errorSchema, description: `Every error. \`error.code\` is one of: ${ERROR_CODES.join(', ')}.` },
        Generation: {
          description: 'The contract\u2019s exact per-state shapes',
          oneOf: [ref('GenerationPending'), ref('GenerationProcessing'), ref('GenerationCompleted'), ref('GenerationFailed')],
          discriminator: {
            propertyName: 'status',
            mapping: {
              pending: '#/components/schemas/GenerationPending',
              processing: '#/components/schemas/GenerationProcessing',
              completed: '#/components/schemas/GenerationCompleted',
              failed: '#/components/schemas/GenerationFailed',
            },
          },
        },
        GenerationPending: status('pending', ['status'], ['status']),
        GenerationProcessing: status('processing', ['status'], ['status']),
        GenerationCompleted: status('completed', ['status', 'result', 'price'], ['status', 'result', 'price']),
        GenerationFailed: status('failed', ['status', 'price'], ['status', 'price']),
        GenerationDetails: {
          description: 'The details view (and a list item): one shape per status, told apart by `status`',
          oneOf: [ref('GenerationDetailsPending'), ref('GenerationDetailsProcessing'), ref('GenerationDetailsCompleted'), ref('GenerationDetailsFailed')],
          discriminator: {
            propertyName: 'status',
            mapping: {
              pending: '#/components/schemas/GenerationDetailsPending',
              processing: '#/components/schemas/GenerationDetailsProcessing',
              completed: '#/components/schemas/GenerationDetailsCompleted',
              failed: '#/components/schemas/GenerationDetailsFailed',
            },
          },
        },
        GenerationDetailsPending: schema(generationDetailsSchemas.pending),
        GenerationDetailsProcessing: schema(generationDetailsSchemas.processing),
        GenerationDetailsCompleted: schema(generationDetailsSchemas.completed),
        GenerationDetailsFailed: schema(generationDetailsSchemas.failed),
      },
    },
    security: [{ bearer: [] }],
    paths: {
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
            'Timestamps, progress, metadata and the reason of a failure, in one shape per status. With `Prefer: wait=N`, answers when its status changes or after N seconds.',
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
            'Server-Sent Events: the current state, then one message per transition (id = event seq, event = type, data = GenerationDetails), a keep-alive comment every 15 s, ending after the terminal event. Resume with Last-Event-ID.',
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
      ...batchPaths({ op, errors, schema, json, listSchema, common: COMMON }),
      '/v1/balance': {
        get: op({
          operationId: 'getBalance',
          summary: 'Your balance',
          description: 'Spendable tokens (reserved ones are not included).',
          tag: 'Account',
          responses: { '200': { description: 'Spendable tokens', content: json(schema(balanceResponseSchema)) }, ...errors(...COMMON) },
        }),
      },
      '/v1/usage': {
        get: op({
          operationId: 'getUsage',
          summary: 'Your usage',
          description: `Settled spend and counts per UTC day, model or key, read from the ledger. \`from\` and \`to\` are days (both counted), at most 366 apart; by default the last 30 days.`,
          tag: 'Account',
          parameters: [
            { name: 'from', in: 'query', required: false, description: 'First day, YYYY-MM-DD', schema: { type: 'string', format: 'date' } },
            { name: 'to', in: 'query', required: false, description: 'Last day, YYYY-MM-DD (default today, UTC)', schema: { type: 'string', format: 'date' } },
            { name: 'groupBy', in: 'query', required: false, description: 'How to group', schema: { type: 'string', enum: ['day', 'model', 'key'], default: 'day' } },
          ],
          responses: { '200': { description: 'Usage', content: json(schema(usageResponseSchema)) }, ...errors(400, 403, ...COMMON) },
        }),
      },
      '/v1/admin/users': {
        post: op({
          operationId: 'adminCreateUser',
          summary: 'Create a user',
          description: 'Opens the user\u2019s account with a starting balance (default 0). Audited.',
          tag: 'Admin',
          security: ADMIN,
          requestBody: { required: true, content: json(schema(adminNewUserSchema, 'input')) },
          responses: { '201': { description: 'Created', content: json(schema(adminUserSchema)) }, ...errors(400, 404, 409, 413, 415, ...COMMON) },
        }),
      },
      '/v1/admin/users/{userId}/credits': {
        post: op({
          operationId: 'adminCredit',
          summary: 'Add credits to a user',
          description: 'Adds tokens to the balance, with a reason for the audit log.',
          tag: 'Admin',
          security: ADMIN,
          parameters: [USER_PARAM],
          requestBody: { required: true, content: json(schema(adminCreditSchema, 'input')) },
          responses: { '200': { description: 'The new balance', content: json(schema(balanceResponseSchema)) }, ...errors(400, 404, 413, 415, ...COMMON) },
        }),
      },
      '/v1/admin/users/{userId}/keys': {
        post: op({
          operationId: 'adminCreateKey',
          summary: 'Issue an API key',
          description: 'A key with a name, scopes, an optional model allow-list, budget and expiry. Its secret is in this answer only.',
          tag: 'Admin',
          security: ADMIN,
          parameters: [USER_PARAM],
          requestBody: { required: true, content: json(schema(adminNewKeySchema, 'input')) },
          responses: { '201': { description: 'The key and its secret', content: json(schema(adminCreatedKeySchema)) }, ...errors(400, 404, 413, 415, ...COMMON) },
        }),
        get: op({
          operationId: 'adminListKeys',
          summary: 'List a user\u2019s keys',
          description: 'Oldest first; never a secret.',
          tag: 'Admin',
          security: ADMIN,
          parameters: [USER_PARAM],
          responses: { '200': { description: 'The keys', content: json(schema(z.object({ data: z.array(adminKeySchema) }))) }, ...errors(400, 404, ...COMMON) },
        }),
      },
      '/v1/admin/keys/{keyId}': {
        delete: op({
          operationId: 'adminRevokeKey',
          summary: 'Revoke a key',
          description: 'Its next request is 401 on every instance (with `apiKeyCache` on, other instances within its `ttlMs`).',
          tag: 'Admin',
          security: ADMIN,
          parameters: [{ name: 'keyId', in: 'path', required: true, description: 'The keyId', schema: { type: 'string' } }],
          responses: { '204': { description: 'Revoked' }, ...errors(404, ...COMMON) },
        }),
      },
      '/v1/admin/audit': {
        get: op({
          operationId: 'adminAudit',
          summary: 'The audit log',
          description: 'Every admin action: who, what, when; newest first, a page at a time.',
          tag: 'Admin',
          security: ADMIN,
          parameters: [
            { name: 'limit', in: 'query', required: false, description: 'Entries per page', schema: { type: 'integer', minimum: 1, maximum: 200, default: 50 } },
            { name: 'cursor', in: 'query', required: false, description: 'The nextCursor of the previous page', schema: { type: 'string' } },
          ],
          responses: { '200': { description: 'A page', content: json(schema(adminAuditSchema)) }, ...errors(400, 404, ...COMMON) },
        }),
      },
      '/v1/openapi.json': {
        get: op({
          operationId: 'getOpenApi',
          summary: 'This document',
          description: 'The OpenAPI 3.1 description of this service, with each model\u2019s settings schema.',
          tag: 'Meta',
          security: [],
          responses: { '200': { description: 'This document', content: json({ type: 'object' }) }, ...errors(405) },
        }),
      },
      '/v1/files/{key}': {
        get: op({
          operationId: 'getFile',
          summary: 'Download a result file',
          description: 'A signed, expiring URL (no key needed). Supports a single byte Range.',
          tag: 'Files',
          security: [],
          parameters: [
            { name: 'key', in: 'path', required: true, description: 'The file key', schema: { type: 'string' } },
            { name: 'exp', in: 'query', required: true, description: 'Expiry (seconds since the epoch)', schema: { type: 'string' } },
            { name: 'sig', in: 'query', required: true, description: 'Signature', schema: { type: 'string' } },
            { name: 'Range', in: 'header', required: false, description: 'One byte range', schema: { type: 'string' } },
          ],
          responses: {
            '200': { description: 'The file', content: { 'application/octet-stream': { schema: { type: 'string', contentMediaType: 'application/octet-stream' } } } },
            '206': {
              description: 'Part of the file',
              headers: { 'Content-Range': { description: 'The bytes sent', schema: { type: 'string' } } },
              content: { 'application/octet-stream': { schema: { type: 'string', contentMediaType: 'application/octet-stream' } } },
            },
            '403': { description: 'Invalid or expired link', content: json(ref('Error')) },
            '404': { description: 'No such file', content: json(ref('Error')) },
            '416': { description: 'The range starts past the end', headers: { 'Content-Range': { description: '`bytes */size`', schema: { type: 'string' } } } },
            ...errors(405),
          },
        }),
      },
    },
  };
}
