/**
 * pg-boss (issue 43): our PgBossQueue against raw pg-boss 10 doing the same work, on a throwaway database.
 *
 * - Enqueue + no-op job: `n` jobs enqueued one after another as `Lifecycle.create` enqueues them (fresh, with their
 *   owner) and run by a no-op handler at concurrency 8, until all ran; against `boss.send` with the generation id as
 *   singleton key on a `short` queue (the deduplication our queue does) and a consumer that keeps 8 jobs in flight with
 *   `boss.fetch` and completes each fetched batch with one `boss.complete` (pg-boss's own `work` runs the same steps
 *   but sleeps its polling interval, at least 0.5 s, after every batch). Both get a pool of the same size and are woken
 *   by their own process's sends. Ours also keeps the owners' counts (fairness) in the same statement as the insert.
 * - End to end: the Postgres end to end of issue 22 (`service.create` on the Postgres stores, run to settled by the
 *   runner, 32 clients) with the PgBossQueue as the service's queue, against the same service with raw pg-boss as its
 *   queue (a JobQueue of a few lines: `send` with the generation id as singleton key, the consumer above): what our
 *   queue costs a whole create-to-settled path. And, without a target, against the hand-written `pg` side of that
 *   section with raw pg-boss instead of p-queue (send after the insert, the same consumer, 32 in flight): there the
 *   stores' own cost (issue 22's rows) is in the ratio too.
 */
import pg from 'pg';
import PgBoss from 'pg-boss';
import { randomUUID } from 'node:crypto';
import { createGenerationService, newGenerationId, type GenerationContext } from '@genservice/core';
import type { Job, JobHandler, JobQueue, RunnerSettings } from '@genservice/core/ports';
import { PgBossQueue } from '@genservice/queue-pgboss';
import { createPostgresStores, runMigrations } from '@genservice/store-postgres';
import { MODEL, MODEL_ID, SETTINGS, USER_ID, noopProvider } from '../lib/fixture.js';
import { BALANCE, IN_FLIGHT, LEASE_MS, PG_E2E_POOL, PG_E2E_RUNNER, PG_E2E_SQL, clientsCreate, countCompletions, countdown, inTransaction, measured, users, validSettings, type E2EResult } from './pg-e2e.js';

export const PGBOSS_CONCURRENCY = 8;
/** Connections of each side's queue (our PgBossQueue's default). */
export const PGBOSS_POOL = 4;
/** pg-boss's schema, shared by both sides (each run has a queue of its own name in it). */
const SCHEMA = 'bench_jobs';

interface Counter {
  hit: () => void;
  done: Promise<void>;
}

function counter(n: number, timeoutMs: number, what: string): Counter {
  let count = 0;
  let resolve!: () => void;
  let reject!: (e: Error) => void;
  const done = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  const timer = setTimeout(() => reject(new Error(`${what}: only ${count}/${n} jobs processed in ${timeoutMs} ms`)), timeoutMs);
  return {
    hit: () => {
      if (++count === n) {
        clearTimeout(timer);
        resolve();
      }
    },
    done,
  };
}

/** The raw side's pg-boss: started (schema installed by pg-boss), with a queue made as ours makes it (policy short). */
async function rawBoss(url: string, queueName: string): Promise<PgBoss> {
  const boss = new PgBoss({ connectionString: url, schema: SCHEMA, max: PGBOSS_POOL, schedule: false });
  boss.on('error', () => undefined);
  await boss.start();
  await boss.createQueue(queueName, { name: queueName, policy: 'short' });
  return boss;
}

/**
 * A raw pg-boss consumer: keeps up to `slots` jobs in flight with `fetch`, completes each fetched batch with one
 * `complete`, and, when the queue is empty, waits for `wake()` (a send of this process) or a 500 ms poll.
 */
function rawConsumer(boss: PgBoss, queueName: string, slots: number, run: (data: { generationId: string }) => Promise<void>): { wake: () => void; stop: () => Promise<void> } {
  let stopped = false;
  let inFlight = 0;
  let waiter: (() => void) | undefined;
  const wake = (): void => {
    const w = waiter;
    waiter = undefined;
    w?.();
  };
  const loop = (async () => {
    while (!stopped) {
      const free = slots - inFlight;
      if (free === 0) {
        await new Promise<void>((r) => (waiter = r));
        continue;
      }
      const jobs = await boss.fetch<{ generationId: string }>(queueName, { batchSize: free });
      if (jobs.length === 0) {
        await new Promise<void>((r) => {
          const t = setTimeout(r, 500);
          waiter = () => {
            clearTimeout(t);
            r();
          };
        });
        continue;
      }
      inFlight += jobs.length;
      void Promise.all(jobs.map((j) => run(j.data))).then(async () => {
        await boss.complete(queueName, jobs.map((j) => j.id));
        inFlight -= jobs.length;
        wake();
      });
    }
  })();
  return {
    wake,
    stop: async () => {
      stopped = true;
      wake();
      await loop;
    },
  };
}

/** Our PgBossQueue: `enqueue` in a loop (fresh, with the owner), a no-op handler, until all ran. Jobs per second. */
export async function oursPgBoss(url: string, queueName: string, n: number): Promise<number> {
  const queue = new PgBossQueue({ connectionString: url, schema: SCHEMA, queueName, concurrency: PGBOSS_CONCURRENCY, poolSize: PGBOSS_POOL });
  const c = counter(n, 300_000, 'PgBossQueue');
  const warm = counter(1, 60_000, 'PgBossQueue warm-up');
  let ready = false;
  try {
    await queue.start(async () => {
      if (ready) c.hit();
      else warm.hit();
    });
    // pg-boss installed, the queue made and a job through before the clock starts (as the raw side starts its boss).
    await queue.enqueue({ generationId: newGenerationId(), modelId: MODEL_ID, ownerId: USER_ID }, { fresh: true });
    await warm.done;
    ready = true;
    const t0 = performance.now();
    for (let i = 0; i < n; i++) await queue.enqueue({ generationId: newGenerationId(), modelId: MODEL_ID, ownerId: USER_ID }, { fresh: true });
    await c.done;
    return n / ((performance.now() - t0) / 1000);
  } finally {
    await queue.stop({ timeoutMs: 5000 });
  }
}

/** The same on pg-boss alone: `send` with the id as singleton key in a loop, the fetch-and-complete consumer. */
export async function rawPgBoss(url: string, queueName: string, n: number): Promise<number> {
  const boss = await rawBoss(url, queueName);
  const c = counter(n, 300_000, 'raw pg-boss');
  const consumer = rawConsumer(boss, queueName, PGBOSS_CONCURRENCY, async () => c.hit());
  try {
    const t0 = performance.now();
    for (let i = 0; i < n; i++) {
      const id = randomUUID();
      await boss.send(queueName, { generationId: id, modelId: MODEL_ID }, { singletonKey: id });
      consumer.wake();
    }
    await c.done;
    return n / ((performance.now() - t0) / 1000);
  } finally {
    await consumer.stop();
    await boss.stop({ graceful: false });
  }
}

/** Raw pg-boss as a service's queue: what a host would write in a few lines (no fairness, no hand-back on stop). */
class RawPgBossQueue implements JobQueue {
  private boss: Promise<PgBoss>;
  private consumer: ReturnType<typeof rawConsumer> | undefined;

  constructor(url: string, private readonly name: string) {
    this.boss = rawBoss(url, name);
  }

  async enqueue(job: Job): Promise<void> {
    const boss = await this.boss;
    await boss.send(this.name, { ...job }, { singletonKey: job.generationId });
    this.consumer?.wake();
  }

  async start(handler: JobHandler, settings: RunnerSettings): Promise<void> {
    const boss = await this.boss;
    this.consumer = rawConsumer(boss, this.name, settings.concurrency, (data) => handler(data as Job, new AbortController().signal));
  }

  async stop(): Promise<void> {
    await this.consumer?.stop();
    await (await this.boss).stop({ graceful: false });
  }
}

/** End to end: `service.create` on the Postgres stores, with our PgBossQueue or raw pg-boss as the service's queue. */
export async function servicePgBossE2E(side: 'ours' | 'raw', url: string, schema: string, queueName: string, n: number, clients: number): Promise<E2EResult> {
  const stores = await createPostgresStores({ connectionString: url, schema, poolSize: PG_E2E_POOL });
  for (const u of users) await stores.ledger.credit(u, BALANCE);
  const ledger = stores.ledger;
  let settled: ReturnType<typeof countdown> | undefined;
  countCompletions(stores.store, () => settled?.hit());
  const queue = side === 'ours' ? new PgBossQueue({ connectionString: url, schema: SCHEMA, queueName, poolSize: PGBOSS_POOL }) : new RawPgBossQueue(url, queueName);
  const service = createGenerationService({
    store: stores.store,
    ledger,
    apiKeys: stores.apiKeys,
    idempotency: stores.idempotency,
    providers: [noopProvider],
    queue,
    limits: { inFlightPerUser: IN_FLIGHT },
    runner: { concurrency: PG_E2E_RUNNER, leaseMs: LEASE_MS },
    recovery: { onStart: false, intervalMs: 0 },
  });
  await service.start();
  try {
    // pg-boss installed and the queue made before the clock starts.
    if (queue instanceof PgBossQueue) await queue.counts();
    else await queue.enqueue({ generationId: 'warm-up', modelId: MODEL_ID });
    settled = countdown(n);
    const result = await measured(n, async () => {
      await clientsCreate(n, clients, (user) => service.create(user, { modelId: MODEL_ID, settings: SETTINGS }));
      await settled!.done;
    });
    const counts = await stores.store.countByStatus!();
    if (counts.completed < n) throw new Error(`pg-boss e2e: expected ${n} completed, got ${JSON.stringify(counts)}`);
    return result;
  } finally {
    await service.stop({ timeoutMs: 5000 });
    await stores.close();
  }
}

/** Hand-written `pg` (the statements of the Postgres end to end) with raw pg-boss carrying the work. */
export async function rawPgBossE2E(url: string, schema: string, queueName: string, n: number, clients: number): Promise<E2EResult> {
  const pool = new pg.Pool({ connectionString: url, max: PG_E2E_POOL, connectionTimeoutMillis: 5000 });
  pool.on('error', () => {});
  await runMigrations(pool, schema);
  const sql = PG_E2E_SQL(`"${schema}"`);
  for (const u of users) await pool.query(sql.credit, [u, BALANCE]);
  const boss = await rawBoss(url, queueName);
  const ctx = {} as GenerationContext;
  const settled = countdown(n);
  const run = async ({ generationId: id }: { generationId: string }): Promise<void> => {
    const now = Date.now();
    const { rows } = await pool.query(sql.claim, [id, now, 'raw', now + LEASE_MS]);
    if (!rows[0]) return;
    const out = await noopProvider.generate({ model: MODEL, settings: rows[0].settings as Record<string, string> }, ctx);
    const done = await pool.query<{ n: number }>(sql.complete, [id, Date.now(), 'raw', 1, 'text' in out ? out.text : null]);
    if (done.rows[0]!.n !== 1) return;
    settled.hit();
  };
  const consumer = rawConsumer(boss, queueName, PG_E2E_RUNNER, run);
  const create = async (user: string): Promise<string> => {
    if (!validSettings(SETTINGS)) throw new Error('invalid settings');
    const id = randomUUID();
    const now = Date.now();
    await inTransaction(pool, async (c) => {
      if ((await c.query(sql.reserve, [user, 1, IN_FLIGHT])).rowCount !== 1) throw new Error('insufficient or at the in-flight cap');
      await c.query(sql.insert, [id, user, MODEL_ID, JSON.stringify(SETTINGS), 1, now]);
    });
    await boss.send(queueName, { generationId: id, modelId: MODEL_ID, ownerId: user }, { singletonKey: id });
    consumer.wake();
    return id;
  };
  try {
    const result = await measured(n, async () => {
      await clientsCreate(n, clients, create);
      await settled.done;
    });
    const { rows } = await pool.query<{ status: string; n: number }>(sql.count);
    const completed = rows.find((r) => r.status === 'completed')?.n ?? 0;
    if (completed < n) throw new Error(`raw pg-boss e2e: ${completed}/${n} completed`);
    return result;
  } finally {
    await consumer.stop();
    await boss.stop({ graceful: false });
    await pool.end();
  }
}
