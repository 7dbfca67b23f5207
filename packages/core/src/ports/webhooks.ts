import type { WebhookEventType } from '../domain/types.js';

export type { WebhookEventType };

/**
 * The events of the OpenAI-compatible surface (docs/openai-compatible.md): a video generation finished, in OpenAI's
 * event shape. Sent to a user's default endpoints (`webhooks.endpoints`) that list them.
 */
export type OpenAiWebhookEventType = 'video.completed' | 'video.failed';

/** Where and what to deliver: one per generation (given at create) or the host's default endpoints of a user. */
export interface WebhookEndpoint {
  url: string;
  /** A generation's own webhook takes `generation.*` events only; a default endpoint may also list `video.*`. */
  events: Array<WebhookEventType | OpenAiWebhookEventType>;
}

/** What a registered endpoint (`POST /v1/webhook-endpoints`) may subscribe to. */
export type EndpointEventType = WebhookEventType | 'webhook_endpoint.disabled';

/**
 * A webhook endpoint a user registered over the API: its own signing secret (and, during a rotation's overlap, the
 * previous one), the events it takes, and whether it was disabled (it failed every attempt for
 * `webhooks.disableEndpointAfterMs`, or its owner said so).
 */
export interface WebhookEndpointRecord {
  /** `we_` + 22 characters. */
  id: string;
  ownerId: string;
  url: string;
  events: EndpointEventType[];
  description?: string;
  /** `whsec_` + base64 (Standard Webhooks). */
  secret: string;
  /** The secret before the last rotation, still signing until `expiresAt` (epoch ms). */
  previousSecret?: { key: string; expiresAt: number };
  createdAt: number;
  updatedAt: number;
  /** Epoch ms it was disabled; absent while it is enabled. */
  disabledAt?: number;
  /** Epoch ms of the first failed attempt since its last success; absent while it is healthy. */
  failingSince?: number;
}

/** A change to an endpoint: only the fields given change; `description: null` removes it, `disabledAt: null` enables. */
export interface WebhookEndpointChange {
  url?: string;
  events?: EndpointEventType[];
  description?: string | null;
  disabledAt?: number | null;
  updatedAt: number;
}

/** A user's signing secrets: the current one, and during a rotation's overlap the previous one too. */
export interface WebhookSecrets {
  /** `whsec_` + base64 of the key bytes (Standard Webhooks). */
  current: string;
  previous?: { key: string; expiresAt: number };
}

export type DeliveryState = 'pending' | 'delivered' | 'failed' | 'gone';

/** One message to one endpoint: retried until delivered, given up, or the endpoint said it is gone (410). */
export interface NewDelivery {
  /** The `webhook-id` header: the same on every retry of one message; unique per (event, endpoint). */
  id: string;
  generationId: string;
  ownerId: string;
  /** The `seq` of the generation's event this message is about. */
  seq: number;
  /**
   * A generation's event, `batch.completed` (then `generationId` is the batch's id), an OpenAI `video.*` event, or
   * `webhook_endpoint.disabled` (then `generationId` is the disabled endpoint's id).
   */
  type: WebhookEventType | 'batch.completed' | OpenAiWebhookEventType | 'webhook_endpoint.disabled';
  /** The registered endpoint it goes to (signed with that endpoint's secret); absent for every other receiver. */
  endpointId?: string;
  url: string;
  /** The JSON body, exactly as it is sent (and signed) on every attempt. */
  payload: string;
  /** Epoch ms of the first attempt. */
  nextAttemptAt: number;
  createdAt: number;
  /**
   * The W3C `traceparent` of the generation's create (at most 55 characters), so every attempt continues its trace;
   * absent without tracing, and for `batch.completed`.
   */
  traceparent?: string;
}

export interface DeliveryAttempt {
  /** Epoch ms the attempt started. */
  at: number;
  /** The receiver's HTTP status, when it answered. */
  status?: number;
  /** Why there is no status (timeout, refused address, connection error), in words safe for the owner. */
  error?: string;
  durationMs: number;
}

export interface Delivery extends NewDelivery {
  state: DeliveryState;
  /** Attempts made so far. */
  attempts: number;
  leaseOwner?: string;
  leaseExpiresAt?: number;
}

export interface DeliveryWithAttempts extends Delivery {
  /** Oldest first. */
  history: DeliveryAttempt[];
}

/** Caps on deliveries in flight, so that one slow receiver (or one user's many) cannot hold every slot. */
export interface ClaimFairness {
  /** Most deliveries leased at once to one (owner, url). */
  perEndpoint: number;
  /** Most deliveries leased at once for one owner. */
  perOwner: number;
}

/** What to do after an attempt. */
export interface DeliveryOutcome {
  state: DeliveryState;
  /** When `state` is `pending`: epoch ms of the next attempt. */
  nextAttemptAt?: number;
}

/**
 * Webhook secrets and the delivery outbox.
 *
 * Guarantees (the contract suite in @genservice/testing checks each):
 * - `ensureSecret` is atomic: of concurrent calls for one user exactly one secret is kept, and every call returns it.
 *   `rotateSecret` makes `newKey` current and keeps the old one as `previous` until `now + overlapMs`; `getSecrets`
 *   leaves out a `previous` that has expired.
 * - `addDeliveries` is idempotent by delivery id: adding one that exists changes nothing (so several instances may
 *   write the same event's deliveries).
 * - `claimDue` hands a pending delivery whose `nextAttemptAt <= now` and whose lease is absent or expired to exactly
 *   one of racing callers, leasing it to `workerId` until `now + leaseMs`. With `fairness`, a delivery is handed out
 *   only while its endpoint (owner and URL) has fewer than `perEndpoint` and its owner fewer than `perOwner` deliveries
 *   leased (lease not expired, counting those handed out in the same call), and owners take turns: every owner's
 *   oldest due delivery comes before any owner's second. Within an owner, oldest `nextAttemptAt` first. Without it,
 *   oldest `nextAttemptAt` first. (Racing callers on several instances may exceed a cap by the deliveries they take
 *   at the same moment; never hand one delivery to two.)
 * - `recordAttempt` appends the attempt and applies the outcome only while `workerId` holds the lease (else false,
 *   nothing written); it clears the lease and counts the attempt.
 * - `stopEndpoint` moves every pending delivery of that owner to that URL to `gone` (the receiver answered 410).
 * - `advanceCursor(name, from, to)` moves a named cursor (an opaque string of the store's feed) from `from` to `to`
 *   only if it is still at `from` (compare-and-set; a cursor never set reads `''`).
 * - `deleteForGenerations` deletes the deliveries (and their attempts) of those generations (retention).
 *
 * Registered endpoints (every read and change is owner-scoped: another owner's endpoint reads as absent):
 * - `createEndpoint` stores it whole; `listEndpoints` answers an owner's, oldest first.
 * - `updateEndpoint` applies only the fields given; `disabledAt: null` clears `failingSince` too, and a `disabledAt` on an
 *   enabled endpoint moves its pending deliveries to `failed` (as `disableEndpoint`). Null when absent.
 * - `deleteEndpoint` removes it and moves its pending deliveries to `gone`; its deliveries' history stays readable
 *   through `deliveriesOf`.
 * - `rotateEndpointSecret` makes `newKey` its secret and keeps the old one as `previousSecret` until `now + overlapMs`.
 * - `noteEndpointAttempt(id, ok, at)`: a success clears `failingSince`; a failure sets it to `at` when absent. Answers
 *   `failingSince` after the change (null when healthy, or the endpoint is gone or disabled).
 * - `disableEndpoint(id, at)` sets `disabledAt` only while it is enabled (of racing callers exactly one gets true),
 *   and moves its pending deliveries to `failed`.
 * - `endpointDeliveries` answers an endpoint's deliveries with their attempts, newest first, at most `limit`.
 * - `replayDelivery(id, endpointId, now)` makes a delivery of that endpoint pending again, due at `now`, keeping its id
 *   and payload: the delivery, `'busy'` while an attempt holds its lease, or null when it is not that endpoint's.
 */
export interface WebhookStore {
  getSecrets(userId: string, now: number): Promise<WebhookSecrets | null>;
  ensureSecret(userId: string, candidate: string, now: number): Promise<string>;
  rotateSecret(userId: string, newKey: string, now: number, overlapMs: number): Promise<WebhookSecrets>;
  addDeliveries(deliveries: NewDelivery[]): Promise<void>;
  claimDue(now: number, limit: number, workerId: string, leaseMs: number, fairness?: ClaimFairness): Promise<Delivery[]>;
  recordAttempt(id: string, workerId: string, attempt: DeliveryAttempt, outcome: DeliveryOutcome): Promise<boolean>;
  stopEndpoint(ownerId: string, url: string): Promise<number>;
  /** One generation's deliveries with their attempts, oldest first. */
  deliveriesOf(generationId: string): Promise<DeliveryWithAttempts[]>;
  getCursor(name: string): Promise<string>;
  advanceCursor(name: string, from: string, to: string): Promise<boolean>;
  deleteForGenerations(generationIds: string[]): Promise<number>;
  createEndpoint(endpoint: WebhookEndpointRecord): Promise<void>;
  getEndpoint(id: string, ownerId: string): Promise<WebhookEndpointRecord | null>;
  listEndpoints(ownerId: string): Promise<WebhookEndpointRecord[]>;
  updateEndpoint(id: string, ownerId: string, change: WebhookEndpointChange): Promise<WebhookEndpointRecord | null>;
  deleteEndpoint(id: string, ownerId: string): Promise<boolean>;
  rotateEndpointSecret(id: string, ownerId: string, newKey: string, now: number, overlapMs: number): Promise<WebhookEndpointRecord | null>;
  noteEndpointAttempt(id: string, ok: boolean, at: number): Promise<number | null>;
  disableEndpoint(id: string, at: number): Promise<boolean>;
  endpointDeliveries(endpointId: string, ownerId: string, limit: number): Promise<DeliveryWithAttempts[]>;
  replayDelivery(id: string, endpointId: string, now: number): Promise<Delivery | 'busy' | null>;
}
