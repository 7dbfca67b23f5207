import { linkSignals, sleep, throwIfAborted, timeoutSignal } from './abort.js';
import { Backoff, pollSchedule } from './backoff.js';
import {
  ConflictError,
  ConnectionError,
  GenServiceError,
  GenerationFailedError,
  TimeoutError,
  isTransientError,
} from './errors.js';
import { batchesApi, type BatchesApi } from './batches.js';
import { uploadsApi, type UploadsApi } from './uploads.js';
import { webhookEndpointsApi, type WebhookEndpointsApi } from './webhook-endpoints.js';
import type { RetryOptions } from './retry.js';
import { Transport, isRecord, readEventStream, type FetchLike } from './transport.js';
import type {
  AnyModels,
  Balance,
  CancelResult,
  CompletedGeneration,
  CreateGenerationInput,
  FailedGeneration,
  Generation,
  GenerationItem,
  GenerationPage,
  GenerationStatus,
  ListOptions,
  Model,
  ModelMap,
  Quote,
  QueuePosition,
  TerminalGeneration,
} from './types.js';

export interface ClientOptions {
  /**
   * Where the API is mounted, without `/v1` (e.g. `https://api.example.com` or `http://localhost:3000/gen`): the client
   * adds `/v1/...` itself. (A 404 "No such endpoint." through a baseUrl ending in `/v1` says so.)
   */
  baseUrl: string;
  /**
   * Sent as `Authorization: Bearer <apiKey>`. Default: the `GENSERVICE_API_KEY` environment variable, where there is a
   * `process` (Node, Bun, Deno; never in a browser); without either, `createClient` throws a TypeError.
   */
  apiKey?: string;
  /** Default: the global `fetch`. */
  fetch?: FetchLike;
  /** Default in Node: `genservice-client/<version>`; in browsers none is sent unless given (CORS). */
  userAgent?: string;
  /** Abandon one HTTP request after this long (0 = never). Default 30 000. */
  requestTimeoutMs?: number;
  /** How long the models list fetched for polling estimates is reused. Default 5 minutes. */
  modelsCacheTtlMs?: number;
  /**
   * Trying safe requests again (every GET, and a create that carries an Idempotency-Key) after no response, a 502,
   * 503 or 504, or a 429 with Retry-After: on by default (3 tries, 500 ms then 1 s apart); `false` turns it off.
   * `run` and `waitFor` keep their own, longer patience (`maxOutageMs`).
   */
  retry?: RetryOptions | false;
}

export interface RequestSignalOptions {
  signal?: AbortSignal;
}

export interface CreateOptions extends RequestSignalOptions {
  /** Sent as `Idempotency-Key`: the same key and body returns the first generation again and charges once. */
  idempotencyKey?: string;
}

export type StatusListener = (status: GenerationStatus, generation: Generation) => void;

/**
 * One piece of a generation's partial output, as its event stream sends it: text to append (`delta`), or a preview
 * image or frame (`url` is the service's signed file URL).
 */
export type OutputChunk = { type: 'text'; delta: string } | { type: 'preview'; url: string; mimeType: string };

export interface OutputOptions extends RequestSignalOptions {
  /** Stop (TimeoutError) when the generation has not finished this long after the call. Default: no limit. */
  timeoutMs?: number;
}

export interface WaitForOptions extends RequestSignalOptions {
  /** Give up (TimeoutError) when no terminal status was seen this long after the call. Default: no limit. */
  timeoutMs?: number;
  /** Called once per status change, the terminal one included, in order. An exception stops the wait. */
  onStatus?: StatusListener;
  /**
   * Called with each piece of partial output the event stream brings (text deltas, previews), in order. Only while
   * streaming: polling never sees partial output.
   */
  onOutput?: (chunk: OutputChunk) => void;
  /**
   * Called with where the generation waits in the queue (`{position, aheadOfYou, etaSeconds}`), once when the stream
   * opens on a pending generation and each time it moves up. Only while streaming, and only from a service whose queue
   * can tell.
   */
  onQueue?: (queue: QueuePosition) => void;
  /**
   * Follow the service's live event stream (default true), falling back to polling when the service has none or it
   * breaks off. False: poll only.
   */
  stream?: boolean;
  /** First delay between polls, instead of the one derived from the model's estimatedGenerationTime. */
  pollIntervalMs?: number;
  /** Largest delay between polls. */
  maxPollIntervalMs?: number;
  /**
   * The generation's model, to pace polling by its estimate. Not needed for generations this client created.
   */
  modelId?: string;
  /**
   * Stop retrying, and throw the last error, once transient errors (no response, 408, 429, 5xx) have gone on
   * this long without a single good answer. Guards against waiting forever on a dead server when there is no
   * `timeoutMs`. Default 5 minutes.
   */
  maxOutageMs?: number;
}

export interface RunOptions extends Omit<WaitForOptions, 'modelId'> {
  /**
   * Idempotency-Key for the create. Default: a random one, which lets `run` retry the create after a network
   * error or 5xx without paying twice. Pass your own to make `run` itself safe to repeat.
   */
  idempotencyKey?: string;
  /** Called with the id as soon as the generation exists, e.g. to store it in case the process dies. */
  onCreated?: (generationId: string) => void;
  /**
   * When the signal aborts or `timeoutMs` passes after the generation was created, ask the server to cancel it
   * (fire and forget, errors ignored). Default false: the generation goes on and is charged.
   */
  cancelOnAbort?: boolean;
  /** Default true: a failed generation throws GenerationFailedError. False returns it instead. */
  throwOnFailure?: boolean;
}

/**
 * A client of one genservice API. `M` is its model map (`generateModelTypes` writes it): each create, quote and batch
 * request is checked against its model's settings at compile time. Default: any model, any settings.
 */
export interface GenServiceClient<M extends ModelMap<M> = AnyModels> {
  models: {
    /** GET /v1/models. Also refreshes the cache polling uses. */
    list(options?: RequestSignalOptions): Promise<Model[]>;
  };
  generations: {
    /** POST /v1/generations. Returns at once; the generation runs on the server. */
    create<K extends keyof M & string>(input: CreateGenerationInput<M, K>, options?: CreateOptions): Promise<{ generationId: string }>;
    /** GET /v1/generations/:id (tried again by the `retry` policy, as every GET). */
    get(generationId: string, options?: RequestSignalOptions): Promise<Generation>;
    /** GET /v1/generations/:id/details: timestamps, progress, metadata and the reason of a failure. */
    details(generationId: string, options?: RequestSignalOptions): Promise<GenerationItem>;
    /** GET /v1/generations: one page of your generations, newest first. */
    list(options?: ListOptions): Promise<GenerationPage>;
    /** Every page of `list`, one generation at a time. */
    listAll(options?: Omit<ListOptions, 'cursor'>): AsyncIterable<GenerationItem>;
    /**
     * The generation's partial output as it forms, from its event stream: the text so far first (when it already
     * began), then each delta and preview as it comes; ends when the generation finishes (then read its result with
     * `get` or `waitFor`). A stream that breaks off is resumed with Last-Event-ID, so nothing comes twice or is lost.
     * Ends at once, with nothing, when the service offers no event stream. Breaking out of the loop closes it.
     */
    output(generationId: string, options?: OutputOptions): AsyncIterable<OutputChunk>;
    /** POST /v1/quotes: the price a create with this input would reserve, and your balance; reserves nothing. */
    quote<K extends keyof M & string>(input: CreateGenerationInput<M, K>, options?: RequestSignalOptions): Promise<Quote>;
    /** POST /v1/generations/:id/cancel. A finished generation is returned unchanged. */
    cancel(generationId: string, options?: RequestSignalOptions): Promise<CancelResult>;
    /**
     * DELETE /v1/generations/:id: cancels it if it is still running (charged as a cancel), then deletes its files,
     * result and events; every read of it then answers 404 (NotFoundError), and so does a second delete.
     */
    delete(generationId: string, options?: RequestSignalOptions): Promise<void>;
    /** Polls until `completed` or `failed` and returns that generation; a failed one is returned, not thrown. */
    waitFor(generationId: string, options?: WaitForOptions): Promise<TerminalGeneration>;
    /** create + waitFor. Returns the completed generation; throws GenerationFailedError for a failed one. */
    run<K extends keyof M & string>(input: CreateGenerationInput<M, K>, options?: RunOptions & { throwOnFailure?: true }): Promise<CompletedGeneration>;
    run<K extends keyof M & string>(input: CreateGenerationInput<M, K>, options: RunOptions & { throwOnFailure: false }): Promise<TerminalGeneration>;
    run<K extends keyof M & string>(input: CreateGenerationInput<M, K>, options?: RunOptions): Promise<TerminalGeneration>;
  };
  /** POST /v1/batches and the rest: many generations created, reserved and followed as one. */
  batches: BatchesApi<M>;
  /** POST /v1/uploads: a file of yours (an image, a sound) to give as an input of your generations. */
  uploads: UploadsApi;
  /** /v1/webhook-endpoints: your webhook receivers as objects (each with its own secret), their deliveries and replay. */
  webhookEndpoints: WebhookEndpointsApi;
  /** GET /v1/balance: the caller's spendable tokens. */
  balance(options?: RequestSignalOptions): Promise<Balance>;
}

const STATUSES: ReadonlySet<string> = new Set(['pending', 'processing', 'completed', 'failed']);
const DEFAULT_MAX_OUTAGE_MS = 5 * 60_000;
/** Right after a refresh, a model missing from the list stays missing: do not refetch per call. */
const MODELS_REFETCH_MIN_MS = 10_000;
/** Remembered generation -> model pairs, so waitFor can pace polling by the model's estimate. */
const CREATED_MEMORY = 1_000;
/** A broken event stream is resumed until this many resumes in a row bring no message; then the client polls. */
const STREAM_RESUMES = 3;
const STREAM_RESUME_DELAY_MS = 250;
/** Create retries (only with an Idempotency-Key) start here and double. */
const CREATE_RETRY_SCHEDULE = { initialMs: 250, maxMs: 5_000, factor: 2 };

/** Aborts the deadline link; never seen by callers (it becomes a TimeoutError). */
class DeadlineReached extends Error {
  override readonly name = 'DeadlineReached' as const;
}

/** One waitFor/run call: the caller's signal and the deadline folded into one signal. */
interface Operation {
  signal: AbortSignal;
  userSignal?: AbortSignal;
  expired(): boolean;
  close(): void;
}

function openOperation(userSignal: AbortSignal | undefined, timeoutMs: number | undefined): Operation {
  const deadline = timeoutMs === undefined ? undefined : timeoutSignal(timeoutMs, new DeadlineReached());
  const linked = linkSignals([userSignal, deadline?.signal]);
  return {
    signal: linked.signal,
    userSignal,
    // The caller's abort wins a tie, so an explicit abort is never reported as a timeout.
    expired: () => !userSignal?.aborted && deadline?.signal.aborted === true,
    close: () => {
      linked.dispose();
      deadline?.clear();
    },
  };
}

function invalidResponse(message: string): GenServiceError {
  return new GenServiceError(message, { status: 200, code: 'invalid_response' });
}

function toGeneration(generationId: string, body: unknown): Generation {
  if (!isRecord(body) || typeof body.status !== 'string' || !STATUSES.has(body.status)) {
    throw invalidResponse(`Generation ${generationId}: the response has no valid status`);
  }
  const status = body.status as GenerationStatus;
  if (status === 'pending' || status === 'processing') return { generationId, status };
  if (typeof body.price !== 'number') {
    throw invalidResponse(`Generation ${generationId}: a ${status} generation must have a numeric price`);
  }
  if (status === 'failed') return { generationId, status, price: body.price };
  if (typeof body.result !== 'string') {
    throw invalidResponse(`Generation ${generationId}: a completed generation must have a string result`);
  }
  return { generationId, status, result: body.result, price: body.price };
}

function isTerminal(generation: Generation): generation is TerminalGeneration {
  return generation.status === 'completed' || generation.status === 'failed';
}

/** Rejects with the signal's reason as soon as it aborts, without cancelling `promise` (which others may share). */
function raceAbort<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

function randomIdempotencyKey(): string | undefined {
  const cryptoApi = (globalThis as { crypto?: Crypto }).crypto;
  // randomUUID is missing in insecure browser contexts (plain http), where getRandomValues still works.
  if (typeof cryptoApi?.randomUUID === 'function') return cryptoApi.randomUUID();
  if (typeof cryptoApi?.getRandomValues === 'function') {
    const bytes = cryptoApi.getRandomValues(new Uint8Array(16));
    return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
  }
  return undefined;
}

class Client implements GenServiceClient<AnyModels> {
  readonly models: GenServiceClient['models'];
  readonly generations: GenServiceClient['generations'];
  readonly batches: BatchesApi;
  readonly uploads: UploadsApi;
  readonly webhookEndpoints: WebhookEndpointsApi;
  private readonly transport: Transport;
  private readonly modelsCacheTtlMs: number;
  private modelsCache?: { at: number; byId: Map<string, Model> };
  private modelsInFlight?: Promise<void>;
  private readonly modelOf = new Map<string, string>();

  constructor(options: ClientOptions) {
    this.transport = new Transport(options);
    this.modelsCacheTtlMs = options.modelsCacheTtlMs ?? 5 * 60_000;
    this.models = { list: (opts) => this.listModels(opts) };
    this.batches = batchesApi(this.transport);
    this.uploads = uploadsApi(this.transport);
    this.webhookEndpoints = webhookEndpointsApi(this.transport);
    this.generations = {
      create: (input, opts) => this.create(input, opts),
      get: (id, opts) => this.get(id, opts),
      cancel: (id, opts) => this.cancel(id, opts),
      delete: (id, opts) => this.delete(id, opts),
      details: (id, opts) => this.details(id, opts),
      list: (opts) => this.list(opts),
      listAll: (opts) => this.listAll(opts),
      output: (id, opts) => this.output(id, opts),
      quote: (input, opts) => this.quote(input, opts),
      waitFor: (id, opts) => this.waitFor(id, opts),
      run: ((input: CreateGenerationInput, opts?: RunOptions) => this.run(input, opts)) as GenServiceClient['generations']['run'],
    };
  }

  async balance(options: RequestSignalOptions = {}): Promise<Balance> {
    const body = await this.transport.request('GET', '/v1/balance', { signal: options.signal });
    if (!isRecord(body) || typeof body.balance !== 'number') throw invalidResponse('GET /v1/balance: no numeric balance');
    return { balance: body.balance };
  }

  private async listModels(options: RequestSignalOptions = {}): Promise<Model[]> {
    const body = await this.transport.request('GET', '/v1/models', { signal: options.signal });
    if (!isRecord(body) || !Array.isArray(body.models)) throw invalidResponse('GET /v1/models: no models array');
    const models = body.models as Model[];
    this.modelsCache = { at: Date.now(), byId: new Map(models.map((m) => [m.modelId, m])) };
    return models;
  }

  private async create(input: CreateGenerationInput, options: CreateOptions = {}, retry = true): Promise<{ generationId: string }> {
    const headers: Record<string, string> = {};
    if (options.idempotencyKey !== undefined) headers['idempotency-key'] = options.idempotencyKey;
    const body = await this.transport.request('POST', '/v1/generations', {
      body: bodyOf(input),
      headers,
      signal: options.signal,
      retry,
    });
    if (!isRecord(body) || typeof body.generationId !== 'string' || body.generationId === '') {
      throw invalidResponse('POST /v1/generations: no generationId');
    }
    this.remember(body.generationId, input.modelId);
    return { generationId: body.generationId };
  }

  private async details(generationId: string, options: RequestSignalOptions = {}): Promise<GenerationItem> {
    const body = await this.transport.request('GET', `/v1/generations/${encodeURIComponent(generationId)}/details`, {
      signal: options.signal,
    });
    if (!isRecord(body) || typeof body.status !== 'string' || !STATUSES.has(body.status)) throw invalidResponse('GET details: no status');
    return body as unknown as GenerationItem;
  }

  private async list(options: ListOptions = {}): Promise<GenerationPage> {
    const q = new URLSearchParams();
    if (options.limit !== undefined) q.set('limit', String(options.limit));
    if (options.cursor !== undefined) q.set('cursor', options.cursor);
    if (options.status !== undefined) q.set('status', options.status);
    if (options.modelId !== undefined) q.set('modelId', options.modelId);
    const query = q.toString();
    const body = await this.transport.request('GET', `/v1/generations${query ? `?${query}` : ''}`, { signal: options.signal });
    if (!isRecord(body) || !Array.isArray(body.data)) throw invalidResponse('GET /v1/generations: no data array');
    return { data: body.data as GenerationItem[], nextCursor: typeof body.nextCursor === 'string' ? body.nextCursor : null };
  }

  private async *listAll(options: Omit<ListOptions, 'cursor'> = {}): AsyncGenerator<GenerationItem> {
    let cursor: string | undefined;
    for (;;) {
      const page = await this.list({ ...options, ...(cursor !== undefined ? { cursor } : {}) });
      yield* page.data;
      if (page.nextCursor === null) return;
      cursor = page.nextCursor;
    }
  }

  private async quote(input: CreateGenerationInput, options: RequestSignalOptions = {}): Promise<Quote> {
    const body = await this.transport.request('POST', '/v1/quotes', { body: bodyOf(input), signal: options.signal });
    if (!isRecord(body) || typeof body.price !== 'number' || typeof body.balance !== 'number') throw invalidResponse('POST /v1/quotes: no price');
    const priority = body.priority === 'low' || body.priority === 'normal' || body.priority === 'high' ? body.priority : undefined;
    return {
      price: body.price,
      balance: body.balance,
      ...(priority !== undefined ? { priority } : {}),
      ...(typeof body.multiplier === 'number' ? { multiplier: body.multiplier } : {}),
    };
  }

  /** A failed generation with its reason, when the service can say (an older one cannot: then without). */
  private async withReason(generation: FailedGeneration, signal: AbortSignal): Promise<FailedGeneration> {
    if (generation.error) return generation;
    try {
      const d = await this.details(generation.generationId, { signal });
      return d.error ? { ...generation, error: d.error } : generation;
    } catch {
      return generation;
    }
  }

  private async get(generationId: string, options: RequestSignalOptions = {}, retry = true): Promise<Generation> {
    const body = await this.transport.request('GET', `/v1/generations/${encodeURIComponent(generationId)}`, {
      signal: options.signal,
      retry,
    });
    return toGeneration(generationId, body);
  }

  private async cancel(generationId: string, options: RequestSignalOptions = {}): Promise<CancelResult> {
    const body = await this.transport.request('POST', `/v1/generations/${encodeURIComponent(generationId)}/cancel`, {
      signal: options.signal,
    });
    const generation = toGeneration(generationId, body);
    // A server that does not say counts as not cancelled: claiming a stop that may not have happened is worse.
    const cancelled = isRecord(body) && typeof body.cancelled === 'boolean' ? body.cancelled : false;
    return { ...generation, cancelled };
  }

  private async delete(generationId: string, options: RequestSignalOptions = {}): Promise<void> {
    await this.transport.request('DELETE', `/v1/generations/${encodeURIComponent(generationId)}`, { signal: options.signal });
  }

  private async waitFor(generationId: string, options: WaitForOptions = {}): Promise<TerminalGeneration> {
    throwIfAborted(options.signal);
    const op = openOperation(options.signal, options.timeoutMs);
    const state: PollState = {};
    try {
      const modelId = options.modelId ?? this.modelOf.get(generationId);
      const generation = await this.poll(generationId, modelId, options, op, state, true);
      return generation.status === 'failed' ? await this.withReason(generation, op.signal) : generation;
    } catch (error) {
      throw this.settle(error, op, generationId, state);
    } finally {
      op.close();
    }
  }

  private async run(input: CreateGenerationInput, options: RunOptions = {}): Promise<TerminalGeneration> {
    throwIfAborted(options.signal);
    const op = openOperation(options.signal, options.timeoutMs);
    const state: PollState = {};
    let generationId: string | undefined;
    try {
      // Warm the estimate while the create is in flight; the poll awaits the same cache.
      void this.estimateFor(input.modelId, op.signal).catch(() => undefined);
      generationId = await this.createWithRetries(input, options, op, state);
      options.onCreated?.(generationId);
      let generation = await this.poll(generationId, input.modelId, options, op, state, false);
      if (generation.status === 'failed') {
        generation = await this.withReason(generation, op.signal);
        if (options.throwOnFailure !== false) throw new GenerationFailedError(generation);
      }
      return generation;
    } catch (error) {
      const settled = this.settle(error, op, generationId, state);
      if (options.cancelOnAbort && generationId !== undefined && op.signal.aborted) {
        this.cancel(generationId).catch(() => undefined);
      }
      throw settled;
    } finally {
      op.close();
    }
  }

  /** Maps an error that ended a wait to what the caller sees: their abort reason, a TimeoutError, or itself. */
  private settle(error: unknown, op: Operation, generationId: string | undefined, state: PollState): unknown {
    if (op.userSignal?.aborted) return op.userSignal.reason;
    if (op.expired()) {
      const what = generationId === undefined ? 'the generation was not created' : `generation ${generationId} did not finish`;
      return new TimeoutError(`Timed out: ${what} in time${state.lastStatus ? ` (last status ${state.lastStatus})` : ''}`, {
        generationId,
        lastStatus: state.lastStatus,
        cause: state.lastError,
      });
    }
    return error;
  }

  private async createWithRetries(
    input: CreateGenerationInput,
    options: RunOptions,
    op: Operation,
    state: PollState,
  ): Promise<string> {
    const idempotencyKey = options.idempotencyKey ?? randomIdempotencyKey();
    const backoff = new Backoff(CREATE_RETRY_SCHEDULE);
    const maxOutageMs = options.maxOutageMs ?? DEFAULT_MAX_OUTAGE_MS;
    const startedAt = Date.now();
    for (;;) {
      try {
        return await this.createOnce(input, idempotencyKey, options.cancelOnAbort === true, op);
      } catch (error) {
        if (op.signal.aborted) throw error;
        // Without a key a retry could start (and charge) a second generation. 409 means the first request with
        // this key is still being handled: asking again shortly gets its answer.
        const retryable = idempotencyKey !== undefined && (isTransientError(error) || error instanceof ConflictError);
        if (!retryable || Date.now() - startedAt >= maxOutageMs) throw error;
        state.lastError = error;
        await sleep(delayAfter(error, backoff.next()), op.signal);
      }
    }
  }

  /**
   * One create. With cancelOnAbort, the request is not tied to the caller's signal: an abort while it is in
   * flight cannot stop the server from creating (and charging for) the generation, so the request is left to
   * finish in the background and what it created is cancelled. The caller is still released at once.
   */
  private async createOnce(
    input: CreateGenerationInput,
    idempotencyKey: string | undefined,
    cancelOnAbort: boolean,
    op: Operation,
  ): Promise<string> {
    // One try each: createWithRetries is the retry loop here.
    if (!cancelOnAbort) return (await this.create(input, { idempotencyKey, signal: op.signal }, false)).generationId;
    throwIfAborted(op.signal);
    const attempt = this.create(input, { idempotencyKey }, false);
    try {
      return (await raceAbort(attempt, op.signal)).generationId;
    } catch (error) {
      if (op.signal.aborted) {
        attempt.then(({ generationId }) => this.cancel(generationId)).catch(() => undefined);
      }
      throw error;
    }
  }

  /**
   * The polling loop. `pollFirst`: poll at once (waitFor on an id that may be long finished) rather than after
   * the first delay (run, which knows the generation was just created).
   */
  private async poll(
    generationId: string,
    modelId: string | undefined,
    options: WaitForOptions,
    op: Operation,
    state: PollState,
    pollFirst: boolean,
  ): Promise<TerminalGeneration> {
    const maxOutageMs = options.maxOutageMs ?? DEFAULT_MAX_OUTAGE_MS;
    const estimate = modelId === undefined ? Promise.resolve(undefined) : this.estimateFor(modelId, op.signal);
    // The estimate only paces polling: if it cannot be had, poll on the default schedule rather than fail. Never
    // rejects, so it cannot become an unhandled rejection when an abort ends the loop before it is awaited; the
    // abort itself surfaces from the request or the sleep.
    const schedule = estimate.then(
      (seconds) => pollSchedule(seconds, options),
      () => pollSchedule(undefined, options),
    );
    // Live first: the stream tells each transition as it happens, at no polling cost. A service without streams, or a
    // stream that breaks off, leaves the rest to polling.
    if (options.stream !== false) {
      const streamed = await this.follow(generationId, options, op, state);
      if (streamed) return streamed;
    }
    let backoff: Backoff | undefined;
    let outageStartedAt: number | undefined;
    let skipPoll = !pollFirst && state.lastStatus === undefined;
    for (;;) {
      let delay: number;
      if (skipPoll) {
        skipPoll = false;
        backoff = new Backoff(await schedule);
        delay = backoff.next();
      } else {
        try {
          // One try each: this loop has its own patience (maxOutageMs) and pace.
          const generation = await this.get(generationId, { signal: op.signal }, false);
          outageStartedAt = undefined;
          state.lastError = undefined;
          if (generation.status !== state.lastStatus) {
            state.lastStatus = generation.status;
            options.onStatus?.(generation.status, generation);
          }
          if (isTerminal(generation)) return generation;
          backoff ??= new Backoff(await schedule);
          delay = backoff.next();
        } catch (error) {
          if (op.signal.aborted || !isTransientError(error)) throw error;
          state.lastError = error;
          outageStartedAt ??= Date.now();
          if (Date.now() - outageStartedAt >= maxOutageMs) throw error;
          backoff ??= new Backoff(await schedule);
          delay = delayAfter(error, backoff.next());
        }
      }
      await sleep(delay, op.signal);
    }
  }

  /**
   * Follows the generation's event stream to its terminal event; null when the service has none, or when it broke off
   * and could not be resumed (the caller then polls). A break is resumed with `Last-Event-ID`, so no transition is
   * lost or told twice.
   */
  private async follow(generationId: string, options: WaitForOptions, op: Operation, state: PollState): Promise<TerminalGeneration | null> {
    const path = `/v1/generations/${encodeURIComponent(generationId)}/events`;
    let lastEventId: string | undefined;
    // Resumes in a row that brought no message: a stream that keeps breaking at once is left to polling.
    let fruitless = 0;
    for (let attempt = 0; ; attempt++) {
      // The stream may be quiet for long: only the caller's own signal and deadline end it, not the per-request timer.
      const response = await this.transport.open(path, op.signal, lastEventId);
      if (response === null && attempt === 0) return null;
      let heard = false;
      if (response !== null) {
        try {
          for await (const message of readEventStream(response, lastEventId)) {
            heard = true;
            lastEventId = message.id;
            // Where it waits is no state either: handed to its listener, if any.
            if (message.event === 'queue') {
              const queue = toQueue(message.data);
              if (queue) options.onQueue?.(queue);
              continue;
            }
            // Partial output is not a state: handed to its listener, if any, and never mistaken for a generation.
            const chunk = toChunk(message);
            if (chunk !== undefined) {
              if (chunk !== null) options.onOutput?.(chunk);
              continue;
            }
            let generation: Generation;
            try {
              generation = toGeneration(generationId, message.data);
            } catch {
              return null;
            }
            // A pending generation's state carries where it waits (when the service's queue can tell).
            const queue = generation.status === 'pending' && isRecord(message.data) ? toQueue(message.data.queue) : null;
            if (queue) options.onQueue?.(queue);
            if (generation.status !== state.lastStatus) {
              state.lastStatus = generation.status;
              options.onStatus?.(generation.status, generation);
            }
            if (isTerminal(generation)) {
              // The stream's item carries the reason of a failure: no second request for it.
              const reason = isRecord(message.data) && isRecord(message.data.error) ? message.data.error : undefined;
              return generation.status === 'failed' && reason && typeof reason.code === 'string' && typeof reason.message === 'string'
                ? { ...generation, error: { code: reason.code, message: reason.message } }
                : generation;
            }
          }
        } catch (error) {
          if (op.signal.aborted) throw error;
          // A message that is not JSON is not a stream this client understands: poll instead.
          if (error instanceof SyntaxError) return null;
        }
      }
      fruitless = heard ? 0 : fruitless + 1;
      if (fruitless >= STREAM_RESUMES) return null;
      // At once after a stream that was flowing; a little later each time one breaks again without a message.
      if (fruitless > 0) await sleep(STREAM_RESUME_DELAY_MS * 2 ** (fruitless - 1), op.signal);
    }
  }

  private async *output(generationId: string, options: OutputOptions = {}): AsyncGenerator<OutputChunk> {
    const path = `/v1/generations/${encodeURIComponent(generationId)}/events`;
    const op = openOperation(options.signal, options.timeoutMs);
    let lastEventId: string | undefined;
    let fruitless = 0;
    try {
      for (;;) {
        const response = await this.transport.open(path, op.signal, lastEventId);
        if (response === null) return;
        let heard = false;
        try {
          for await (const message of readEventStream(response, lastEventId)) {
            heard = true;
            lastEventId = message.id;
            const chunk = toChunk(message);
            if (chunk) yield chunk;
            else if (chunk === undefined && (message.event === 'completed' || message.event === 'failed')) return;
          }
        } catch (error) {
          if (op.signal.aborted) throw error;
          if (error instanceof SyntaxError) throw invalidResponse(`GET ${path}: a message that is not JSON`);
        }
        fruitless = heard ? 0 : fruitless + 1;
        if (fruitless >= STREAM_RESUMES) throw new ConnectionError(`GET ${path}: the event stream broke off ${fruitless} times without a message`);
        if (fruitless > 0) await sleep(STREAM_RESUME_DELAY_MS * 2 ** (fruitless - 1), op.signal);
      }
    } catch (error) {
      if (op.expired()) throw new TimeoutError(`The generation did not finish within ${options.timeoutMs} ms.`, { generationId, cause: error });
      throw error;
    } finally {
      op.close();
    }
  }

  /** The model's estimatedGenerationTime in seconds, from a cached models list; undefined when unknown. */
  private async estimateFor(modelId: string, signal: AbortSignal): Promise<number | undefined> {
    const cached = this.modelsCache;
    const age = cached ? Date.now() - cached.at : Infinity;
    if (cached && (age < MODELS_REFETCH_MIN_MS || (age < this.modelsCacheTtlMs && cached.byId.has(modelId)))) {
      return cached.byId.get(modelId)?.estimatedGenerationTime;
    }
    // One refresh shared by all concurrent waits; none of them may cancel it for the others.
    this.modelsInFlight ??= this.listModels()
      .then(() => undefined)
      .finally(() => {
        this.modelsInFlight = undefined;
      });
    try {
      await raceAbort(this.modelsInFlight, signal);
    } catch (error) {
      if (signal.aborted) throw error;
      return undefined;
    }
    return this.modelsCache?.byId.get(modelId)?.estimatedGenerationTime;
  }

  private remember(generationId: string, modelId: string): void {
    this.modelOf.set(generationId, modelId);
    if (this.modelOf.size > CREATED_MEMORY) {
      const oldest = this.modelOf.keys().next().value;
      if (oldest !== undefined) this.modelOf.delete(oldest);
    }
  }
}

interface PollState {
  lastStatus?: GenerationStatus;
  lastError?: unknown;
}

/** The JSON body of a create or quote: only the fields given. */
function bodyOf(input: CreateGenerationInput): Record<string, unknown> {
  return {
    modelId: input.modelId,
    ...(input.settings !== undefined ? { settings: input.settings } : {}),
    ...(input.metadata !== undefined ? { metadata: input.metadata } : {}),
    ...(input.webhook !== undefined ? { webhook: input.webhook } : {}),
    ...(input.expiresAfterSeconds !== undefined ? { expiresAfterSeconds: input.expiresAfterSeconds } : {}),
    ...(input.priority !== undefined ? { priority: input.priority } : {}),
    ...(input.deadline !== undefined ? { deadline: input.deadline } : {}),
  };
}

/** A `queue` message's data, or null when it is not one this client can read. */
function toQueue(data: unknown): QueuePosition | null {
  if (!isRecord(data) || typeof data.position !== 'number' || typeof data.aheadOfYou !== 'number') return null;
  return { position: data.position, aheadOfYou: data.aheadOfYou, etaSeconds: typeof data.etaSeconds === 'number' ? data.etaSeconds : null };
}

/**
 * A stream message as partial output: the chunk, null for partial output this client cannot read (skipped), undefined
 * for any other message (a state).
 */
function toChunk(message: { event: string; data: unknown }): OutputChunk | null | undefined {
  if (message.event === 'output') {
    return isRecord(message.data) && typeof message.data.delta === 'string' ? { type: 'text', delta: message.data.delta } : null;
  }
  if (message.event === 'preview') {
    const d = message.data;
    return isRecord(d) && typeof d.url === 'string' && typeof d.mimeType === 'string' ? { type: 'preview', url: d.url, mimeType: d.mimeType } : null;
  }
  return undefined;
}

/** A server's Retry-After is a floor: polling sooner would only be refused again. */
function delayAfter(error: unknown, backoffMs: number): number {
  const retryAfterMs = error instanceof GenServiceError ? error.retryAfterMs : undefined;
  return retryAfterMs === undefined ? backoffMs : Math.max(backoffMs, retryAfterMs);
}

/**
 * A client for one genservice API and one API key.
 *
 * @example
 * // The API key from GENSERVICE_API_KEY; `Models` written by generateModelTypes, so settings are checked per model.
 * const client = createClient<Models>({ baseUrl: 'https://api.example.com' });
 * const { result, price } = await client.generations.run(
 *   { modelId: 'text-small', settings: { prompt: 'A haiku about rain' } },
 *   { timeoutMs: 60_000, onStatus: (status) => console.log(status) },
 * );
 */
export function createClient<M extends ModelMap<M> = AnyModels>(options: ClientOptions): GenServiceClient<M> {
  // One implementation for every model map: the map only narrows what the caller may pass.
  return new Client(options) as unknown as GenServiceClient<M>;
}
