import { z } from 'zod';
import { GENERATION_STATUSES, RESULT_TYPES } from '../domain.js';

/** The body of POST /v1/generations, before per-model settings validation. The handler validates with it. */
export const createRequestSchema = z.object({
  modelId: z.string().min(1).max(200).describe('A modelId from GET /v1/models'),
  settings: z.record(z.string(), z.unknown()).optional().describe("Keyed by the names of the model's setting descriptors"),
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

export const errorResponseSchema = z.object({
  error: z.object({
    code: z.string(),
    message: z.string(),
    details: z.array(z.object({ field: z.string(), code: z.string(), message: z.string() })).optional(),
  }),
});
