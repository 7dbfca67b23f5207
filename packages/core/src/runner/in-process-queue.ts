import type PQueueClass from 'p-queue';
import * as pQueueModule from 'p-queue';
import type { EnqueueOptions, Job, JobHandler, JobQueue, QueueStopOptions, RunnerSettings } from '../ports/queue.js';
import { systemClock } from '../clock.js';
import type { Clock, ClockTimer } from '../ports/clock.js';

/**
 * p-queue is ESM only. In this package's CommonJS build, Node's `require` of it yields its module namespace, which the
 * bundler's interop wraps once more: the class is `default` in ESM and `default.default` there.
 */
const PQueue: typeof PQueueClass = ((m: { default: unknown }) =>
  (typeof m.default === 'function' ? m.default : (m.default as { default: unknown }).default) as typeof PQueueClass)(pQueueModule as unknown as { default: unknown });
type PQueue = PQueueClass;

export interface InProcessQueueOptions {
  /** Jobs running at once over all models. Default: the service's `runner.concurrency`. */
  concurrency?: number;
  /** Jobs of one model running at once; undefined means only the global limit applies. Default: each model's `concurrency`. */
  modelConcurrency?: (modelId: string) => number | undefined;
  /**
   * Jobs kept while the queue is not started (an API-only instance never starts it). Beyond this they are not kept:
   * they stay `pending` in the store and recovery enqueues them when a worker starts. Default 10 000.
   */
  backlogLimit?: number;
  /** The clock of delayed jobs and of the stop's wait. Default: the system clock (the service gives its own to the queue it makes). */
  clock?: Clock;
}

/** A provider lane on this instance: its p-queue (the lane's `concurrency` here, paused while an upstream asked to wait). */
interface LaneSlots {
  queue: PQueue;
  /** When a pause ends, and its timer. */
  pausedUntil: number;
  timer?: ClockTimer;
}

/** One owner's waiting jobs, oldest first (a head index instead of shift() keeps taking O(1)). */
interface Lane {
  jobs: Job[];
  head: number;
}

/**
 * The embedded runner, in this process. Waiting jobs live in memory only; the store still holds them as `pending`,
 * and recovery enqueues them again on the next start, so a stop or crash loses none.
 *
 * Fair: each owner has a lane, and free slots go round-robin over the owners with waiting work, so a user with
 * thousands queued delays another user's job by at most one round. A model's `concurrency` limits its jobs further;
 * an owner whose next job's model is at its limit is skipped for that round, not waited on.
 *
 * The slots are p-queues: one for the global concurrency, one per model that has a limit, and one per provider lane
 * (`RunnerSettings.laneOf`: the lane's `concurrency` on this instance, paused by `pauseLane` while its upstream asked
 * to wait, started again on the clock). The fair choice of which
 * job goes next is made here, and a job is handed to p-queue only when it has a free slot, so p-queue never holds a
 * waiting job of its own (its order would be first come, first served); it runs, counts, pauses and tells when idle.
 */
export class InProcessQueue implements JobQueue {
  private concurrency: number;
  private modelConcurrency: ((modelId: string) => number | undefined) | undefined;
  private readonly lanes = new Map<string, Lane>();
  /** Owners with waiting jobs, in the order they get their next turn. */
  private ring: string[] = [];
  private readonly waiting = new Set<string>();
  private readonly running = new Map<string, AbortController>();
  /** Every running job holds one of these slots. Paused until `start`, and again from `stop`. */
  private readonly slots = new PQueue({ autoStart: false });
  /** The slots of each model with a `concurrency` of its own. */
  private readonly modelSlots = new Map<string, PQueue>();
  /** Each provider lane's slots on this instance (`RunnerSettings.laneOf`). */
  private readonly laneSlots = new Map<string, LaneSlots>();
  private laneOf: RunnerSettings['laneOf'];
  private handler: JobHandler | undefined;
  private stopped = false;
  private started = false;
  /** Delayed jobs (a remote job's next check), by generation id: one timer each, replaced by a newer delay. */
  private readonly delayed = new Map<string, ClockTimer>();
  private readonly clock: Clock;

  constructor(private readonly options: InProcessQueueOptions = {}) {
    this.concurrency = options.concurrency ?? 8;
    this.modelConcurrency = options.modelConcurrency;
    this.clock = options.clock ?? systemClock;
  }

  async enqueue(job: Job, options: EnqueueOptions = {}): Promise<void> {
    if (options.delayMs !== undefined && options.delayMs > 0) {
      // Kept in this process only: the store's parkedUntil is what recovery reschedules from after a restart.
      this.clock.clearTimeout(this.delayed.get(job.generationId));
      const timer = this.clock.setTimeout(() => {
        this.delayed.delete(job.generationId);
        void this.enqueue(job);
      }, options.delayMs);
      timer.unref?.();
      this.delayed.set(job.generationId, timer);
      return;
    }
    if (this.waiting.has(job.generationId) || this.running.has(job.generationId)) return;
    if (!this.started && this.waiting.size >= (this.options.backlogLimit ?? 10_000)) return;
    this.waiting.add(job.generationId);
    const owner = job.ownerId ?? '';
    let lane = this.lanes.get(owner);
    if (!lane) {
      lane = { jobs: [], head: 0 };
      this.lanes.set(owner, lane);
      this.ring.push(owner);
    }
    lane.jobs.push(job);
    this.pump();
  }

  /** The slots of a model with a limit of its own; undefined when only the global limit applies. */
  private slotsOf(modelId: string): PQueue | undefined {
    const limit = this.modelConcurrency?.(modelId);
    if (!limit) return undefined;
    let q = this.modelSlots.get(modelId);
    if (!q) {
      q = new PQueue({ concurrency: limit });
      this.modelSlots.set(modelId, q);
    } else if (q.concurrency !== limit) q.concurrency = limit;
    return q;
  }

  /** A lane's slots on this instance (made on first use), with the lane's current concurrency. */
  private lane(name: string, concurrency?: number): LaneSlots {
    let l = this.laneSlots.get(name);
    if (!l) {
      l = { queue: new PQueue({ concurrency: concurrency ?? Number.POSITIVE_INFINITY }), pausedUntil: 0 };
      this.laneSlots.set(name, l);
    } else if (concurrency !== undefined && l.queue.concurrency !== concurrency) l.queue.concurrency = concurrency;
    return l;
  }

  /** The lane slots of a job's model, when it has a lane. */
  private slotsOfLane(modelId: string): PQueue | undefined {
    const lane = this.laneOf?.(modelId);
    return lane ? this.lane(lane.lane, lane.concurrency).queue : undefined;
  }

  pauseLane(lane: string, ms: number): void {
    const l = this.lane(lane);
    const until = this.clock.now() + ms;
    if (until <= l.pausedUntil) return;
    l.pausedUntil = until;
    l.queue.pause();
    this.clock.clearTimeout(l.timer);
    l.timer = this.clock.setTimeout(() => {
      l.timer = undefined;
      l.queue.start();
      this.pump();
    }, ms);
    l.timer.unref?.();
  }

  /** Starts waiting jobs while there are free slots, one per owner per round. */
  private pump(): void {
    if (!this.started || this.stopped) return;
    let skipped = 0;
    while (this.slots.pending < this.slots.concurrency && this.ring.length > 0 && skipped < this.ring.length) {
      const owner = this.ring.shift()!;
      const lane = this.lanes.get(owner)!;
      const job = lane.jobs[lane.head]!;
      const model = this.slotsOf(job.modelId);
      const upstream = this.slotsOfLane(job.modelId);
      // A full model, or a provider lane that is full here or paused: this owner waits for the next round.
      if ((model && model.pending >= model.concurrency) || (upstream && (upstream.isPaused || upstream.pending >= upstream.concurrency))) {
        this.ring.push(owner);
        skipped++;
        continue;
      }
      skipped = 0;
      lane.head++;
      if (lane.head === lane.jobs.length) this.lanes.delete(owner);
      else {
        if (lane.head > 1024 && lane.head * 2 > lane.jobs.length) {
          lane.jobs = lane.jobs.slice(lane.head);
          lane.head = 0;
        }
        this.ring.push(owner);
      }
      this.waiting.delete(job.generationId);
      this.run(job, model, upstream);
    }
  }

  private run(job: Job, model: PQueue | undefined, lane: PQueue | undefined): void {
    const controller = new AbortController();
    this.running.set(job.generationId, controller);
    const handler = this.handler!;
    const run = (): Promise<void> => handler(job, controller.signal);
    const inLane = lane ? () => lane.add(run) : run;
    const task = model ? () => model.add(inLane) : inLane;
    // Every slot is free (pump checked), so p-queue starts the task now, within this call.
    const running = this.slots.add(task);
    // A handler that threw or rejected logged its own fault; its generation is recovered from the store later.
    const finished = (): void => {
      this.running.delete(job.generationId);
      this.pump();
    };
    running.then(finished, finished);
  }

  async start(handler: JobHandler, settings?: RunnerSettings): Promise<void> {
    // Explicit constructor options win; otherwise the service's settings apply.
    if (settings && this.options.concurrency === undefined) this.concurrency = settings.concurrency;
    if (settings && this.options.modelConcurrency === undefined) this.modelConcurrency = settings.modelConcurrency;
    this.laneOf = settings?.laneOf;
    this.handler = handler;
    this.slots.concurrency = this.concurrency;
    this.stopped = false;
    this.started = true;
    this.slots.start();
    this.pump();
  }

  async stop(options: QueueStopOptions = {}): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.started = false;
    this.slots.pause();
    // Waiting jobs are dropped: they are `pending` (or parked) in the store, and recovery enqueues them on the next start.
    for (const t of this.delayed.values()) this.clock.clearTimeout(t);
    this.delayed.clear();
    for (const l of this.laneSlots.values()) {
      this.clock.clearTimeout(l.timer);
      l.timer = undefined;
      l.pausedUntil = 0;
      l.queue.start();
    }
    this.lanes.clear();
    this.ring = [];
    this.waiting.clear();
    const timeoutMs = options.timeoutMs ?? 10_000;
    if (await this.idleWithin(timeoutMs)) return;
    for (const c of this.running.values()) c.abort(new Error('queue stopped'));
    // Handlers honour the signal; give them a moment to write their outcome.
    await this.idleWithin(1000);
  }

  /** Whether every running job finished within `ms`. */
  private async idleWithin(ms: number): Promise<boolean> {
    let timer: ClockTimer | undefined;
    const idle = await Promise.race([
      this.slots.onIdle().then(() => true),
      new Promise<boolean>((resolve) => {
        timer = this.clock.setTimeout(() => resolve(false), ms);
      }),
    ]);
    this.clock.clearTimeout(timer);
    return idle;
  }

  abort(generationId: string): boolean {
    const c = this.running.get(generationId);
    if (c) {
      c.abort(new Error('cancelled'));
      return true;
    }
    return false;
  }

  /** Jobs waiting plus running; for tests and metrics. */
  get size(): number {
    return this.waiting.size + this.running.size;
  }

  /** Jobs running now (a job held back by a full or paused lane is waiting, not running); for tests and metrics. */
  get active(): number {
    return this.running.size;
  }
}
