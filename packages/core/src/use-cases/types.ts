/**
 * What the use cases take and answer: the embedder's API (`GenerationService`, service-types.ts) and the HTTP routes
 * alike. Its own file, so that the use cases import no file that imports them back.
 */
import type { BaseUrl, GenerationStatus, GenerationView, Metadata, ModelInfo, Settings, WebhookEventType } from '../domain/types.js';
import type { Page } from '../domain/paging.js';
import type { Principal } from '../ports/api-keys.js';
import type { ModelDefinition } from '../ports/provider.js';
import type { GenerationItem } from './views.js';

export interface CreateGenerationInput {
  modelId: string;
  settings?: Settings;
  /** Up to 16 string labels, returned in the list and details views (the HTTP layer checks their limits). */
  metadata?: Metadata;
  /**
   * Where to send this generation's events (Standard Webhooks, signed with the user's secret): checked like the HTTP
   * body's `webhook` (the URL must pass the `webhooks` options' checks). Default: none.
   */
  webhook?: { url: string; events?: WebhookEventType[] };
  /**
   * A shorter life than the service's retention: the generation (record and files) is deleted this many seconds after
   * it finishes, and reads as deleted from then on. An integer from 1 to the retention in seconds (any up to
   * 2^31-1 when the service keeps generations forever); a 400 `invalid_request` naming the field beyond that.
   */
  expiresAfterSeconds?: number;
  /**
   * `high` goes first within its owner's share of the queue, `low` waits for spare capacity; each is priced by the
   * host (a multiplier of the model's price). Default `normal`. A priority the host restricts needs a key with the
   * `priority` scope (403 otherwise).
   */
  priority?: 'low' | 'normal' | 'high';
  /**
   * Only with `priority: 'low'`: an ISO 8601 instant (at most 30 days ahead) after which the generation, if it has not
   * started, fails free (`timeout`, nothing charged).
   */
  deadline?: string;
}

/** A quote: the price and balance, and the priority and its price multiplier when the quote asked one. */
export interface Quote {
  price: number;
  balance: number;
  priority?: 'low' | 'normal' | 'high';
  multiplier?: number;
}

export interface ListOptions extends ReadOptions {
  /** 1..100, default 20. */
  limit?: number;
  /** `nextCursor` of the previous page. */
  cursor?: string;
  status?: GenerationStatus;
  modelId?: string;
}

/** A page of the user's generations; pass `nextCursor` as `cursor` for the next page (null on the last page). */
export type GenerationPage = Page<GenerationItem>;

export interface QuoteOptions {
  /**
   * The user's API key the request came with (what the `apiKeys` resolver answered for it): its model allow-list and
   * budget apply, as on the HTTP API. Default: none (every model, no budget).
   */
  key?: Principal;
  /**
   * The request's base URL (see trustRequestHost): where the service's own file links start, so a forged or expired
   * one of them is named as such. Without it (and without publicUrl), only links the service signed are recognised.
   */
  baseUrl?: BaseUrl;
}

export interface CreateOptions extends QuoteOptions {
  /** Idempotency-Key: the same key and body from the same user returns the first generation again. */
  idempotencyKey?: string;
}

export interface ReadOptions {
  /** Base URL to build file URLs from when the service has no publicUrl (see trustRequestHost). */
  baseUrl?: BaseUrl;
}

export type CancelOutcome = 'cancelled' | 'already_finished';

/** What an embedder and the HTTP routes alike ask of generations: the generation methods of `GenerationService`. */
export interface GenerationUseCases {
  /** The models, as GET /v1/models lists them. */
  listModels(): ModelInfo[];
  /** A model's full definition, or undefined. */
  getModel(modelId: string): ModelDefinition | undefined;
  /** Validates, reserves the price, stores and enqueues. Throws DomainError (invalid_settings, insufficient_funds, model_not_found, ...). */
  create(userId: string, input: CreateGenerationInput, options?: CreateOptions): Promise<{ generationId: string }>;
  /** Price and balance of a create with this input, without reserving or storing anything; validates like create. */
  quote(userId: string, input: CreateGenerationInput, options?: QuoteOptions): Promise<Quote>;
  /** Owner-scoped read; throws DomainError('not_found') for a missing or another user's generation. */
  get(userId: string, generationId: string, options?: ReadOptions): Promise<GenerationView>;
  /** The richer view (timestamps, failure reason, progress, metadata); owner-scoped like `get`. */
  details(userId: string, generationId: string, options?: ReadOptions): Promise<GenerationItem>;
  /** The user's generations, newest first, a page at a time. */
  list(userId: string, options?: ListOptions): Promise<GenerationPage>;
  /** Cancels a pending or processing generation of this user. */
  cancel(userId: string, generationId: string, options?: ReadOptions): Promise<{ outcome: CancelOutcome; generation: GenerationView }>;
  /**
   * Deletes a generation of this user (a pending or processing one is cancelled first, charged as a cancel): its files,
   * settings, result, metadata, events and webhook deliveries; the charge stays in the ledger. Throws
   * DomainError('not_found') when there is none.
   */
  delete(userId: string, generationId: string): Promise<void>;
  /** The user's spendable balance. */
  balance(userId: string): Promise<number>;
}
