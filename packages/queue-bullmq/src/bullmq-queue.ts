import { DelayedError, Queue, Worker, type Job as BullJob, type RedisOptions } from 'bullmq';
import {
  UnavailableError,
  silentLogger,
  type EnqueueOptions,
  type Job,
  type JobHandler,
  type JobQueue,
  type Logger,
  type QueuePosition,
  type QueueStopOptions,
  type RunnerSettings,
  enqueueWithin,
  fairLineOf,
  jobFields,
  messageOf as message,
  within,
} from '@genservice/core/ports';
import { FAIR_PLACE_LUA, FAIR_RELEASE_LUA, FAIR_SUFFIX, installFairAdd, POSITION_LUA } from './fair-add.js';

export interface BullMQQueueOptions {
  /**
   * Where Redis is: a `redis://` / `rediss://` URL, or ioredis options (not a client: this queue opens and closes
   * its own connections, because they need different settings). Every connection this queue opens is made
   * from it (see "Connections" on {@link BullMQQueue}). Without a `retryStrategy` of your own, a lost connection is
   * retried every 0.25-2 s, so work resumes within about two seconds of Redis coming back.
   */
  connection: string | RedisOptions;
  /** BullMQ queue name; every instance of one service must use the same. Default `genservice`. */
  queueName?: string;
  /** BullMQ key prefix in Redis. Default `bull` (BullMQ's own). */
  prefix?: string;
  /** Jobs this instance runs at once. Default: the service's `runner.concurrency` (handed over at start). */
  concurrency?: number;
  /**
   * How long BullMQ's lock on a running job lasts without renewal (renewed every half of it). When an instance
   * dies, its jobs go back to the queue this long after its last renewal. Default: the service's `runner.leaseMs`
   * (handed over at start). A value below it is raised to it: a job handed out again before the store lease of the
   * dead worker ran out would find the generation still leased and be dropped, leaving it to the next recovery pass.
   */
  lockDurationMs?: number;
  /**
   * Times a job may lose its worker (lock expired) before BullMQ fails it. The service's `runner.maxClaims` is what
   * bounds attempts (and charges the failure fee); keep this above it so BullMQ keeps handing the job out until the
   * store gives up on it. Default 10.
   */
  maxStalledCount?: number;
  /** How often workers look for jobs whose lock expired. Default: the lock duration. */
  stalledIntervalMs?: number;
  /** How long `enqueue` waits for Redis before answering UnavailableError (HTTP 503). Default 1000. */
  enqueueTimeoutMs?: number;
  /** Redis outages and handler faults are reported here (throttled). Default: the service's logger (handed over at start). */
  logger?: Logger;
}

/** The signal reason of a job aborted because its queue is stopping. */
class QueueStoppedError extends Error {
  override readonly name = 'QueueStoppedError' as const;
}

const JOB_NAME = 'generation';
/** After the stop deadline aborted the running jobs: how long they get to wind down before we stop waiting. */
const ABORT_GRACE_MS = 1000;
/** After that: how long BullMQ gets to hand the unfinished jobs back to Redis and close its connections. */
const CLOSE_GRACE_MS = 5000;
/** Worker retry delay after a Redis command failed (BullMQ's default of 15 s makes recovery after an outage slow). */
const RUN_RETRY_DELAY_MS = 1000;

/** The ioredis commands used beside BullMQ's own (its client type does not declare them). */
interface RedisCommands {
  ping(): Promise<string>;
  defineCommand(name: string, definition: { numberOfKeys: number; lua: string }): void;
  [RELEASE_COMMAND]?: (key: string, ...lineMemberTenantPriority: string[]) => Promise<unknown>;
  [PLACE_COMMAND]?: (key: string, prioritized: string, data: string) => Promise<number>;
  [POSITION_COMMAND]?: (key: string, jobId: string) => Promise<number>;
}

/** How long started jobs are gathered before they are counted out of their owners' lines in one command. */
const RELEASE_WINDOW_MS = 5;

/** The fair order's scripts as commands of the connection: sent by their SHA (EVALSHA), not as text every time. */
const RELEASE_COMMAND = 'genserviceFairRelease';
const PLACE_COMMAND = 'genserviceFairPlace';
const POSITION_COMMAND = 'genservicePosition';

function defineCommands(client: RedisCommands): void {
  if (typeof client[RELEASE_COMMAND] === 'function') return;
  client.defineCommand(RELEASE_COMMAND, { numberOfKeys: 1, lua: FAIR_RELEASE_LUA });
  client.defineCommand(PLACE_COMMAND, { numberOfKeys: 2, lua: FAIR_PLACE_LUA });
  client.defineCommand(POSITION_COMMAND, { numberOfKeys: 1, lua: POSITION_LUA });
}

/** Counts started jobs out of their lines: `starts` holds line, member and tenant for each. */
function releaseSlots(client: RedisCommands, key: string, starts: string[]): Promise<unknown> {
  defineCommands(client);
  return client[RELEASE_COMMAND]!(key, ...starts);
}

/** The release arguments of one started job. */
function startOf(data: Job): string[] {
  const line = fairLineOf(data);
  return [line.line, line.member, line.tenant];
}

interface OpenQueue {
  queue: Queue<Job>;
  /**
   * Whether this connection adds a fresh job and counts its owner's place in one round trip (see fair-add.ts):
   * a promise until that is known, then the answer; undefined after the connection failed while it was being found
   * out (asked again on the next enqueue).
   */
  fair: Promise<boolean> | boolean | undefined;
  /** The connection's client once it is known (so a job does not wait a tick for an already resolved promise). */
  client?: RedisCommands;
  /** Jobs that started, not yet counted out of their lines in Redis (three arguments each, see `startOf`). */
  releases: string[];
  /** Became ready at least once; after that the offline queue being off makes commands fail fast by themselves. */
  ready: boolean;
  lastError: unknown;
}

/**
 * A {@link JobQueue} on BullMQ 5 (Redis), so that any instance of a service can accept a create and any instance's
 * worker can run it.
 *
 * Delivery is at least once: a job whose worker died (or whose event loop stalled past `lockDurationMs`) is handed
 * out again. Exactly-once effects come from the store: the executor claims the generation under a lease and
 * completes it only while it still holds that lease, and the ledger settles once per generation.
 *
 * Connections (per instance): one for the producer `Queue` (opened by the constructor, offline queue off so that
 * `enqueue` fails fast while Redis is down), and two for the `Worker` (commands, and the blocking connection that
 * waits for jobs), opened by `start()`. An API-only instance (`runner.enabled: false`) never starts a worker and
 * holds one. `stop()` closes all of them; `start()` or `enqueue()` after a stop opens them again.
 */
export class BullMQQueue implements JobQueue {
  private readonly name: string;
  private readonly prefix: string | undefined;
  private readonly base: RedisOptions;
  private readonly given: BullMQQueueOptions;
  private concurrency: number;
  private lockDurationMs: number;
  private stalledIntervalMs: number;
  private readonly maxStalledCount: number;
  private readonly enqueueTimeoutMs: number;
  private logger: Logger;

  private producer: OpenQueue | undefined;
  private worker: Worker<Job, void> | undefined;
  private handler: JobHandler | undefined;
  /** Aborting it makes every job still running on the current worker let go (the last step of a forced stop). */
  private letGo = new AbortController();
  private readonly running = new Map<string, AbortController>();
  /** The trace context each running job carried, by generation: its next check (enqueued from inside it) carries it on. */
  private readonly carried = new Map<string, Record<string, string>>();
  private stopping: Promise<void> | undefined;
  private readonly lastLogged = new Map<string, number>();

  constructor(options: BullMQQueueOptions) {
    if (!options || options.connection === undefined || options.connection === null) {
      throw new TypeError('BullMQQueue: options.connection (a Redis URL or ioredis options) is required');
    }
    this.name = options.queueName ?? 'genservice';
    this.prefix = options.prefix;
    const given: RedisOptions = typeof options.connection === 'string' ? { url: options.connection } : { ...options.connection };
    this.base = { retryStrategy: (times: number) => Math.min(250 * times, 2000), ...given };
    this.given = options;
    this.concurrency = options.concurrency ?? 8;
    this.lockDurationMs = options.lockDurationMs ?? 30_000;
    this.stalledIntervalMs = options.stalledIntervalMs ?? this.lockDurationMs;
    this.maxStalledCount = options.maxStalledCount ?? 10;
    this.enqueueTimeoutMs = options.enqueueTimeoutMs ?? 1000;
    this.logger = options.logger ?? silentLogger;
    if (!(this.concurrency >= 1) || !(this.lockDurationMs > 0) || !(this.stalledIntervalMs > 0) || !(this.enqueueTimeoutMs > 0)) {
      throw new RangeError('BullMQQueue: concurrency must be >= 1 and lockDurationMs, stalledIntervalMs, enqueueTimeoutMs > 0');
    }
    // Connect now, so the first request does not pay for it and an unreachable Redis is known before it comes.
    this.openProducer();
  }

  /**
   * Counts a job out of its line, together with the others that start within RELEASE_WINDOW_MS: one command for all
   * of them. Until then its line's count is that many too high, so the line's next jobs queue that much further back
   * (never ahead of anyone).
   */
  private release(open: OpenQueue, data: Job): void {
    open.releases.push(...startOf(data));
    if (open.releases.length === 3) {
      setTimeout(() => void this.flushReleases(open), RELEASE_WINDOW_MS).unref?.();
    }
  }

  private async flushReleases(open: OpenQueue): Promise<void> {
    const starts = open.releases.splice(0);
    if (starts.length === 0) return;
    try {
      const client = open.client ?? ((await open.queue.client) as unknown as RedisCommands);
      await releaseSlots(client, this.fairKey(), starts);
    } catch (err) {
      // The counts stay high until these owners' lines empty; their jobs still run, only ordered a little later.
      this.report('queue', err);
    }
  }

  /** Finds out (once per connection) whether enqueues can take the one-round-trip path; see fair-add.ts. */
  private installFair(open: OpenQueue): Promise<boolean> {
    const fair = installFairAdd(open.queue as unknown as Queue).then(
      (ok) => {
        open.fair = ok;
        if (!ok) {
          this.logger.warn(
            { component: 'queue-bullmq' },
            'the installed BullMQ does not have the addPrioritizedJob script this version knows: every enqueue takes two Redis round trips (same fairness)',
          );
        }
        return ok;
      },
      () => {
        // The connection failed first: nothing was changed; the next enqueue asks again.
        open.fair = undefined;
        return false;
      },
    );
    open.fair = fair;
    return fair;
  }

  private openProducer(): OpenQueue {
    if (this.producer) return this.producer;
    const queue = new Queue<Job>(this.name, {
      prefix: this.prefix,
      // Without the offline queue, a command while Redis is down fails at once instead of waiting for a reconnect
      // that may never come: the create answers 503 and nothing stays reserved.
      connection: { ...this.base, enableOfflineQueue: false, maxRetriesPerRequest: 1 },
    });
    const open: OpenQueue = { queue, ready: false, lastError: undefined, fair: undefined, releases: [] };
    this.installFair(open);
    queue.client.then(
      (client) => {
        open.client = client as unknown as RedisCommands;
      },
      () => undefined,
    );
    queue.on('error', (err: unknown) => {
      open.lastError = err;
      this.report('queue', err);
    });
    queue.waitUntilReady().then(
      () => {
        open.ready = true;
      },
      (err: unknown) => {
        open.lastError = err;
      },
    );
    this.producer = open;
    return open;
  }

  async enqueue(job: Job, options: EnqueueOptions = {}): Promise<void> {
    const open = this.openProducer();
    if (!open.ready && open.lastError !== undefined) {
      // Never connected and the last attempt failed: answer now rather than after the timeout.
      throw new UnavailableError(`Redis is unreachable: ${message(open.lastError)}`, { cause: open.lastError });
    }
    const data = jobFields(job);
    // The create's trace context travels in the job's data, so the run on another instance continues it whole; a
    // remote job's next check, enqueued from inside its running job, carries that job's.
    const trace = job.trace ?? this.carried.get(job.generationId);
    if (trace !== undefined) data.trace = trace;
    await enqueueWithin(this.add(open, data, options.fresh === true, options.delayMs ?? 0), this.enqueueTimeoutMs, data.generationId, 'Redis');
  }

  /** Redis hash of the fair order's counts: a job's priority is its tag in that order (see fair-add.ts). */
  private prioritizedKey(): string {
    return `${this.prefix ?? 'bull'}:${this.name}:prioritized`;
  }

  private fairKey(): string {
    return `${this.prefix ?? 'bull'}:${this.name}:${FAIR_SUFFIX}`;
  }

  private async add(open: OpenQueue, data: Job, fresh: boolean, delayMs: number): Promise<void> {
    const queue = open.queue;
    // The jobId makes a second enqueue of a waiting or running generation a no-op. A failed job is kept a day for
    // inspection and would swallow the enqueue of recovery the same way, so it is cleared first: the store, not
    // BullMQ, decides whether a generation is finished.
    // A fresh generation has no earlier job, so that round trip is skipped on the create path.
    // A remote job's next check is added from inside its current job (still active under the generation's id), so it
    // gets an id of its own: the generation and the second it is due (a repeat for the same time is deduplicated).
    const delayed = delayMs > 0;
    const jobId = delayed ? `${data.generationId}:check:${Math.ceil((Date.now() + delayMs) / 1000)}` : data.generationId;
    if (!fresh && !delayed) {
      const state = await queue.getJobState(data.generationId);
      if (state === 'failed' || state === 'completed') await queue.remove(data.generationId);
    }
    // The fair order: a job's priority is its tag (weighted across organisations, round-robin across users, by
    // priority), and BullMQ runs lower priorities first (FIFO within one).
    if (!delayed && (open.fair === true || (open.fair !== false && (await (open.fair ?? this.installFair(open)))))) {
      // One round trip: this connection's addPrioritizedJob counts the job into its line and makes its tag the
      // priority (the 1 here only makes BullMQ choose that script; see fair-add.ts).
      await queue.add(JOB_NAME, data, { jobId, priority: 1, removeOnComplete: true, removeOnFail: { age: 86_400 } });
      return;
    }
    const client = (await queue.client) as unknown as RedisCommands;
    defineCommands(client);
    const priority = Number(await client[PLACE_COMMAND]!(this.fairKey(), this.prioritizedKey(), JSON.stringify(data)));
    try {
      await queue.add(JOB_NAME, data, {
        jobId,
        ...(delayed ? { delay: delayMs } : {}),
        priority,
        removeOnComplete: true,
        removeOnFail: { age: 86_400 },
      });
    } catch (err) {
      await releaseSlots(client, this.fairKey(), startOf(data)).catch(() => undefined);
      throw err;
    }
  }

  async start(handler: JobHandler, settings?: RunnerSettings): Promise<void> {
    if (this.stopping) await this.stopping;
    this.handler = handler;
    if (this.worker) return;
    if (settings) {
      // The service's settings, so a host sets them once; explicit options of this queue win, but the lock never
      // runs out before the store lease does.
      this.concurrency = this.given.concurrency ?? settings.concurrency;
      this.lockDurationMs = Math.max(this.given.lockDurationMs ?? settings.leaseMs, settings.leaseMs);
      this.stalledIntervalMs = this.given.stalledIntervalMs ?? this.lockDurationMs;
      if (!this.given.logger) this.logger = settings.logger;
    }
    this.openProducer();
    const letGo = new AbortController();
    this.letGo = letGo;
    // Each running job's way to stop waiting for its handler; all are called when letGo aborts (a Set, not a listener
    // per job on the signal: adding and removing EventTarget listeners costs more than the rest of a job's wait).
    const waiting = new Set<() => void>();
    letGo.signal.addEventListener('abort', () => {
      for (const stopWaiting of waiting) stopWaiting();
      waiting.clear();
    }, { once: true });
    // Two parameters, not three: BullMQ then makes no AbortControllers of its own; this class keeps them.
    const worker = new Worker<Job, void>(this.name, (job: BullJob<Job, void>, token?: string) => this.run(job, token, letGo.signal, waiting), {
      prefix: this.prefix,
      connection: { ...this.base, maxRetriesPerRequest: null },
      concurrency: this.concurrency,
      lockDuration: this.lockDurationMs,
      stalledInterval: this.stalledIntervalMs,
      maxStalledCount: this.maxStalledCount,
      runRetryDelay: RUN_RETRY_DELAY_MS,
    });
    // Without a listener an 'error' event would crash the process; BullMQ reconnects by itself.
    worker.on('error', (err: unknown) => this.report('worker', err));
    this.worker = worker;
  }

  private async run(job: BullJob<Job, void>, token: string | undefined, letGo: AbortSignal, waiting: Set<() => void>): Promise<void> {
    const handler = this.handler;
    // By generation, not BullMQ job id: a remote job's delayed check has an id of its own, and abort() names the generation.
    const id = job.data.generationId;
    if (!handler) return;
    // It left the line: the owner's next job moves up. Only on the first start (a stalled job handed out again, or
    // one moved back to delayed, was counted out already).
    // Not waited for: the job need not wait a round trip to start. The jobs that start within a few milliseconds are
    // counted out together, in one command.
    if (job.attemptsStarted <= 1) this.release(this.openProducer(), job.data);
    const controller = new AbortController();
    this.running.set(id, controller);
    if (job.data.trace !== undefined) this.carried.set(id, job.data.trace);
    let finished = false;
    const running = (async (): Promise<void> => {
      try {
        await handler(job.data, controller.signal);
      } catch (err) {
        // Completing the BullMQ job anyway: the generation is still unfinished in the store, and recovery
        // enqueues it again; a failed BullMQ job would only sit in Redis.
        this.report('handler', err, { generationId: job.data.generationId });
      } finally {
        finished = true;
      }
    })();
    try {
      // Removed from `waiting` when it ends: racing every job against one long-pending promise would leak.
      await new Promise<void>((resolve) => {
        if (letGo.aborted) return resolve();
        waiting.add(resolve);
        void running.then(() => {
          waiting.delete(resolve);
          resolve();
        });
      });
    } finally {
      if (this.running.get(id) === controller) {
        this.running.delete(id);
        this.carried.delete(id);
      }
    }
    if (!finished || controller.signal.reason instanceof QueueStoppedError) {
      // Stopped before it finished: hand it back for another instance, once the store lease of this run has run
      // out (lockDurationMs >= leaseMs), so that instance's claim succeeds.
      await job.moveToDelayed(Date.now() + this.lockDurationMs, token);
      throw new DelayedError();
    }
  }

  stop(options: QueueStopOptions = {}): Promise<void> {
    this.stopping ??= this.shutdown(options.timeoutMs ?? 10_000).finally(() => {
      this.stopping = undefined;
    });
    return this.stopping;
  }

  private async shutdown(timeoutMs: number): Promise<void> {
    const worker = this.worker;
    const letGo = this.letGo;
    this.worker = undefined;
    if (worker) {
      // close() takes no new job (it also breaks off the blocking wait), waits for running ones, then closes the
      // worker's connections. Waiting jobs stay in Redis for the other instances.
      const closed = worker.close();
      if (!(await within(closed, timeoutMs))) {
        for (const controller of this.running.values()) controller.abort(new QueueStoppedError('queue stopped'));
        if (!(await within(closed, ABORT_GRACE_MS))) {
          // A handler that ignores its signal: stop waiting for it (its late writes are refused by the store lease).
          letGo.abort();
          if (!(await within(closed, CLOSE_GRACE_MS))) {
            this.logger.warn({ component: 'queue-bullmq' }, 'worker did not close in time (is Redis reachable?); giving up waiting');
          }
        }
      }
    }
    const producer = this.producer;
    this.producer = undefined;
    if (producer) {
      // The last jobs' owners are counted out before the connection closes.
      await within(this.flushReleases(producer), CLOSE_GRACE_MS);
      await within(producer.queue.close(), CLOSE_GRACE_MS);
    }
  }

  /** A PING on the producer's connection (no offline queue: fails at once while Redis is down); for `readyz`. */
  async ping(): Promise<unknown> {
    const open = this.openProducer();
    const client = open.client ?? ((await open.queue.client) as unknown as RedisCommands);
    return client.ping();
  }

  /** Where the generation's job waits: the jobs before it in BullMQ's prioritized set (one script, one round trip). */
  async position(generationId: string): Promise<QueuePosition | undefined> {
    const open = this.openProducer();
    const client = open.client ?? ((await open.queue.client) as unknown as RedisCommands);
    defineCommands(client);
    const ahead = Number(await client[POSITION_COMMAND]!(this.prioritizedKey(), generationId));
    return ahead < 0 ? undefined : { aheadOfYou: ahead, position: ahead + 1 };
  }

  abort(generationId: string): boolean {
    const controller = this.running.get(generationId);
    if (!controller) return false;
    controller.abort(new Error('cancelled'));
    return true;
  }

  /** Job counts in Redis (waiting, active, delayed, failed, ...), for metrics and operators. */
  async counts(): Promise<Record<string, number>> {
    return this.openProducer().queue.getJobCounts('waiting', 'active', 'delayed', 'failed', 'completed', 'paused', 'prioritized');
  }

  /** Logs an error, at most once per 10 s for the same source and message (an outage repeats them every second). */
  private report(source: string, err: unknown, extra: Record<string, unknown> = {}): void {
    const text = message(err);
    const key = `${source}:${text}`;
    const now = Date.now();
    if ((this.lastLogged.get(key) ?? 0) > now - 10_000) return;
    if (this.lastLogged.size > 200) this.lastLogged.clear();
    this.lastLogged.set(key, now);
    const level = source === 'handler' ? 'error' : 'warn';
    this.logger[level]({ component: 'queue-bullmq', source, err: text, ...extra }, source === 'handler' ? 'job handler failed' : 'redis error; retrying');
  }
}
