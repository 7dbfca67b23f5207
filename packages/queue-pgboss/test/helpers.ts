import { HostProcess as SharedHostProcess, createOn, type CreateAnswer, type HostSpawn } from '@genservice/testing';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { createPostgresStores, type PostgresStores } from '@genservice/store-postgres';
// The store tests' way to make a database of a test file's own (dropped afterwards, connections or not).
import { adminUrl, createTestDatabase, type TestDatabase } from '../../store-postgres/test/helpers.js';

export { adminUrl, createTestDatabase, type TestDatabase };

const pkgDir = fileURLToPath(new URL('..', import.meta.url));
/**
 * tsx applies a tsconfig only to the files it includes; the root one includes every package's source, so core's
 * decorators compile when a host process loads it through the `@genservice/source` condition.
 */
const rootTsconfig = fileURLToPath(new URL('../../../tsconfig.json', import.meta.url));

export function randomName(prefix: string): string {
  return `${prefix}_${randomBytes(6).toString('hex')}`;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** One statement on a connection of the test's own. */
export async function sql<R extends pg.QueryResultRow = Record<string, unknown>>(url: string, text: string, values: unknown[] = []): Promise<R[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end();
  }
}

/** Counts of one pg-boss queue's jobs by state, read by a connection of the test's own. */
export async function jobStates(url: string, queueName: string, schema = 'genservice_jobs'): Promise<Record<string, number>> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query(`SELECT state::text AS state, count(*)::int AS n FROM ${schema}.job WHERE name = $1 GROUP BY state`, [queueName]);
    const out: Record<string, number> = { created: 0, retry: 0, active: 0, completed: 0, cancelled: 0, failed: 0 };
    for (const r of rows as Array<{ state: string; n: number }>) out[r.state] = Number(r.n);
    return out;
  } finally {
    await client.end();
  }
}

/** The owners' waiting counts of one queue (added minus taken, in the fairness table), read by a connection of the test's own. */
export async function waitingByOwner(url: string, queueName: string, schema = 'genservice_jobs'): Promise<Record<string, number>> {
  const rows = await sql<{ owner: string; waiting: string }>(
    url,
    `SELECT owner, sum(CASE kind WHEN 'added' THEN n ELSE -n END) AS waiting FROM ${schema}.genservice_owner_counts
      WHERE queue = $1 GROUP BY owner HAVING sum(CASE kind WHEN 'added' THEN n ELSE -n END) > 0`,
    [queueName],
  );
  // The table counts lines (`tenant<US>user<US>priority`): summed here by user.
  const out: Record<string, number> = {};
  for (const r of rows) {
    const parts = r.owner.split('\u001f');
    const owner = parts.length === 3 ? parts[1]! : r.owner;
    out[owner] = (out[owner] ?? 0) + Number(r.waiting);
  }
  return out;
}

export interface FreshStores extends PostgresStores {
  db: TestDatabase;
  schema: string;
  /** Closes the pool and drops the database. */
  drop(): Promise<void>;
}

/** A database of its own with the stores in it (schema `genservice`); the queue's schema goes beside them. */
export async function freshStores(prefix = 'gs_pgboss'): Promise<FreshStores> {
  const db = await createTestDatabase(prefix);
  const stores = await createPostgresStores({ connectionString: db.url, poolSize: 4 });
  return {
    ...stores,
    db,
    schema: 'genservice',
    async drop(): Promise<void> {
      try {
        await stores.close();
      } finally {
        await db.drop();
      }
    },
  };
}

/** Settings of one host process (test/fixtures/host.ts); all optional ones have test-friendly defaults there. */
export interface HostEnv {
  DATABASE_URL: string;
  INSTANCE_ID: string;
  QUEUE_NAME?: string;
  CONCURRENCY?: string;
  LEASE_MS?: string;
  RECOVERY_MS?: string;
  MAX_CLAIMS?: string;
  STOP_TIMEOUT_MS?: string;
  POLL_MS?: string;
  RUNNER?: string;
  PUSH_POLL_MS?: string;
  LOG_LEVEL?: string;
}

const SPAWN: HostSpawn = {
  script: 'test/fixtures/host.ts',
  cwd: pkgDir,
  tsconfig: rootTsconfig,
  // No REDIS_URL reaches the host: nothing of it may need Redis.
  withhold: ['REDIS_URL'],
};

/** One host process: a genservice instance on pg-boss + Postgres behind node:http, with no Redis anywhere. */
export class HostProcess extends SharedHostProcess<HostEnv> {
  constructor(env: HostEnv) {
    super(SPAWN, env);
  }
}

export { createOn, type CreateAnswer };

/** Per-generation rows of the store and the ledger, read straight from the schema. */
export async function generationRows(
  stores: FreshStores,
): Promise<Array<{ id: string; ownerId: string; status: string; price: number | null; claims: number; resultText: string | null; reserveState: string | null; charged: number | null; amount: number | null }>> {
  const s = `"${stores.schema}"`;
  const { rows } = await stores.pool.query(
    `SELECT g.id, g.owner_id, g.status, g.price, g.claims, g.result_text, r.state, r.charged, r.amount
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
    amount: r.amount === null ? null : Number(r.amount),
  }));
}

/** Gives each user a key (`key-<user>`) and a balance. */
export async function seedUsers(stores: FreshStores, balances: Record<string, number>): Promise<void> {
  for (const [user, balance] of Object.entries(balances)) {
    await stores.apiKeys.addKey(`key-${user}`, user);
    await stores.ledger.credit(user, balance);
  }
}
