import { GenServiceError } from './errors.js';
import { isRecord, type Transport } from './transport.js';
import type { WebhookEventType } from './types.js';

/** What a registered endpoint may subscribe to. */
export type EndpointEventType = WebhookEventType | 'webhook_endpoint.disabled';

/** A registered webhook endpoint (never its secret). Times are ISO 8601. */
export interface WebhookEndpoint {
  id: string;
  url: string;
  events: EndpointEventType[];
  description: string | null;
  /** `disabled` after failing every attempt for the service's period, or when you disabled it. */
  status: 'enabled' | 'disabled';
  disabledAt: string | null;
  createdAt: string;
  updatedAt: string;
}

/** The answer of create and rotateSecret: the endpoint and its signing secret, shown this once. */
export interface WebhookEndpointWithSecret extends WebhookEndpoint {
  secret: string;
  /** After a rotation: until then deliveries also carry a signature with the previous secret. */
  previousSecretExpiresAt?: string;
}

/** One delivery to an endpoint with every attempt. */
export interface WebhookDelivery {
  /** The `webhook-id` header of every attempt of this message, a replay's too. */
  id: string;
  type: EndpointEventType;
  /** The generation it is about; null for `webhook_endpoint.disabled`. */
  generationId: string | null;
  url: string;
  state: 'pending' | 'delivered' | 'failed' | 'gone';
  attempts: Array<{ at: string; status?: number; error?: string; durationMs: number }>;
  nextAttemptAt?: string;
  createdAt: string;
}

type Signal = { signal?: AbortSignal };

/** `client.webhookEndpoints`: your webhook receivers as objects, their delivery log and replay. */
export interface WebhookEndpointsApi {
  /** POST /v1/webhook-endpoints. The answer is the only time the secret is shown. A URL the service refuses is a 400. */
  create(input: { url: string; events?: EndpointEventType[]; description?: string }, options?: Signal): Promise<WebhookEndpointWithSecret>;
  /** GET /v1/webhook-endpoints: yours, oldest first. */
  list(options?: Signal): Promise<WebhookEndpoint[]>;
  /** GET /v1/webhook-endpoints/:id (another user's is a NotFoundError, as a missing one). */
  get(id: string, options?: Signal): Promise<WebhookEndpoint>;
  /** PATCH /v1/webhook-endpoints/:id: only the fields given change; `disabled: false` enables it again. */
  update(
    id: string,
    change: { url?: string; events?: EndpointEventType[]; description?: string | null; disabled?: boolean },
    options?: Signal,
  ): Promise<WebhookEndpoint>;
  /** DELETE /v1/webhook-endpoints/:id. */
  delete(id: string, options?: Signal): Promise<void>;
  /** POST /v1/webhook-endpoints/:id/rotate-secret: a new secret; both sign until `previousSecretExpiresAt`. */
  rotateSecret(id: string, options?: Signal): Promise<WebhookEndpointWithSecret>;
  /** GET /v1/webhook-endpoints/:id/deliveries: newest first, at most `limit` (1 to 100, default 50). */
  deliveries(id: string, options?: Signal & { limit?: number }): Promise<WebhookDelivery[]>;
  /** POST /v1/webhook-endpoints/:id/deliveries/:deliveryId/replay: the same message once more, due now. */
  replay(id: string, deliveryId: string, options?: Signal): Promise<WebhookDelivery>;
}

function checked<T>(body: unknown, what: string, ok: (b: Record<string, unknown>) => boolean): T {
  if (!isRecord(body) || !ok(body)) throw new GenServiceError(`${what}: not the answer the API documents`, { status: 200, code: 'invalid_response' });
  return body as T;
}

const isEndpoint = (b: Record<string, unknown>): boolean => typeof b.id === 'string' && typeof b.url === 'string' && Array.isArray(b.events);
const hasData = (b: Record<string, unknown>): boolean => Array.isArray(b.data);

export function webhookEndpointsApi(transport: Transport): WebhookEndpointsApi {
  const path = (id: string, tail = '') => `/v1/webhook-endpoints/${encodeURIComponent(id)}${tail}`;
  return {
    async create(input, options = {}) {
      const body = await transport.request('POST', '/v1/webhook-endpoints', { body: input, signal: options.signal });
      return checked(body, 'POST /v1/webhook-endpoints', (b) => isEndpoint(b) && typeof b.secret === 'string');
    },
    async list(options = {}) {
      const body = await transport.request('GET', '/v1/webhook-endpoints', { signal: options.signal });
      return checked<{ data: WebhookEndpoint[] }>(body, 'GET /v1/webhook-endpoints', hasData).data;
    },
    async get(id, options = {}) {
      return checked(await transport.request('GET', path(id), { signal: options.signal }), 'GET /v1/webhook-endpoints/:id', isEndpoint);
    },
    async update(id, change, options = {}) {
      return checked(await transport.request('PATCH', path(id), { body: change, signal: options.signal }), 'PATCH /v1/webhook-endpoints/:id', isEndpoint);
    },
    async delete(id, options = {}) {
      await transport.request('DELETE', path(id), { signal: options.signal });
    },
    async rotateSecret(id, options = {}) {
      const body = await transport.request('POST', path(id, '/rotate-secret'), { signal: options.signal });
      return checked(body, 'POST /v1/webhook-endpoints/:id/rotate-secret', (b) => isEndpoint(b) && typeof b.secret === 'string');
    },
    async deliveries(id, options = {}) {
      const query = options.limit !== undefined ? `?limit=${encodeURIComponent(String(options.limit))}` : '';
      const body = await transport.request('GET', `${path(id, '/deliveries')}${query}`, { signal: options.signal });
      return checked<{ data: WebhookDelivery[] }>(body, 'GET /v1/webhook-endpoints/:id/deliveries', hasData).data;
    },
    async replay(id, deliveryId, options = {}) {
      const body = await transport.request('POST', path(id, `/deliveries/${encodeURIComponent(deliveryId)}/replay`), { signal: options.signal });
      return checked(body, 'POST /v1/webhook-endpoints/:id/deliveries/:deliveryId/replay', (b) => typeof b.id === 'string' && typeof b.state === 'string');
    },
  };
}
