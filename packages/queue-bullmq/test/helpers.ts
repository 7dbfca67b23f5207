import { HostProcess as SharedHostProcess, createOn, type CreateAnswer, type HostSpawn } from '@genservice/testing';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Queue } from 'bullmq';
import { createPostgresStores, type PostgresStores } from '@genservice/store-postgres';
import { createTestDatabase } from '../../store-postgres/test/helpers.js';

export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
export const QUEUE_NAME = 'genservice';
const pkgDir = fileURLToPath(new URL('..', import.meta.url));
/**
 * tsx applies a tsconfig only to the files it includes; the root one includes every package's source, so core's
 * decorators compile when a host process loads it through the `@genservice/source` condition.
 */
const rootTsconfig = fileURLToPath(new URL('../../../tsconfig.json', import.meta.url));

export function randomName(prefix: string): string {
  return `${prefix}_${randomBytes(6).toString('hex')}`;
}

/** Removes every key of one BullMQ queue under a test's prefix. */
export async function obliterate(prefix: string, queueName = QUEUE_NAME): Promise<void> {
  const q = new Queue(queueName, { connection: { url: REDIS_URL }, prefix });
  q.on('error', () => undefined);
  try {
    await q.obliterate({ force: true });
  } finally {
    await q.close();
  }
}

/** Waiting/active/delayed counts of a test's queue, read from Redis by a connection of the test's own. */
export async function jobCounts(prefix: string, queueName = QUEUE_NAME): Promise<Record<string, number>> {
  const q = new Queue(queueName, { connection: { url: REDIS_URL }, prefix });
  q.on('error', () => undefined);
  try {
    return await q.getJobCounts('waiting', 'active', 'delayed', 'failed', 'prioritized');
  } finally {
    await q.close();
  }
}

export interface FreshStores extends PostgresStores {
  /** The URL of the test's own database (host processes connect to it). */
  databaseUrl: string;
  schema: string;
  /** Closes the pool and drops the database. */
  drop(): Promise<void>;
}

/** Stores in a database of their own (created here, from the `postgres` maintenance database), dropped afterwards. */
export async function freshStores(): Promise<FreshStores> {
  const db = await createTestDatabase('genservice_qb');
  const schema = randomName('qb');
  const stores = await createPostgresStores({ connectionString: db.url, schema, poolSize: 5 }).catch(async (err: unknown) => {
    await db.drop();
    throw err;
  });
  return {
    ...stores,
    databaseUrl: db.url,
    schema,
    async drop(): Promise<void> {
      try {
        await stores.close();
      } finally {
        await db.drop();
      }
    },
  };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Settings of one host process (test/fixtures/host.ts); all optional ones have test-friendly defaults there. */
export interface HostEnv {
  DATABASE_URL: string;
  SCHEMA: string;
  REDIS_URL: string;
  PREFIX: string;
  INSTANCE_ID: string;
  CONCURRENCY?: string;
  LEASE_MS?: string;
  LOCK_MS?: string;
  STALLED_MS?: string;
  RECOVERY_MS?: string;
  MAX_CLAIMS?: string;
  STOP_TIMEOUT_MS?: string;
  LOG_LEVEL?: string;
}

const SPAWN: HostSpawn = {
  script: 'test/fixtures/host.ts',
  cwd: pkgDir,
  tsconfig: rootTsconfig,
};

/** One host process: a genservice instance on BullMQ + Postgres behind node:http. */
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
