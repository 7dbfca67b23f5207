import { z } from 'zod';
import type { ModelRegistry } from '../registry.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import {
  balanceResponseSchema,
  cancelResponseSchema,
  createRequestSchema,
  createResponseSchema,
  errorResponseSchema,
  generationSchema,
  modelsResponseSchema,
} from './schemas.js';

type Json = Record<string, unknown>;

function schema(s: z.ZodType, io: 'input' | 'output' = 'output'): Json {
  const out = z.toJSONSchema(s, { target: 'draft-2020-12', unrepresentable: 'any', io }) as Json;
  delete out.$schema;
  return out;
}

function errorResponses(...statuses: number[]): Json {
  const names: Record<number, string> = {
    400: 'Invalid JSON, request or settings',
    401: 'Missing or invalid API key',
    402: 'The balance has too few tokens',
    404: 'Not found (or another user\'s)',
    405: 'Method not allowed',
    409: 'Same Idempotency-Key still in progress',
    413: 'Body too large',
    415: 'Body is not JSON',
    422: 'Idempotency-Key reused with a different body',
    503: 'A backing service is unavailable',
  };
  return Object.fromEntries(
    statuses.map((s) => [String(s), { description: names[s] ?? 'Error', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } }]),
  );
}

/**
 * The OpenAPI 3.1 document of this service, generated from the zod schemas the handler validates with, and
 * from each model's compiled settings schema, so it cannot drift from what is enforced.
 */
export function buildOpenApiDocument(registry: ModelRegistry, options: ResolvedServiceOptions): Json {
  const perModel = registry.all().map((m) => {
    const s = schema(
      z.object({
        modelId: z.literal(m.info.modelId),
        settings: m.definition.settings.some((d) => d.required) ? m.schema : m.schema.optional(),
      }),
      'input',
    );
    return { title: m.info.title, ...s };
  });
  const createBody = perModel.length > 0 ? { oneOf: perModel } : schema(createRequestSchema, 'input');
  const auth = [{ bearer: [] }];
  const idParam = { name: 'id', in: 'path', required: true, schema: { type: 'string' } };
  return {
    openapi: '3.1.0',
    info: { title: 'Generation Service', version: '1.0.0', description: 'Asynchronous generation jobs: list models, start a generation, poll it.' },
    servers: options.publicUrl ? [{ url: options.publicUrl }] : [],
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
      schemas: { Error: schema(errorResponseSchema), Generation: schema(generationSchema) },
    },
    security: auth,
    paths: {
      '/v1/models': {
        get: {
          operationId: 'listModels',
          responses: { '200': { description: 'The models', content: { 'application/json': { schema: schema(modelsResponseSchema) } } }, ...errorResponses(401) },
        },
      },
      '/v1/generations': {
        post: {
          operationId: 'createGeneration',
          parameters: [{ name: 'Idempotency-Key', in: 'header', required: false, schema: { type: 'string', maxLength: options.limits.idempotencyKeyLength } }],
          requestBody: { required: true, content: { 'application/json': { schema: createBody } } },
          responses: {
            '201': { description: 'Started', content: { 'application/json': { schema: schema(createResponseSchema) } } },
            ...errorResponses(400, 401, 402, 404, 409, 413, 415, 422, 503),
          },
        },
      },
      '/v1/generations/{id}': {
        get: {
          operationId: 'getGeneration',
          parameters: [idParam],
          responses: {
            '200': { description: 'Status and result', content: { 'application/json': { schema: { $ref: '#/components/schemas/Generation' } } } },
            ...errorResponses(401, 404),
          },
        },
      },
      '/v1/generations/{id}/cancel': {
        post: {
          operationId: 'cancelGeneration',
          parameters: [idParam],
          responses: {
            '200': { description: 'Cancelled, or already finished', content: { 'application/json': { schema: schema(cancelResponseSchema) } } },
            ...errorResponses(401, 404),
          },
        },
      },
      '/v1/balance': {
        get: {
          operationId: 'getBalance',
          responses: { '200': { description: 'Spendable tokens', content: { 'application/json': { schema: schema(balanceResponseSchema) } } }, ...errorResponses(401) },
        },
      },
      '/v1/openapi.json': {
        get: { operationId: 'getOpenApi', security: [], responses: { '200': { description: 'This document' } } },
      },
      '/v1/files/{key}': {
        get: {
          operationId: 'getFile',
          security: [],
          parameters: [
            { name: 'key', in: 'path', required: true, schema: { type: 'string' } },
            { name: 'exp', in: 'query', required: true, schema: { type: 'string' } },
            { name: 'sig', in: 'query', required: true, schema: { type: 'string' } },
          ],
          responses: { '200': { description: 'The file' }, '403': { description: 'Invalid or expired link' }, '404': { description: 'No such file' } },
        },
      },
    },
  };
}
