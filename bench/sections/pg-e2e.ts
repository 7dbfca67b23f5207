/**
 * Postgres end to end, public API (issues 22 and 36): N generations created through `service.create` by C concurrent
 * clients for 64 users, on the Postgres stores, run to completed by the in-process runner with the no-op provider;
 * against the minimal hand-written `pg` a careful engineer would write (issue 36): the debit and the in-flight count as
 * columns of the user's account row, checked and moved in the create's one transaction with the generation row and its
 * `created` event; the claim with its event (one statement); the completion with its event and the settle (one
 * statement); per-user row locks only, no reserve table, no count over rows; p-queue at the same concurrency.
 * The figure is generations per second until the last one is settled, with the round trips to the server and the
 * node CPU per generation of each side; the same database server, the same run.
 */
import pg from 'pg';
import PQueue from 'p-queue';
import { randomUUID } from 'node:crypto';
import { createGenerationService, type GenerationContext } from '@genservice/core';
import type { GenerationStore } from '@genservice/core/ports';
import { createPostgresStores, runMigrations } from '@genservice/store-postgres';
import { MODEL, MODEL_ID, SETTINGS, noopProvider } from '../lib/fixture.js';

export const PG_E2E_USERS = 64;
/** Connections per side (the server allows 100 in all, shared with whatever else runs). */
export const PG_E2E_POOL = 34;
/** The runner's concurrency on both sides: enough that 32 clients' generations do not wait for a lane. */
export const PG_E2E_RUNNER = 32;
export const IN_FLIGHT = 10_000_000;
export const LEASE_MS = 30_000;
export const BALANCE = 1e12;
export const users = Array.from({ length: PG_E2E_USERS }, (_, i) => `user-${i}`);

export interface E2EResult {
  /** Generations per second, created to settled. */
  rate: number;
  /** Node CPU (user + system) of this process per generation, µs. */
  cpuUs: number;
  /** Round trips to the server per generation (every query on every connection of this process, in the window). */
  trips: number;
}

/**
 * Round trips: every `Client.query` of this process (pool.query goes through one too), counted from here on. Each
 * side runs alone in the window it measures, so the count is that side's. BEGIN and COMMIT count: they are trips.
 */
let trips = 0;
let counting = false;
export function countRoundTrips(): void {
  if (counting) return;
  counting = true;
  const clientQuery = pg.Client.prototype.query;
  pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
    trips++;
    return (clientQuery as (...a: unknown[]) => unknown).apply(this, args);
  } as typeof clientQuery;
}

/** Runs `fn` (the measured window) and answers its rate, node CPU and round trips per generation. */
export async function measured(n: number, fn: () => Promise<void>): Promise<E2EResult> {
  countRoundTrips();
  const trips0 = trips;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await fn();
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  return { rate: n / seconds, cpuUs: (cpu.user + cpu.system) / n, trips: (trips - trips0) / n };
}

/** `clients` loops, each creating the next generation as soon as its previous create returned. */
export async function clientsCreate(n: number, clients: number, create: (user: string) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (next < n) {
        const i = next++;
        await create(users[i % users.length]!);
      }
    }),
  );
}

/** Counts calls; resolves when `n` were made. */
export function countdown(n: number): { hit: () => void; done: Promise<void> } {
  let left = n;
  let resolve!: () => void;
  const done = new Promise<void>((r) => (resolve = r));
  return {
    hit: () => {
      if (--left === 0) resolve();
    },
    done,
  };
}

/**
 * Calls `hit` for every change that completed a generation (its settle is in the same statement on the Postgres
 * stores, or follows it at once): the bench's "settled" without wrapping the ledger, which the store would not settle
 * through then.
 */
export function countCompletions(store: GenerationStore, hit: () => void): void {
  const update = store.update.bind(store);
  store.update = async (id, change) => {
    const r = await update(id, change);
    if (r && change.set.status === 'completed') hit();
    return r;
  };
}

/** Ours: `service.create` on the Postgres stores, as the README wires them. */
export async function oursPgE2E(url: string, schema: string, n: number, clients: number): Promise<E2EResult> {
  const stores = await createPostgresStores({ connectionString: url, schema, poolSize: PG_E2E_POOL });
  for (const u of users) await stores.ledger.credit(u, BALANCE);
  const ledger = stores.ledger;
  let settled: ReturnType<typeof countdown> | undefined;
  countCompletions(stores.store, () => settled?.hit());
  const service = createGenerationService({
    store: stores.store,
    ledger,
    apiKeys: stores.apiKeys,
    idempotency: stores.idempotency,
    providers: [noopProvider],
    limits: { inFlightPerUser: IN_FLIGHT },
    runner: { concurrency: PG_E2E_RUNNER, leaseMs: LEASE_MS },
    recovery: { onStart: false, intervalMs: 0 },
  });
  await service.start();
  try {
    settled = countdown(n);
    const result = await measured(n, async () => {
      await clientsCreate(n, clients, (user) => service.create(user, { modelId: MODEL_ID, settings: SETTINGS }));
      await settled!.done;
    });
    const counts = await stores.store.countByStatus!();
    if (counts.completed < n) throw new Error(`pg e2e: expected ${n} completed, got ${JSON.stringify(counts)}`);
    return result;
  } finally {
    await service.stop({ timeoutMs: 5000 });
    await stores.close();
  }
}

/**
 * The hand-written statements (on the store's schema: the schema is not what is measured, the statements are). The
 * account row holds balance, reserved, settled and in_flight (the user's unfinished generations); the generation row
 * holds what it reserved, so the settle needs no reserve table.
 */
export const PG_E2E_SQL = (s: string) => ({
  // The user's row lock serialises racing creates of one user; READ COMMITTED re-checks both conditions on it.
  reserve: `UPDATE ${s}.accounts SET balance = balance - $2, reserved = reserved + $2, in_flight = in_flight + 1
    WHERE user_id = $1 AND balance >= $2 AND in_flight < $3`,
  insert: `WITH ins AS (
      INSERT INTO ${s}.generations (id, owner_id, model_id, settings, status, reserved, claims, created_at, updated_at, last_seq)
      VALUES ($1, $2, $3, $4::json, 'pending', $5, 0, $6, $6, 1) RETURNING id, owner_id)
    INSERT INTO ${s}.events (generation_id, seq, owner_id, type, at, data)
      SELECT id, 1, owner_id, 'created', $6, jsonb_build_object('modelId', $3::text) FROM ins`,
  claim: `WITH m AS (
      UPDATE ${s}.generations SET status = 'processing', claims = 1, started_at = $2, lease_owner = $3, lease_expires_at = $4,
        updated_at = $2, last_seq = last_seq + 1
      WHERE id = $1 AND status = 'pending' RETURNING *),
    ev AS (INSERT INTO ${s}.events (generation_id, seq, owner_id, type, at, data)
      SELECT id, last_seq, owner_id, 'processing', $2, '{"claim":1}' FROM m)
    SELECT * FROM m`,
  // The completion, its event and the settle in one statement: all or nothing, the user's row locked last.
  complete: `WITH m AS (
      UPDATE ${s}.generations SET status = 'completed', price = $4, result_text = $5, finished_at = $2, updated_at = $2,
        last_seq = last_seq + 1
      WHERE id = $1 AND status = 'processing' AND lease_owner = $3 AND lease_expires_at > $2 RETURNING *),
    ev AS (INSERT INTO ${s}.events (generation_id, seq, owner_id, type, at, data)
      SELECT id, last_seq, owner_id, 'completed', $2, jsonb_build_object('price', $4::numeric) FROM m),
    a AS (UPDATE ${s}.accounts acc SET reserved = acc.reserved - m.reserved, settled = acc.settled + $4::numeric,
        balance = acc.balance + (m.reserved - $4::numeric), in_flight = acc.in_flight - 1
      FROM m WHERE acc.user_id = m.owner_id RETURNING 1)
    SELECT count(*)::int AS n FROM m`,
  credit: `INSERT INTO ${s}.accounts (user_id, balance) VALUES ($1, $2)`,
  count: `SELECT status, count(*)::int AS n FROM ${s}.generations GROUP BY status`,
});

/** The settings check a hand-written service would do for the bench model. */
export function validSettings(settings: Record<string, unknown>): boolean {
  for (const [name, v] of Object.entries(settings)) {
    const def = MODEL.settings.find((x) => x.name === name);
    if (!def || typeof v !== 'string' || (def.fieldType === 'select' && !def.options!.includes(v))) return false;
  }
  return MODEL.settings.every((x) => !x.required || settings[x.name] !== undefined);
}

export async function inTransaction<T>(pool: pg.Pool, fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
  const c = await pool.connect();
  try {
    await c.query('BEGIN');
    const r = await fn(c);
    await c.query('COMMIT');
    return r;
  } catch (err) {
    await c.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    c.release();
  }
}

/**
 * The minimal hand-written `pg` and p-queue doing the same work. `prepared`: its statements as named (prepared) ones,
 * as the stores send theirs (not the bench's row: what `bench/pg-e2e-waits.ts` sets beside it).
 */
export async function rawPgE2E(url: string, schema: string, n: number, clients: number, prepared = false): Promise<E2EResult> {
  const pool = new pg.Pool({ connectionString: url, max: PG_E2E_POOL, connectionTimeoutMillis: 5000 });
  pool.on('error', () => {});
  await runMigrations(pool, schema);
  const sql = PG_E2E_SQL(`"${schema}"`);
  const q = <R extends pg.QueryResultRow>(on: pg.Pool | pg.PoolClient, name: string, text: string, values: unknown[]) =>
    prepared ? on.query<R>({ name: `raw_${name}`, text, values }) : on.query<R>(text, values);
  for (const u of users) await pool.query(sql.credit, [u, BALANCE]);
  const queue = new PQueue({ concurrency: PG_E2E_RUNNER });
  const ctx = {} as GenerationContext;
  const settled = countdown(n);
  const run = async (id: string): Promise<void> => {
    const now = Date.now();
    const { rows } = await q(pool, 'claim', sql.claim, [id, now, 'raw', now + LEASE_MS]);
    if (!rows[0]) return;
    const out = await noopProvider.generate({ model: MODEL, settings: rows[0].settings as Record<string, string> }, ctx);
    const done = await q<{ n: number }>(pool, 'complete', sql.complete, [id, Date.now(), 'raw', 1, 'text' in out ? out.text : null]);
    if (done.rows[0]!.n !== 1) return;
    settled.hit();
  };
  const create = async (user: string): Promise<string> => {
    if (!validSettings(SETTINGS)) throw new Error('invalid settings');
    const id = randomUUID();
    const now = Date.now();
    await inTransaction(pool, async (c) => {
      if ((await q(c, 'reserve', sql.reserve, [user, 1, IN_FLIGHT])).rowCount !== 1) throw new Error('insufficient or at the in-flight cap');
      await q(c, 'insert', sql.insert, [id, user, MODEL_ID, JSON.stringify(SETTINGS), 1, now]);
    });
    void queue.add(() => run(id));
    return id;
  };
  try {
    const result = await measured(n, async () => {
      await clientsCreate(n, clients, create);
      await settled.done;
    });
    const { rows } = await pool.query<{ status: string; n: number }>(sql.count);
    const completed = rows.find((r) => r.status === 'completed')?.n ?? 0;
    if (completed < n) throw new Error(`raw pg e2e: ${completed}/${n} completed`);
    return result;
  } finally {
    await queue.onIdle();
    await pool.end();
  }
}
