import { randomUUID } from 'node:crypto';
import { inject, injectable } from 'tsyringe';
import { fairLineOf } from '../domain/fair-order.js';
import { spareLimits } from '../domain/priority.js';
import { ModelRegistry, type RegisteredModel } from '../domain/registry.js';
import { asError } from '../logger.js';
import type { CapacityFairness, CapacityStore } from '../ports/capacity.js';
import type { Logger } from '../ports/logger.js';
import type { Job, JobQueue } from '../ports/queue.js';
import type { GenerationStore } from '../ports/store.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';
import type { JobAbort } from './job-signal.js';
import { LanePaused, type RunCapacity, sleep } from './run.js';

/** How long a job refused for a full lane waits before it asks again (sooner when this instance frees a slot). */
export const CAPACITY_POLL_MS = 1000;
/** A refusal longer than this inside a run parks the generation instead of waiting in the run. */
const WAIT_IN_RUN_MS = 1000;
/** Jobs remembered per lane to wake when this instance frees a slot (the rest wait for their poll). */
const MAX_WAITERS = 10_000;

/**
 * Provider capacity (`provider.capacity`): every upstream request of a generation is asked of the lane's shared
 * counters (the `CapacityStore` port) first. Before a claim, a job whose lane is full is handed back to the queue
 * (delayed until the lane may have room): it stays `pending`, spends nothing and never fails. Within a run, each
 * further request (a retry, a remote job's check) asks again. A 429 with `Retry-After` pauses the lane on every
 * instance, and the run parks until then without spending an attempt (provider-calls.ts, execution.ts). A `low`
 * generation asks within `spareLimits` (domain/priority.ts): it never takes a lane's last slot.
 */
/** What a request of a lane reads of its run. */
type LaneRun = { rec: { settings: Record<string, unknown>; priority?: string }; capacity?: RunCapacity; abort: JobAbort };

@injectable()
export class CapacityGate {
  /** Jobs refused for a full lane on this instance, woken one per slot this instance frees. */
  private readonly waiters = new Map<string, Map<string, Job>>();

  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(ModelRegistry) private readonly registry: ModelRegistry,
    @inject(TOKENS.Capacity) private readonly counters: CapacityStore,
    @inject(TOKENS.Queue) private readonly queue: JobQueue,
    @inject(TOKENS.Store) private readonly store: GenerationStore,
    @inject(TOKENS.Logger) private readonly logger: Logger,
  ) {}

  /**
   * Before a claim: the lane's slot and one request for the job, or (answering null) the job handed back to the queue
   * for later. A model without a lane is admitted with nothing held.
   */
  async admit(job: Job): Promise<RunCapacity | null> {
    // Each admission its own permit: a duplicate job of a running generation never takes over the run's slot.
    const permitId = `${job.generationId}.${randomUUID().slice(0, 8)}`;
    const held = new Set<string>();
    const model = this.registry.get(job.modelId);
    const lane = model?.lane;
    if (!model || !lane) return { permitId, held };
    const now = this.options.clock.now();
    let grant: Awaited<ReturnType<CapacityStore['acquire']>>;
    try {
      // A low job takes spare capacity only (spareLimits); a queue that does not carry priority runs it as normal.
      // The others take the lane's turns: its free slots go to tenants by weight over every instance.
      const low = job.priority === 'low';
      const limits = low ? spareLimits(lane) : lane;
      const fair = low ? undefined : this.fairOf(job);
      grant = await this.counters.acquire(lane.lane, limits, { permitId, units: await this.unitsOf(model, job), now, holdMs: this.holdMs(model), ...(fair ? { fair } : {}) });
    } catch (err) {
      // The counters cannot be reached: the job waits (pending) rather than run past the limits or fail.
      this.logger.warn({ err: asError(err), lane: lane.lane }, 'provider capacity unavailable; the job waits');
      grant = { granted: false, retryAfterMs: CAPACITY_POLL_MS };
    }
    if (grant.granted) {
      // No longer waiting here: a slot this instance frees later must not wake it again (it would only ask once more).
      this.waiters.get(lane.lane)?.delete(job.generationId);
      held.add(lane.lane);
      return { permitId, held, fresh: { lane: lane.lane, at: now } };
    }
    if (grant.retryAfterMs === undefined) this.remember(lane.lane, job);
    await this.queue.enqueue(job, { delayMs: Math.max(1, grant.retryAfterMs ?? CAPACITY_POLL_MS) });
    return null;
  }

  /**
   * Before one provider call of a run on `model`: the request admission took (once), or a new one, waited for while
   * the lane is briefly full; undefined when there is nothing to ask (no lane). Rejects with LanePaused when the lane
   * is refused for longer (the run parks).
   */
  request(run: LaneRun, model: RegisteredModel): Promise<void> | undefined {
    const lane = model.lane;
    const capacity = run.capacity;
    // No lane (or a run that was admitted without one): nothing to ask, and no promise step for it.
    if (!lane || !capacity) return undefined;
    if (capacity.fresh?.lane === lane.lane) {
      capacity.fresh = undefined;
      return undefined;
    }
    return this.acquire(run, lane, capacity, model);
  }

  private async acquire(run: LaneRun, lane: NonNullable<RegisteredModel['lane']>, capacity: RunCapacity, model: RegisteredModel): Promise<void> {
    for (;;) {
      if (run.abort.aborted) throw run.abort.reason;
      const now = this.options.clock.now();
      const units = lane.units ? lane.units(run.rec.settings) : 1;
      const limits = run.rec.priority === 'low' ? spareLimits(lane) : lane;
      const grant = await this.counters.acquire(lane.lane, limits, { permitId: capacity.permitId, units, now, holdMs: this.holdMs(model) });
      if (grant.granted) {
        capacity.held.add(lane.lane);
        return;
      }
      if (grant.retryAfterMs !== undefined && grant.retryAfterMs > WAIT_IN_RUN_MS) throw new LanePaused(grant.retryAfterMs);
      await sleep(this.options.clock, grant.retryAfterMs ?? WAIT_IN_RUN_MS, run.abort);
    }
  }

  /** Pauses `model`'s lane on every instance for `ms` (an upstream's `Retry-After`). */
  async pause(model: RegisteredModel, ms: number): Promise<void> {
    if (!model.lane) return;
    this.queue.pauseLane?.(model.lane.lane, ms);
    await this.counters.pause(model.lane.lane, this.options.clock.now() + ms).catch((err: unknown) => {
      this.logger.warn({ err: asError(err), lane: model.lane?.lane }, 'could not pause the provider lane');
    });
  }

  /** Gives back what a run (or a job that was not claimed) holds, and wakes a job waiting here for each lane. */
  async release(capacity: RunCapacity | null): Promise<void> {
    if (!capacity) return;
    for (const lane of capacity.held) {
      const refund = capacity.fresh?.lane === lane ? { at: capacity.fresh.at } : undefined;
      await this.counters.release(lane, capacity.permitId, refund).catch((err: unknown) => {
        // The slot expires by itself (`holdMs`).
        this.logger.warn({ err: asError(err), lane }, 'could not release a provider lane slot');
      });
      this.wake(lane);
    }
    capacity.held.clear();
    capacity.fresh = undefined;
  }

  private remember(lane: string, job: Job): void {
    let w = this.waiters.get(lane);
    if (!w) {
      w = new Map();
      this.waiters.set(lane, w);
    }
    if (w.size < MAX_WAITERS) w.set(job.generationId, job);
  }

  private wake(lane: string): void {
    const w = this.waiters.get(lane);
    const next = w?.entries().next();
    if (!w || !next || next.done) return;
    const [id, job] = next.value;
    w.delete(id);
    // Its delayed turn is still due; whichever comes first is admitted, the other finds it claimed.
    this.queue.enqueue(job).catch(() => undefined);
  }

  /** The job's tenant and weight in the lane's turns (the fair order's own: domain/fair-order.ts). */
  private fairOf(job: Job): CapacityFairness {
    const line = fairLineOf(job);
    return { tenant: line.tenant, weight: line.weight, waiter: job.generationId };
  }

  /** A slot is held no longer than the run can last (its model's time limit), plus a lease of slack. */
  private holdMs(model: RegisteredModel): number {
    return model.timeoutMs + this.options.runner.leaseMs;
  }

  private async unitsOf(model: RegisteredModel, job: Job): Promise<number> {
    const units = model.lane?.units;
    if (!units) return 1;
    const rec = await this.store.getById(job.generationId);
    return rec ? units(rec.settings) : 1;
  }
}
