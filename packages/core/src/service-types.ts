import type { GenerationView, ModelInfo, Settings } from './domain.js';
import type { BaseUrl, HttpRequest, HttpResponse } from './http/types.js';
import type { ApiKeyResolver } from './ports/api-keys.js';
import type { BlobStore } from './ports/blob.js';
import type { Ledger } from './ports/ledger.js';
import type { ModelDefinition } from './ports/provider.js';
import type { GenerationStore } from './ports/store.js';

export interface CreateGenerationInput {
  modelId: string;
  settings?: Settings;
}

export interface CreateOptions {
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
  /** Owner-scoped read; throws DomainError('not_found') for a missing or another user's generation. */
  get(userId: string, generationId: string, options?: ReadOptions): Promise<GenerationView>;
  /** Cancels a pending or processing generation of this user. */
  cancel(userId: string, generationId: string, options?: ReadOptions): Promise<{ outcome: CancelOutcome; generation: GenerationView }>;
  /** The user's spendable balance. */
  balance(userId: string): Promise<number>;
  /** The framework-neutral HTTP entry point every adapter calls. Never throws. */
  handle(request: HttpRequest): Promise<HttpResponse>;
  /** Starts the workers, recovery and retention sweeps. Idempotent. */
  start(): Promise<void>;
  /** Stops taking work and waits up to `timeoutMs` (default 10 s) for running generations. Idempotent. */
  stop(options?: { timeoutMs?: number }): Promise<void>;
  /** Runs one recovery pass now (re-enqueue pending, retry expired leases, settle forgotten reserves). */
  recover(): Promise<{ requeued: number; failed: number; settled: number; released: number }>;
  /** Largest request body in bytes (limits.bodyBytes); adapters stop reading beyond it. */
  readonly bodyLimit: number;
  readonly store: GenerationStore;
  readonly ledger: Ledger;
  readonly apiKeys: ApiKeyResolver;
  readonly blobs: BlobStore;
}
