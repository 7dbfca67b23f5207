import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '@genservice/core';
import type { Job, JobHandler, JobSignal, RunnerSettings } from '@genservice/core/ports';
import { PgBossQueue } from '../src/index.js';
import { createTestDatabase, jobStates, randomName, sleep, sql, type TestDatabase } from './helpers.js';
import { until } from '@genservice/testing';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('gs_pgboss_life');
}, 60_000);
afterAll(async () => {
  await db?.drop();
});

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!().catch(() => undefined);
});

function subject(): { queue: PgBossQueue; name: string } {
  const name = randomName('q');
  const queue = new PgBossQueue({ connectionString: db.url, queueName: name, poolSize: 3 });
  cleanups.push(() => queue.stop({ timeoutMs: 500 }));
  return { queue, name };
}

const settings = (over: Partial<RunnerSettings> = {}): RunnerSettings => ({ concurrency: 4, leaseMs: 2000, modelConcurrency: () => undefined, logger: silentLogger, ...over });
const start = (queue: PgBossQueue, handler: JobHandler): Promise<void> => queue.start(handler, settings());
const job = (): Job => ({ generationId: randomName('gen'), modelId: 'm' });

describe('PgBossQueue lifecycle', () => {
  it('can be started again after a stop, and enqueue after a stop keeps the job in Postgres for the next start', async () => {
    const { queue, name } = subject();
    const seen: string[] = [];
    await start(queue, async (j) => {
      seen.push(j.generationId);
    });
    const first = job();
    await queue.enqueue(first);
    await until(() => seen.includes(first.generationId), { what: 'the first job', timeoutMs: 5000, intervalMs: 10 });
    await queue.stop({ timeoutMs: 1000 });

    const later = job();
    await queue.enqueue(later); // the connection reopens; the job waits in pg-boss
    // Stored and waiting, and not taken: a stopped queue has no loop to fetch it (its enqueue pokes only a running one).
    await until(async () => (await jobStates(db.url, name)).created === 1, { what: 'the job to wait in pg-boss', timeoutMs: 5000, intervalMs: 20 });
    expect(seen).not.toContain(later.generationId);
    expect((await jobStates(db.url, name)).active).toBe(0);

    await start(queue, async (j) => {
      seen.push(`again:${j.generationId}`);
    });
    await until(() => seen.includes(`again:${later.generationId}`), { what: 'the job enqueued while stopped', timeoutMs: 5000, intervalMs: 10 });
  });

  it('enqueues again a generation whose earlier job completed or failed (recovery is not swallowed by the kept job)', async () => {
    const { queue, name } = subject();
    const j = job();
    const seen: string[] = [];
    await start(queue, async (got) => {
      seen.push(got.generationId);
    });
    await queue.enqueue(j);
    await until(() => seen.length === 1, { what: 'the first run', timeoutMs: 5000, intervalMs: 10 });
    await until(async () => (await jobStates(db.url, name)).completed === 1, { what: 'its pg-boss job to complete', timeoutMs: 5000, intervalMs: 20 });
    // The completed job is kept by pg-boss (until it archives it): a second enqueue of the generation still runs.
    await queue.enqueue(j);
    await until(() => seen.length === 2, { what: 'the second run', timeoutMs: 5000, intervalMs: 10 });
    expect(seen).toEqual([j.generationId, j.generationId]);
  });

  it('a handler that ignores its abort signal does not hold up stop; its job is handed back to pg-boss for a retry', async () => {
    const { queue, name } = subject();
    let started = false;
    let signal: JobSignal | undefined;
    await start(queue, (_j, s) => {
      started = true;
      signal = s;
      return new Promise<void>(() => undefined); // never settles
    });
    await queue.enqueue(job());
    await until(() => started, { what: 'the job to start', timeoutMs: 5000, intervalMs: 10 });
    // A stop that waited for the job instead of its timeout would never return (the job never settles).
    await queue.stop({ timeoutMs: 100 });
    expect(signal?.aborted).toBe(true);
    const states = await jobStates(db.url, name);
    expect(states.retry).toBe(1);
    expect(states.active).toBe(0);
    // Not before the store lease (2 s, whole seconds in pg-boss) has run out.
    const rows = await sql<{ wait: number; retry_delay: number }>(db.url, `SELECT EXTRACT(epoch FROM start_after - now())::float AS wait, retry_delay FROM genservice_jobs.job WHERE name = $1`, [name]);
    expect(rows[0]!.retry_delay).toBe(2);
    expect(rows[0]!.wait).toBeGreaterThan(1);
  });

  it('stop returns promptly while Postgres is unreachable', async () => {
    const queue = new PgBossQueue({ connectionString: 'postgres://postgres@127.0.0.1:1/none', queueName: randomName('q') });
    await start(queue, async () => undefined);
    // The stop is asked once a connection attempt has failed (the loop keeps retrying behind it).
    await expect(queue.ping()).rejects.toThrow();
    // Returning at all is the check: a stop that waited for Postgres would hang until the test's timeout.
    await expect(queue.stop({ timeoutMs: 100 })).resolves.toBeUndefined();
  });

  it('abort(id) fires only the signal of that job', async () => {
    const { queue } = subject();
    const signals = new Map<string, JobSignal>();
    const finish = new Map<string, () => void>();
    cleanups.push(async () => {
      for (const end of finish.values()) end(); // the job that was not aborted ends with the test
    });
    await start(
      queue,
      (j, s) =>
        new Promise<void>((resolve) => {
          signals.set(j.generationId, s);
          finish.set(j.generationId, resolve);
          s.addEventListener('abort', () => resolve());
        }),
    );
    const [a, b] = [job(), job()];
    await queue.enqueue(a);
    await queue.enqueue(b);
    await until(() => signals.size === 2, { what: 'both jobs to run', timeoutMs: 5000, intervalMs: 10 });
    expect(queue.abort(a.generationId)).toBe(true);
    expect(signals.get(a.generationId)!.aborted).toBe(true);
    expect(signals.get(b.generationId)!.aborted).toBe(false);
    // The aborted job's end inside the worker is not observable from outside the queue but by this answer.
    await sleep(100);
    expect(queue.abort(a.generationId)).toBe(false); // it has finished
  });

  it('takes work another instance enqueued on its next poll, without a local wake-up', async () => {
    const name = randomName('q');
    const worker = new PgBossQueue({ connectionString: db.url, queueName: name, poolSize: 2, pollIntervalMs: 100 });
    const api = new PgBossQueue({ connectionString: db.url, queueName: name, poolSize: 2 });
    cleanups.push(() => worker.stop({ timeoutMs: 500 }), () => api.stop({ timeoutMs: 500 }));
    const seen: string[] = [];
    await start(worker, async (j) => {
      seen.push(j.generationId);
    });
    const jobs = Array.from({ length: 5 }, job);
    for (const j of jobs) await api.enqueue(j);
    await until(() => seen.length === 5, { what: 'the worker to take the other instance’s jobs', timeoutMs: 5000, intervalMs: 10 });
    expect(seen.sort()).toEqual(jobs.map((j) => j.generationId).sort());
  });

  it('several instances installing pg-boss and creating the queue at once on a fresh schema all get ready', async () => {
    // pg-boss's own createQueue deadlocks when two instances create one queue at the same moment (Postgres then fails
    // one of them after its deadlock_timeout): each instance's first enqueue would answer 503.
    const schema = randomName('s');
    const name = randomName('q');
    const queues = Array.from({ length: 4 }, () => new PgBossQueue({ connectionString: db.url, schema, queueName: name, poolSize: 2, enqueueTimeoutMs: 20_000 }));
    for (const q of queues) cleanups.push(() => q.stop({ timeoutMs: 500 }));
    const results = await Promise.allSettled(queues.map((q, i) => q.enqueue({ generationId: `g${i}`, modelId: 'm' })));
    expect(results.map((r) => (r.status === 'rejected' ? String(r.reason) : 'ok'))).toEqual(['ok', 'ok', 'ok', 'ok']);
    expect((await jobStates(db.url, name, schema)).created).toBe(4);
  });

  it('prepares a statement again when a table changed under it (pg-boss migrated by a newer instance)', async () => {
    const table = randomName('t');
    await sql(db.url, `CREATE TABLE ${table} (a int)`);
    await sql(db.url, `INSERT INTO ${table} VALUES (1)`);
    const queue = new PgBossQueue({ connectionString: db.url, queueName: randomName('q'), poolSize: 1 });
    cleanups.push(() => queue.stop({ timeoutMs: 500 }));
    // The queue's own statements return fixed columns; this one, through the same path, returns every column.
    const query = (queue as unknown as { query(open: unknown, text: string, values: unknown[]): Promise<{ rows: unknown[] }> }).query.bind(queue);
    const open = (queue as unknown as { openConnection(): unknown }).openConnection();
    const text = `SELECT * FROM ${table} WHERE a = $1`;
    expect((await query(open, text, [1])).rows).toEqual([{ a: 1 }]);
    await sql(db.url, `ALTER TABLE ${table} ADD COLUMN b int DEFAULT 2`);
    // Without a new name the one connection's prepared statement fails: "cached plan must not change result type".
    expect((await query(open, text, [1])).rows).toEqual([{ a: 1, b: 2 }]);
  });
});

