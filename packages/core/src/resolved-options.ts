import type { FieldTypeSchema, TelemetryOptions, RateLimitBackend, RateLimitRule, WebhookOptions } from './options.js';
import type { Clock } from './ports/clock.js';
import type { ResolvedLimits } from './settings/compile.js';

export interface ResolvedServiceOptions {
  /** The one clock: every time reading and timer of the service. */
  clock: Clock;
  instanceId: string;
  limits: ResolvedLimits;
  fieldTypes: Record<string, FieldTypeSchema>;
  publicUrl?: string;
  /** Signing of file URLs: the host's secret (none: a random one per process) and how long a URL works. */
  fileUrls: { secret?: string; ttlSeconds: number };
  /** The cache in front of the host's key resolver, when one is wanted (a positive `ttlMs`). */
  apiKeyCache?: { ttlMs: number; max?: number };
  trustRequestHost: boolean;
  runner: {
    concurrency: number;
    leaseMs: number;
    retryBaseDelayMs: number;
    retryMaxDelayMs: number;
    maxClaims: number;
    enabled: boolean;
    circuit: { failureThreshold: number; openMs: number };
  };
  recovery: { onStart: boolean; intervalMs: number; orphanReserveMs: number; openBatchMs: number };
  retention: { finishedTtlMs?: number; sweepIntervalMs: number };
  idempotencyTtlMs: number;
  push: { pollIntervalMs: number; keepAliveMs: number; maxWaitSeconds: number; queuePositionIntervalMs: number };
  playground: boolean;
  console: boolean;
  cors?: { origins: string[] | '*'; maxAgeSeconds: number };
  /** Admin key digests and the actor name each stands for. */
  admin?: { keys: Map<string, string> };
  rateLimits?: {
    backend: RateLimitBackend;
    failOpen: boolean;
    keyPrefix: string;
    create?: RateLimitRule;
    read?: RateLimitRule;
    stream?: RateLimitRule;
    unauthenticated?: RateLimitRule;
  };
  telemetry: TelemetryOptions;
  priority: import('./domain/priority.js').PriorityRules;
  health: { timeoutMs: number; checks: Record<string, () => unknown> };
  /** The OpenAI-compatible surface, when enabled: the hold limit, and the video models (their `video.*` webhooks). */
  openai?: { maxWaitSeconds: number; videoModels: ReadonlySet<string> };
  uploads: { maxBytes: number; types: string[]; ttlSeconds: number };
  webhooks: Required<Omit<WebhookOptions, 'endpoints'>> & Pick<WebhookOptions, 'endpoints'>;
}
