// Several host processes (test/fixtures/host.ts) share one Postgres database (the stores and the pg-boss queue), as
// instances behind a load balancer would, with no Redis: the hosts are given no REDIS_URL and load nothing of it. Each
// test has a database of its own, and kills whatever it started.
import { afterEach, describe, expect, it } from 'vitest';
import { HostProcess, createOn, freshStores, generationRows, jobStates, seedUsers, sleep, type CreateAnswer, type FreshStores, type HostEnv } from './helpers.js';
import { until } from '@genservice/testing';

const PRICE = 3;
const FAILURE_FEE = 1;
const MAX_CLAIMS = 3;

interface Cluster {
  stores: FreshStores;
  hosts: HostProcess[];
  start(instanceId: string, extra?: Partial<HostEnv>): HostProcess;
  close(): Promise<void>;
}

let current: Cluster | undefined;
afterEach(async () => {
  const c = current;
  current = undefined;
  await c?.close();
});

async function cluster(): Promise<Cluster> {
  const stores = await freshStores();
  const hosts: HostProcess[] = [];
  const c: Cluster = {
    stores,
    hosts,
    start(instanceId, extra = {}) {
      const host = new HostProcess({
        DATABASE_URL: stores.db.url,
        INSTANCE_ID: instanceId,
        MAX_CLAIMS: String(MAX_CLAIMS),
        ...extra,
      });
      hosts.push(host);
      return host;
    },
    async close() {
      for (const h of hosts) h.kill('SIGKILL');
      await Promise.all(hosts.map((h) => h.exited));
      await stores.drop();
    },
  };
  current = c;
  return c;
}

/**
 * Generations not finished yet: still pending or processing, or terminal with their reserve still open (the
 * lifecycle settles just after the transition; a crash in between is settled by recovery).
 */
async function unfinished(stores: FreshStores): Promise<number> {
  const s = `"${stores.schema}"`;
  const { rows } = await stores.pool.query(
    `SELECT count(*)::int AS n FROM ${s}.generations g LEFT JOIN ${s}.reserves r ON r.generation_id = g.id
      WHERE g.status IN ('pending', 'processing') OR r.state = 'open'`,
  );
  return Number(rows[0].n);
}

async function statusCounts(stores: FreshStores): Promise<Record<string, number>> {
  const { rows } = await stores.pool.query(`SELECT status, count(*)::int AS n FROM "${stores.schema}".generations GROUP BY status`);
  return Object.fromEntries(rows.map((r: { status: string; n: number }) => [r.status, Number(r.n)]));
}

/** Every generation is finished and billed exactly once; every user's tokens add up to what they were given. */
async function expectBilledOnce(stores: FreshStores, initial: Record<string, number>): Promise<void> {
  const rows = await generationRows(stores);
  for (const r of rows) {
    expect(['completed', 'failed'], `generation ${r.id}`).toContain(r.status);
    expect(r.reserveState, `reserve of ${r.id}`).toBe('settled');
    // One reserve row per generation (primary key), charged once, and what the client reads as price.
    expect(r.charged, `charge of ${r.id}`).toBe(r.price);
    expect(r.price, `price of ${r.id}`).toBe(r.status === 'completed' ? PRICE : FAILURE_FEE);
  }
  for (const [user, amount] of Object.entries(initial)) {
    const a = await stores.ledger.account(user);
    expect(a.balance + a.reserved + a.settled, `tokens of ${user}`).toBe(amount);
    expect(a.reserved, `open reserves of ${user}`).toBe(0);
    const charged = rows.filter((r) => r.ownerId === user).reduce((sum, r) => sum + (r.charged ?? 0), 0);
    expect(a.settled, `settled of ${user}`).toBe(charged);
  }
}

function refusals(hosts: HostProcess[], generationId: string): HostProcess[] {
  return hosts.filter((h) =>
    h.logs().some((l) => l.generationId === generationId && String(l.msg).startsWith('completion refused by the store')),
  );
}

describe('PgBossQueue across host processes (no Redis)', () => {
  it(
    '500 creates over two instances, one SIGKILLed mid-run: every accepted generation finishes, none is charged twice',
    async () => {
      const c = await cluster();
      const users = Array.from({ length: 10 }, (_, i) => `u${i}`);
      // 50 creates per user at 3 tokens against 120 tokens: about 10 per user are refused with 402.
      const initial = Object.fromEntries(users.map((u) => [u, 120]));
      await seedUsers(c.stores, initial);
      const quiet = { LOG_LEVEL: 'warn' };
      const a = c.start('A', quiet);
      const b = c.start('B', quiet);
      await Promise.all([a.ready(), b.ready()]);
      const live: HostProcess[] = [a, b];

      const total = 500;
      const killAt = 200;
      const answers: CreateAnswer[] = [];
      let next = 0;
      let restarted: Promise<void> | undefined;
      const sender = async (): Promise<void> => {
        for (;;) {
          const i = next++;
          if (i >= total) return;
          if (i === killAt) {
            // Mid-run: A has jobs running and a backlog is waiting in Postgres.
            a.kill('SIGKILL');
            live.splice(live.indexOf(a), 1);
            restarted = (async () => {
              // The killed instance stays down a while, as a real restart does: its leases must lapse meanwhile.
              await sleep(1000);
              const again = c.start('A2', quiet);
              await again.ready();
              live.push(again);
            })();
          }
          const host = live[i % live.length]!;
          const user = users[i % users.length]!;
          answers.push(await createOn(host.url, `key-${user}`, `prompt ${i}`));
        }
      };
      await Promise.all(Array.from({ length: 16 }, sender));
      await restarted;

      const accepted = answers.filter((r) => r.status === 201).map((r) => r.generationId!);
      const refused = answers.filter((r) => r.status === 402);
      const lost = answers.filter((r) => r.status === 0); // in flight to A when it died: outcome unknown to the client
      expect(answers).toHaveLength(total);
      expect(accepted.length + refused.length + lost.length).toBe(total);
      expect(refused.every((r) => r.code === 'insufficient_funds')).toBe(true);
      expect(refused.length).toBeGreaterThan(0);
      expect(accepted.length).toBeGreaterThan(300);

      await until(async () => (await unfinished(c.stores)) === 0, { what: 'every generation to finish', timeoutMs: 90_000, intervalMs: 250 });
      // A create cut off between its reserve and its insert leaves a reserve without a generation; recovery releases
      // it after orphanReserveMs (2 s in the fixture).
      await until(async () => (await c.stores.ledger.openReserves(10)).length === 0, { what: 'orphan reserves to be released', timeoutMs: 30_000, intervalMs: 250 });

      const rows = await generationRows(c.stores);
      const byId = new Map(rows.map((r) => [r.id, r]));
      for (const id of accepted) expect(byId.get(id)?.status, `accepted generation ${id}`).toBe('completed');
      // A create whose answer was lost may have been stored before A died; recovery finishes it like any other.
      expect(rows.length).toBeGreaterThanOrEqual(accepted.length);
      expect(rows.length).toBeLessThanOrEqual(accepted.length + lost.length);
      // A's running jobs were taken over by another instance (recovery found their store leases run out and enqueued
      // them again): a second claim, still one completion. Whether A held a
      // running job at the instant of the kill depends on the machine's timing, so the count is not asserted; that a
      // taken-over job completes once is (and the billing check below).
      const takenOver = rows.filter((r) => r.claims >= 2);
      for (const r of takenOver) expect(r.status).toBe('completed');
      await expectBilledOnce(c.stores, initial);
      // And no instance ever needed Redis: none holds a connection to its port.
      for (const h of live) {
        const sockets = (await (await fetch(`${h.url}/_test/redis-connections`)).json()) as { connections: number };
        expect(sockets.connections, h.env.INSTANCE_ID).toBe(0);
      }
    },
    150_000,
  );

  it(
    'a worker whose event loop blocks past its lease loses the job to another instance, and its late completion is refused',
    async () => {
      const c = await cluster();
      await seedUsers(c.stores, { u: 30 });
      const a = c.start('A');
      const b = c.start('B');
      await Promise.all([a.ready(), b.ready()]);

      const created = await createOn(a.url, 'key-u', 'block:6000');
      expect(created.status).toBe(201);
      const id = created.generationId!;

      await until(async () => (await unfinished(c.stores)) === 0, { what: 'the takeover to finish the generation', timeoutMs: 30_000 });
      // The blocked worker wakes after 6 s, tries to complete, and the store refuses it.
      await until(() => refusals([a, b], id).length === 1, { what: 'the blocked worker to be refused', timeoutMs: 20_000 });

      const [row] = await generationRows(c.stores);
      expect(row!.status).toBe('completed');
      expect(row!.claims).toBe(2);
      const refused = refusals([a, b], id)[0]!;
      const winner = refused === a ? 'B' : 'A';
      expect(row!.resultText).toBe(`done by ${winner} on attempt 2`);
      // Give the refused worker's process a moment to write anything it still would; nothing may change.
      await sleep(500);
      expect(await c.stores.ledger.account('u')).toEqual({ balance: 27, reserved: 0, settled: 3 });
      await expectBilledOnce(c.stores, { u: 30 });
    },
    90_000,
  );

  it(
    'a job that kills its worker every time ends failed with the failure fee after maxClaims runs; other jobs are unaffected',
    async () => {
      const c = await cluster();
      await seedUsers(c.stores, { poison: 30, other: 100 });
      let deaths = 0;
      let supervising = true;
      // A supervisor, as a process manager would be: a host that dies is started again.
      const keep = (id: string, n = 0): HostProcess => {
        const h = c.start(`${id}${n || ''}`);
        void h.exited.then(({ signal }) => {
          if (!supervising || signal !== 'SIGKILL') return;
          deaths++;
          if (deaths <= 10) keep(id, n + 1);
        });
        return h;
      };
      const a = keep('A');
      keep('B');
      await Promise.all(c.hosts.map((h) => h.ready()));

      const poison = await createOn(a.url, 'key-poison', 'kill');
      expect(poison.status).toBe(201);
      const others: string[] = [];
      for (let i = 0; i < 10; i++) {
        const live = c.hosts.find((h) => h.alive && h.port > 0) ?? a;
        const r = await createOn(live.url, 'key-other', `fine ${i}`);
        if (r.status === 201) others.push(r.generationId!);
      }
      expect(others.length).toBeGreaterThan(0);

      await until(async () => (await unfinished(c.stores)) === 0, { what: 'every generation to finish', timeoutMs: 90_000, intervalMs: 250 });
      supervising = false;

      const rows = await generationRows(c.stores);
      const bad = rows.find((r) => r.id === poison.generationId)!;
      expect(bad.status).toBe('failed');
      expect(bad.price).toBe(FAILURE_FEE);
      expect(bad.charged).toBe(FAILURE_FEE);
      // Each of the first maxClaims claims ran the provider (and died); a later claim, if any, gave up at once.
      expect(deaths).toBe(MAX_CLAIMS);
      expect(bad.claims).toBeGreaterThanOrEqual(MAX_CLAIMS);
      expect(bad.claims).toBeLessThanOrEqual(MAX_CLAIMS + 1);
      for (const id of others) expect(rows.find((r) => r.id === id)?.status).toBe('completed');
      expect(await c.stores.ledger.account('poison')).toEqual({ balance: 29, reserved: 0, settled: 1 });
      await expectBilledOnce(c.stores, { poison: 30, other: 100 });
    },
    120_000,
  );

  it(
    'SIGTERM: running jobs finish, waiting ones stay in Postgres and another instance does them',
    async () => {
      const c = await cluster();
      await seedUsers(c.stores, { u: 100 });
      const a = c.start('A', { CONCURRENCY: '2', STOP_TIMEOUT_MS: '10000' });
      await a.ready();
      const ids: string[] = [];
      for (let i = 0; i < 8; i++) {
        const r = await createOn(a.url, 'key-u', 'sleep:1500');
        expect(r.status).toBe(201);
        ids.push(r.generationId!);
      }
      await until(async () => (await statusCounts(c.stores)).processing === 2, { what: 'two jobs running on A', timeoutMs: 10_000, intervalMs: 50 });

      const exit = await a.terminate();
      expect(exit.code).toBe(0);
      const stopped = a.logs().find((l) => l.event === 'stopped');
      expect(stopped, a.output).toBeDefined();
      // The two running jobs were finished by A, not aborted.
      const rows = await generationRows(c.stores);
      const doneByA = rows.filter((r) => r.status === 'completed');
      expect(doneByA).toHaveLength(2);
      for (const r of doneByA) expect(r.resultText).toBe('done by A on attempt 1');
      expect(rows.filter((r) => r.status === 'pending')).toHaveLength(6);
      // The rest wait in pg-boss, untouched.
      const counts = await jobStates(c.stores.db.url, 'genservice');
      expect(counts.created).toBe(6);
      expect(counts.active).toBe(0);
      expect(counts.completed).toBe(2);

      const b = c.start('B', { CONCURRENCY: '4' });
      await b.ready();
      await until(async () => (await unfinished(c.stores)) === 0, { what: 'B to run the waiting jobs', timeoutMs: 30_000 });
      const after = await generationRows(c.stores);
      expect(after.filter((r) => r.resultText === 'done by B on attempt 1')).toHaveLength(6);
      await expectBilledOnce(c.stores, { u: 100 });
    },
    90_000,
  );

  it(
    'SIGTERM past the stop deadline: the running job is aborted, handed back, and finished once by another instance',
    async () => {
      const c = await cluster();
      await seedUsers(c.stores, { u: 100 });
      const a = c.start('A', { STOP_TIMEOUT_MS: '300' });
      await a.ready();
      const r = await createOn(a.url, 'key-u', 'sleep:4000');
      expect(r.status).toBe(201);
      await until(async () => (await statusCounts(c.stores)).processing === 1, { what: 'the job to run on A', timeoutMs: 10_000, intervalMs: 50 });

      const exit = await a.terminate();
      expect(exit.code).toBe(0);
      const [row] = await generationRows(c.stores);
      expect(row!.status).toBe('processing'); // A let go of it; its lease runs out
      const counts = await jobStates(c.stores.db.url, 'genservice');
      // Handed back to pg-boss (to be retried once the store lease of A's run has run out), not lost.
      expect(counts.retry).toBe(1);
      expect(counts.active).toBe(0);

      const b = c.start('B');
      await b.ready();
      await until(async () => (await unfinished(c.stores)) === 0, { what: 'B to finish the job', timeoutMs: 30_000 });
      const [done] = await generationRows(c.stores);
      expect(done!.status).toBe('completed');
      expect(done!.resultText).toMatch(/^done by B on attempt \d$/);
      await expectBilledOnce(c.stores, { u: 100 });
    },
    60_000,
  );
});
