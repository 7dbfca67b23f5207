import { z } from 'zod';
import { GENERATION_STATUSES } from '../domain/types.js';
import { MAX_BATCH_SIZE } from '../domain/batches.js';
import { metadataSchema, settingsObject, webhookRequestSchema } from './schemas.js';

/** One request of a batch: a create body without a webhook of its own (the batch has one). */
export const batchItemSchema = z.strictObject({
  modelId: z.string().min(1).max(200).describe('A modelId from GET /v1/models'),
  settings: settingsObject.optional().describe("Keyed by the names of the model's setting descriptors"),
  metadata: metadataSchema.optional(),
});

export const batchRequestSchema = z.object({
  requests: z.array(z.unknown()).min(1).max(MAX_BATCH_SIZE).describe(`1 to ${MAX_BATCH_SIZE} generation requests, created and reserved as one`),
  webhook: z
    // The URL rule of a create's webhook, so what one refuses (a NUL, a lone UTF-16 half) the other does.
    .strictObject({ url: webhookRequestSchema.shape.url.describe('https URL that gets batch.completed') })
    .optional()
    .describe('Where batch.completed is sent when every generation of the batch has finished'),
});

/** The documented body (the array's items are checked one by one, so each bad one is named by its index). */
export const batchRequestDocSchema = batchRequestSchema.extend({ requests: z.array(batchItemSchema).min(1).max(MAX_BATCH_SIZE) });

export const batchCreatedSchema = z.object({
  batchId: z.string(),
  generationIds: z.array(z.string()).describe("The batch's generations, in the order of its requests"),
});

const countsSchema = z.object(Object.fromEntries(GENERATION_STATUSES.map((s) => [s, z.number().int()])) as Record<(typeof GENERATION_STATUSES)[number], z.ZodNumber>);

export const batchSchema = z.object({
  status: z.enum(['running', 'completed']).describe('completed once none of its generations is pending or processing'),
  counts: countsSchema.describe('Its generations by status'),
  price: z.number().describe('Tokens charged for its finished generations'),
});

export const batchCancelSchema = batchSchema.extend({ cancelled: z.number().int().describe('How many generations this call cancelled') });
