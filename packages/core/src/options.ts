import type { ZodType } from 'zod';
import type { ApiKeyCacheOptions } from './use-cases/api-key-cache.js';
import type { SettingDescriptor } from './domain/types.js';
import type { ApiKeyResolver } from './ports/api-keys.js';
import type { AuditLog } from './ports/audit.js';
import type { BlobStore } from './ports/blob.js';
import type { IdempotencyStore } from './ports/idempotency.js';
import type { UploadStore } from './ports/uploads.js';
import type { Ledger } from './ports/ledger.js';
import type { Logger } from './ports/logger.js';
import type { Clock } from './ports/clock.js';
import type { ModelProvider } from './ports/provider.js';
import type { JobQueue } from './ports/queue.js';
import type { CapacityStore } from './ports/capacity.js';
import type { Notifier } from './ports/notifier.js';
import type { WebhookEndpoint, WebhookStore } from './ports/webhooks.js';
import type { GenerationStore } from './ports/store.js';

/** Builds the zod schema of one setting of a host-registered field type. */
export type FieldTypeSchema = (descriptor: SettingDescriptor, limits: Required<LimitsOptions>) => ZodType;

export interface LimitsOptions {
  /** Largest request body in bytes; larger gives 413. Default 1 MiB. */
  bodyBytes?: number;
  /**
   * Longest time, in ms, a request body may take to arrive once its headers have (the adapters stop reading then,
   * and the answer is `408 request_timeout` with `Connection: close`). Default 30 000. A client sending one byte
   * every few seconds cannot hold a request open longer than this.
   */
  bodyTimeoutMs?: number;
  /** Most URLs in one media setting. Default 10. */
  mediaUrls?: number;
  /** Longest URL in a media setting. Default 2048. */
  urlLength?: number;
  /** Longest `text` setting value in characters. Default 10 000. */
  textLength?: number;
  /** Longest Idempotency-Key header. Default 255. */
  idempotencyKeyLength?: number;
  /**
   * Generations one user may have pending or processing at once; the next create answers 429 `rate_limited` (with
   * Retry-After) until one finishes. Exact under races and across instances. Default 100.
   */
  inFlightPerUser?: number;
  /**
   * Event streams and `Prefer: wait` long-polls one user may hold open at once; the next answers 429 `rate_limited`
   * (with Retry-After) until one ends. Counted over every service in the process (exact), not across processes.
   * Default 20.
   */
  streamsPerUser?: number;
  /**
   * Event streams and long-polls the whole process holds open at once, over all users and services; the next answers
   * 503 `unavailable` (with Retry-After). Default 5000.
   */
  streamsTotal?: number;
}

export interface RunnerOptions {
  /** Generations run at once on this instance, over all models. Default 8. */
  concurrency?: number;
  /** Lease a worker holds on a generation; renewed while it runs. Default 30 s. */
  leaseMs?: number;
  /** First retry delay for retryable ProviderErrors; doubles each attempt. Default 500 ms. */
  retryBaseDelayMs?: number;
  /** Longest retry delay. Default 30 s. */
  retryMaxDelayMs?: number;
  /** Claims of one generation (by lost workers) before recovery fails it with the failure fee. Default 3. */
  maxClaims?: number;
  /** Run workers in this instance. False makes an API-only instance (another instance runs the jobs). Default true. */
  enabled?: boolean;
  /**
   * The circuit breaker each provider has on this instance, for models with `fallbacks`: after `failureThreshold`
   * retryable failures of the provider in a row (attempts, over all its generations) it is open (unavailable) for
   * `openMs`; a generation whose model's provider is open runs on its first fallback whose provider is not. After
   * `openMs` one trial run goes through (half-open): a success closes it, a failure opens it again. Defaults 5 and
   * 30 s.
   */
  circuit?: { failureThreshold?: number; openMs?: number };
}

export interface RecoveryOptions {
  /** Run recovery on `start()`. Default true. */
  onStart?: boolean;
  /** Also re-scan every this many ms (0 = only on start). Default 60 s. */
  intervalMs?: number;
  /** An open reserve with no generation older than this is released. Default 10 min. */
  orphanReserveMs?: number;
  /**
   * A batch not completed yet and older than this is checked by recovery, and completed (with its `batch.completed`
   * webhook) when none of its generations is pending or processing any more: the completion a process that died after
   * the batch's last generation finished never made. Younger batches are left to the instance finishing them.
   * Default 1 min.
   */
  openBatchMs?: number;
}

export interface RetentionOptions {
  /** Delete finished generations and their files this long after they finished. Default: keep forever. */
  finishedTtlMs?: number;
  /** How often the background sweep runs. Default 10 min. */
  sweepIntervalMs?: number;
}

export interface PushOptions {
  /**
   * Wakes this instance's live streams when another instance commits a transition (`RedisNotifier` from
   * @genservice/queue-bullmq, `PostgresNotifier` from @genservice/store-postgres). Default: this process only; other
   * instances' transitions are then seen within `pollIntervalMs`.
   */
  notifier?: Notifier;
  /** While any stream or long-poll waits, read the event log at least this often (ms). Default 1000. */
  pollIntervalMs?: number;
  /** A comment line on every open event stream this often (ms), so proxies keep it open. Default 15 000. */
  keepAliveMs?: number;
  /** The longest `Prefer: wait=N` honoured, in seconds. Default 60. */
  maxWaitSeconds?: number;
  /**
   * How often an event stream of a pending generation asks the queue where it stands, and sends a `queue` message
   * when it moved (ms). Default 2000.
   */
  queuePositionIntervalMs?: number;
}

/** `points` requests per `durationSeconds`, per key (a user, or a client address). */
export interface RateLimitRule {
  points: number;
  durationSeconds: number;
}

/**
 * Where the counters live. `memory`: this process only (one instance). Otherwise the store every instance shares:
 * an ioredis client, a `pg` Pool, or a better-sqlite3 Database (the same one `createSqliteStores` opened, `stores.db`).
 * Postgres and SQLite get a table (`tableName`, default `genservice_rate_limits`) made on first use.
 */
export type RateLimitBackend =
  | { type: 'memory' }
  | { type: 'redis'; client: unknown }
  | { type: 'postgres'; client: unknown; tableName?: string }
  | { type: 'sqlite'; client: unknown; tableName?: string };

export interface RateLimitOptions {
  /** Default `{ type: 'memory' }`. */
  backend?: RateLimitBackend;
  /** POST /v1/generations, per user. */
  create?: RateLimitRule;
  /** Every other authenticated request (reads, lists, quotes, cancel, webhook settings), per user. */
  read?: RateLimitRule;
  /** Event streams and `Prefer: wait` long-polls (the request that opens them), per user. */
  stream?: RateLimitRule;
  /** Requests without a valid key, per client address: guessing keys is limited. */
  unauthenticated?: RateLimitRule;
  /** When the backend fails: let requests through and log a warning (true, default), or answer 503. */
  failOpen?: boolean;
  /** Key prefix in the backend. Default `genservice-rl`. */
  keyPrefix?: string;
}

export interface CorsOptions {
  /** Origins allowed to call the API from a browser (`https://app.example.com`), or `'*'` for any. */
  origins: string[] | '*';
  /** How long a browser may cache a preflight answer, in seconds. Default 600. */
  maxAgeSeconds?: number;
}

export interface WebhookOptions {
  /** Accept plain `http://` webhook URLs. Default false (https only). */
  allowHttp?: boolean;
  /**
   * Accept webhook URLs whose host resolves to a loopback, private, link-local, CGNAT, multicast or reserved
   * address, and deliver to them. Default false: only for local development (a receiver on your machine).
   */
  allowPrivateUrls?: boolean;
  /**
   * Delays before each retry, in ms (+-20 % jitter). Default 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h. A receiver's
   * `Retry-After` (on 429 or 503) may lengthen a delay (up to 24 h), never shorten it.
   */
  retrySchedule?: number[];
  /** Time for one attempt, in ms. Default 15 000. */
  timeoutMs?: number;
  /** The host's default endpoints of a user, which get every subscribed event of every generation of theirs. */
  endpoints?: (userId: string) => WebhookEndpoint[] | Promise<WebhookEndpoint[]>;
  /** Deliver from this instance. Default: when the runner is enabled. The outbox is written either way. */
  deliver?: boolean;
  /** Deliveries in flight on this instance. Default 16. */
  concurrency?: number;
  /**
   * Deliveries in flight to one endpoint (one user's URL), over all instances: a receiver that hangs holds at most
   * this many slots, so it delays only its owner's other deliveries to it. Default 4.
   */
  concurrencyPerEndpoint?: number;
  /**
   * Deliveries in flight for one user, over all instances and endpoints: many slow URLs of one user cannot take every
   * slot. Due deliveries are also taken round-robin across users. It caps one user's webhook throughput too (a host
   * whose one user is itself raises it). Default 8.
   */
  concurrencyPerUser?: number;
  /** How long an instance holds a delivery it is attempting, in ms; must exceed `timeoutMs`. Default 60 000. */
  leaseMs?: number;
  /** How often due retries are looked for, in ms. Default 1000. */
  pollIntervalMs?: number;
  /** How long deliveries carry the old signature too after a secret rotation, in ms. Default 24 h. */
  rotationOverlapMs?: number;
  /**
   * A registered endpoint (`POST /v1/webhook-endpoints`) that has failed every attempt for this long, in ms, is
   * disabled: its pending deliveries are given up, its owner's other endpoints get `webhook_endpoint.disabled`, and
   * the audit log a line. Default 5 days.
   */
  disableEndpointAfterMs?: number;
  /** Most endpoints one user may register. Default 20. */
  maxEndpointsPerUser?: number;
}

/**
 * The OpenAI-compatible surface at `<mount>/openai/v1/...` (docs/openai-compatible.md): OpenAI's models, images,
 * videos and speech shapes over the same generations, keys, budgets and webhooks.
 */
export interface OpenAiOptions {
  /** Serve the surface. Default false: its paths answer 404, as if they did not exist. */
  enabled?: boolean;
  /**
   * Longest time, in seconds, a request that answers when its generation finishes (`POST /images/generations`,
   * `/images/edits`, `/audio/speech`) is held. Past it the answer is `408` (the generation goes on: repeat the request
   * with the same `Idempotency-Key` to wait for it again). Default 120, at most 3600.
   */
  maxWaitSeconds?: number;
}

export interface AdminOptions {
  /**
   * The admin keys, each a string of 32 to 512 characters, or `{ key, name }`: the name is the actor the audit log
   * records (default `admin-1`, `admin-2`, ... by position). Held as SHA-256 digests only.
   */
  apiKeys: Array<string | { key: string; name?: string }>;
}

/**
 * Priority of a create (`priority: 'low' | 'normal' | 'high'`, docs/operations.md): what each costs and who may ask
 * it. Higher priority goes first within its owner's share of the queue; `low` may carry a `deadline` after which it
 * fails free.
 */
export interface PriorityOptions {
  /**
   * Price multiplier of each priority (a create reserves the model's price times it). Default 1 for each. A model's
   * own `priorityMultipliers` win over these.
   */
  multipliers?: { low?: number; normal?: number; high?: number };
  /**
   * Priorities only keys with the `priority` scope may ask (others answer 403 `forbidden`). Default none. Keys of a
   * host's own resolver (no scopes) may ask any.
   */
  scoped?: Array<'low' | 'normal' | 'high'>;
}

export interface GenerationServiceOptions {
  /** Model providers; model ids must be unique over all of them. */
  providers: ModelProvider[];
  /** Default: in-memory (lost on restart). */
  store?: GenerationStore;
  /** Default: in-memory. */
  ledger?: Ledger;
  /** Default: an in-memory key store (add keys through `service.apiKeys` when it is an ApiKeyStore). */
  apiKeys?: ApiKeyResolver;
  /**
   * Cache successful key resolutions for `ttlMs` (an LRU of `max` keys). Off by default: with it, a revoked key
   * keeps working on each instance for up to `ttlMs`.
   */
  apiKeyCache?: ApiKeyCacheOptions;
  /** Every admin action on users, credits, keys and organisations (`service.accounts`, the admin routes). Default: in memory. */
  auditLog?: AuditLog;
  /** Default: in-memory. */
  blobs?: BlobStore;
  /** Default: the in-process queue (`InProcessQueue`). */
  queue?: JobQueue;
  /** What each create priority costs and which keys may ask it. */
  priority?: PriorityOptions;
  /**
   * Where the counters of providers' lanes (`provider.capacity`: concurrency, requests and units per minute, a 429's
   * pause) live. Default: this process (`MemoryCapacityStore`). Instances that share an upstream account share one:
   * `RedisCapacityStore` (@genservice/queue-bullmq) when the host has a Redis, else the store's
   * (`createSqliteStores().capacity`, `PostgresCapacityStore` from @genservice/store-postgres).
   */
  capacity?: CapacityStore;
  /** Default: in-memory. */
  idempotency?: IdempotencyStore;
  /** Default: silent. */
  logger?: Logger;
  /**
   * Where the service reads the time and starts its timers. Default: the system clock. Give one only to control
   * time in tests (leases, retries, expiry, budget windows, intervals); see `Clock` in `@genservice/core/ports`.
   */
  clock?: Clock;
  /**
   * Public base URL of the mounted API, mount prefix included (e.g. `https://api.example.com/gen`).
   * File results are `${publicUrl}/v1/files/...`.
   */
  publicUrl?: string;
  /**
   * Without `publicUrl`, build file URLs from the request's own Host header. Only safe behind a proxy that
   * sets Host; default false (file results then fail to render and the service logs why).
   */
  trustRequestHost?: boolean;
  /** HMAC secret for file URLs. Default: random per process (URLs stop working after a restart). */
  fileUrlSecret?: string;
  /** How long a signed file URL stays valid, in seconds. Default 3600. */
  fileUrlTtlSeconds?: number;
  limits?: LimitsOptions;
  runner?: RunnerOptions;
  recovery?: RecoveryOptions;
  retention?: RetentionOptions;
  /** Host-registered setting field types, by fieldType name. */
  fieldTypes?: Record<string, FieldTypeSchema>;
  /** How long Idempotency-Key records are kept. Default 24 h. */
  idempotencyTtlMs?: number;
  /** Identifies this instance's worker in leases and logs. Default: random. */
  instanceId?: string;
  /** Live status: event streams and long-polls. */
  push?: PushOptions;
  /**
   * Let browser apps on other origins call the API: preflights are answered and CORS headers added in core, the same
   * on every adapter. Off by default (same-origin only). Keys are sent as a Bearer header, never cookies, so no
   * credentials mode is needed.
   */
  cors?: CorsOptions;
  /**
   * Serve the playground page at `<mount>/playground` (needs the `@genservice/playground` package installed): a form
   * for every model, live status and results, using the public API with the caller's own key. Off by default.
   */
  playground?: boolean;
  /**
   * Serve the operator console at `<mount>/console/` and each user's usage page at `<mount>/console/me` (needs the
   * `@genservice/playground` package installed): pages over the documented API, signed in with an admin key (the
   * console, with `admin` set) or the user's own key (`/console/me`). Off by default. See docs/console.md.
   */
  console?: boolean;
  /** Request rate limits per route class; a class without a rule is not limited. Off by default. */
  rateLimits?: RateLimitOptions;
  /** Webhook secrets and the delivery outbox. Default: in memory. */
  webhookStore?: WebhookStore;
  /**
   * The uploads (`POST /v1/uploads`) and when each expires, for the clean-up that deletes their files. Default: in
   * memory (a restart forgets them: their files then stay in a durable blob store). The SQLite and Postgres stores
   * give one (`uploadStore`).
   */
  uploadStore?: UploadStore;
  /**
   * Serve the admin routes under `<mount>/v1/admin/` (users, credits, keys, organisations, the audit log), behind these admin keys
   * only: a user's key there is 401, and an admin key on a user route is 401. Off (404) without it.
   */
  admin?: AdminOptions;
  webhooks?: WebhookOptions;
  /** The OpenAI-compatible surface (`<mount>/openai/v1`): off unless `enabled`. */
  openai?: OpenAiOptions;
  /** `<mount>/readyz`: its time limit and the host's own checks. */
  health?: HealthOptions;
  /** `POST /v1/uploads`: the size, types and life of the files users upload as inputs. */
  uploads?: UploadOptions;
  /** Where metrics and spans go (default: the global OpenTelemetry API, a no-op until the host registers an SDK). */
  telemetry?: TelemetryOptions;
}

/**
 * `<mount>/healthz` answers 200 while the process serves requests; `<mount>/readyz` answers 200 when the store, the
 * ledger, the queue and (when configured) the rate limits' Redis answer within `timeoutMs`, else 503 naming the
 * failing parts. Neither needs a key; neither says more than `ok`, `error` or `timeout` per part.
 */
export interface HealthOptions {
  /** How long each check may take before it counts as failing. Default 2000 ms. */
  timeoutMs?: number;
  /**
   * More checks by name (`{ redis: () => redis.ping() }`): a check that throws, rejects or takes longer than
   * `timeoutMs` fails readiness. Names: letters, digits, `_` and `-`.
   */
  checks?: Record<string, () => unknown>;
}

/**
 * `POST /v1/uploads` (a raw body with its `Content-Type`): the file is kept in the blob store and answered as the
 * service's own signed file URL, which works for `ttlSeconds` (at most `fileUrlTtlSeconds`).
 */
export interface UploadOptions {
  /** Largest upload in bytes. Default, and at most, `limits.bodyBytes` (adapters read no more than that). */
  maxBytes?: number;
  /** The content types taken (anything else is 415). Default: `DEFAULT_UPLOAD_TYPES` (common images and audio). */
  types?: string[];
  /** Seconds an upload's URL works. Default 3600; the URL never outlives `fileUrlTtlSeconds` either. */
  ttlSeconds?: number;
}

/** The content types `POST /v1/uploads` takes by default. */
export const DEFAULT_UPLOAD_TYPES: readonly string[] = ['image/png', 'image/jpeg', 'image/webp', 'image/gif', 'audio/mpeg', 'audio/wav', 'audio/ogg', 'audio/webm'];

/**
 * OpenTelemetry providers to use instead of the global ones (`metrics.getMeterProvider()`,
 * `trace.getTracerProvider()`), e.g. a MeterProvider from `@genservice/metrics-prometheus`.
 */
export interface TelemetryOptions {
  meterProvider?: import('@opentelemetry/api').MeterProvider;
  tracerProvider?: import('@opentelemetry/api').TracerProvider;
}
