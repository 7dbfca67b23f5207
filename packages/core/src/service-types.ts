import type { HttpRequest, HttpResponse } from './http/types.js';
import type { RecoveryReport } from './lifecycle/recovery.js';
import type { ServiceStats } from './runner/background.js';
import type { Accounts } from './use-cases/accounts.js';
import type { Batches } from './use-cases/batches.js';
import type { WebhookEndpoints } from './use-cases/webhook-endpoints.js';
import type { GenerationUseCases } from './use-cases/types.js';

export type { GenerationItem } from './use-cases/views.js';
export type {
  CancelOutcome,
  CreateGenerationInput,
  CreateOptions,
  GenerationPage,
  GenerationUseCases,
  ListOptions,
  QuoteOptions,
  ReadOptions,
} from './use-cases/types.js';
export type { RecoveryReport } from './lifecycle/recovery.js';
export type { ServiceStats } from './runner/background.js';

/**
 * What `createGenerationService` returns: the generation use cases (use-cases/types.ts), accounts and batches, the
 * HTTP entry point, and the background work.
 */
export interface GenerationService extends GenerationUseCases {
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
  /**
   * A user's registered webhook endpoints (`/v1/webhook-endpoints`): `create(userId, { url, events?, description? })`
   * (the answer holds the secret, once), `list`, `get`, `update`, `delete`, `rotateSecret`, `deliveries`, `replay`,
   * each owner-scoped like the routes.
   */
  readonly webhookEndpoints: WebhookEndpoints;
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
  /**
   * Whether the console is on (`options.console`): adapters hand `<mount>/console/...` to `handle` only then, so a
   * host's own `/console` stays the host's otherwise.
   */
  readonly servesConsole?: boolean;
  /** How long a request body may take to arrive (limits.bodyTimeoutMs); adapters stop reading after it. */
  readonly bodyTimeoutMs: number;
}
