import type { GenerationStatus, GenerationView, Metadata, ModelInfo, Settings, WebhookEventType } from './domain/types.js';
import type { BaseUrl, HttpRequest, HttpResponse } from './http/types.js';
import type { Principal } from './ports/api-keys.js';
import type { ModelDefinition } from './ports/provider.js';
import type { Accounts } from './use-cases/accounts.js';
import type { Batches } from './use-cases/batches.js';
import type { GenerationItem } from './use-cases/views.js';

export type { GenerationItem } from './use-cases/views.js';

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
}

export interface ListOptions extends ReadOptions {
  /** 1..100, default 20. */
  limit?: number;
  /** `nextCursor` of the previous page. */
  cursor?: string;
  status?: GenerationStatus;
  modelId?: string;
}

export interface GenerationPage {
  data: GenerationItem[];
  /** Pass as `cursor` for the next page; null on the last page. */
  nextCursor: string | null;
}

/** Live counters of this instance, for operators and tests. */
export interface ServiceStats {
  /** Event streams open (`GET /v1/generations/:id/events`). */
  openStreams: number;
  /** Streams and long-polls waiting for a generation's next event. */
  watchers: number;
}

export interface RecoveryReport {
  requeued: number;
  failed: number;
  settled: number;
  released: number;
  /** Batches whose generations had all finished but whose completion a crash lost, completed by this pass. */
  batchesCompleted: number;
}

export interface QuoteOptions {
  /**
   * The user's API key the request came with (what the `apiKeys` resolver answered for it): its model allow-list and
   * budget apply, as on the HTTP API. Default: none (every model, no budget).
   */
  key?: Principal;
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

/** What `createGenerationService` returns. */
export interface GenerationService {
  /** The models, as GET /v1/models lists them. */
  listModels(): ModelInfo[];
  /** A model's full definition, or undefined. */
  getModel(modelId: string): ModelDefinition | undefined;
  /** Validates, reserves the price, stores and enqueues. Throws DomainError (invalid_settings, insufficient_funds, model_not_found, ...). */
  create(userId: string, input: CreateGenerationInput, options?: CreateOptions): Promise<{ generationId: string }>;
  /** Price and balance of a create with this input, without reserving or storing anything; validates like create. */
  quote(userId: string, input: CreateGenerationInput, options?: QuoteOptions): Promise<{ price: number; balance: number }>;
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
  /**
   * Users, credits, keys (with scopes, model allow-lists, budgets and expiry), usage and the audit log: what a host's
   * own code or its admin manages. Every action but reads is audited; a bad input throws a 400 DomainError naming
   * its fields, with nothing written.
   */
  readonly accounts: Accounts;
  /**
   * Batches (`POST /v1/batches` and the rest): `create(userId, { requests, webhook? }, idempotencyKey?)`, `get`,
   * `list`, `cancel`, each owner-scoped like the generation methods.
   */
  readonly batches: Batches;
  /** The framework-neutral HTTP entry point every adapter calls. Never throws. */
  handle(request: HttpRequest): Promise<HttpResponse>;
  /** Starts the workers, recovery and retention sweeps. Idempotent. */
  start(): Promise<void>;
  /** Stops taking work and waits up to `timeoutMs` (default 10 s) for running generations. Idempotent. */
  stop(options?: { timeoutMs?: number }): Promise<void>;
  /** Runs one recovery pass now (re-enqueue pending, retry expired leases, settle forgotten reserves). */
  recover(): Promise<RecoveryReport>;
  /** Live counters of this instance. */
  stats(): ServiceStats;
  /**
   * Runs one retention sweep now: deletes finished generations past `retention.finishedTtlMs`, and those past the
   * `expiresAfterSeconds` their create asked for.
   */
  sweep(): Promise<number>;
  /** Largest request body in bytes (limits.bodyBytes); adapters stop reading beyond it. */
  readonly bodyLimit: number;
  /**
   * Whether the OpenAI-compatible surface is on (`options.openai.enabled`): adapters hand `<mount>/openai/v1/...` to
   * `handle` only then (`isApiPath(path, service)`), so a host's own routes there stay the host's otherwise.
   */
  readonly servesOpenAi?: boolean;
  /** How long a request body may take to arrive (limits.bodyTimeoutMs); adapters stop reading after it. */
  readonly bodyTimeoutMs: number;
}
