import { inject, injectable } from 'tsyringe';
import { ProviderError, UnavailableError } from '../domain/errors.js';
import type { GenerationRecord } from '../domain/types.js';
import { Fallbacks } from './fallbacks.js';
import { Lifecycle } from '../lifecycle/lifecycle.js';
import { asError, childLogger, silentLogger } from '../logger.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import type { BlobStore } from '../ports/blob.js';
import type { Logger } from '../ports/logger.js';
import type { GenerateProvider, GenerationContext, GenerationOutput } from '../ports/provider.js';
import type { Job } from '../ports/queue.js';
import { isRemoteJobProvider, ModelRegistry, type RegisteredModel } from '../domain/registry.js';
import { withRequestContext } from '../request-context.js';
import { continuedContext, Telemetry } from '../telemetry.js';
import { TOKENS } from '../tokens.js';
import { SpanKind } from '@opentelemetry/api';
import { JobAbort } from './job-signal.js';
import { OutputReporter } from './output-stream.js';
import type { Clock, ClockTimer } from '../ports/clock.js';

class TimeoutAbort extends Error {
  override readonly name = 'TimeoutAbort' as const;
}

/** A provider's result that breaks the provider contract; fails the generation like a non-retryable error. */
class BadOutput extends ProviderError {}

/** The blob store could not be reached: worth trying again, and never the owner's or the model's fault. */
class StorageUnavailable extends ProviderError {
  constructor(cause: unknown) {
    super(`the blob store is unavailable: ${cause instanceof Error ? cause.message : String(cause)}`, {
      retryable: true,
      publicMessage: 'The result could not be stored. Please try again.',
      cause,
    });
  }
}

/** At most one progress event per generation per this many ms; the latest value in between is written at its end. */
export const PROGRESS_INTERVAL_MS = 1000;

/**
 * When to check a remote job again: every fifth of its estimated time (at least 250 ms) while it is within the
 * estimate, then a quarter of the time it has run so far, at most a minute apart.
 */
export function nextCheckDelay(estimatedSeconds: number, elapsedMs: number): number {
  const base = Math.max(250, (estimatedSeconds * 1000) / 5);
  return Math.round(Math.min(60_000, Math.max(base, elapsedMs / 4)));
}

function sleep(clock: Clock, ms: number, abort: JobAbort): Promise<void> {
  return new Promise((resolve) => {
    if (abort.aborted) return resolve();
    const t = clock.setTimeout(done, ms);
    const unlisten = abort.onAbort(done);
    function done(): void {
      clock.clearTimeout(t);
      unlisten();
      resolve();
    }
  });
}

/**
 * The `ctx` a provider gets. A class, so a run builds it as cheaply as a plain object: `signal` is a getter on the
 * prototype that makes the run's AbortSignal on first read (see job-signal.ts), where a getter in an object literal
 * would cost a runtime call per run. Every other member is an own property (`progress` and `files.put` are bound
 * functions, safe to pass around on their own).
 */
class RunContext implements GenerationContext {
  readonly #abort: JobAbort;

  constructor(
    readonly generationId: string,
    abort: JobAbort,
    readonly deadline: number,
    readonly claim: number,
    readonly files: GenerationContext['files'],
    readonly logger: Logger,
    readonly progress: GenerationContext['progress'],
    readonly output: GenerationContext['output'],
  ) {
    this.#abort = abort;
  }

  get signal(): AbortSignal {
    return this.#abort.signal;
  }
}

/**
 * `ctx.progress` of one run, throttled: the first report is written at once, later ones at most one per
 * PROGRESS_INTERVAL_MS (the latest value wins), and none after the run ends. Holds nothing until the first report.
 */
class ProgressReporter {
  private lastAt = 0;
  private pending: { fraction: number; message?: string } | undefined = undefined;
  private timer: ClockTimer | undefined = undefined;
  private stopped = false;
  private writing: Promise<unknown> | undefined = undefined;

  constructor(
    private readonly lifecycle: Lifecycle,
    private readonly id: string,
    private readonly log: Logger,
    private readonly clock: Clock,
  ) {}

  readonly report = (fraction: number, message?: string): void => {
    if (this.stopped || typeof fraction !== 'number') return;
    const p = message === undefined ? { fraction } : { fraction, message };
    const wait = this.lastAt + PROGRESS_INTERVAL_MS - this.clock.now();
    if (wait <= 0 && !this.timer) return this.write(p);
    this.pending = p;
    this.timer ??= this.clock.setTimeout(() => {
      this.timer = undefined;
      if (!this.stopped && this.pending) this.write(this.pending);
      this.pending = undefined;
    }, Math.max(0, wait));
  };

  stop(): void {
    this.stopped = true;
    if (this.timer) this.clock.clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** Before the lease is let go (a parked remote job): what was reported is written now, while it may still be. */
  async flush(): Promise<void> {
    if (this.timer) {
      this.clock.clearTimeout(this.timer);
      this.timer = undefined;
      if (this.pending) this.write(this.pending);
      this.pending = undefined;
    }
    await this.writing;
  }

  private write(p: { fraction: number; message?: string }): void {
    this.lastAt = this.clock.now();
    this.writing = this.lifecycle.progress(this.id, p.fraction, p.message).catch((err: unknown) => this.log.warn({ err: asError(err) }, 'progress not recorded'));
  }
}

interface HeldRun {
  abort: JobAbort;
  log: Logger;
}

/**
 * Runs one generation: claim it, call its provider with a deadline and retries, store the result. Every state change
 * is the Lifecycle's; the runner owns only running, retrying, timing out and keeping leases. Every queue (in-process or
 * distributed) hands its jobs here, so they all behave alike.
 */
@injectable()
export class Runner {
  private readonly logger: Logger;
  /** Runs this worker holds, by generation id: one timer renews all their leases (not one timer per run). */
  private readonly held = new Map<string, HeldRun>();
  private renewTimer: ClockTimer | undefined;
  /** `ctx.files` of every run: one object for all of them. */
  private readonly files: GenerationContext['files'] = { put: (bytes, mimeType) => this.upload(bytes, mimeType) };

  /** `blobs.put`, with an outage turned into a retryable failure (the runner's backoff applies). */
  private upload(bytes: Uint8Array, mimeType: string): Promise<string> {
    return this.telemetry.inSpan('genservice.blob.put', { 'genservice.blob.bytes': bytes.byteLength, 'genservice.blob.mime_type': mimeType }, async () => {
      try {
        return await this.blobs.put(bytes, mimeType);
      } catch (err) {
        throw err instanceof UnavailableError ? new StorageUnavailable(err) : err;
      }
    });
  }

  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(Lifecycle) private readonly lifecycle: Lifecycle,
    @inject(TOKENS.Blobs) private readonly blobs: BlobStore,
    @inject(ModelRegistry) private readonly registry: ModelRegistry,
    @inject(Fallbacks) private readonly fallbacks: Fallbacks,
    @inject(Telemetry) private readonly telemetry: Telemetry,
    @inject(TOKENS.Logger) logger: Logger,
  ) {
    this.logger = childLogger(logger, { component: 'runner' });
  }

  private keepLeases(): void {
    if (this.renewTimer) return;
    this.renewTimer = this.options.clock.setInterval(() => {
      if (this.held.size === 0) {
        this.options.clock.clearInterval(this.renewTimer);
        this.renewTimer = undefined;
        return;
      }
      // Every lease this instance holds, in one store call (as BullMQ's LockManager extends all its locks at once).
      const ids = [...this.held.keys()];
      this.lifecycle.renewLeases(ids).then(
        (renewed) => {
          const still = new Set(renewed);
          for (const id of ids) {
            // Lost (a stall let it expire and another worker took it) or finished by someone else (cancelled).
            if (!still.has(id)) this.held.get(id)?.abort.abort(new Error('lease lost'));
          }
        },
        (err: unknown) => this.logger.warn({ err: asError(err), leases: ids.length }, 'lease renewal failed'),
      );
    }, Math.max(50, Math.floor(this.options.runner.leaseMs / 3)));
    this.renewTimer.unref?.();
  }

  /** Runs a job handed out with an AbortSignal (any queue): the run follows that signal. */
  async run(job: Job, queueSignal: AbortSignal): Promise<void> {
    const { abort, unfollow } = JobAbort.following(queueSignal);
    try {
      // Every log line of the run carries its generation id (and its trace id, in its span).
      await withRequestContext({ generationId: job.generationId }, () => this.runJob(job, abort));
    } finally {
      unfollow();
    }
  }

  /** The run itself, with the abort that follows its queue's signal (the runner aborts it on a timeout or a lost lease). */
  private async runJob(job: Job, abort: JobAbort): Promise<void> {
    // The Lifecycle decides whether it may run at all (its model is there, it has not lost its worker too often).
    const rec = await this.lifecycle.claim(job);
    if (!rec) return; // Someone else holds it, it is finished, or it was given up: nothing to do.
    const model = this.registry.get(rec.modelId);
    if (!model) return; // Not reached: claim refuses a generation whose model is gone.
    // The run continues the create's trace (stored with the generation), on whichever instance it runs.
    const attributes: Record<string, string | number> = { 'genservice.generation_id': rec.id, 'genservice.model': rec.modelId, 'genservice.claim': rec.claims };
    if (rec.startedAt !== undefined) attributes['genservice.queue_wait_ms'] = rec.startedAt - rec.createdAt;
    this.telemetry.running(1);
    try {
      await this.telemetry.inSpan('genservice.run', attributes, () => this.runClaimed(rec, model, abort), continuedContext(job.trace, rec.traceparent));
    } finally {
      this.telemetry.running(-1);
    }
  }

  private async runClaimed(rec: GenerationRecord, model: RegisteredModel, abort: JobAbort): Promise<void> {    // With the default silent logger there is nothing to bind: no child (and its bindings) per run.
    const log = this.logger === silentLogger ? silentLogger : childLogger(this.logger, { generationId: rec.id, modelId: rec.modelId, claim: rec.claims });
    if (log !== silentLogger) log.info({ status: 'processing' }, 'generation processing');

    // A remote job's time limit runs from its first start, across checks and restarts; a local run's from now.
    const remote = isRemoteJobProvider(model.provider) ? model.provider : undefined;
    const deadline = remote ? (rec.startedAt ?? this.options.clock.now()) + model.timeoutMs : this.options.clock.now() + model.timeoutMs;
    const timeout = this.options.clock.setTimeout(
      () => abort.abort(new TimeoutAbort(`timed out after ${model.timeoutMs} ms`)),
      Math.max(0, deadline - this.options.clock.now()),
    );
    this.held.set(rec.id, { abort, log });
    this.keepLeases();
    const progress = new ProgressReporter(this.lifecycle, rec.id, log, this.options.clock);
    const output = new OutputReporter(this.outputSink(rec.id), log, this.options.clock);
    const ctx = new RunContext(rec.id, abort, deadline, rec.claims, this.files, log, progress.report, output);
    const input = { model: model.definition, settings: rec.settings };
    let handle: unknown = rec.remoteHandle;

    try {
      // A remote job checked after its time limit (a check that was due late, or a restart): time out now rather
      // than on a timer that a quick check would outrun.
      if (this.options.clock.now() >= deadline) abort.abort(new TimeoutAbort(`timed out after ${model.timeoutMs} ms`));
      if (abort.aborted) throw abort.reason;
      if (!remote) {
        // Its own model, then its fallbacks while one fails retryably or its provider is unavailable (fallbacks.ts).
        const { value: result, served } = await this.fallbacks.run(
          model,
          rec.settings,
          (c) => {
            if (c.fallback) log.warn({ servedModelId: c.model.info.modelId }, 'running on a fallback model');
            return this.withRetries(
              () => this.providerCall('generate', rec, () => (c.model.provider as GenerateProvider).generate({ model: c.model.definition, settings: c.settings }, ctx)),
              c.model,
              abort,
              log,
              true,
            );
          },
          () => abort.aborted,
        );
        progress.stop();
        // Every delta and preview reported is in the log before the completion that follows it.
        await output.flush();
        output.stop();
        await this.finishCompleted(rec, model, result, abort, log, served.fallback ? { model: served.model, settings: served.settings } : undefined);
        return;
      }
      if (handle === undefined) {
        const started = await this.withRetries(() => this.providerCall('start', rec, () => remote.start(input, ctx)), model, abort, log);
        handle = started.handle;
        if (!(await this.lifecycle.setRemoteHandle(rec.id, handle))) {
          // Cancelled or taken over while it was being started: nobody will check this upstream job, so stop it.
          log.warn({}, 'remote job started after this worker lost the generation; cancelling it upstream');
          await this.lifecycle.cancelUpstream(rec.modelId, rec.id, handle);
          return;
        }
      }
      const status = await this.withRetries(() => this.providerCall('check', rec, () => remote.check(handle, ctx)), model, abort, log);
      if (status.status === 'running') {
        if (typeof status.progress === 'number') ctx.progress(status.progress, status.message);
        const delay = nextCheckDelay(model.info.estimatedGenerationTime, this.options.clock.now() - (rec.startedAt ?? this.options.clock.now()));
        // Parked, it holds no slot: the queue hands out the next check when it is due.
        await progress.flush();
        await output.flush();
        if (!(await this.lifecycle.park(rec.id, rec.modelId, rec.ownerId, delay))) log.warn({}, 'could not park the remote job (lease lost)');
        return;
      }
      progress.stop();
      await output.flush();
      output.stop();
      if (status.status === 'done') {
        await this.finishCompleted(rec, model, status.output, abort, log);
        return;
      }
      throw status.error;
    } catch (err) {
      progress.stop();
      output.stop();
      const reason: unknown = abort.aborted ? abort.reason : undefined;
      if (reason instanceof TimeoutAbort) {
        const failed = await this.lifecycle.failClaimed(rec, {
          code: 'timeout',
          publicMessage: `The generation took longer than ${Math.round(model.timeoutMs / 1000)} s.`,
          reason: reason.message,
          fee: 'failure_fee',
        });
        if (failed !== null && remote && handle !== undefined) await this.lifecycle.cancelUpstream(rec.modelId, rec.id, handle);
        return;
      }
      if (abort.aborted) {
        // Cancelled (the canceller already failed it), shutting down or lease lost: an unfinished generation is
        // retried by recovery once its lease expires.
        log.info({ reason: reason instanceof Error ? reason.message : String(reason) }, 'generation run aborted');
        return;
      }
      const message = err instanceof Error ? err.message : String(err);
      if (!(err instanceof ProviderError)) log.error({ err: asError(err) }, 'provider threw an unexpected error');
      // Only a ProviderError's own publicMessage reaches the owner; anything else gets the generic sentence.
      await this.lifecycle.failClaimed(
        rec,
        {
          code: err instanceof ProviderError ? err.code : 'provider_error',
          ...(err instanceof ProviderError && err.publicMessage !== undefined ? { publicMessage: err.publicMessage } : {}),
          reason: message,
          fee: err instanceof StorageUnavailable ? 'free' : 'failure_fee',
        },
      );
    } finally {
      progress.stop();
      output.stop();
      this.options.clock.clearTimeout(timeout);
      this.held.delete(rec.id);
    }
  }

  /** Where a run's `ctx.output` writes: the log, and a preview's bytes to the blob store first. */
  private outputSink(id: string): { text(delta: string): Promise<unknown>; preview(bytes: Uint8Array, mimeType: string): Promise<unknown> } {
    return {
      text: (delta) => this.lifecycle.output(id, delta),
      preview: async (bytes, mimeType) => {
        const key = await this.upload(bytes, mimeType);
        // Refused (the run lost its lease, or was cancelled): nobody will ever see or delete this file otherwise.
        if (!(await this.lifecycle.preview(id, key, mimeType))) await this.blobs.delete(key);
      },
    };
  }

  /** One call of a provider, in its own span (a client span: the provider's HTTP requests carry its traceparent). */
  private providerCall<T>(op: 'generate' | 'start' | 'check', rec: GenerationRecord, fn: () => Promise<T>): Promise<T> {
    return this.telemetry.inSpan(`genservice.provider.${op}`, { 'genservice.generation_id': rec.id, 'genservice.model': rec.modelId }, fn, undefined, SpanKind.CLIENT);
  }

  /**
   * Calls `fn`, again with exponential backoff while it throws a retryable ProviderError, up to the model's
   * maxAttempts. Throws the last error, or the abort reason once the run is aborted.
   */
  private async withRetries<T>(fn: () => Promise<T>, model: RegisteredModel, abort: JobAbort, log: Logger, provider = false): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        const out = await fn();
        if (abort.aborted) throw abort.reason;
        if (provider) this.fallbacks.succeeded(model);
        return out;
      } catch (err) {
        if (abort.aborted) throw abort.reason;
        const retryable = err instanceof ProviderError && err.retryable;
        // The provider's circuit counts its retryable failures (a blob store's outage is not the provider's).
        if (provider && retryable) this.fallbacks.failed(model);
        if (!retryable || attempt >= model.maxAttempts) throw err;
        const delay = Math.min(this.options.runner.retryMaxDelayMs, this.options.runner.retryBaseDelayMs * 2 ** (attempt - 1));
        log.warn({ err: asError(err), retryInMs: delay }, 'provider failed; retrying');
        await sleep(this.options.clock, delay, abort);
        if (abort.aborted) throw abort.reason;
      }
    }
  }

  private async finishCompleted(
    rec: GenerationRecord,
    model: RegisteredModel,
    output: GenerationOutput,
    abort: JobAbort,
    log: Logger,
    fallback?: { model: RegisteredModel; settings: Record<string, unknown> },
  ): Promise<void> {
    let resultText: string | undefined;
    let resultKey: string | undefined;
    let stored = false;
    try {
      if (output.price !== undefined && !(typeof output.price === 'number' && Number.isFinite(output.price) && output.price >= 0)) {
        throw new BadOutput(`the provider priced the result at ${String(output.price)}`);
      }
      if ('text' in output && typeof output.text === 'string') {
        if (model.info.resultType !== 'text') throw new BadOutput(`a ${model.info.resultType} model returned text`);
        resultText = output.text;
      } else if ('bytes' in output && output.bytes instanceof Uint8Array) {
        if (model.info.resultType === 'text') throw new BadOutput('a text model must return { text }');
        const bytes = output.bytes;
        const mimeType = output.mimeType;
        try {
          resultKey = await this.withRetries(() => this.upload(bytes, mimeType), model, abort, log);
        } catch (err) {
          if (!(err instanceof StorageUnavailable)) throw err;
          // The model did its work and our storage failed it: the owner pays nothing and may simply try again.
          log.error({ err }, 'the result could not be stored');
          await this.lifecycle.failClaimed(rec, { code: 'provider_error', publicMessage: err.publicMessage, reason: err.message, fee: 'free' });
          return;
        }
        stored = true;
      } else if ('file' in output && typeof output.file === 'string') {
        if (model.info.resultType === 'text') throw new BadOutput('a text model must return { text }');
        resultKey = output.file;
      } else {
        throw new BadOutput('the provider returned no result');
      }
    } catch (err) {
      // Aborted while the result was being stored: the run's own handler decides (cancelled, timed out, lease lost).
      if (abort.aborted) throw err;
      log.error({ err: asError(err) }, 'provider broke its contract');
      await this.lifecycle.failClaimed(rec, { code: 'provider_error', reason: err instanceof Error ? err.message : String(err), fee: 'failure_fee' });
      return;
    }
    const price = fallback
      ? this.lifecycle.fallbackPrice(rec.reserved, this.registry.priceOf(fallback.model, fallback.settings), output.price)
      : Math.min(rec.reserved, output.price ?? rec.reserved);
    const ok = await this.lifecycle.complete(rec, {
      price,
      ...(resultText !== undefined ? { resultText } : {}),
      ...(resultKey !== undefined ? { resultKey } : {}),
      ...(fallback ? { servedModelId: fallback.model.info.modelId } : {}),
    });
    if (!ok) {
      // Another worker took over (our lease expired) or the generation was cancelled: our result is void.
      log.warn({}, 'completion refused by the store; result discarded');
      if (resultKey && stored) await this.blobs.delete(resultKey);
    }
  }
}
