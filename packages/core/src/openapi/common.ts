import { z } from 'zod';
import type { ModelRegistry } from '../domain/registry.js';
import { createRequestSchema, deadlineSchema, metadataSchema, prioritySchema, webhookRequestSchema } from '../http/schemas.js';

/** The building blocks of the OpenAPI document: JSON Schema from zod, references, the error table, operations. */

export type Json = Record<string, unknown>;

export function schema(s: z.ZodType, io: 'input' | 'output' = 'output'): Json {
  const out = z.toJSONSchema(s, { target: 'draft-2020-12', unrepresentable: 'any', io }) as Json;
  delete out.$schema;
  return out;
}

export const ref = (name: string): Json => ({ $ref: `#/components/schemas/${name}` });
export const json = (s: Json): Json => ({ 'application/json': { schema: s } });

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

export function errors(...statuses: number[]): Json {
  return Object.fromEntries(
    statuses.map((s) => {
      const e = ERROR_STATUSES[s]!;
      return [String(s), { description: e.description, ...(e.headers ? { headers: e.headers } : {}), content: json(ref('Error')) }];
    }),
  );
}

/** Statuses every authenticated operation can answer (408: any request whose body is too slow). */
export const COMMON = [401, 405, 408, 429, 500, 503];

/**
 * The body of a create (and a quote) in the document: one variant per model, with that model's compiled settings
 * schema (the one that validates them), so it cannot drift from what is enforced.
 */
export function createBodyDoc(registry: ModelRegistry): Json {
  const extras = {
    metadata: schema(metadataSchema, 'input'),
    webhook: schema(webhookRequestSchema, 'input'),
    priority: schema(prioritySchema, 'input'),
    deadline: schema(deadlineSchema, 'input'),
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
  return perModel.length > 0 ? { oneOf: perModel } : schema(createRequestSchema, 'input');
}

/** A page of generations (GET /v1/generations, GET /v1/batches/{id}/generations). */
export const generationPageDoc: Json = {
  type: 'object',
  properties: {
    data: { type: 'array', items: ref('GenerationDetails') },
    nextCursor: { anyOf: [{ type: 'string' }, { type: 'null' }], description: 'Pass as `cursor` for the next page; null on the last page' },
  },
  required: ['data', 'nextCursor'],
  additionalProperties: false,
};
