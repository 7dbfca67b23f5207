import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import PgBoss from 'pg-boss';
import { silentLogger } from '@genservice/core';
import type { Job } from '@genservice/core/ports';
import { fairOrder, fairTagUnits } from '@genservice/core/ports';
import { PgBossQueue } from '../src/index.js';
import { fairFetch, fairInsert, INSERT_PARAMETERS, LOW_BAND, sweepSql } from '../src/fair-send.js';
import { createTestDatabase, randomName, sql, waitingByOwner, type TestDatabase } from './helpers.js';
import { until } from '@genservice/testing';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('gs_pgboss_rt');
}, 60_000);
afterAll(async () => {
  await db?.drop();
});

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A real pool whose statements are recorded (the text of each `query` the queue sends). */
function recordingPool(): { pool: pg.Pool; sent: string[]; names: Array<string | undefined> } {
  const pool = new pg.Pool({ connectionString: db.url, max: 3 });
  // As a host's pool has: an idle connection's error (the server ended it) must not end the process.
  pool.on('error', () => undefined);
  const sent: string[] = [];
  const names: Array<string | undefined> = [];
  const query = pool.query.bind(pool) as (...args: unknown[]) => Promise<unknown>;
  (pool as unknown as { query: (...args: unknown[]) => Promise<unknown> }).query = (...args: unknown[]) => {
    const config = typeof args[0] === 'string' ? { text: args[0] } : (args[0] as { text: string; name?: string });
    sent.push(config.text);
    names.push(config.name);
    return query(...args);
  };
  cleanups.push(() => pool.end());
  return { pool, sent, names };
}

describe('PgBossQueue: a fair enqueue is one round trip', () => {
  it("the installed pg-boss's insert has the shape the one-round-trip path builds on", async () => {
    // If this fails after a pg-boss upgrade, fair-send.ts must follow pg-boss's new statement before the upgrade ships.
    const boss = new PgBoss({ connectionString: 'postgres://unused@127.0.0.1:1/none', schema: 'gs_x' }); // never started
    let seen: { text: string; values: unknown[] } | undefined;
    const db = {
      executeSql: async (text: string, values: unknown[]) => {
        seen = { text, values };
        return { rows: [{ id: 'id' }] };
      },
    };
    expect(await boss.send('q', { a: 1 }, { singletonKey: 'k', db })).toBe('id');
    expect(seen!.values).toHaveLength(INSERT_PARAMETERS);
    const fair = fairInsert(seen!.text, 'gs_x');
    expect(fair).not.toBeNull();
    expect(fair).toContain('INSERT INTO gs_x.genservice_owner_counts');
    expect(fairInsert('SELECT 1', 'gs_x')).toBeNull();
    // And its fetch (as this queue fetches: by priority, without metadata), which counts the fetched jobs out.
    let fetched: string | undefined;
    const fetchDb = {
      executeSql: async (text: string) => {
        fetched = text;
        return { rows: [] };
      },
    };
    expect(await boss.fetch('q', { batchSize: 3, priority: true, db: fetchDb })).toEqual([]);
    const fairF = fairFetch(fetched!, 'gs_x');
    expect(fairF).not.toBeNull();
    expect(fairF).toContain('INSERT INTO gs_x.genservice_owner_counts');
    expect(fairFetch('SELECT 1', 'gs_x')).toBeNull();
  });

  it('sends one statement per enqueue, and stores the job as pg-boss does with the owner’s place as priority', async () => {
    const name = randomName('q');
    const { pool, sent, names } = recordingPool();
    const queue = new PgBossQueue({ pool, queueName: name });
    cleanups.push(() => queue.stop({ timeoutMs: 1000 }));
    // The first enqueue installs pg-boss and the queue: not the steady state measured.
    await queue.enqueue({ generationId: 'warm-1', modelId: 'm', ownerId: 'alice' }, { fresh: true });
    sent.length = 0;
    names.length = 0;
    await queue.enqueue({ generationId: 'gen-a2', modelId: 'm', ownerId: 'alice' }, { fresh: true });
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatch(/^WITH gs_place AS/);
    // A prepared statement: after its first use on a connection, only its values travel.
    expect(names[0]).toMatch(/^genservice_pgboss_/);
    await queue.enqueue({ generationId: 'gen-b1', modelId: 'm', ownerId: 'bob' }, { fresh: true });
    await queue.enqueue({ generationId: 'gen-x1', modelId: 'm' }, { fresh: true });

    expect(await waitingByOwner(db.url, name)).toEqual({ alice: 2, bob: 1, '': 1 });
    const rows = await sql<{ singleton_key: string; priority: number; data: unknown; state: string; policy: string; retry_limit: number }>(
      db.url,
      'SELECT singleton_key, priority, data, state::text, policy, retry_limit FROM genservice_jobs.job WHERE name = $1 ORDER BY created_on',
      [name],
    );
    // Minus (the fair order's sort key + 1): alice's second job one round behind the first waiting job.
    const first = -(fairOrder(fairTagUnits(0, 1, 1, 1), 1) + 1);
    expect(rows.map((r) => [r.singleton_key, r.priority])).toEqual([
      ['warm-1', first],
      ['gen-a2', -(fairOrder(fairTagUnits(0, 2, 1, 1), 1) + 1)],
      ['gen-b1', first],
      ['gen-x1', first],
    ]);
    expect(rows[1]).toMatchObject({ data: { generationId: 'gen-a2', modelId: 'm', ownerId: 'alice' }, state: 'created', policy: 'short', retry_limit: 10 });

    // A duplicate (the same generation still waiting) is pg-boss's no-op, and counts nothing.
    await queue.enqueue({ generationId: 'gen-a2', modelId: 'm', ownerId: 'alice' }, { fresh: true });
    expect(await waitingByOwner(db.url, name)).toEqual({ alice: 2, bob: 1, '': 1 });
    expect((await sql(db.url, 'SELECT 1 FROM genservice_jobs.job WHERE name = $1', [name])).length).toBe(4);
  });

  it("computes the fair order's tags as `fairTagUnits` does: weights, users of an organisation, priorities", async () => {
    const name = randomName('q');
    const queue = new PgBossQueue({ connectionString: db.url, queueName: name, poolSize: 2 });
    cleanups.push(() => queue.stop({ timeoutMs: 1000 }));
    const jobs: Array<Job & { expected: number }> = [
      { generationId: 'g1', modelId: 'm', ownerId: 'ann', organizationId: 'gold', weight: 5, expected: fairOrder(fairTagUnits(0, 1, 1, 5), 1) },
      { generationId: 'g2', modelId: 'm', ownerId: 'ann', organizationId: 'gold', weight: 5, expected: fairOrder(fairTagUnits(0, 2, 1, 5), 1) },
      { generationId: 'g3', modelId: 'm', ownerId: 'ann', organizationId: 'gold', weight: 5, expected: fairOrder(fairTagUnits(0, 3, 1, 5), 1) },
      // A second user of the organisation: two users share its turns.
      { generationId: 'g4', modelId: 'm', ownerId: 'bea', organizationId: 'gold', weight: 5, expected: fairOrder(fairTagUnits(0, 1, 2, 5), 1) },
      { generationId: 'g5', modelId: 'm', ownerId: 'bea', organizationId: 'gold', weight: 5, expected: fairOrder(fairTagUnits(0, 2, 2, 5), 1) },
      { generationId: 's1', modelId: 'm', ownerId: 'sam', organizationId: 'silver', weight: 2, expected: fairOrder(fairTagUnits(0, 1, 1, 2), 1) },
      { generationId: 's2', modelId: 'm', ownerId: 'sam', organizationId: 'silver', weight: 2, expected: fairOrder(fairTagUnits(0, 2, 1, 2), 1) },
      { generationId: 'h1', modelId: 'm', ownerId: 'sam', organizationId: 'silver', weight: 2, priority: 'high', expected: fairOrder(fairTagUnits(0, 1, 1, 2), 0) },
      { generationId: 'l1', modelId: 'm', ownerId: 'sam', organizationId: 'silver', weight: 2, priority: 'low', expected: LOW_BAND + fairOrder(fairTagUnits(0, 1, 1, 2), 1) },
      { generationId: 'l2', modelId: 'm', ownerId: 'sam', organizationId: 'silver', weight: 2, priority: 'low', expected: LOW_BAND + fairOrder(fairTagUnits(0, 2, 1, 2), 1) },
      // A weight of 3 does not divide FAIR_SCALE: both round down alike.
      { generationId: 't1', modelId: 'm', ownerId: 'tom', organizationId: 'odd', weight: 3, expected: fairOrder(fairTagUnits(0, 1, 1, 3), 1) },
      { generationId: 't2', modelId: 'm', ownerId: 'tom', organizationId: 'odd', weight: 3, expected: fairOrder(fairTagUnits(0, 2, 1, 3), 1) },
    ];
    for (const { expected: _, ...j } of jobs) await queue.enqueue(j, { fresh: true });
    const rows = await sql<{ singleton_key: string; priority: number }>(db.url, 'SELECT singleton_key, priority FROM genservice_jobs.job WHERE name = $1', [name]);
    const got = Object.fromEntries(rows.map((r) => [r.singleton_key, r.priority]));
    expect(got).toEqual(Object.fromEntries(jobs.map((j) => [j.generationId, -(j.expected + 1)])));
  });

  it('a worker runs the jobs so added, owners taking turns, and the fetches count them out (no statement of their own)', async () => {
    const name = randomName('q');
    const { pool, sent } = recordingPool();
    const queue = new PgBossQueue({ pool, queueName: name });
    cleanups.push(() => queue.stop({ timeoutMs: 1000 }));
    for (let i = 1; i <= 3; i++) await queue.enqueue({ generationId: `a${i}`, modelId: 'm', ownerId: 'alice' }, { fresh: true });
    for (let i = 1; i <= 3; i++) await queue.enqueue({ generationId: `b${i}`, modelId: 'm', ownerId: 'bob' }, { fresh: true });
    const ran: string[] = [];
    await queue.start(
      async (job: Job) => {
        ran.push(job.generationId);
      },
      { concurrency: 1, leaseMs: 5000, modelConcurrency: () => undefined, logger: silentLogger },
    );
    await until(() => ran.length === 6, { what: 'six runs', timeoutMs: 5000, intervalMs: 10 });
    expect(ran).toEqual(['a1', 'b1', 'a2', 'b2', 'a3', 'b3']);
    // Counted out by the statements that fetched them: nothing waits the moment the last one is fetched.
    expect(await waitingByOwner(db.url, name)).toEqual({});
    expect(sent.some((t) => t.startsWith('WITH gs_fetched AS'))).toBe(true);
    expect(sent.filter((t) => t.includes('genservice_owner_counts') && !/^WITH gs_(place|fetched) AS/.test(t) && !t.startsWith('BEGIN'))).toEqual([]);
  });

  it("the sweep drops the counts of owners with nothing waiting, and keeps a waiting owner's", async () => {
    const name = randomName('q');
    const queue = new PgBossQueue({ connectionString: db.url, queueName: name, poolSize: 3 });
    cleanups.push(() => queue.stop({ timeoutMs: 1000 }));
    const ran: string[] = [];
    await queue.start(async (job: Job) => void ran.push(job.generationId), { concurrency: 2, leaseMs: 5000, modelConcurrency: () => undefined, logger: silentLogger });
    for (let i = 0; i < 3; i++) await queue.enqueue({ generationId: `done-${i}`, modelId: 'm', ownerId: 'idle' }, { fresh: true });
    await until(() => ran.length === 3, { what: 'the idle owner’s jobs to run', timeoutMs: 5000, intervalMs: 10 });
    await queue.stop({ timeoutMs: 1000 });
    // A waiting job of another owner (the queue is stopped: it stays waiting).
    await queue.enqueue({ generationId: 'waits', modelId: 'm', ownerId: 'busy' }, { fresh: true });
    const owners = async (): Promise<string[]> =>
      (await sql<{ owner: string; kind: string }>(db.url, 'SELECT owner, kind FROM genservice_jobs.genservice_owner_counts WHERE queue = $1 ORDER BY 1, 2', [name])).map((r) => `${r.owner}:${r.kind}`);
    const line = (owner: string): string => `u:${owner}\u001f${owner}\u001fnormal`;
    expect(await owners()).toEqual([`${line('busy')}:added`, `${line('idle')}:added`, `${line('idle')}:taken`]);
    await sql(db.url, sweepSql('genservice_jobs'), [name]);
    expect(await owners()).toEqual([`${line('busy')}:added`]);
    expect(await waitingByOwner(db.url, name)).toEqual({ busy: 1 });
  });

  it('a job handed back and taken again is counted out of its owner’s line once', async () => {
    const name = randomName('q');
    const queue = new PgBossQueue({ connectionString: db.url, queueName: name, poolSize: 3 });
    cleanups.push(() => queue.stop({ timeoutMs: 1000 }));
    const settings = { concurrency: 2, leaseMs: 1000, modelConcurrency: () => undefined, logger: silentLogger };
    let started = 0;
    await queue.start(() => {
      started++;
      return new Promise<void>(() => undefined); // ignores its signal: handed back at the stop's deadline
    }, settings);
    await queue.enqueue({ generationId: 'g', modelId: 'm', ownerId: 'alice' }, { fresh: true });
    await until(() => started === 1, { what: 'the first run', timeoutMs: 5000, intervalMs: 10 });
    await queue.stop({ timeoutMs: 50 });
    const ran: string[] = [];
    await queue.start(async (job: Job) => void ran.push(job.generationId), settings);
    // Handed back with a retry delay of the lease (1 s): taken again after it.
    await until(() => ran.length === 1, { what: 'the second run', timeoutMs: 10_000, intervalMs: 20 });
    const counts = await sql<{ kind: string; n: string }>(db.url, 'SELECT kind, n FROM genservice_jobs.genservice_owner_counts WHERE queue = $1 ORDER BY kind', [name]);
    expect(counts.map((c) => [c.kind, Number(c.n)])).toEqual([
      ['added', 1],
      ['taken', 1],
    ]);
  });

  it('with preparedStatements off, no statement is prepared (for a pooler in transaction mode)', async () => {
    const { pool, sent, names } = recordingPool();
    const queue = new PgBossQueue({ pool, queueName: randomName('q'), preparedStatements: false });
    cleanups.push(() => queue.stop({ timeoutMs: 1000 }));
    const ran: string[] = [];
    await queue.start(async (job: Job) => void ran.push(job.generationId), { concurrency: 2, leaseMs: 5000, modelConcurrency: () => undefined, logger: silentLogger });
    for (let i = 0; i < 3; i++) await queue.enqueue({ generationId: `g${i}`, modelId: 'm', ownerId: 'alice' }, { fresh: true });
    await until(() => ran.length === 3, { what: 'three runs', timeoutMs: 5000, intervalMs: 10 });
    expect(sent.some((t) => t.startsWith('WITH gs_place AS'))).toBe(true);
    expect(names.filter((n) => n !== undefined)).toEqual([]);
  });
});

