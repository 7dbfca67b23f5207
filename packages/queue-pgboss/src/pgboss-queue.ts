import pg from 'pg';
import PgBoss from 'pg-boss';
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
  jobFields,
  messageOf as message,
  within,
} from '@genservice/core/ports';
import { countInSql, fairFetch, fairInsert, fairParams, INSERT_PARAMETERS, ownersTableSql, positionSql, sweepSql, takenSql } from './fair-send.js';

export interface PgBossQueueOptions {
  /**
   * Where Postgres is: a `postgres://` URL (this queue opens a pool of `poolSize` connections from it and closes it
   * on stop). Give this or `pool`.
   */
  connectionString?: string;
  /**
   * A pool of the host's to use instead (the stores' pool, for example); the queue never ends it. Its connections are
   * then shared with whatever else uses it.
   */
  pool?: pg.Pool;
  /** Connections of the pool this queue opens from `connectionString`. Default 4. */
  poolSize?: number;
  /**
   * The schema pg-boss keeps its tables in (created and migrated by pg-boss on first use), and this queue its table of
   * owners' waiting counts. Default `genservice_jobs`. Every instance of one service must use the same.
   */
  schema?: string;
  /** pg-boss queue name; every instance of one service must use the same. Default `genservice`. */
  queueName?: string;
  /** Jobs this instance runs at once. Default: the service's `runner.concurrency` (handed over at start). */
  concurrency?: number;
  /**
   * How often an idle worker asks Postgres for work another instance enqueued (work enqueued on this instance is
   * taken at once). Default 500 ms.
   */
  pollIntervalMs?: number;
  /**
   * How long a job handed back (its instance stopped before it finished, or pg-boss expired it) waits before another
   * instance may take it. Default: the service's `runner.leaseMs` (handed over at start; 30 s before it). A value
   * below it is raised to it: a job handed out again before the store lease of its last run ran out would find the
   * generation still leased and be dropped, leaving it to the next recovery pass. Whole seconds (pg-boss's unit).
   */
  retryDelayMs?: number;
  /**
   * Times pg-boss hands a job out again after it was handed back or expired. The service's `runner.maxClaims` is what
   * bounds attempts (and charges the failure fee); keep this above it. Default 10.
   */
  retryLimit?: number;
  /**
   * How long a job may stay active before pg-boss's maintenance expires it and hands it out again (a backstop: the
   * take-over of a crashed instance's work is driven by the store's leases, through the service's recovery pass).
   * A longer run is not harmed: the second hand-out finds the generation leased by its live worker and lets go.
   * Default 900 (pg-boss's 15 minutes); at most 24 hours.
   */
  expireInSeconds?: number;
  /** How often pg-boss's maintenance (expiry, archiving) runs; one instance at a time does it. Default 120. */
  maintenanceIntervalSeconds?: number;
  /** How long `enqueue` waits for Postgres before answering UnavailableError (HTTP 503). Default 1000. */
  enqueueTimeoutMs?: number;
  /**
   * Run statements with parameters as named (prepared) statements: parsed and planned once per connection, then only
   * their values are sent. Turn off behind a pooler in transaction mode that does not keep prepared statements
   * (PgBouncer before 1.21, or without `max_prepared_statements`). Default true.
   */
  preparedStatements?: boolean;
  /** Postgres outages and handler faults are reported here (throttled). Default: the service's logger (handed over at start). */
  logger?: Logger;
}

/** The signal reason of a job aborted because its queue is stopping. */
class QueueStoppedError extends Error {
  override readonly name = 'QueueStoppedError' as const;
}

interface JobData {
  generationId: string;
  modelId: string;
  ownerId?: string;
  organizationId?: string;
  weight?: number;
  priority?: Job['priority'];
  /** The job's line in the fair order (`fairLineOf(job).line`), which the fetch counts it out of. */
  gsLine?: string;
}

/** After the stop deadline aborted the running jobs: how long they get to wind down before we stop waiting. */
const ABORT_GRACE_MS = 1000;
/** How long the last completions, hand-backs and pg-boss's stop get after that. */
const CLOSE_GRACE_MS = 5000;
/** How long started and finished jobs are gathered before they are written in one statement each. */
const FLUSH_WINDOW_MS = 2;
/** Before a new attempt to install or reach pg-boss after a failure. */
const RETRY_PREPARE_MS = 1000;
/** How often owners with nothing waiting are dropped from the counts table. */
const SWEEP_EVERY_MS = 60_000;
const DEFAULT_RETRY_DELAY_MS = 30_000;

/** A connection to Postgres and the pg-boss on it; opened by `start` or `enqueue`, closed by `stop`. */
interface Open {
  pool: pg.Pool;
  ownPool: boolean;
  /** pg-boss once it is installed (migrated) and the queue exists. */
  boss?: PgBoss;
  preparing?: Promise<PgBoss>;
  /** pg-boss's insert with the fair count in front, once known; null when the installed pg-boss differs. */
  fairText?: string | null;
  /** pg-boss's fetch with the owners' count-out behind it, once known; null when the installed pg-boss differs. */
  fairFetchText?: string | null;
  fetchDb?: PgBoss.Db;
  /** A query succeeded at least once; until then a failed attempt makes `enqueue` answer at once. */
  ready: boolean;
  lastError: unknown;
  /** Jobs that started, by owner, not yet counted out of their owners' lines (only when fetching cannot do it). */
  releases: Map<string, number>;
  /** Jobs that finished (their pg-boss ids), not yet completed in pg-boss. */
  completions: string[];
  flushTimer?: NodeJS.Timeout;
  flushing: Promise<void>;
  lastSweep: number;
}

/** A fetched job; its retry count and priority only when fetched with pg-boss's metadata (the slower path). */
type Fetched = PgBoss.Job<JobData> & { retryCount?: number; priority?: number; createdOn?: Date };

/** pg-boss's fetch order: higher priority first, then older. */
function fairlyFirst(a: Fetched, b: Fetched): number {
  return (b.priority ?? 0) - (a.priority ?? 0) || (a.createdOn?.getTime() ?? 0) - (b.createdOn?.getTime() ?? 0);
}

interface Running {
  generationId: string;
  controller: AbortController;
}

/**
 * A {@link JobQueue} on pg-boss 10 (Postgres), so that any instance of a service can accept a create and any
 * instance's worker can run it, with no Redis: for hosts that have a Postgres and nothing else.
 *
 * Delivery is at least once. Exactly-once effects come from the store: the executor claims the generation under a
 * lease and completes it only while it still holds that lease, and the ledger settles once per generation. A job
 * whose instance died stays active in pg-boss; the generation's store lease runs out and the service's recovery pass
 * (on any instance) enqueues it again, and pg-boss's expiry (`expireInSeconds`) is a backstop behind that.
 *
 * Jobs are taken with pg-boss's `fetch` (`FOR UPDATE SKIP LOCKED`, highest priority first) as slots free up, never
 * more than `concurrency` at once, and completed with `complete` in batches; pg-boss's `work` is not used, because it
 * runs a batch at a time and sleeps its polling interval between batches. Waiting work is deduplicated by generation
 * (a `short` queue keyed by generation id) and taken round-robin across owners (see fair-send.ts).
 *
 * Connections (per instance): a pool of `poolSize` (default 4) opened by the first `enqueue` or `start`, or the
 * host's `pool`. `stop()` closes what it opened; `start()` or `enqueue()` after a stop opens it again.
 */
export class PgBossQueue implements JobQueue {
  private readonly name: string;
  private readonly schema: string;
  private readonly given: PgBossQueueOptions;
  private concurrency: number;
  private retryDelayMs: number;
  private readonly retryLimit: number;
  private readonly expireInSeconds: number;
  private readonly pollIntervalMs: number;
  private readonly enqueueTimeoutMs: number;
  private logger: Logger;

  private open: Open | undefined;
  private handler: JobHandler | undefined;
  /** The fetch loop while started. */
  private looping: Promise<void> | undefined;
  private stopRequested = false;
  /** Set when Postgres may hold work for this instance: a local enqueue, a poll, a delayed job come due. */
  private mayHaveWork = true;
  private wake: (() => void) | undefined;
  private readonly delayTimers = new Set<NodeJS.Timeout>();
  /** Running jobs by pg-boss job id. */
  private readonly running = new Map<string, Running>();
  /** Each running job's way to stop waiting for its handler; all are called when a forced stop lets go. */
  private readonly waiting = new Set<() => void>();
  private stopping: Promise<void> | undefined;
  private readonly lastLogged = new Map<string, number>();

  constructor(options: PgBossQueueOptions) {
    if (!options || (!options.connectionString && !options.pool)) {
      throw new TypeError('PgBossQueue: options.connectionString (a Postgres URL) or options.pool is required');
    }
    this.given = options;
    this.name = options.queueName ?? 'genservice';
    this.schema = options.schema ?? 'genservice_jobs';
    if (!/^[a-z_][a-z0-9_]{0,49}$/.test(this.schema)) throw new TypeError(`PgBossQueue: invalid schema ${JSON.stringify(this.schema)}`);
    if (!/^[\w-]{1,100}$/.test(this.name)) throw new TypeError(`PgBossQueue: invalid queueName ${JSON.stringify(this.name)}`);
    this.concurrency = options.concurrency ?? 8;
    this.retryDelayMs = options.retryDelayMs ?? DEFAULT_RETRY_DELAY_MS;
    this.retryLimit = options.retryLimit ?? 10;
    this.expireInSeconds = options.expireInSeconds ?? 900;
    this.pollIntervalMs = options.pollIntervalMs ?? 500;
    this.enqueueTimeoutMs = options.enqueueTimeoutMs ?? 1000;
    this.logger = options.logger ?? silentLogger;
    const whole = (n: number | undefined): boolean => n === undefined || (Number.isInteger(n) && n >= 1);
    if (
      !(this.concurrency >= 1) ||
      !(this.retryDelayMs >= 0) ||
      !(this.pollIntervalMs > 0) ||
      !(this.enqueueTimeoutMs > 0) ||
      !(Number.isInteger(this.retryLimit) && this.retryLimit >= 0) ||
      !(this.expireInSeconds >= 1 && this.expireInSeconds < 86_400) ||
      !whole(options.poolSize) ||
      !whole(options.maintenanceIntervalSeconds)
    ) {
      throw new RangeError(
        'PgBossQueue: concurrency >= 1, retryDelayMs >= 0, pollIntervalMs and enqueueTimeoutMs > 0, retryLimit an integer >= 0, expireInSeconds within 1 s to 24 h, poolSize and maintenanceIntervalSeconds whole numbers >= 1',
      );
    }
  }

  // ------------------------------------------------------------------ connection and pg-boss

  private openConnection(): Open {
    if (this.open) return this.open;
    const ownPool = !this.given.pool;
    const pool =
      this.given.pool ??
      new pg.Pool({ connectionString: this.given.connectionString, max: this.given.poolSize ?? 4, connectionTimeoutMillis: 5000, application_name: 'genservice-queue-pgboss' });
    const open: Open = { pool, ownPool, ready: false, lastError: undefined, releases: new Map(), completions: [], flushing: Promise.resolve(), lastSweep: Date.now() };
    // An idle client's error (the server went away) must not crash the process; the next query reconnects.
    if (ownPool) pool.on('error', (err: Error) => this.failed(open, 'pool', err));
    this.open = open;
    return open;
  }

  /** Runs a statement on the queue's pool, noting whether Postgres answered (for the fail-fast path of `enqueue`). */
  private async query<R extends pg.QueryResultRow = pg.QueryResultRow>(open: Open, text: string, values?: unknown[]): Promise<pg.QueryResult<R>> {
    try {
      // A statement with parameters runs as a named (prepared) statement: each connection parses and plans it once,
      // and then only its values are sent (the hot ones, an enqueue's and a fetch's, are a few kilobytes of text).
      const prepared = this.given.preparedStatements !== false && values !== undefined && values.length > 0;
      const run = (): Promise<pg.QueryResult<R>> => open.pool.query<R>(prepared ? { name: statementName(text), text, values } : { text, values });
      let result: pg.QueryResult<R>;
      try {
        result = await run();
      } catch (err) {
        // A table changed under a prepared statement (pg-boss migrated by a newer instance): prepare it again, under
        // new names, once.
        if ((err as { code?: unknown }).code !== '0A000' || !/cached plan/.test(message(err))) throw err;
        renameStatements();
        result = await run();
      }
      open.ready = true;
      open.lastError = undefined;
      return result;
    } catch (err) {
      if (isConnectionFault(err)) this.failed(open, 'postgres', err);
      throw err;
    }
  }

  private failed(open: Open, source: string, err: unknown): void {
    open.lastError = err;
    this.report(source, err);
  }

  /** pg-boss's connection: our pool, through `query` (pg-boss swallows a failed fetch; this still sees it). */
  private bossDb(open: Open): PgBoss.Db {
    return { executeSql: (text: string, values: unknown[]) => this.query(open, text, values) };
  }

  /**
   * Installs pg-boss (its schema, migrated by pg-boss under its advisory lock), the queue and the owners' table, once
   * per connection; a failed attempt is forgotten, so the next caller tries again.
   */
  private prepare(open: Open): Promise<PgBoss> {
    if (open.boss) return Promise.resolve(open.boss);
    open.preparing ??= (async () => {
      // A new PgBoss for every attempt: one whose start() failed half way considers itself started.
      const boss = new PgBoss({
        db: this.bossDb(open),
        schema: this.schema,
        migrate: true,
        supervise: true,
        schedule: false,
        ...(this.given.maintenanceIntervalSeconds ? { maintenanceIntervalSeconds: this.given.maintenanceIntervalSeconds } : {}),
      });
      boss.on('error', (err: unknown) => this.report('pg-boss', err));
      try {
        await boss.start();
        if (!(await boss.getQueue(this.name))) await this.createQueue(open);
        const queue = await boss.getQueue(this.name);
        if (queue?.policy !== 'short') {
          throw new Error(`pg-boss queue ${this.name} in schema ${this.schema} has policy ${String(queue?.policy)}; this queue needs its own, with policy short`);
        }
        await this.query(open, ownersTableSql(this.schema));
        await this.learnStatements(open, boss);
      } catch (err) {
        await boss.stop({ graceful: false, close: false }).catch(() => undefined);
        throw err;
      }
      if (this.open !== open) {
        // Stopped while installing: leave nothing running.
        await boss.stop({ graceful: false, close: false }).catch(() => undefined);
        throw new Error('queue stopped');
      }
      open.boss = boss;
      return boss;
    })().finally(() => {
      open.preparing = undefined;
    });
    return open.preparing;
  }

  /**
   * Reads the insert and fetch statements the installed pg-boss builds (through a connection that only records them:
   * nothing reaches the database) and wraps them with the owners' counts, or notes that they cannot be (see
   * fair-send.ts).
   */
  private async learnStatements(open: Open, boss: PgBoss): Promise<void> {
    if (open.fairText !== undefined && open.fairFetchText !== undefined) return;
    const seen: Array<{ text: string; values: unknown[] }> = [];
    const recorder: PgBoss.Db = {
      executeSql: async (text: string, values: unknown[]) => {
        seen.push({ text, values: values ?? [] });
        return { rows: [] };
      },
    };
    await boss.send(this.name, {}, { singletonKey: 'x', db: recorder });
    await boss.fetch(this.name, { batchSize: 1, priority: true, db: recorder });
    const [insert, fetch] = seen;
    open.fairText = insert && insert.values.length === INSERT_PARAMETERS ? fairInsert(insert.text, this.schema) : null;
    open.fairFetchText = fetch ? fairFetch(fetch.text, this.schema) : null;
    if (open.fairText === null) this.slowPath('insert');
    if (open.fairFetchText === null) this.slowPath('fetch');
  }

  /**
   * Creates the pg-boss queue (policy `short`: one waiting job per key) with pg-boss's own `create_queue`, under an
   * advisory lock: two instances creating the same queue at once through pg-boss's `createQueue` deadlock (one waits
   * for the other's queue row, the other for a lock on the queue table the first holds), and Postgres fails one of
   * them after its deadlock timeout (a second: that instance's first enqueue would answer 503).
   */
  private async createQueue(open: Open): Promise<void> {
    const client = await open.pool.connect();
    try {
      await client.query('BEGIN');
      await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`genservice-queue-pgboss:${this.schema}:create-queue`]);
      await client.query(`SELECT ${this.schema}.create_queue($1, $2::json)`, [this.name, JSON.stringify({ policy: 'short' })]);
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
  }

  // ------------------------------------------------------------------ enqueue

  async enqueue(job: Job, options: EnqueueOptions = {}): Promise<void> {
    const open = this.openConnection();
    if (!open.ready && open.lastError !== undefined) {
      // Never reached and the last attempt failed: answer now rather than after the timeout, and try again behind it.
      this.prepare(open).catch(() => undefined);
      throw new UnavailableError(`Postgres is unreachable: ${message(open.lastError)}`, { cause: open.lastError });
    }
    const data: JobData = {
      ...jobFields(job),
      gsLine: fairParams(job)[0],
    };
    const delayMs = Math.max(0, options.delayMs ?? 0);
    await enqueueWithin(this.prepare(open).then((boss) => this.send(open, boss, data, delayMs)), this.enqueueTimeoutMs, data.generationId, 'Postgres');
    // This instance's worker takes it at once (others on their next poll).
    if (delayMs === 0) this.poke(true);
    else if (this.looping) this.pokeAfter(delayMs);
  }

  /** Says once that a statement of pg-boss is not the one this version knows, so the slower path is taken. */
  private slowPath(which: 'insert' | 'fetch', err?: unknown): void {
    this.logger.warn(
      { component: 'queue-pgboss', ...(err !== undefined ? { err: message(err) } : {}) },
      which === 'insert'
        ? 'the installed pg-boss does not have the insert statement this version knows: every enqueue takes two round trips (same fairness)'
        : 'the installed pg-boss does not have the fetch statement this version knows: started jobs are counted out in statements of their own (same fairness)',
    );
  }

  private async send(open: Open, boss: PgBoss, data: JobData, delayMs: number): Promise<void> {
    const fair = fairParams(data);
    const line = fair[0];
    // Waiting work is deduplicated by generation (a short queue keeps one waiting job per key). A remote job's next
    // check is enqueued from inside its current job, so it has a key of its own: the generation and the second it
    // is due (a repeat for the same time is deduplicated).
    const singletonKey = delayMs > 0 ? `${data.generationId}:check:${Math.ceil((Date.now() + delayMs) / 1000)}` : data.generationId;
    const sendOptions: PgBoss.SendOptions = {
      singletonKey,
      retryLimit: this.retryLimit,
      retryDelay: Math.ceil(this.retryDelayMs / 1000),
      expireInSeconds: this.expireInSeconds,
      // Seconds from the database's clock, not ours.
      ...(delayMs > 0 ? { startAfter: `${delayMs / 1000} seconds` } : {}),
    };
    const fairText = open.fairText;
    if (typeof fairText === 'string') {
      // One round trip: pg-boss's own insert, run with the job's tag in the fair order as its priority (see fair-send.ts).
      try {
        await boss.send(this.name, data, { ...sendOptions, db: { executeSql: (_text: string, values: unknown[]) => this.query(open, fairText, [...values, ...fair]) } });
        return;
      } catch (err) {
        // Postgres is away: the caller's answer. Anything else means the statement no longer fits this pg-boss.
        if (isConnectionFault(err)) throw err;
        open.fairText = null;
        this.slowPath('insert', err);
      }
    }
    // Two round trips (three for a duplicate): count the job in and read its priority, send it with that, and count
    // it out again if pg-boss answered that it was a duplicate.
    const { rows } = await this.query<{ priority: number }>(open, countInSql(this.schema), [this.name, ...fair]);
    const priority = Number(rows[0]?.priority ?? -1) || -1;
    try {
      const id = await boss.send(this.name, data, { ...sendOptions, priority });
      if (id === null) await this.query(open, takenSql(this.schema), [this.name, [line], [1]]);
    } catch (err) {
      await this.query(open, takenSql(this.schema), [this.name, [line], [1]]).catch(() => undefined);
      throw err;
    }
  }

  // ------------------------------------------------------------------ worker

  async start(handler: JobHandler, settings?: RunnerSettings): Promise<void> {
    if (this.stopping) await this.stopping;
    this.handler = handler;
    if (this.looping) return;
    if (settings) {
      // The service's settings, so a host sets them once; explicit options of this queue win, but a handed-back job
      // never comes back before the store lease of its last run has run out.
      this.concurrency = this.given.concurrency ?? settings.concurrency;
      this.retryDelayMs = Math.max(this.given.retryDelayMs ?? settings.leaseMs, settings.leaseMs);
      if (!this.given.logger) this.logger = settings.logger;
    }
    this.stopRequested = false;
    this.mayHaveWork = true;
    const open = this.openConnection();
    // Not awaited: start must not wait for (or fail on) a Postgres that is down; the loop keeps trying.
    this.looping = this.loop(open);
  }

  /** Takes jobs as slots free up, until stop. */
  private async loop(open: Open): Promise<void> {
    while (!this.stopRequested) {
      let boss: PgBoss;
      try {
        boss = await this.prepare(open);
      } catch (err) {
        this.report('prepare', err);
        await this.nap(RETRY_PREPARE_MS);
        continue;
      }
      const free = this.concurrency - this.running.size;
      if (free > 0 && this.mayHaveWork) {
        this.mayHaveWork = false;
        // pg-boss answers a failed fetch with no jobs (the failure is reported by `query`): the next poll tries again.
        let jobs: Fetched[] = [];
        try {
          // The fetch counts its jobs out of their owners' lines itself, unless the installed pg-boss's fetch could
          // not be extended: then each job's retry count says whether it is a first start, to count it out here.
          jobs =
            typeof open.fairFetchText === 'string'
              ? await boss.fetch<JobData>(this.name, { batchSize: free, priority: true, db: this.fetchDb(open) })
              : await boss.fetch<JobData>(this.name, { batchSize: free, priority: true, includeMetadata: true });
        } catch (err) {
          this.report('fetch', err);
        }
        // The plain fetch answers in no particular order: a batch starts in the fair order (the fair fetch sorts itself).
        if (typeof open.fairFetchText !== 'string') jobs.sort(fairlyFirst);
        // Jobs fetched are jobs taken, even when stop was asked meanwhile: they run, and stop waits for them.
        for (const job of jobs) this.run(open, job);
        // A full batch: there may be more behind it.
        if (jobs.length === free) this.mayHaveWork = true;
        continue;
      }
      // No slot: a finished job wakes us. No work: a local enqueue, a delayed job coming due, or the poll.
      await this.nap(free > 0 ? this.pollIntervalMs : undefined);
      if (free > 0) this.mayHaveWork = true;
    }
  }

  /** Resolves on `poke` or after `ms` (never by time when undefined). */
  private nap(ms: number | undefined): Promise<void> {
    return new Promise<void>((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const done = (): void => {
        clearTimeout(timer);
        if (this.wake === done) this.wake = undefined;
        resolve();
      };
      if (ms !== undefined) timer = setTimeout(done, ms);
      this.wake = done;
    });
  }

  private poke(work: boolean): void {
    if (work) this.mayHaveWork = true;
    this.wake?.();
  }

  private pokeAfter(ms: number): void {
    const timer = setTimeout(() => {
      this.delayTimers.delete(timer);
      this.poke(true);
    }, ms + 5);
    timer.unref?.();
    this.delayTimers.add(timer);
  }

  /**
   * pg-boss's connection for `fetch`: its own statement with the fetched jobs counted out of their owners' lines
   * behind it (see fair-send.ts). pg-boss answers a failed fetch with no jobs, so a statement error other than a lost
   * connection switches to plain fetches at once, rather than leaving the queue to fetch nothing for ever.
   */
  private fetchDb(open: Open): PgBoss.Db {
    open.fetchDb ??= {
      executeSql: async (text: string, values: unknown[]) => {
        const fair = open.fairFetchText;
        if (typeof fair !== 'string') return this.query(open, text, values);
        try {
          return await this.query(open, fair, values);
        } catch (err) {
          if (isConnectionFault(err)) throw err;
          open.fairFetchText = null;
          this.slowPath('fetch', err);
          // This batch is taken plainly (its jobs stay counted as waiting: their owners' next jobs queue a few
          // places further back); from the next fetch on, the retry counts say which starts to count out.
          return this.query(open, text, values);
        }
      },
    };
    return open.fetchDb;
  }

  private run(open: Open, job: Fetched): void {
    const handler = this.handler;
    const data = job.data;
    // It left the line: the owner's next job moves up. The fetch did that already, unless the installed pg-boss's
    // fetch could not be extended; then it is written with the next flush. Only on its first start (a job handed out
    // again was counted out already).
    if (open.fairFetchText === null && job.retryCount === 0) {
      const line = data.gsLine ?? data.ownerId ?? '';
      open.releases.set(line, (open.releases.get(line) ?? 0) + 1);
    }
    const controller = new AbortController();
    const entry: Running = { generationId: data.generationId, controller };
    this.running.set(job.id, entry);
    let finished = false;
    const running = (async (): Promise<void> => {
      try {
        if (handler) await handler(jobOf(data), controller.signal);
      } catch (err) {
        // Completed in pg-boss anyway: the generation is still unfinished in the store, and recovery enqueues it
        // again; a failed pg-boss job would only be handed out again for nothing.
        this.report('handler', err, { generationId: data.generationId });
      } finally {
        finished = true;
      }
    })();
    // Stop's forced let-go ends the wait for a handler that ignores its signal.
    void new Promise<void>((resolve) => {
      this.waiting.add(resolve);
      void running.then(() => {
        this.waiting.delete(resolve);
        resolve();
      });
    }).then(() => {
      if (this.running.get(job.id) === entry) this.running.delete(job.id);
      if (!finished || controller.signal.reason instanceof QueueStoppedError) {
        // Stopped before it finished: hand it back for another instance, once the store lease of this run has run
        // out (pg-boss's retry delay, at least the lease), so that instance's claim succeeds.
        this.handBack(open, job.id);
      } else {
        open.completions.push(job.id);
      }
      this.scheduleFlush(open);
      this.poke(false);
    });
    this.scheduleFlush(open);
  }

  private handBack(open: Open, id: string): void {
    const boss = open.boss;
    if (!boss) return;
    const failing = boss.fail(this.name, id, { reason: 'the instance stopped before the job finished' }).catch((err: unknown) => this.report('postgres', err));
    open.flushing = open.flushing.then(() => failing);
  }

  /** Writes the started jobs' owners and the finished jobs together, FLUSH_WINDOW_MS after the first of them. */
  private scheduleFlush(open: Open): void {
    if (open.flushTimer) return;
    open.flushTimer = setTimeout(() => {
      open.flushTimer = undefined;
      const flushed = this.flush(open);
      open.flushing = open.flushing.then(() => flushed);
    }, FLUSH_WINDOW_MS);
  }

  private async flush(open: Open): Promise<void> {
    const boss = open.boss;
    const ids = open.completions.splice(0);
    const counts = new Map(open.releases);
    open.releases.clear();
    const writes: Array<Promise<unknown>> = [];
    if (ids.length > 0 && boss) writes.push(boss.complete(this.name, ids));
    if (counts.size > 0) {
      // Until this is written the owners' counts are that many too high, so their next jobs queue that much further
      // back (never ahead of anyone).
      writes.push(this.query(open, takenSql(this.schema), [this.name, [...counts.keys()], [...counts.values()]]));
    }
    if (Date.now() - open.lastSweep > SWEEP_EVERY_MS) {
      open.lastSweep = Date.now();
      writes.push(this.query(open, sweepSql(this.schema), [this.name]));
    }
    // A completion that fails leaves the job active until pg-boss expires it and hands it out again: its claim then
    // finds the generation finished. Nothing is lost either way.
    const results = await Promise.allSettled(writes);
    for (const r of results) if (r.status === 'rejected') this.report('postgres', r.reason);
  }

  // ------------------------------------------------------------------ stop

  stop(options: QueueStopOptions = {}): Promise<void> {
    this.stopping ??= this.shutdown(options.timeoutMs ?? 10_000).finally(() => {
      this.stopping = undefined;
    });
    return this.stopping;
  }

  private async shutdown(timeoutMs: number): Promise<void> {
    const open = this.open;
    const looping = this.looping;
    this.stopRequested = true;
    for (const t of this.delayTimers) clearTimeout(t);
    this.delayTimers.clear();
    this.poke(false);
    // The loop ends after its fetch in flight (whose jobs then run, and are waited for below).
    if (looping) await within(looping, CLOSE_GRACE_MS);
    this.looping = undefined;
    const allDone = (): Promise<void> => new Promise<void>((resolve) => {
      const check = (): void => {
        if (this.running.size === 0) resolve();
        else setTimeout(check, 10);
      };
      check();
    });
    if (this.running.size > 0 && !(await within(allDone(), timeoutMs))) {
      for (const r of this.running.values()) r.controller.abort(new QueueStoppedError('queue stopped'));
      if (!(await within(allDone(), ABORT_GRACE_MS))) {
        // A handler that ignores its signal: stop waiting for it (its late writes are refused by the store lease).
        for (const stopWaiting of this.waiting) stopWaiting();
        this.waiting.clear();
        // Its bookkeeping (the hand-back) runs a few microtasks later.
        await within(allDone(), ABORT_GRACE_MS);
      }
    }
    this.open = undefined;
    if (!open) return;
    // The last completions, hand-backs and owners' counts are written before the pool closes.
    clearTimeout(open.flushTimer);
    open.flushTimer = undefined;
    const last = this.flush(open);
    await within(open.flushing.then(() => last), CLOSE_GRACE_MS);
    const preparing = open.preparing;
    if (preparing) await within(preparing, CLOSE_GRACE_MS);
    if (open.boss) {
      if (!(await within(open.boss.stop({ graceful: false, close: false }), CLOSE_GRACE_MS))) {
        this.logger.warn({ component: 'queue-pgboss' }, 'pg-boss did not stop in time (is Postgres reachable?); giving up waiting');
      }
    }
    if (open.ownPool) await within(open.pool.end(), CLOSE_GRACE_MS);
  }

  // ------------------------------------------------------------------ the rest of the port

  /** A `SELECT 1` on the queue's pool; for `readyz`. */
  async ping(): Promise<unknown> {
    const open = this.openConnection();
    return this.query(open, 'SELECT 1');
  }

  /** Where the generation's job waits: the waiting jobs pg-boss's fetch takes before it (one statement). */
  async position(generationId: string): Promise<QueuePosition | undefined> {
    const open = this.openConnection();
    await this.prepare(open);
    const { rows } = await this.query<{ ahead: number }>(open, positionSql(this.schema), [this.name, generationId]);
    const ahead = rows[0]?.ahead;
    return ahead === undefined ? undefined : { aheadOfYou: Number(ahead), position: Number(ahead) + 1 };
  }

  abort(generationId: string): boolean {
    let found = false;
    for (const r of this.running.values()) {
      if (r.generationId !== generationId || r.controller.signal.aborted) continue;
      r.controller.abort(new Error('cancelled'));
      found = true;
    }
    return found;
  }

  /** Job counts of this queue in pg-boss (created, retry, active, ...), for metrics and operators. */
  async counts(): Promise<Record<string, number>> {
    const open = this.openConnection();
    await this.prepare(open);
    const { rows } = await this.query<{ state: string; n: number }>(open, `SELECT state::text AS state, count(*)::int AS n FROM ${this.schema}.job WHERE name = $1 GROUP BY state`, [this.name]);
    const out: Record<string, number> = { created: 0, retry: 0, active: 0, completed: 0, cancelled: 0, failed: 0 };
    for (const r of rows) out[r.state] = Number(r.n);
    return out;
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
    this.logger[level]({ component: 'queue-pgboss', source, err: text, ...extra }, source === 'handler' ? 'job handler failed' : 'postgres error; retrying');
  }
}

/** The job as enqueued, from its pg-boss data (without the queue's own fields). */
function jobOf(data: JobData): Job {
  const { gsLine: _, ...job } = data;
  return job;
}

const statementNames = new Map<string, string>();
let statementEpoch = 0;

function renameStatements(): void {
  statementEpoch++;
  statementNames.clear();
}

/**
 * The prepared statement's name for a text: a hash of the text (FNV-1a) and its length, so that the same text has the
 * same name on every connection and two texts never share one (even in a pool another user of it prepares on).
 */
function statementName(text: string): string {
  let name = statementNames.get(text);
  if (name === undefined) {
    let h = 0x811c9dc5;
    for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
    name = `genservice_pgboss_${(h >>> 0).toString(36)}_${text.length}_${statementEpoch}`;
    if (statementNames.size > 500) statementNames.clear();
    statementNames.set(text, name);
  }
  return name;
}

/** A failure to reach Postgres (as opposed to an error of one statement). */
function isConnectionFault(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && (code.startsWith('08') || code === '57P01' || code === '57P03' || code.startsWith('E'))) return true;
  return /connect|terminat|timeout|ECONN|EHOSTUNREACH|ENOTFOUND/i.test(message(err));
}
