import type { ModelInfo, Settings } from '../domain/types.js';
import type { ProviderError } from '../domain/errors.js';
import type { Logger } from './logger.js';
import type { FetchedMedia, FetchMediaOptions } from '../outbound/guard.js';
import type { ProviderCapacity } from './capacity.js';

/** What a provider gets to do its work. */
export interface GenerationContext {
  generationId: string;
  /**
   * Fired on timeout, cancellation or shutdown. Stop work and throw when it fires. Made on first read (most runs never
   * need one): read it as `ctx.signal` or destructure it; a spread copy of `ctx` (`{ ...ctx }`) does not carry it.
   */
  readonly signal: AbortSignal;
  /** Epoch ms after which the run is aborted. */
  deadline: number;
  /**
   * Which claim of the generation this run is: 1 on the first run, more when a lost worker's generation is run again
   * (a retry of a retryable ProviderError within one run is an attempt, and keeps the claim).
   */
  claim: number;
  files: {
    /** Stores a result file; returns its key. Return `{ file: key }` from generate to make it the result. */
    put(bytes: Uint8Array, mimeType: string): Promise<string>;
    /**
     * Reads a media setting's URL (an `image`, `audio`, ... input). The service's own file links (the owner's uploads
     * and generation files, which a create admits only for their owner) come straight from the blob store, so they work
     * even when the service itself is on a loopback or private address; any other URL is fetched through the outbound
     * guard, exactly as `fetchMedia(url, options)` (same options, same `OutboundError`s).
     */
    fetch(url: string, options?: FetchMediaOptions): Promise<FetchedMedia>;
  };
  logger: Logger;
  /**
   * Reports progress: `fraction` in 0..1 (clamped), an optional short message. Cheap to call often: at most one
   * `progress` event per second is recorded (the latest value wins), and nothing after the run has ended.
   */
  progress(fraction: number, message?: string): void;
  /** Partial output, streamed to the generation's event stream while it forms (see `GenerationOutputStream`). */
  output: GenerationOutputStream;
}

/**
 * Output a provider reports while it forms. Clients watching the event stream see `event: output` (`{ delta }`) and
 * `event: preview` (`{ url, mimeType }`); the contract's poll shapes never show it, and the final result is what
 * `generate` returns. Cheap to call often: deltas are coalesced (at most one `output` event per generation every
 * `OUTPUT_INTERVAL_MS`, 250 ms, each carrying every delta of its window, in order), previews likewise (the latest
 * wins, and only that one is stored); everything pending is written before the generation completes, nothing after
 * the run ended. A retried attempt (a retryable ProviderError) streams again from its start.
 */
export interface GenerationOutputStream {
  /** Appends text to the output (a text model's words or tokens as they come). */
  append(text: string): void;
  /**
   * A preview image or frame (a low-resolution draft, a video's first frame): stored in the blob store (when its
   * window's write comes; the bytes must not change until the run ends) and shown to the stream's clients as a
   * signed file URL. A file of the generation, deleted with it.
   */
  preview(bytes: Uint8Array, mimeType: string): void;
}

export interface GenerationInput {
  model: ModelDefinition;
  /** Validated settings. */
  settings: Settings;
}

/**
 * What `generate` returns. A text model returns `{ text }`; any other model returns bytes (stored for it)
 * or the key of a file it already stored with `ctx.files.put`. `price` overrides the settled price
 * (clamped to the reserve).
 */
export type GenerationOutput =
  | { text: string; price?: number }
  | { bytes: Uint8Array; mimeType: string; price?: number }
  | { file: string; price?: number };

export interface ModelDefinition extends ModelInfo {
  /** Tokens reserved at create: a number, or a function of the validated settings. */
  price: number | ((settings: Settings) => number);
  /** Tokens charged when a generation fails. Default 0. */
  failureFee?: number;
  /**
   * Price multiplier of each create priority for this model (a create reserves `price` times it), over the service's
   * `priority.multipliers`. `{ low: 0.5, high: 2 }`: half price on spare capacity, double to go first.
   */
  priorityMultipliers?: { low?: number; normal?: number; high?: number };
  /** Abort and fail a run after this many ms. Default: 4 x estimatedGenerationTime, at least 30 s. */
  timeoutMs?: number;
  /** Runs at most this many of this model's generations at once on one instance. */
  concurrency?: number;
  /** Attempts for retryable ProviderErrors (including the first). Default 3. */
  maxAttempts?: number;
  /**
   * Models to run a generation on, in order, when this model's provider fails it retryably after all its attempts,
   * or is unavailable (its circuit breaker is open: see `runner.circuit`). Each must exist, have the same
   * `resultType` and run in one `generate` call (as this model must); one whose settings validation refuses the
   * generation's settings is skipped. The generation is charged the serving model's price (or what its provider
   * reports), never more than was reserved for this model; its details name the model that served it.
   */
  fallbacks?: string[];
  /**
   * How OpenAI's request fields reach this model's settings on the OpenAI-compatible surface (`<mount>/openai/v1`,
   * docs/openai-compatible.md). A field goes to the setting of the same name unless `params` names another:
   * `{ params: { seconds: 'duration', input: 'prompt', voice: 'instrument' } }`. The uploaded `image` of an image
   * edit (and a video's `input_reference`) goes to the first `image` setting unless `params` names one.
   */
  openai?: OpenAiMapping;
}

/** A model's mapping of OpenAI's request fields to its settings (`ModelDefinition.openai`). */
export interface OpenAiMapping {
  /** OpenAI field name -> setting name, for fields whose setting has another name. */
  params?: Record<string, string>;
}

/**
 * A source of models that runs each generation in one call. `generate` may run more than once for one generation (a
 * retry, or a worker that was lost mid-run): execution is at-least-once, billing exactly-once.
 */
export interface GenerateProvider {
  models: ModelDefinition[];
  /** The upstream's limits: the runner keeps every instance's calls within them (work beyond waits, pending). */
  capacity?: ProviderCapacity;
  generate(input: GenerationInput, ctx: GenerationContext): Promise<GenerationOutput>;
}

/** What `check` found: still running (with optional progress), done (the output), or failed. */
export type RemoteJobStatus =
  | { status: 'running'; progress?: number; message?: string }
  | { status: 'done'; output: GenerationOutput }
  | { status: 'failed'; error: ProviderError };

/**
 * A source of models whose generations run as jobs elsewhere (a hosted API): `start` submits one and returns a
 * small JSON handle naming it; the runner stores the handle durably before the first `check`, so after a crash, a lost
 * lease or a restart it resumes checking the same upstream job. `start` is called once per generation (again only
 * when it threw a retryable ProviderError, or when the process died between `start` resolving and the handle being
 * stored: make `start` idempotent by `ctx.generationId` where the upstream API allows). Between checks the generation
 * holds no concurrency slot; checks back off from the model's `estimatedGenerationTime`.
 */
export interface RemoteJobProvider {
  models: ModelDefinition[];
  /** The upstream's limits: each `start` and `check` is a request (see `GenerateProvider.capacity`). */
  capacity?: ProviderCapacity;
  start(input: GenerationInput, ctx: GenerationContext): Promise<{ handle: unknown }>;
  check(handle: unknown, ctx: GenerationContext): Promise<RemoteJobStatus>;
  /** Best effort: asks upstream to stop (on cancel or timeout). */
  cancel?(handle: unknown, ctx: { generationId: string; logger: Logger }): Promise<void>;
}

export type ModelProvider = GenerateProvider | RemoteJobProvider;
