/** The schemas of webhook endpoints as objects (docs/webhooks.md#webhook-endpoints): bodies and answers. */
import { z } from 'zod';
import { ENDPOINT_EVENT_TYPES } from '../domain/webhook-endpoints.js';

const endpointEventSchema = z.enum(ENDPOINT_EVENT_TYPES);
export const webhookEndpointSchema = z.object({
  id: z.string().describe('we_ and 22 characters'),
  url: z.string(),
  events: z.array(endpointEventSchema),
  description: z.string().nullable(),
  status: z.enum(['enabled', 'disabled']).describe('disabled after failing every attempt for the service’s period, or by its owner'),
  disabledAt: z.string().nullable().describe('ISO 8601'),
  createdAt: z.string().describe('ISO 8601'),
  updatedAt: z.string().describe('ISO 8601'),
});
export const webhookEndpointWithSecretSchema = webhookEndpointSchema.extend({
  secret: z.string().describe('whsec_...: verify this endpoint’s deliveries with it (Standard Webhooks); shown in this answer only'),
  previousSecretExpiresAt: z.string().optional().describe('After a rotation: until then deliveries are also signed with the previous secret'),
});
export const newWebhookEndpointSchema = z.strictObject({
  url: z.string().max(2048).describe('https URL of the receiver'),
  events: z.array(endpointEventSchema).min(1).optional().describe('Default: every generation event but generation.deleted, and webhook_endpoint.disabled'),
  description: z.string().min(1).max(500).optional(),
});
export const webhookEndpointChangeSchema = z.strictObject({
  url: z.string().max(2048).optional(),
  events: z.array(endpointEventSchema).min(1).optional(),
  description: z.string().min(1).max(500).nullable().optional().describe('null removes it'),
  disabled: z.boolean().optional().describe('false enables a disabled endpoint; true disables it'),
});
export const endpointDeliveriesSchema = z.object({
  data: z.array(
    z.object({
      id: z.string().describe('The webhook-id header of every attempt of this message (a replay too)'),
      type: endpointEventSchema,
      generationId: z.string().nullable().describe('The generation it is about; null for webhook_endpoint.disabled'),
      url: z.string(),
      state: z.enum(['pending', 'delivered', 'failed', 'gone']),
      attempts: z.array(
        z.object({
          at: z.string(),
          status: z.number().optional().describe('The receiver’s HTTP status'),
          error: z.string().optional().describe('Why there is no status'),
          durationMs: z.number().describe('Latency of the attempt'),
        }),
      ),
      nextAttemptAt: z.string().optional(),
      createdAt: z.string(),
    }),
  ),
});
export const endpointDeliverySchema = endpointDeliveriesSchema.shape.data.element;
