/** What a model produces. Text results are the text itself; every other type is a URL of the file. */
export type ResultType = 'image' | 'video' | 'text' | 'audio' | '3d';

export type GenerationStatus = 'pending' | 'processing' | 'completed' | 'failed';

/** A status that never changes again. */
export type TerminalStatus = 'completed' | 'failed';

/** One parameter of a model. */
export interface SettingDescriptor {
  /** Key inside `settings` of a create request. */
  name: string;
  /** Human-readable label. */
  title: string;
  /** `text`, `select`, a media type (`image`, `video`, `audio`, `file`: arrays of URLs) or a host-defined type. */
  fieldType: string;
  /** Present and true when the setting must be supplied. */
  required?: boolean;
  /** Allowed values; only for `select`. */
  options?: string[];
}

/** An element of GET /v1/models. */
export interface Model {
  modelId: string;
  title: string;
  resultType: ResultType;
  /** Approximate generation time in seconds; the client's polling starts from it. */
  estimatedGenerationTime: number;
  settings: SettingDescriptor[];
}

/**
 * The settings of each model, by model id (`{ 'image-fast': { prompt: string; size?: '512x512' | '1024x1024' } }`):
 * what `generateModelTypes` writes from a service's `GET /v1/models` or OpenAPI document. `createClient<Models>()`
 * then checks the `modelId` and `settings` of every create, quote and batch against it at compile time.
 */
export type ModelMap<M = Record<string, unknown>> = { [K in keyof M]: object };

/** Any model id, any settings: the client's default, when no model map is given. */
export type AnyModels = Record<string, Record<string, unknown>>;

/** `settings` of a create for a model with settings `S`: optional when none of them is required. */
export type SettingsField<S> = {} extends S
  ? {
      /** Keyed by the `name` of the model's settings; media settings take arrays of URLs. */
      settings?: S;
    }
  : {
      /** Keyed by the `name` of the model's settings; media settings take arrays of URLs. */
      settings: S;
    };

/**
 * A create of model `K` of the model map `M`: its `settings` typed by that model (for several models, a union with
 * each model's own settings). The client's methods infer `K` from the `modelId` given, so a bad setting is reported
 * against that model's own settings type. Without a model map (`AnyModels`), any model id with any settings.
 */
export type CreateGenerationInput<M extends ModelMap<M> = AnyModels, K extends keyof M & string = keyof M & string> = K extends unknown
  ? { modelId: K } & SettingsField<M[K]> & CreateGenerationCommon
  : never;

/** What every create may carry beside its model and settings. */
export interface CreateGenerationCommon {
  /** Your own labels: at most 16 string values (keys up to 64 characters, values up to 512). */
  metadata?: Record<string, string>;
  /** Where the service should send this generation's events (Standard Webhooks, signed with your secret). */
  webhook?: { url: string; events?: WebhookEventType[] };
  /**
   * A shorter life than the service keeps generations: it is deleted (record and files) this many seconds after it
   * finishes, and reads as deleted (404) from then on. An integer of at least 1, at most the service's retention (a
   * 400 `invalid_request` naming `expiresAfterSeconds` beyond it). Shown as `expiresAt` on the details and the list.
   */
  expiresAfterSeconds?: number;
  /**
   * `high` goes first within your share of the queue, `low` waits for spare capacity; the service prices each (a
   * multiplier of the model's price: `quote` shows it). Default `normal`. A priority the service restricts needs a key
   * with the `priority` scope (403 otherwise).
   */
  priority?: 'low' | 'normal' | 'high';
  /** Only with `priority: 'low'`: an ISO 8601 instant after which, not started, it fails free (`timeout`). */
  deadline?: string;
}

/** `generation.deleted` is sent only to webhooks that list it. */
export type WebhookEventType = 'generation.processing' | 'generation.progress' | 'generation.completed' | 'generation.failed' | 'generation.deleted';

/** Why a generation failed, in words safe to show its owner. */
export interface FailureReason {
  code: 'cancelled' | 'timeout' | 'provider_error' | 'invalid_input' | 'worker_lost' | 'model_unavailable' | 'storage_unavailable' | (string & {});
  message: string;
}

/** Where a pending generation waits in the service's queue (details and the live stream). */
export interface QueuePosition {
  /** 1 for the next job to start. */
  position: number;
  /** Waiting jobs that start before it if nothing else arrives. */
  aheadOfYou: number;
  /** Seconds until it is expected to start, from the service's recent run times; null while it has none to go by. */
  etaSeconds: number | null;
}

/** A generation as the list, `/details`, live streams and webhooks show it. */
export interface GenerationItem {
  generationId: string;
  modelId: string;
  status: GenerationStatus;
  /** ISO 8601. */
  createdAt: string;
  startedAt?: string;
  finishedAt?: string;
  result?: string;
  price?: number;
  error?: FailureReason;
  progress?: { fraction: number; message?: string };
  /** While processing, when its model streams: the text so far and the latest preview (a signed file URL). */
  output?: { text?: string; preview?: { url: string; mimeType: string } };
  /** While pending, in `/details` and the live stream: where it waits in the queue. */
  queue?: QueuePosition;
  metadata?: Record<string, string>;
  /** When one of its model's fallbacks produced the result: that model. */
  servedModelId?: string;
  /**
   * ISO 8601: when this finished generation is deleted (the service's retention, or the create's
   * `expiresAfterSeconds`, whichever comes first). Absent when it is kept.
   */
  expiresAt?: string;
}

export interface ListOptions {
  /** 1..100, default 20. */
  limit?: number;
  /** `nextCursor` of the previous page. */
  cursor?: string;
  status?: GenerationStatus;
  modelId?: string;
  signal?: AbortSignal;
}

export interface GenerationPage {
  data: GenerationItem[];
  /** Pass as `cursor` for the next page; null on the last one. */
  nextCursor: string | null;
}

/** What POST /v1/quotes answers. */
export interface Quote {
  /** Tokens a create with this input would reserve now. */
  price: number;
  /** Your spendable tokens now. */
  balance: number;
  /** The priority the quote asked, and what it multiplies the model's price by (only when a priority was asked). */
  priority?: 'low' | 'normal' | 'high';
  multiplier?: number;
}

/** A verified webhook delivery's body. */
export type WebhookEvent =
  | {
      type: Exclude<WebhookEventType, 'generation.deleted'>;
      /** ISO 8601 of the event. */
      timestamp: string;
      data: GenerationItem;
    }
  | {
      type: 'generation.deleted';
      timestamp: string;
      /** Only what identifies it: the rest was deleted with it. */
      data: { generationId: string; modelId: string; status: 'deleted' };
    }
  | {
      /** To a registered endpoint (`/v1/webhook-endpoints`) that lists it: another endpoint of yours was disabled. */
      type: 'webhook_endpoint.disabled';
      timestamp: string;
      /** Times in ISO 8601; `reason` is `failing` (it failed every attempt for the service's period). */
      data: { endpointId: string; url: string; failingSince: string; disabledAt: string; reason: 'failing' };
    };

/** Still running: no result and no price yet. */
export interface InProgressGeneration {
  generationId: string;
  status: 'pending' | 'processing';
}

export interface CompletedGeneration {
  generationId: string;
  status: 'completed';
  /** The text for text models; an absolute (usually signed, expiring) URL of the file for the others. */
  result: string;
  /** Tokens charged. */
  price: number;
}

export interface FailedGeneration {
  generationId: string;
  status: 'failed';
  /** Tokens charged for the failure (often 0). */
  price: number;
  /** Why, when the client knows it (run() and waitFor() ask the service for it). */
  error?: FailureReason;
}

export type TerminalGeneration = CompletedGeneration | FailedGeneration;

/** Narrow on `status`: `result` exists only on completed, `price` only on completed and failed. */
export type Generation = InProgressGeneration | TerminalGeneration;

/** What POST /v1/generations/:id/cancel answers: the generation as it now is. */
export type CancelResult = Generation & {
  /** True when this call stopped it; false when it had already finished (it is then unchanged). */
  cancelled: boolean;
};

export interface Balance {
  /** Spendable tokens. */
  balance: number;
}

/** One entry of an error's `details`. */
export interface ErrorDetail {
  /** The offending field; genservice names a bad setting `settings.<name>`. */
  field: string;
  code: string;
  message: string;
}

/** One request of a batch: a create without a webhook of its own (its settings typed by its model, as a create's). */
export type BatchRequest<M extends ModelMap<M> = AnyModels> = {
  [K in keyof M & string]: { modelId: K; metadata?: Record<string, string> } & SettingsField<M[K]>;
}[keyof M & string];

export interface CreateBatchInput<M extends ModelMap<M> = AnyModels> {
  /** 1 to 1,000 requests, validated and reserved as a whole. */
  requests: BatchRequest<M>[];
  /** Where `batch.completed` is sent when every generation of the batch has finished. */
  webhook?: { url: string };
}

export interface BatchCreated {
  batchId: string;
  /** One per request, in the order of the requests. */
  generationIds: string[];
}

/** GET /v1/batches/:id. */
export interface Batch {
  /** `completed` once none of its generations is pending or processing. */
  status: 'running' | 'completed';
  counts: Record<GenerationStatus, number>;
  /** Tokens charged for its finished generations. */
  price: number;
}

export interface BatchCancelResult extends Batch {
  /** How many generations this call cancelled. */
  cancelled: number;
}
