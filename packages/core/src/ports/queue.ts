export interface Job {
  generationId: string;
  modelId: string;
  /**
   * Whose generation it is. Queues take work round-robin across owners, so one user's flood cannot starve another
   * (a job without one, enqueued by an older version, counts as one shared owner).
   */
  ownerId?: string;
  /**
   * The priority its create asked (absent: `normal`). Queues order an owner's waiting work by it (`high` first,
   * `low` last); the runner reads it to check a `low` one's deadline before claiming it.
   */
  priority?: 'low' | 'normal' | 'high';
  /**
   * The create's trace context as propagation fields (`traceparent`, `tracestate`, and whatever else the host's
   * propagator writes, such as `baggage`), so its run continues it with everything it carried. A queue carries it
   * unchanged; absent without tracing and on a job re-enqueued from the store (its run then continues the
   * generation's stored `traceparent`).
   */
  trace?: Record<string, string>;
}

/** Runs one job. Resolves when the job is finished (whatever its outcome); rejects only on an infrastructure fault. */
export type JobHandler = (job: Job, signal: AbortSignal) => Promise<void>;

/**
 * The service's runner settings, handed to `start` so a host sets them once (on the service) and never repeats
 * them on the queue. A queue built with explicit values of its own keeps those.
 */
export interface RunnerSettings {
  /** Jobs this instance runs at once, over all models. */
  concurrency: number;
  /** The store lease of a running generation; a distributed queue's own lock must last at least this long. */
  leaseMs: number;
  /** Jobs of one model running at once on this instance; undefined: only `concurrency` applies. */
  modelConcurrency: (modelId: string) => number | undefined;
  /**
   * The provider lane of a model's jobs (`provider.capacity`), or undefined. An in-process queue may hold a lane's
   * waiting jobs back while this instance runs `concurrency` of them or the lane is paused (`pauseLane`); the runner
   * asks the lane's shared counters before each job either way, so a queue may ignore it.
   */
  laneOf?: (modelId: string) => { lane: string; concurrency?: number } | undefined;
  logger: import('./logger.js').Logger;
}

export interface QueueStopOptions {
  /** How long to wait for running jobs before aborting them. Default 10 s. */
  timeoutMs?: number;
}

/**
 * Hands generations to workers.
 *
 * Guarantees an implementation must give (the contract suite in @genservice/testing checks each):
 * - Every enqueued job is handed to a handler at least once, unless the queue is stopped before it starts;
 *   jobs of a stopped queue are not lost (a durable queue keeps them, the in-process queue's are recovered
 *   from the store on the next start).
 * - Enqueueing the same generationId twice while it is waiting runs it once (delayed jobs: the same id and delay).
 * - A delayed job is handed out no sooner than its delay (a durable queue keeps it across restarts; the in-process
 *   queue's are recovered from the store's `parkedUntil`).
 * - `start(handler, settings)` begins handing out jobs, with the service's runner settings; `stop()` stops taking new jobs and waits up to `timeoutMs` for
 *   running ones, then fires their AbortSignal.
 * - `enqueue` rejects with `UnavailableError` when the backing service cannot take the job.
 * - Fair: waiting work is taken round-robin across `ownerId`s, so with thousands waiting for one owner, another
 *   owner's job starts within about one round (before the first owner's next 2 x concurrency jobs).
 */
export interface EnqueueOptions {
  /**
   * Hand the job out no sooner than this many ms from now (a remote job's next check). A delayed job of a generation
   * does not dedupe against its running job: the runner enqueues the next check from inside the current one.
   */
  delayMs?: number;
  /**
   * The generation was just created and has never been enqueued, so no earlier job of it can exist: a queue may
   * skip its duplicate checks (a Redis round trip for BullMQ).
   */
  fresh?: boolean;
}

export interface JobQueue {
  enqueue(job: Job, options?: EnqueueOptions): Promise<void>;
  start(handler: JobHandler, settings: RunnerSettings): Promise<void>;
  stop(options?: QueueStopOptions): Promise<void>;
  /** Aborts the job if it is running on this instance. Returns true when it was. */
  abort?(generationId: string): boolean;
  /**
   * Holds back the waiting jobs of a provider lane for `ms` (an upstream's 429 `Retry-After`). Optional: the runner
   * hands a paused lane's jobs back, delayed, without it.
   */
  pauseLane?(lane: string, ms: number): void;
  /**
   * Resolves when the queue's backend answers (a Redis PING for BullMQ); rejects or hangs when it does not. Asked by
   * `<mount>/readyz` under its deadline. Absent: a queue without a backend of its own, always ready.
   */
  ping?(): Promise<unknown>;
}
