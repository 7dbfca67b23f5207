import { z } from 'zod';
import { FAILURE_CODES, GENERATION_STATUSES, RESULT_TYPES, WEBHOOK_EVENT_TYPES } from '../domain.js';
import type { ErrorCode } from '../errors.js';

/** Limits of `metadata` on create: small labels, not a document store. */
export const METADATA_LIMITS = { entries: 16, keyLength: 64, valueLength: 512 } as const;

export const metadataSchema = z
  .record(z.string().min(1).max(METADATA_LIMITS.keyLength), z.string().max(METADATA_LIMITS.valueLength))
  .refine((m) => Object.keys(m).length <= METADATA_LIMITS.entries, { message: `at most ${METADATA_LIMITS.entries} entries` })
  .describe(
    `Your own labels for this generation: at most ${METADATA_LIMITS.entries} string values, keys of 1 to ${METADATA_LIMITS.keyLength} characters, values of at most ${METADATA_LIMITS.valueLength}. Returned in the list and details views.`,
  );

export const webhookRequestSchema = z
  .strictObject({
    url: z.string().min(1).max(2048).describe('https URL of your receiver; it gets Standard Webhooks signed POSTs'),
    events: z
      .array(z.enum(WEBHOOK_EVENT_TYPES))
      .min(1)
      .max(WEBHOOK_EVENT_TYPES.length)
      .optional()
      .describe('Which events to send; default the four state changes (generation.deleted only when listed)'),
  })
  .describe('Where to send this generation\'s events');

/** The body of POST /v1/generations (and /v1/quotes), before per-model settings validation. The handler validates with it. */
export const createRequestSchema = z.object({
  modelId: z.string().min(1).max(200).describe('A modelId from GET /v1/models'),
  settings: z.record(z.string(), z.unknown()).optional().describe("Keyed by the names of the model's setting descriptors"),
  metadata: metadataSchema.optional(),
  webhook: webhookRequestSchema.optional(),
});

export const createResponseSchema = z.object({ generationId: z.string() });

export const generationSchema = z.object({
  status: z.enum(GENERATION_STATUSES),
  result: z.string().optional().describe('Only when completed: the text, or the URL of the file'),
  price: z.number().optional().describe('Tokens charged; only when completed or failed'),
});

export const cancelResponseSchema = generationSchema.extend({
  cancelled: z.boolean().describe('False when the generation had already finished'),
});

export const failureSchema = z
  .object({ code: z.enum(FAILURE_CODES), message: z.string() })
  .describe('Why a generation failed, in words safe to show its owner');

export const progressSchema = z
  .object({ fraction: z.number().min(0).max(1), message: z.string().optional() })
  .describe('The latest progress the model reported');

/** One generation in the list, and GET /v1/generations/{id}?include=details. */
export const generationItemSchema = z.object({
  generationId: z.string(),
  modelId: z.string(),
  status: z.enum(GENERATION_STATUSES),
  createdAt: z.string().describe('ISO 8601'),
  startedAt: z.string().optional().describe('ISO 8601; when a worker first took it'),
  finishedAt: z.string().optional().describe('ISO 8601; when it completed or failed'),
  result: z.string().optional().describe('Only when completed: the text, or the URL of the file'),
  price: z.number().optional().describe('Tokens charged; only when completed or failed'),
  error: failureSchema.optional(),
  progress: progressSchema.optional(),
  metadata: z.record(z.string(), z.string()).optional(),
  expiresAt: z.string().optional().describe('ISO 8601; with the service\'s retention, when this finished generation is deleted'),
});

export const webhookSecretSchema = z.object({ key: z.string().describe('whsec_...: verify deliveries with it (Standard Webhooks)') });

export const webhookDeliveriesSchema = z.object({
  data: z.array(
    z.object({
      id: z.string().describe('The webhook-id header of every attempt of this message'),
      type: z.enum(WEBHOOK_EVENT_TYPES),
      url: z.string(),
      state: z.enum(['pending', 'delivered', 'failed', 'gone']),
      attempts: z.array(z.object({ at: z.string(), status: z.number().optional(), error: z.string().optional(), durationMs: z.number() })),
      nextAttemptAt: z.string().optional(),
    }),
  ),
});

export const LIST_LIMITS = { default: 20, max: 100 } as const;

export const listResponseSchema = z.object({
  data: z.array(generationItemSchema),
  nextCursor: z.string().nullable().describe('Pass as `cursor` for the next page; null on the last page'),
});

export const quoteResponseSchema = z.object({
  price: z.number().describe('Tokens a create with this body would reserve now'),
  balance: z.number().describe('Your spendable balance now'),
});

export const settingDescriptorSchema = z.object({
  name: z.string(),
  title: z.string(),
  fieldType: z.string(),
  required: z.boolean().optional(),
  options: z.array(z.string()).optional(),
});

export const modelSchema = z.object({
  modelId: z.string(),
  title: z.string(),
  resultType: z.enum(RESULT_TYPES),
  estimatedGenerationTime: z.number(),
  settings: z.array(settingDescriptorSchema),
});

export const modelsResponseSchema = z.object({ models: z.array(modelSchema) });
export const balanceResponseSchema = z.object({ balance: z.number() });

/** Every error code the API answers with (kept in step with ErrorCode by the type below). */
export const ERROR_CODES = [
  'invalid_json',
  'invalid_request',
  'invalid_settings',
  'unauthorized',
  'insufficient_funds',
  'model_not_found',
  'not_found',
  'payload_too_large',
  'request_timeout',
  'unsupported_media_type',
  'method_not_allowed',
  'idempotency_conflict',
  'idempotency_mismatch',
  'forbidden',
  'rate_limited',
  'unavailable',
  'internal',
] as const satisfies readonly ErrorCode[];
type MissingCodes = Exclude<ErrorCode, (typeof ERROR_CODES)[number]>;
// Fails to compile when ErrorCode gains a code ERROR_CODES lacks.
export const ERROR_CODES_COMPLETE: MissingCodes extends never ? true : never = true;

export const errorResponseSchema = z.object({
  error: z.object({
    code: z.enum(ERROR_CODES),
    message: z.string(),
    details: z.array(z.object({ field: z.string(), code: z.string(), message: z.string() })).optional(),
  }),
});
