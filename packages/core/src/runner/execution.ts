import { inject, injectable } from 'tsyringe';
import { ProviderError } from '../domain/errors.js';
import { isRemoteJobProvider, type RegisteredModel } from '../domain/registry.js';
import type { GenerationRecord } from '../domain/types.js';
import { Lifecycle } from '../lifecycle/lifecycle.js';
import { asError } from '../logger.js';
import type { Logger } from '../ports/logger.js';
import type { GenerationOutput } from '../ports/provider.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';
import type { JobAbort } from './job-signal.js';
import { LeaseKeeper } from './leases.js';
import { ProviderCalls } from './provider-calls.js';
import { RemoteJobs } from './remote-jobs.js';
import { Results } from './results.js';
import { LanePaused, type ReporterSinks, type Run, type RunCapacity, RunContext, StorageUnavailable, TimeoutAbort } from './run.js';

/**
 * One claimed run, from its deadline to its end: the lease held, progress and partial output reported, the provider
 * called (locally with retries and fallbacks, or a remote job's turn), the result kept. When it fails, the runner says
 * what happened (a `FailureCause`: timeout, the provider's failure, our storage) and the Lifecycle decides the rest.
 */
@injectable()
export class Execution {
  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(Lifecycle) private readonly lifecycle: Lifecycle,
    @inject(LeaseKeeper) private readonly leases: LeaseKeeper,
    @inject(ProviderCalls) private readonly calls: ProviderCalls,
    @inject(RemoteJobs) private readonly remote: RemoteJobs,
    @inject(Results) private readonly results: Results,
  ) {
    this.sinks = {
      progress: (id, fraction, message) => this.lifecycle.progress(id, fraction, message),
      output: (id) => this.results.sink(id),
      clock: options.clock,
    };
  }

  /** Where every run's reporters write: one object, not closures per run. */
  private readonly sinks: ReporterSinks;

  /**
   * The run, each step in a `then` of the last rather than an async frame (issue 36: ~0.3 KB a suspended frame, on
   * every generation's path). Whatever it ends with, its reporters stop, its timer is cleared and its lease let go,
   * after the failure (if any) was told to the Lifecycle.
   */
  run(rec: GenerationRecord, model: RegisteredModel, abort: JobAbort, log: Logger, capacity?: RunCapacity): Promise<void> {
    const { clock } = this.options;
    // A remote job's time limit runs from its first start, across checks and restarts; a local run's from now.
    const remote = isRemoteJobProvider(model.provider);
    const now = clock.now();
    const deadline = (remote ? (rec.startedAt ?? now) : now) + model.timeoutMs;
    const timeout = clock.setTimeout(() => abort.abort(new TimeoutAbort(`timed out after ${model.timeoutMs} ms`)), Math.max(0, deadline - now));
    this.leases.hold(rec.id, abort);
    // Without a spread (V8's slow path and a temporary: issue 36); a capacity only when the run holds one.
    const run: Run = { rec, model, abort, log, deadline, handle: rec.remoteHandle };
    if (capacity) run.capacity = capacity;
    // Its progress and output reporters are made on the first report (run.ts): most providers make none.
    const ctx = new RunContext(run, this.results.files, this.sinks);
    const end = (): void => {
      ctx.stopProgress();
      ctx.stopOutput();
      clock.clearTimeout(timeout);
      this.leases.release(rec.id);
    };
    let running: Promise<void>;
    try {
      // A remote job checked after its time limit (a check that was due late, or a restart): time out now rather
      // than on a timer that a quick check would outrun.
      if (now >= deadline) abort.abort(new TimeoutAbort(`timed out after ${model.timeoutMs} ms`));
      if (abort.aborted) throw abort.reason;
      // Locally: its own model, then its fallbacks while one fails retryably or its provider is unavailable (fallbacks.ts).
      running = remote ? this.remoteTurn(run, ctx) : this.calls.generate(run, ctx).then((value) => this.localResult(run, ctx, value));
    } catch (err) {
      running = Promise.reject(err);
    }
    return running.then(end, (err: unknown) => {
      ctx.stopProgress();
      ctx.stopOutput();
      return this.failed(run, err, remote).then(end, (failure: unknown) => {
        end();
        throw failure;
      });
    });
  }

  /**
   * A local run's result kept: every delta and preview reported is in the log before the completion that follows it
   * (a provider that reported none has nothing to wait for).
   */
  private localResult(run: Run, ctx: RunContext, value: GenerationOutput): Promise<void> {
    ctx.stopProgress();
    const output = ctx.outputReporter;
    if (!output?.pending) {
      ctx.stopOutput();
      return this.results.finish(run, value, run.servedBy);
    }
    return output.flush().then(() => {
      ctx.stopOutput();
      return this.results.finish(run, value, run.servedBy);
    });
  }

  /** A remote job's turn: started or checked (remote-jobs.ts), and its result kept once it is done. */
  private async remoteTurn(run: Run, ctx: RunContext): Promise<void> {
    const step = await this.remote.step(run, ctx, async () => {
      await ctx.progressReporter?.flush();
      await ctx.outputReporter?.flush();
    });
    if (!step) return;
    ctx.stopProgress();
    await ctx.outputReporter?.flush();
    ctx.stopOutput();
    if ('error' in step) throw step.error;
    await this.results.finish(run, step.output);
  }

  /** What the run's failure was, told to the Lifecycle (which decides its code and fee). */
  private async failed(run: Run, err: unknown, remote: boolean): Promise<void> {
    const { rec, model, abort, log } = run;
    const reason: unknown = abort.aborted ? abort.reason : undefined;
    if (reason instanceof TimeoutAbort) {
      const publicMessage = `The generation took longer than ${Math.round(model.timeoutMs / 1000)} s.`;
      const failed = await this.lifecycle.failClaimed(rec, { cause: 'timeout', publicMessage, reason: reason.message });
      if (failed !== null && remote && run.handle !== undefined) await this.remote.cancelUpstream(run);
      return;
    }
    if (err instanceof LanePaused && !abort.aborted) {
      // The upstream asked to wait (or its lane is paused): the generation waits, parked, and spends no attempt.
      log.info({ retryInMs: err.delayMs }, "provider's lane paused; the generation waits");
      await this.remote.parkFor(run, err.delayMs);
      return;
    }
    if (abort.aborted) {
      // Cancelled (the canceller already failed it), shutting down or lease lost: an unfinished generation is
      // retried by recovery once its lease expires.
      log.info({ reason: reason instanceof Error ? reason.message : String(reason) }, 'generation run aborted');
      return;
    }
    if (!(err instanceof ProviderError)) log.error({ err: asError(err) }, 'provider threw an unexpected error');
    // Only a ProviderError's own publicMessage reaches the owner; anything else gets the generic sentence.
    await this.lifecycle.failClaimed(rec, {
      cause: err instanceof StorageUnavailable ? 'storage_unavailable' : 'provider_failed',
      ...(err instanceof ProviderError ? { providerCode: err.code } : {}),
      ...(err instanceof ProviderError && err.publicMessage !== undefined ? { publicMessage: err.publicMessage } : {}),
      reason: err instanceof Error ? err.message : String(err),
    });
  }
}
