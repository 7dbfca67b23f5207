import { SpanKind } from '@opentelemetry/api';
import { inject, injectable } from 'tsyringe';
import { ProviderError } from '../domain/errors.js';
import type { RegisteredModel } from '../domain/registry.js';
import type { GenerationRecord } from '../domain/types.js';
import { asError } from '../logger.js';
import type { GenerateProvider, GenerationOutput } from '../ports/provider.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { Telemetry } from '../telemetry.js';
import { TOKENS } from '../tokens.js';
import { type Candidate, Fallbacks } from './fallbacks.js';
import { CapacityGate } from './capacity-gate.js';
import { LanePaused, sleep, type Run, type RunContext } from './run.js';

/** The spans' names, not a template string per call. */
const SPAN_NAMES = { generate: 'genservice.provider.generate', start: 'genservice.provider.start', check: 'genservice.provider.check' } as const;

/** A `generate` call's options for `withRetries`: one object for every run. */
const GENERATE = { circuit: true, upstream: true } as const;

/**
 * Calling providers: each call in its own span, retried with exponential backoff while it fails retryably (up to
 * the model's `maxAttempts`), and a local run moved on to the model's fallbacks (fallbacks.ts) when its own model
 * keeps failing, each provider's circuit counting its failures.
 */
@injectable()
export class ProviderCalls {
  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(Fallbacks) private readonly fallbacks: Fallbacks,
    @inject(Telemetry) private readonly telemetry: Telemetry,
    @inject(CapacityGate) private readonly gate: CapacityGate,
  ) {}

  /**
   * A local run: `generate` on its own model, then on its fallbacks in turn (see `Fallbacks.run`). The model that
   * served it is kept as `run.servedBy` when a fallback did.
   */
  generate(run: Run, ctx: RunContext): Promise<GenerationOutput> {
    return this.fallbacks.run(run.model, run.rec.settings, (c) => this.attempt(run, ctx, c), () => run.abort.aborted);
  }

  /** `generate` on one candidate, with its retries; a fallback that serves is kept as the run's `servedBy`. */
  private attempt(run: Run, ctx: RunContext, c: Candidate): Promise<GenerationOutput> {
    const { model, settings } = c;
    const provider = model.provider as GenerateProvider;
    if (c.fallback) run.log.warn({ servedModelId: model.info.modelId }, 'running on a fallback model');
    const out = this.withRetries(() => this.call('generate', run.rec, () => provider.generate({ model: model.definition, settings }, ctx)), model, run, GENERATE);
    if (!c.fallback) return out;
    return out.then((value) => {
      run.servedBy = c;
      return value;
    });
  }

  /** One call of a provider, in its own span (a client span: the provider's HTTP requests carry its traceparent). */
  call<T>(op: 'generate' | 'start' | 'check', rec: GenerationRecord, fn: () => Promise<T>): Promise<T> {
    return this.telemetry.inSpan(SPAN_NAMES[op], { 'genservice.generation_id': rec.id, 'genservice.model': rec.modelId }, fn, undefined, SpanKind.CLIENT);
  }

  /**
   * Calls `fn`, again with exponential backoff while it throws a retryable ProviderError, up to the model's
   * maxAttempts. Throws the last error, or the abort reason once the run is aborted. `circuit`: `fn` is the model's
   * provider, whose circuit counts the outcome. `upstream`: each call of `fn` is a request to the provider's upstream
   * (its lane is asked first, and a `retryAfterMs` pauses it); not so for our own blob store's writes.
   */
  withRetries<T>(
    fn: () => Promise<T>,
    model: RegisteredModel,
    run: Pick<Run, 'abort' | 'log' | 'rec' | 'capacity'>,
    options: { circuit?: boolean; upstream?: boolean } = {},
  ): Promise<T> {
    // The first call is settled here, without an async frame (issue 36: most calls succeed at once); a failure goes on
    // to `retrying`, the loop of the later attempts.
    return this.send(fn, model, run, options).then(
      (out) => this.succeeded(out, model, run, options),
      (err: unknown) => this.retrying(fn, model, run, options, err),
    );
  }

  /** After the first attempt failed with `err`: again with backoff while it fails retryably (see `withRetries`). */
  private async retrying<T>(
    fn: () => Promise<T>,
    model: RegisteredModel,
    run: Pick<Run, 'abort' | 'log' | 'rec' | 'capacity'>,
    options: { circuit?: boolean; upstream?: boolean },
    err: unknown,
  ): Promise<T> {
    const { abort, log } = run;
    for (let attempt = 1; ; attempt++) {
      if (abort.aborted) throw abort.reason;
      if (options.upstream && err instanceof ProviderError && err.retryAfterMs !== undefined) {
        // The upstream asked to wait (a 429's Retry-After): its lane pauses everywhere, and this run parks until
        // then without spending an attempt or counting against the provider's circuit.
        await this.gate.pause(model, err.retryAfterMs);
        throw new LanePaused(err.retryAfterMs);
      }
      const retryable = err instanceof ProviderError && err.retryable;
      // The provider's circuit counts its retryable failures (a blob store's outage is not the provider's).
      if (options.circuit === true && retryable) this.fallbacks.failed(model);
      if (!retryable || attempt >= model.maxAttempts) throw err;
      const delay = Math.min(this.options.runner.retryMaxDelayMs, this.options.runner.retryBaseDelayMs * 2 ** (attempt - 1));
      log.warn({ err: asError(err), retryInMs: delay }, 'provider failed; retrying');
      await sleep(this.options.clock, delay, abort);
      if (abort.aborted) throw abort.reason;
      try {
        return this.succeeded(await this.send(fn, model, run, options), model, run, options);
      } catch (e) {
        err = e;
      }
    }
  }

  /**
   * One attempt: its lane's request first (provider.capacity), then `fn`; a synchronous throw as a rejection, and a
   * plain value (a provider that is not async) as a promise, as `await` took them (a promise is answered as it is).
   */
  private send<T>(fn: () => Promise<T>, model: RegisteredModel, run: Pick<Run, 'abort' | 'rec' | 'capacity'>, options: { upstream?: boolean }): Promise<T> {
    // Each call is one request of the provider's lane: asked before it is sent (undefined: nothing to ask).
    const asked = options.upstream ? this.gate.request(run, model) : undefined;
    if (asked) return asked.then(fn);
    try {
      return Promise.resolve(fn());
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** A call that returned: its result, unless the run was aborted meanwhile; the provider's circuit counts the success. */
  private succeeded<T>(out: T, model: RegisteredModel, run: Pick<Run, 'abort'>, options: { circuit?: boolean }): T {
    if (run.abort.aborted) throw run.abort.reason;
    if (options.circuit === true) this.fallbacks.succeeded(model);
    return out;
  }
}
