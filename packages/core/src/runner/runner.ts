import { inject, injectable } from 'tsyringe';
import { ModelRegistry } from '../domain/registry.js';
import type { GenerationRecord } from '../domain/types.js';
import { Lifecycle } from '../lifecycle/lifecycle.js';
import { childLogger, silentLogger } from '../logger.js';
import type { Logger } from '../ports/logger.js';
import type { Job, JobSignal } from '../ports/queue.js';
import { contextRead, withRequestContext } from '../request-context.js';
import { continuedContext, Telemetry } from '../telemetry.js';
import { TOKENS } from '../tokens.js';
import { Execution } from './execution.js';
import { JobAbort } from './job-signal.js';
import type { RunCapacity } from './run.js';
import { CapacityGate } from './capacity-gate.js';


/**
 * Runs one generation: claim it, then run it (execution.ts: a deadline, retries, fallbacks or a remote job's turn,
 * the result kept). Every state change is the Lifecycle's; the runner owns only running, retrying, timing out and
 * keeping leases. Every queue (in-process or distributed) hands its jobs here, so they all behave alike.
 */
@injectable()
export class Runner {
  private readonly logger: Logger;
  /** Whether any provider declares a lane (`provider.capacity`): without one a run has nothing to admit or give back. */
  private readonly lanes: boolean;

  constructor(
    @inject(Lifecycle) private readonly lifecycle: Lifecycle,
    @inject(ModelRegistry) private readonly registry: ModelRegistry,
    @inject(Execution) private readonly execution: Execution,
    @inject(Telemetry) private readonly telemetry: Telemetry,
    @inject(CapacityGate) private readonly gate: CapacityGate,
    @inject(TOKENS.Logger) logger: Logger,
  ) {
    this.logger = childLogger(logger, { component: 'runner' });
    this.lanes = registry.all().some((m) => m.lane !== undefined);
  }

  /**
   * Runs a job handed out with its signal (any queue): the run follows that signal (the in-process queue's own is
   * taken as it is, and needs no unfollowing). Without an async frame of its own (issue 36: an await costs ~0.4 KB).
   */
  run(job: Job, queueSignal: JobSignal): Promise<void> {
    const { abort, unfollow } = JobAbort.following(queueSignal);
    // Every log line of the run carries its generation id (and its trace id, in its span); without a contextual
    // logger nothing reads it, and no context is made.
    const running = contextRead() ? withRequestContext({ generationId: job.generationId }, () => this.start(job, abort)) : this.start(job, abort);
    return unfollow === JobAbort.nothingToUnfollow ? running : running.finally(unfollow);
  }

  private start(job: Job, abort: JobAbort): Promise<void> {
    return this.lanes ? this.runJob(job, abort) : this.claimAndRun(job, abort, undefined);
  }

  /** The run itself, with the abort that follows its queue's signal (the runner aborts it on a timeout or a lost lease). */
  private async runJob(job: Job, abort: JobAbort): Promise<void> {
    // Its provider's lane first (provider.capacity): a full lane hands the job back to the queue, still pending.
    const capacity = await this.gate.admit(job);
    if (!capacity) return;
    try {
      await this.claimAndRun(job, abort, capacity);
    } finally {
      await this.gate.release(capacity);
    }
  }

  /** The claim, then the run of what it claimed: each in a `then` of the last, not an await (issue 36: ~0.3 KB a frame). */
  private claimAndRun(job: Job, abort: JobAbort, capacity: RunCapacity | undefined): Promise<void> {
    // The Lifecycle decides whether it may run at all (its model is there, it has not lost its worker too often).
    // Refused: someone else holds it, it is finished, or it was given up; nothing to do.
    try {
      return this.lifecycle.claim(job).then((rec) => (rec ? this.runClaimed(rec, job, abort, capacity) : undefined));
    } catch (err) {
      return Promise.reject(err);
    }
  }

  private runClaimed(rec: GenerationRecord, job: Job, abort: JobAbort, capacity: RunCapacity | undefined): Promise<void> | undefined {
    const model = this.registry.get(rec.modelId);
    if (!model) return; // Not reached: claim refuses a generation whose model is gone.
    // The run continues the create's trace (stored with the generation), on whichever instance it runs.
    // Two literals, not a property added later (a second allocation for its backing store).
    const attributes: Record<string, string | number> =
      rec.startedAt !== undefined
        ? { 'genservice.generation_id': rec.id, 'genservice.model': rec.modelId, 'genservice.claim': rec.claims, 'genservice.queue_wait_ms': rec.startedAt - rec.createdAt }
        : { 'genservice.generation_id': rec.id, 'genservice.model': rec.modelId, 'genservice.claim': rec.claims };
    // With the default silent logger there is nothing to bind: no child (and its bindings) per run.
    const log = this.logger === silentLogger ? silentLogger : childLogger(this.logger, { generationId: rec.id, modelId: rec.modelId, claim: rec.claims });
    // Counted as running until the run settles; its time feeds the wait estimate of the generations still queued.
    const ended = this.telemetry.running();
    let running: Promise<void>;
    try {
      running = this.telemetry.inSpan(
        'genservice.run',
        attributes,
        () => {
          if (log !== silentLogger) log.info({ status: 'processing' }, 'generation processing');
          return this.execution.run(rec, model, abort, log, capacity);
        },
        continuedContext(job.trace, rec.traceparent),
      );
    } catch (err) {
      ended();
      throw err;
    }
    return running.then(ended, (err: unknown) => {
      ended();
      throw err;
    });
  }
}
