import { inject, injectable } from 'tsyringe';
import { Cancellation } from '../lifecycle/cancellation.js';
import { Lifecycle } from '../lifecycle/lifecycle.js';
import type { GenerationOutput, RemoteJobProvider } from '../ports/provider.js';
import type { JobQueue } from '../ports/queue.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';
import { ProviderCalls } from './provider-calls.js';
import type { Run, RunContext } from './run.js';
import { jobOfRecord } from '../domain/fair-order.js';

/**
 * When to check a remote job again: every fifth of its estimated time (at least 250 ms) while it is within the
 * estimate, then a quarter of the time it has run so far, at most a minute apart.
 */
export function nextCheckDelay(estimatedSeconds: number, elapsedMs: number): number {
  const base = Math.max(250, (estimatedSeconds * 1000) / 5);
  return Math.round(Math.min(60_000, Math.max(base, elapsedMs / 4)));
}

/** How one check of a remote job ended: its output, its error, or nothing more to do on this run (parked, or let go). */
export type RemoteStep = { output: GenerationOutput } | { error: unknown } | null;

/**
 * One turn of a remote job (a provider with `start` / `check`): started once (its handle stored before the first
 * check, so a crash resumes the same upstream job), then checked; while it runs, the generation is parked (its lease
 * let go: a waiting job holds no concurrency slot) and its next check enqueued for when it is due.
 */
@injectable()
export class RemoteJobs {
  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(Lifecycle) private readonly lifecycle: Lifecycle,
    @inject(ProviderCalls) private readonly calls: ProviderCalls,
    @inject(Cancellation) private readonly cancellation: Cancellation,
    @inject(TOKENS.Queue) private readonly queue: JobQueue,
  ) {}

  /** Starts (when it has no handle yet) and checks the run's job; `beforePark` writes what the run reported so far. */
  async step(run: Run, ctx: RunContext, beforePark: () => Promise<void>): Promise<RemoteStep> {
    const { rec, model, log } = run;
    const remote = model.provider as RemoteJobProvider;
    if (run.handle === undefined) {
      const input = { model: model.definition, settings: rec.settings };
      const started = await this.calls.withRetries(() => this.calls.call('start', rec, () => remote.start(input, ctx)), model, run, { upstream: true });
      run.handle = started.handle;
      if (!(await this.lifecycle.setRemoteHandle(rec.id, run.handle))) {
        // Cancelled or taken over while it was being started: nobody will check this upstream job, so stop it.
        log.warn({}, 'remote job started after this worker lost the generation; cancelling it upstream');
        await this.cancelUpstream(run);
        return null;
      }
    }
    const handle = run.handle;
    const status = await this.calls.withRetries(() => this.calls.call('check', rec, () => remote.check(handle, ctx)), model, run, { upstream: true });
    if (status.status === 'running') {
      if (typeof status.progress === 'number') ctx.progress(status.progress, status.message);
      const now = this.options.clock.now();
      const delay = nextCheckDelay(model.info.estimatedGenerationTime, now - (rec.startedAt ?? now));
      await beforePark();
      await this.parkFor(run, delay);
      return null;
    }
    return status.status === 'done' ? { output: status.output } : { error: status.error };
  }

  /**
   * Lets go of the run's generation until its next turn, `delayMs` from now (a remote job's next check, or a run
   * whose provider's lane is paused), and enqueues that turn. Parked, it holds no slot.
   */
  async parkFor(run: Run, delayMs: number): Promise<void> {
    const { rec } = run;
    if (await this.lifecycle.park(rec.id, delayMs)) {
      await this.queue.enqueue(jobOfRecord(rec), { delayMs });
    } else run.log.warn({}, 'could not park the generation (lease lost)');
  }

  /** Tells the provider to stop the run's job: nobody will check it any more. */
  cancelUpstream(run: Run): Promise<void> {
    return this.cancellation.cancelUpstream(run.rec.modelId, run.rec.id, run.handle);
  }
}
