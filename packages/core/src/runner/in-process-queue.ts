import type { EnqueueOptions, Job, JobHandler, JobQueue, QueueStopOptions, RunnerSettings } from '../ports/queue.js';
import { JobAbort, jobAbortEntry, type JobAbortHandler } from './job-signal.js';

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
 */
export class InProcessQueue implements JobQueue {
  private concurrency: number;
  private modelConcurrency: ((modelId: string) => number | undefined) | undefined;
  private readonly lanes = new Map<string, Lane>();
  /** Owners with waiting jobs, in the order they get their next turn. */
  private ring: string[] = [];
  private readonly waiting = new Set<string>();
  private readonly running = new Map<string, JobAbort>();
  private readonly runningByModel = new Map<string, number>();
  private readonly settled = new Set<Promise<void>>();
  private handler: JobHandler | undefined;
  /** The runner's own entry when the handler has one: called with the JobAbort, so no AbortSignal is made per job. */
  private direct: JobAbortHandler<Job> | undefined;
  private stopped = false;
  private started = false;
  /** Delayed jobs (a remote job's next check), by generation id: one timer each, replaced by a newer delay. */
  private readonly delayed = new Map<string, NodeJS.Timeout>();

  constructor(private readonly options: InProcessQueueOptions = {}) {
    this.concurrency = options.concurrency ?? 8;
    this.modelConcurrency = options.modelConcurrency;
  }

  async enqueue(job: Job, options: EnqueueOptions = {}): Promise<void> {
    if (options.delayMs !== undefined && options.delayMs > 0) {
      // Kept in this process only: the store's parkedUntil is what recovery reschedules from after a restart.
      clearTimeout(this.delayed.get(job.generationId));
      const timer = setTimeout(() => {
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

  /** Starts waiting jobs while there are free slots, one per owner per round. */
  private pump(): void {
    if (!this.started || this.stopped) return;
    let skipped = 0;
    while (this.running.size < this.concurrency && this.ring.length > 0 && skipped < this.ring.length) {
      const owner = this.ring.shift()!;
      const lane = this.lanes.get(owner)!;
      const job = lane.jobs[lane.head]!;
      const limit = this.modelConcurrency?.(job.modelId);
      if (limit && (this.runningByModel.get(job.modelId) ?? 0) >= limit) {
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
      this.run(job);
    }
  }

  private run(job: Job): void {
    // One JobAbort per job, shared with the runner (which aborts it on a timeout or a lost lease): its AbortSignal is
    // made only if something reads it (see job-signal.ts).
    const abort = new JobAbort();
    this.running.set(job.generationId, abort);
    this.runningByModel.set(job.modelId, (this.runningByModel.get(job.modelId) ?? 0) + 1);
    const direct = this.direct;
    const handler = this.handler!;
    let running: Promise<void>;
    try {
      running = direct !== undefined ? direct(job, abort) : handler(job, abort.signal);
      // A host's handler that answered without a promise (its type asks for one) is taken as finished.
      if (typeof (running as Promise<void> | undefined)?.then !== 'function') running = Promise.resolve();
    } catch {
      running = Promise.resolve();
    }
    // One reaction per job (not an async wrapper and a finally): a handler that threw or rejected logged its own
    // fault, and its generation is recovered from the store later.
    const finished = (): void => {
      this.running.delete(job.generationId);
      const n = (this.runningByModel.get(job.modelId) ?? 1) - 1;
      if (n > 0) this.runningByModel.set(job.modelId, n);
      else this.runningByModel.delete(job.modelId);
      this.settled.delete(done);
      this.pump();
    };
    const done: Promise<void> = running.then(finished, finished);
    this.settled.add(done);
  }

  async start(handler: JobHandler, settings?: RunnerSettings): Promise<void> {
    // Explicit constructor options win; otherwise the service's settings apply.
    if (settings && this.options.concurrency === undefined) this.concurrency = settings.concurrency;
    if (settings && this.options.modelConcurrency === undefined) this.modelConcurrency = settings.modelConcurrency;
    this.handler = handler;
    this.direct = jobAbortEntry(handler);
    this.stopped = false;
    this.started = true;
    this.pump();
  }

  async stop(options: QueueStopOptions = {}): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.started = false;
    // Waiting jobs are dropped: they are `pending` (or parked) in the store, and recovery enqueues them on the next start.
    for (const t of this.delayed.values()) clearTimeout(t);
    this.delayed.clear();
    this.lanes.clear();
    this.ring = [];
    this.waiting.clear();
    const timeoutMs = options.timeoutMs ?? 10_000;
    let timer: NodeJS.Timeout | undefined;
    const idle = Promise.all([...this.settled]);
    const timedOut = await Promise.race([
      idle.then(() => false),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(true), timeoutMs);
      }),
    ]);
    clearTimeout(timer);
    if (timedOut) {
      for (const c of this.running.values()) c.abort(new Error('queue stopped'));
      // Handlers honour the signal; give them a moment to write their outcome.
      await Promise.race([Promise.all([...this.settled]), new Promise((r) => setTimeout(r, 1000))]);
    }
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
}
