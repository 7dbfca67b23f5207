/** The five kinds of result a model produces. */
export const RESULT_TYPES = ['image', 'video', 'text', 'audio', '3d'] as const;
export type ResultType = (typeof RESULT_TYPES)[number];

/** Lifecycle of a generation. Only forward: pending -> processing -> completed | failed, and pending -> failed. */
export const GENERATION_STATUSES = ['pending', 'processing', 'completed', 'failed'] as const;
export type GenerationStatus = (typeof GENERATION_STATUSES)[number];
export type TerminalStatus = 'completed' | 'failed';

export function isTerminal(status: GenerationStatus): status is TerminalStatus {
  return status === 'completed' || status === 'failed';
}

/** One parameter of a model, as listed by GET /v1/models. */
export interface SettingDescriptor {
  /** Key inside the `settings` object of a create request. */
  name: string;
  /** Human-readable label. */
  title: string;
  /** `text`, `select`, a media type (`image`, `video`, `audio`, `file`) or a host-registered type. */
  fieldType: string;
  /** Present and true when the setting must be supplied. */
  required?: boolean;
  /** Allowed values; only for `select`. */
  options?: string[];
  /**
   * Media types only: the most URLs this model accepts (at most the service's `limits.mediaUrls`). Checked at
   * create (400) and shown in the OpenAPI schema; not part of GET /v1/models, whose shape the contract fixes.
   */
  maxItems?: number;
}

/** A model as the contract shows it (element of `models` in GET /v1/models). */
export interface ModelInfo {
  modelId: string;
  title: string;
  resultType: ResultType;
  /** Approximate generation time in seconds. */
  estimatedGenerationTime: number;
  settings: SettingDescriptor[];
}

/** Settings after validation: keyed by setting name. Media settings are arrays of URLs. */
export type Settings = Record<string, unknown>;

/**
 * A generation as stored. `resultText` holds a text model's output; `resultKey` the BlobStore key of a file
 * result (its URL is signed at read time, so it is never stored).
 */
export interface GenerationRecord {
  id: string;
  ownerId: string;
  modelId: string;
  settings: Settings;
  status: GenerationStatus;
  /** Tokens reserved at create. */
  reserved: number;
  /** Tokens settled (what the client sees as `price`); set with a terminal status. */
  price?: number;
  resultText?: string;
  resultKey?: string;
  /** Why a generation failed, in the worker's words; for logs and operators, never shown to the client. */
  failureReason?: string;
  /** Why a generation failed, safe to show its owner (`?include=details`, the list, webhooks). */
  error?: FailureInfo;
  /** Up to 16 string values the client attached at create; returned in the list and details views. */
  metadata?: Metadata;
  /** The latest progress a provider reported while processing. */
  progress?: Progress;
  /** When a worker first claimed it (epoch ms). */
  startedAt?: number;
  /**
   * A two-phase provider's handle of the upstream job (small JSON), stored before the first check so that a crash
   * resumes checking the same job instead of starting (and paying for) another.
   */
  remoteHandle?: unknown;
  /** While a remote job waits between checks: when the next check is due. It holds no lease then. */
  parkedUntil?: number;
  /** Where the client asked for this generation's webhooks, given at create. */
  webhook?: { url: string; events: WebhookEventType[] };
  /**
   * The shorter life its owner asked for at create: it expires this many seconds after it finishes (the service's
   * `retention` may still end it sooner). Absent: the service's retention alone decides.
   */
  expiresAfterSeconds?: number;
  /**
   * When that own life ends (epoch ms): written with `finishedAt` by the change that finishes a generation with
   * `expiresAfterSeconds`, so the sweep finds it by index. The Lifecycle's `expiresAt` is the whole rule.
   */
  lifeEndsAt?: number;
  /**
   * The W3C `traceparent` of the create's span (or of the client's request, without an SDK), so the run continues
   * the same trace on whichever instance it runs. Absent without tracing.
   */
  traceparent?: string;
  /** The priority its create asked (absent: `normal`, asked or not). */
  priority?: 'low' | 'high' | 'normal';
  /** A `low` one's deadline (epoch ms): still pending then, it fails free. */
  deadlineAt?: number;
  /** How many times a worker claimed it (1 on the first run; a parked remote job's checks are not claims). */
  claims: number;
  /** The worker that holds the current claim, and until when (epoch ms). */
  leaseOwner?: string;
  leaseExpiresAt?: number;
  createdAt: number;
  updatedAt: number;
  finishedAt?: number;
  /** The batch it was created in (`POST /v1/batches`); absent for a single create. */
  batchId?: string;
  /** The model that produced the result when it was not `modelId` (one of the model's `fallbacks`). */
  servedModelId?: string;
}

/**
 * A batch as stored: the generations created together by one `POST /v1/batches` (each generation carries the
 * batch's id). Its counts and price are read from its generations, never stored twice.
 */
export interface BatchRecord {
  id: string;
  ownerId: string;
  /** The batch's generations, in the order of the request. */
  generationIds: string[];
  /** Where `batch.completed` is sent (URL already checked); absent when none was given. */
  webhook?: { url: string };
  createdAt: number;
  /** Set once, when the last of its generations finished (and `batch.completed` was decided). */
  completedAt?: number;
}

/** A batch's generations by status, and the tokens charged for its finished ones. */
export interface BatchCounts {
  counts: Record<GenerationStatus, number>;
  price: number;
}

/** A client's own labels on a generation: string values only, bounded by the service's limits. */
export type Metadata = Record<string, string>;

/** Why a generation failed, in words its owner may read. */
export const FAILURE_CODES = ['cancelled', 'timeout', 'provider_error', 'invalid_input', 'worker_lost', 'model_unavailable', 'storage_unavailable'] as const;
export type FailureCode = (typeof FAILURE_CODES)[number];
export interface FailureInfo {
  code: FailureCode;
  message: string;
}

/** Progress a provider reported: `fraction` in 0..1, an optional short message. */
export interface Progress {
  fraction: number;
  message?: string;
}

/**
 * One entry of the event log. Every transition appends exactly one, in the same atomic step as the transition;
 * a transition that loses its race appends nothing. `seq` numbers one generation's events: 1 for `created`, then
 * 2, 3, ... in the order they were appended (a stream's `Last-Event-ID`).
 *
 * `data` by type: `created` `{ modelId }`; `processing` `{ claim }`; `progress` `{ fraction, message? }`;
 * `completed` `{ price }`; `failed` `{ price, error: { code, message } }` (a cancel is a `failed` with code
 * `cancelled`); `output` `{ delta }` (text a provider streamed, coalesced); `preview` `{ key, mimeType }` (the blob
 * key of a preview image or frame). `output` and `preview` change no field of the record: they are partial output,
 * shown on the event stream and in the details view, never in the contract's poll shapes nor sent as webhooks.
 */
export const EVENT_TYPES = ['created', 'processing', 'progress', 'completed', 'failed', 'output', 'preview'] as const;
export type GenerationEventType = (typeof EVENT_TYPES)[number];
/** The event types that carry partial output rather than a change of state. */
export function isOutputEvent(type: GenerationEventType): type is 'output' | 'preview' {
  return type === 'output' || type === 'preview';
}
/** The blob keys of the previews a log names (files of their generation, deleted with it). */
export function previewKeys(events: readonly GenerationEvent[]): string[] {
  const keys: string[] = [];
  for (const e of events) if (e.type === 'preview' && typeof e.data.key === 'string') keys.push(e.data.key);
  return keys;
}
export interface GenerationEvent {
  seq: number;
  generationId: string;
  ownerId: string;
  type: GenerationEventType;
  /** Epoch ms of the transition (the `now` the transition was given). */
  at: number;
  data: Record<string, unknown>;
}

/**
 * The webhook events a client can subscribe to: `generation.` + the event log type (`created` is not sent), and
 * `generation.deleted` when the generation was deleted (only to endpoints that list it: the owner asked for it).
 */
export const WEBHOOK_EVENT_TYPES = ['generation.processing', 'generation.progress', 'generation.completed', 'generation.failed', 'generation.deleted'] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];
/** What a webhook without an `events` list gets: every change of the generation's state, not its deletion. */
export const DEFAULT_WEBHOOK_EVENTS: readonly WebhookEventType[] = ['generation.processing', 'generation.progress', 'generation.completed', 'generation.failed'];

/** What a client reads from GET /v1/generations/:id. */
export interface GenerationView {
  status: GenerationStatus;
  result?: string;
  price?: number;
}

/**
 * The request's own base URL, or a function that builds it. Adapters pass a function: the URL is needed only to
 * build file URLs under `trustRequestHost`, so no request pays for reading the Host header otherwise.
 */
export type BaseUrl = string | (() => string);
