import { PRIORITIES } from '../domain/priority.js';
import { z } from 'zod';
import { FAILURE_CODES, GENERATION_STATUSES, RESULT_TYPES, WEBHOOK_EVENT_TYPES } from '../domain/types.js';
import { ERROR_DETAIL_CODES, type ErrorCode } from '../domain/errors.js';
import { MAX_TOKENS } from '../domain/amounts.js';

/** Limits of `metadata` on create: small labels, not a document store. */
export const METADATA_LIMITS = { entries: 16, keyLength: 64, valueLength: 512 } as const;

/** A lone surrogate: a UTF-16 half without its other half, which no Unicode encoding can store. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Text every store keeps as given: no NUL (PostgreSQL text and jsonb cannot hold it) and no lone surrogate (not
 * Unicode; jsonb refuses its escape). Refused at the door, so every store answers the same 400, never a 500.
 */
export function isStorableText(value: string): boolean {
  return !value.includes('\u0000') && !LONE_SURROGATE.test(value);
}

const STORABLE = { message: 'must not contain NUL characters or lone surrogates' } as const;

/** A plain copy of an object's own enumerable keys, `__proto__` kept as an own key (defined, not assigned). */
function ownCopy(v: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(v)) {
    if (key === '__proto__') Object.defineProperty(out, key, { value: v[key], enumerable: true, writable: true, configurable: true });
    else out[key] = v[key];
  }
  return out;
}

/**
 * `settings` as an object with every own key of the body kept, `__proto__` included (as an own property, `ownCopy`), so the model's settings check refuses it by name as a setting the model does not declare,
 * instead of a record parse dropping it.
 */
export const settingsObject = z
  .custom<Record<string, unknown>>((v) => {
    if (v === null || typeof v !== 'object' || Array.isArray(v)) return false;
    const proto = Object.getPrototypeOf(v);
    return proto === Object.prototype || proto === null;
  }, { message: 'must be an object' })
  .transform(ownCopy)
  .meta({ type: 'object', additionalProperties: {} });

const metadataRecord = z
  .record(
    z.string().min(1).max(METADATA_LIMITS.keyLength).refine(isStorableText, STORABLE),
    z.string().max(METADATA_LIMITS.valueLength).refine(isStorableText, STORABLE),
  )
  .refine((m) => Object.keys(m).length <= METADATA_LIMITS.entries, { message: `at most ${METADATA_LIMITS.entries} entries` });

const { $schema: _draft, ...metadataJsonSchema } = z.toJSONSchema(metadataRecord, { target: 'draft-2020-12', io: 'input' });

/**
 * `metadata`. A record parse skips a `__proto__` key (copying it would set the prototype), which dropped it without
 * a word: it is refused by name first, on the body as sent. The document shows the record's own JSON Schema.
 */
export const metadataSchema = z
  .custom<unknown>((v) => v === null || typeof v !== 'object' || !Object.hasOwn(v, '__proto__'), {
    message: '"__proto__" is not allowed as a key',
    path: ['__proto__'],
  })
  .pipe(metadataRecord)
  .meta(metadataJsonSchema)
  .describe(
    `Your own labels for this generation: at most ${METADATA_LIMITS.entries} string values, keys of 1 to ${METADATA_LIMITS.keyLength} characters, values of at most ${METADATA_LIMITS.valueLength}. Returned in the list and details views.`,
  );

export const webhookRequestSchema = z
  .strictObject({
    url: z.string().min(1).max(2048).refine(isStorableText, STORABLE).describe('https URL of your receiver; it gets Standard Webhooks signed POSTs'),
    events: z
      .array(z.enum(WEBHOOK_EVENT_TYPES))
      .min(1)
      .max(WEBHOOK_EVENT_TYPES.length)
      .optional()
      .describe('Which events to send; default the four state changes (generation.deleted only when listed)'),
  })
  .describe('Where to send this generation\'s events');

/** A create's `priority` (docs/operations.md). */
export const prioritySchema = z
  .enum(PRIORITIES)
  .describe(
    "Default normal. high goes first within your share of the queue, low waits for spare capacity; the service prices each (a multiplier of the model's price, shown by POST /v1/quotes). A priority the service restricts needs a key with the priority scope (403 otherwise).",
  );
/** A `low` create's `deadline`. */
export const deadlineSchema = z
  .string()
  .max(64)
  .describe('Only with priority low: an ISO 8601 date and time (at most 30 days ahead). Not started by then, the generation fails (error code timeout) and nothing is charged.');

/** The body of POST /v1/generations (and /v1/quotes), before per-model settings validation. The handler validates with it. */
export const createRequestSchema = z.object({
  modelId: z.string().min(1).max(200).describe('A modelId from GET /v1/models'),
  settings: settingsObject.optional().describe("Keyed by the names of the model's setting descriptors"),
  metadata: metadataSchema.optional(),
  webhook: webhookRequestSchema.optional(),
  expiresAfterSeconds: z
    .number()
    .int()
    .min(1)
    .max(2_147_483_647)
    .optional()
    .describe(
      "A shorter life than the service's retention: the generation (record and files) is deleted this many seconds after it finishes, and reads as deleted from then on. At most the retention in seconds (400 beyond it); any value when the service keeps generations forever. Shown as expiresAt in details, the list and webhooks.",
    ),
  priority: prioritySchema.optional(),
  deadline: deadlineSchema.optional(),
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

const itemBase = {
  generationId: z.string(),
  modelId: z.string(),
  createdAt: z.string().describe('ISO 8601'),
  startedAt: z.string().optional().describe('ISO 8601; when a worker first took it'),
  progress: progressSchema.optional(),
  metadata: z.record(z.string(), z.string()).optional(),
};
const finishedAt = z.string().optional().describe('ISO 8601; when it completed or failed');
const expiresAt = z
  .string()
  .optional()
  .describe("ISO 8601; when it is deleted (the service's retention, or the create's expiresAfterSeconds, whichever is first); absent when it is kept");
const price = z.number().describe('Tokens charged');

/** The details view of each status: what a client can count on once it has narrowed on `status`. */
export const generationDetailsSchemas = {
  pending: z
    .object({
      ...itemBase,
      status: z.literal('pending'),
      queue: z
        .object({
          position: z.number().int().min(1).describe('1 for the next job to start'),
          aheadOfYou: z.number().int().min(0).describe('Waiting jobs that start before this one if nothing else arrives'),
          etaSeconds: z
            .number()
            .int()
            .min(0)
            .nullable()
            .describe('Seconds until it is expected to start, from recent run times; null while there are none to go by'),
        })
        .optional()
        .describe(
          'Details and the event stream only: where it waits in the queue (weighted fair across organisations and users). Absent when the queue cannot tell',
        ),
    })
    .meta({ title: 'GenerationDetailsPending' }),
  processing: z
    .object({
      ...itemBase,
      status: z.literal('processing'),
      output: z
        .object({
          text: z.string().optional().describe('The text streamed so far'),
          preview: z.object({ url: z.string().describe('Signed file URL'), mimeType: z.string() }).optional().describe('The latest preview image or frame'),
        })
        .optional()
        .describe('Details only: the partial output the model streamed so far (the event stream sends it as it comes)'),
    })
    .meta({ title: 'GenerationDetailsProcessing' }),
  completed: z
    .object({
      ...itemBase,
      status: z.literal('completed'),
      finishedAt,
      expiresAt,
      result: z.string().describe('The text, or the URL of the file'),
      price,
      servedModelId: z.string().optional().describe('Present when one of its model\u2019s fallbacks produced the result: that model'),
    })
    .meta({ title: 'GenerationDetailsCompleted' }),
  failed: z
    .object({ ...itemBase, status: z.literal('failed'), finishedAt, expiresAt, price, error: failureSchema.optional() })
    .meta({ title: 'GenerationDetailsFailed' }),
} as const;

/** One generation in the list, and GET /v1/generations/{id}/details: one shape per status. */
export const generationItemSchema = z.discriminatedUnion('status', [
  generationDetailsSchemas.pending,
  generationDetailsSchemas.processing,
  generationDetailsSchemas.completed,
  generationDetailsSchemas.failed,
]);

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
  priority: z.enum(PRIORITIES).optional().describe('The priority asked (only when the body asked one)'),
  multiplier: z.number().optional().describe("What that priority multiplies the model's price by (only when the body asked a priority)"),
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
  'budget_exceeded',
  'model_not_found',
  'not_found',
  'payload_too_large',
  'request_timeout',
  'unsupported_media_type',
  'method_not_allowed',
  'idempotency_conflict',
  'conflict',
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
    details: z
      .array(z.object({ field: z.string().describe('Where: a body field such as `settings.size`, or a header'), code: z.enum(ERROR_DETAIL_CODES), message: z.string() }))
      .optional(),
  }),
});

const keyBudgetSchema = z
  .object({ amount: z.number().positive().max(MAX_TOKENS), period: z.enum(['day', 'month']) })
  .describe('At most `amount` tokens reserved or charged per UTC day or UTC month');

export const usageResponseSchema = z.object({
  data: z.array(
    z.object({
      period: z.string().optional().describe('groupBy=day: the UTC day, YYYY-MM-DD'),
      modelId: z.string().nullable().optional().describe('groupBy=model'),
      keyId: z.string().nullable().optional().describe('groupBy=key; null for spend made without a managed key'),
      userId: z.string().optional().describe('groupBy=member (an organisation admin): the member'),
      count: z.number().int().describe('Generations that finished (settled) in the group'),
      tokens: z.number().describe('Tokens charged'),
    }),
  ),
  total: z.object({ count: z.number().int(), tokens: z.number() }),
});

export const adminNewUserSchema = z.object({ userId: z.string().min(1).max(200), balance: z.number().nonnegative().max(MAX_TOKENS).optional() });
export const adminUserSchema = z.object({ userId: z.string(), balance: z.number() });
export const adminCreditSchema = z.object({
  amount: z.number().positive().max(MAX_TOKENS).describe(`The balance plus reserved may reach at most ${MAX_TOKENS} (2^53 - 1)`),
  reason: z.string().min(1).max(500),
});
export const adminNewKeySchema = z.object({
  name: z.string().min(1).max(100),
  scopes: z
    .array(z.enum(['generate', 'read', 'priority']))
    .min(1)
    .optional()
    .describe('Default generate and read; priority lets the key ask a create priority the service restricts'),
  models: z.array(z.string()).min(1).max(100).optional().describe('Model allow-list; default every model'),
  budget: keyBudgetSchema.optional(),
  maxInFlight: z.number().int().positive().max(1_000_000).optional().describe('At most this many of the key\u2019s generations pending or processing at once'),
  expiresAt: z.string().optional().describe('ISO 8601, in the future'),
});
export const adminKeySchema = z.object({
  keyId: z.string(),
  userId: z.string(),
  name: z.string(),
  scopes: z.array(z.enum(['generate', 'read', 'priority'])),
  models: z.array(z.string()).optional(),
  budget: keyBudgetSchema.optional(),
  maxInFlight: z.number().int().optional(),
  expiresAt: z.string().optional(),
  createdAt: z.string(),
  lastUsedAt: z.string().optional(),
});
export const adminCreatedKeySchema = adminKeySchema.extend({ apiKey: z.string().describe('The secret: shown this once, never again') });
export const adminAuditSchema = z.object({
  data: z.array(
    z.object({
      id: z.string(),
      at: z.string().describe('ISO 8601'),
      actor: z.string().describe('The admin key’s name'),
      action: z.enum(['user.create', 'credits.add', 'key.create', 'key.revoke', 'webhook_endpoint.disable', 'webhook_delivery.replay', 'organization.create', 'organization.limits.set', 'organization.member.add', 'organization.member.remove', 'user.limits.set']),
      userId: z.string().optional(),
      keyId: z.string().optional(),
      details: z.record(z.string(), z.unknown()).optional(),
    }),
  ),
  nextCursor: z.string().nullable(),
});

export const adminUserViewSchema = z.object({
  userId: z.string(),
  balance: z.number().describe('Spendable tokens'),
  reserved: z.number().describe('Held by generations that have not finished'),
  settled: z.number().describe('Charged, over all time'),
  keys: z.array(adminKeySchema.extend({ budgetSpent: z.number().optional().describe('Keys with a budget: tokens held or charged in the current window') })),
});
export const adminQueueSchema = z.object({
  models: z.array(
    z.object({
      modelId: z.string(),
      provider: z.string().describe('The provider’s `name`, else its place in the `providers` option (`provider 1`, ...)'),
      resultType: z.string().nullable().describe('null for a model no longer served'),
      pending: z.number().int(),
      running: z.number().int(),
      oldestPendingAt: z.string().nullable().describe('ISO 8601'),
    }),
  ),
  total: z.object({ pending: z.number().int(), running: z.number().int() }),
  oldestPendingAt: z.string().nullable().describe('ISO 8601; null when nothing waits'),
  oldestPendingSeconds: z.number().int().nullable(),
  failuresLastHour: z.number().int().describe('Generations this instance saw fail in the last hour (each instance counts its own)'),
  scanned: z.number().int().describe('Unfinished generations read'),
  truncated: z.boolean().describe('More than 10000 unfinished generations: the counts cover the oldest 10000'),
});
// The webhook endpoint objects' schemas (issue 41) live beside: one file each, the same import path for the routes.
export * from './webhook-endpoint-schemas.js';
