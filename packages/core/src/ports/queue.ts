export interface Job {
  generationId: string;
  modelId: string;
  /**
   * Whose generation it is. Queues take work round-robin across owners, so one user's flood cannot starve another
   * (a job without one, enqueued by an older version, counts as one shared owner).
   */
  ownerId?: string;
  /**
   * The organisation the owner belongs to, when it belongs to one, as the create's reserve read it (no lookup of its
   * own). Queues share their runners across organisations by `weight`, then round-robin across the organisation's
   * users. Absent: the owner is a tenant of its own, of weight 1 (a user of no organisation, and a job re-enqueued
   * from the store by recovery).
   */
  organizationId?: string;
  /**
   * The organisation's weight, its share of the runners when every tenant has work waiting (plan tiers 5 / 2 / 1
   * give 5 / 2 / 1 eighths). A positive number; default 1; ignored without `organizationId`.
   */
  weight?: number;
  /**
   * Within its tenant's share, `high` goes before `normal` before `low`; `low` runs only on spare capacity (when no
   * `normal` or `high` job of anyone waits). Default `normal`. The runner reads it too, to check a `low` one's
   * deadline before claiming it.
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

/**
 * How a queue tells a running job to stop (the queue stops, or `abort` is called): the part of an AbortSignal a job
 * reads. A queue may hand a real AbortSignal (the durable queues do); the in-process queue hands a lighter object
 * that makes no AbortController per job (issue 36: a Node 20 AbortSignal costs microseconds to make and to follow).
 */
export interface JobSignal {
  readonly aborted: boolean;
  readonly reason: unknown;
  /** `listener` is called once, when the job is aborted (never when added after). */
  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: 'abort', listener: () => void): void;
}

/** Runs one job. Resolves when the job is finished (whatever its outcome); rejects only on an infrastructure fault. */
export type JobHandler = (job: Job, signal: JobSignal) => Promise<void>;

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
 *   running ones, then fires their signal.
 * - `enqueue` rejects with `UnavailableError` when the backing service cannot take the job.
 * - Fair: waiting work is handed out in the order of `@genservice/core/ports`' `fairLineOf` / `fairTagUnits`:
 *   weighted across organisations (`organizationId`, `weight`; a job without one is its owner's own tenant of weight
 *   1), round-robin across the users of one, `high` before `normal` within a tenant's share, `low` only when nothing
 *   else waits. So with thousands waiting for one tenant, another tenant's next job starts within about one round
 *   (before the first tenant's next 2 x concurrency jobs), and with every tenant busy their shares follow the weights.
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

/** Where a waiting job stands in its queue. */
export interface QueuePosition {
  /** Waiting jobs that will be handed out before this one if nothing else arrives (running jobs not counted). */
  aheadOfYou: number;
  /** `aheadOfYou + 1`. */
  position: number;
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
  /**
   * Where the generation's job waits, in the queue's own order (see "Fair" above); undefined when it is not waiting
   * (running, delayed, finished, or unknown to the queue). A count over the waiting jobs: cheap enough for a poll, not
   * for a loop. Absent: the queue cannot tell.
   */
  position?(generationId: string): Promise<QueuePosition | undefined>;
}
