import { afterEach, describe, expect, it } from 'vitest';
import type { Ledger } from '@genservice/core/ports';
import { until } from '../until.js';
import { createOn, type CreateAnswer, type HostProcess as AnyHostProcess } from './host-process.js';

type HostProcess = AnyHostProcess<{ INSTANCE_ID: string }>;

/**
 * The scale-out suite: several host processes share one Postgres (the stores) and one distributed queue, as instances
 * behind a load balancer would; one is SIGKILLed mid-run, one blocks its event loop past its lease, a job kills its
 * worker every time, and instances stop with SIGTERM. Every queue package runs it (BullMQ, pg-boss) with a host fixture
 * of its own: a genservice instance behind node:http that prints `{"event":"listening","port":N}` and `{"event":
 * "stopped"}` as JSON lines, offers the model `fake` at price 3 with a failure fee of 1 and `runner.maxClaims` from
 * `MAX_CLAIMS`, and runs a prompt as told: `sleep:N` (ms), `block:N` (a busy event loop for N ms), `kill` (SIGKILLs its
 * own process), anything else at once; a completed run's text is `done by <INSTANCE_ID> on attempt <claim>`. Hosts read
 * `CONCURRENCY` and `STOP_TIMEOUT_MS`, and `LOG_LEVEL`. Recovery runs often and a reserve left without its generation
 * is released within seconds (the fixture's `recovery` settings), so a crashed instance's work is taken over in the test.
 */

const PRICE = 3;
const FAILURE_FEE = 1;
const MAX_CLAIMS = 3;

/** The stores the hosts share, as the suite reads them. */
export interface ScaleOutStores {
  /** A pool on the stores' database, for reading their rows. */
  pool: { query(text: string, values?: unknown[]): Promise<{ rows: any[] }> };
  /** The stores' schema in it. */
  schema: string;
  ledger: Ledger;
  apiKeys: { addKey(apiKey: string, userId: string): Promise<void> };
}

/** One test's cluster: fresh stores and queue, and how to start hosts on them. */
export interface ScaleOutCluster {
  stores: ScaleOutStores;
  /** Every host started so far (`close` kills them). */
  hosts: HostProcess[];
  /** Starts a host of this cluster with its instance id and extra environment (the suite adds `MAX_CLAIMS`). */
  start(instanceId: string, extra?: Record<string, string>): HostProcess;
  /** The queue's jobs of this cluster: waiting to run, running, and handed back by a stopped instance. */
  jobs(): Promise<{ waiting: number; active: number; handedBack: number }>;
  /** After an instance was SIGKILLed mid-run and before it is started again (default: until its process is gone). */
  afterKill?(killed: HostProcess): Promise<void>;
  /** Checks of the live hosts after the big run (pg-boss: none holds a connection to Redis). */
  checkHosts?(hosts: HostProcess[]): Promise<void>;
  /** Kills the hosts and drops what the cluster made. */
  close(): Promise<void>;
}

export interface ScaleOutOptions {
  /** Where waiting work lives, in words, for the tests' names (`Redis`, `Postgres`). */
  where: string;
}

/** Gives each user a key (`key-<user>`) and a balance. */
async function seedUsers(stores: ScaleOutStores, balances: Record<string, number>): Promise<void> {
  for (const [user, balance] of Object.entries(balances)) {
    await stores.apiKeys.addKey(`key-${user}`, user);
    await stores.ledger.credit(user, balance);
  }
}

/** Per-generation rows of the store and the ledger, read straight from the schema. */
async function generationRows(
  stores: ScaleOutStores,
): Promise<Array<{ id: string; ownerId: string; status: string; price: number | null; claims: number; resultText: string | null; reserveState: string | null; charged: number | null }>> {
  const s = `"${stores.schema}"`;
  const { rows } = await stores.pool.query(
    `SELECT g.id, g.owner_id, g.status, g.price, g.claims, g.result_text, r.state, r.charged
       FROM ${s}.generations g LEFT JOIN ${s}.reserves r ON r.generation_id = g.id`,
  );
  return rows.map((r: Record<string, unknown>) => ({
    id: String(r.id),
    ownerId: String(r.owner_id),
    status: String(r.status),
    price: r.price === null ? null : Number(r.price),
    claims: Number(r.claims),
    resultText: r.result_text === null ? null : String(r.result_text),
    reserveState: r.state === null ? null : String(r.state),
    charged: r.charged === null ? null : Number(r.charged),
  }));
}

/**
 * Generations not finished yet: still pending or processing, or terminal with their reserve still open (the
 * lifecycle settles just after the transition; a crash in between is settled by recovery).
 */
async function unfinished(stores: ScaleOutStores): Promise<number> {
  const s = `"${stores.schema}"`;
  const { rows } = await stores.pool.query(
    `SELECT count(*)::int AS n FROM ${s}.generations g LEFT JOIN ${s}.reserves r ON r.generation_id = g.id
      WHERE g.status IN ('pending', 'processing') OR r.state = 'open'`,
  );
  return Number(rows[0].n);
}

async function statusCounts(stores: ScaleOutStores): Promise<Record<string, number>> {
  const { rows } = await stores.pool.query(`SELECT status, count(*)::int AS n FROM "${stores.schema}".generations GROUP BY status`);
  return Object.fromEntries(rows.map((r: { status: string; n: number }) => [r.status, Number(r.n)]));
}

/** Every generation is finished and billed exactly once; every user's tokens add up to what they were given. */
async function expectBilledOnce(stores: ScaleOutStores, initial: Record<string, number>): Promise<void> {
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


/** Runs the scale-out suite on one queue; `make` builds a fresh cluster for each test. */
export function runScaleOutSuite(name: string, options: ScaleOutOptions, make: () => Promise<ScaleOutCluster>): void {
  let current: ScaleOutCluster | undefined;
  afterEach(async () => {
    const c = current;
    current = undefined;
    await c?.close();
  });

  async function cluster(): Promise<ScaleOutCluster> {
    const c = await make();
    current = c;
    // Every host runs with the suite's maxClaims (the poison-job case counts the runs against it).
    const start = c.start.bind(c);
    c.start = (id, extra = {}) => start(id, { MAX_CLAIMS: String(MAX_CLAIMS), ...extra });
    return c;
  }

  describe(`${name}: across host processes`, () => {
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
              // Mid-run: A has jobs running and a backlog is waiting in the queue.
              a.kill('SIGKILL');
              live.splice(live.indexOf(a), 1);
              restarted = (async () => {
                // The killed instance stays down a while, as a real restart does (the backend says how long).
                await (c.afterKill ? c.afterKill(a) : a.exited);
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
        // A's running jobs were taken over by another instance: a second claim, still one completion. Whether A held a
        // running job at the instant of the kill depends on the machine's timing, so the count is not asserted; that a
        // taken-over job completes once is (and the billing check below).
        const takenOver = rows.filter((r) => r.claims >= 2);
        for (const r of takenOver) expect(r.status).toBe('completed');
        await expectBilledOnce(c.stores, initial);
        await c.checkHosts?.(live);
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
        // Both processes stop gracefully (each waits for what it still runs and would write): nothing may change.
        await Promise.all([a.terminate(), b.terminate()]);
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
      `SIGTERM: running jobs finish, waiting ones stay in ${options.where} and another instance does them`,
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
        // The rest wait in the queue, untouched.
        expect(await c.jobs()).toEqual({ waiting: 6, active: 0, handedBack: 0 });

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
        // Handed back to the queue (to run again once the store lease of A's run has run out), not lost.
        const counts = await c.jobs();
        expect(counts.active).toBe(0);
        expect(counts.handedBack + counts.waiting).toBe(1);

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
}
