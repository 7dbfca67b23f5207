/**
 * Stores: `insert` then `get` of one generation through our SQLite and Postgres GenerationStores, against the raw
 * driver running the same statements (copied from the stores' SQL), with the same pragmas / pool size. And the
 * BullMQ queue against a raw BullMQ worker doing the same no-op.
 */
import Database from 'better-sqlite3';
import pg from 'pg';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { newGenerationId } from '@genservice/core';
import type { GenerationStore } from '@genservice/core/ports';
import { createSqliteStores, runMigrations as runSqliteMigrations } from '@genservice/store-sqlite';
import { createPostgresStores, runMigrations as runPgMigrations } from '@genservice/store-postgres';
import { MODEL_ID, SETTINGS, USER_ID } from '../lib/fixture.js';

export function tempDir(): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(path.join(tmpdir(), 'genservice-bench-'));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

// ---------------------------------------------------------------- SQLite



const SQLITE_COLUMNS = `id, owner_id, model_id, settings, status, reserved, price, result_text, result_key, failure_reason,
  claims, lease_owner, lease_expires_at, created_at, updated_at, finished_at`;
/** Copied from GENERATION_SQL in packages/store-sqlite/src/generation-store.ts. */
export const SQLITE_INSERT = `INSERT INTO generations (id, owner_id, model_id, settings, status, reserved, claims, last_seq, created_at, updated_at)
    VALUES (@id, @ownerId, @modelId, @settings, 'pending', @reserved, 0, 1, @createdAt, @createdAt)`;
export const SQLITE_GET = `SELECT ${SQLITE_COLUMNS} FROM generations WHERE id = ? AND owner_id = ?`;

/**
 * The same pragmas as openSqliteDatabase (WAL, synchronous NORMAL, busy timeout, foreign keys, page cache, mmap), and
 * the store's own schema (its migrations: the schema is not what is measured, the statements are).
 */
export function rawSqlite(filename: string): Database.Database {
  const db = new Database(filename, { timeout: 5000 });
  db.pragma('busy_timeout = 5000');
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('foreign_keys = ON');
  db.pragma('cache_size = -65536');
  db.pragma('mmap_size = 268435456');
  runSqliteMigrations(db);
  return db;
}

/** The first event of a generation, as the Lifecycle appends it. */
const CREATED = { type: 'created' as const, data: { modelId: MODEL_ID } };

async function storeLoop(store: GenerationStore, n: number): Promise<number> {
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    const id = newGenerationId();
    await store.insert({ id, ownerId: USER_ID, modelId: MODEL_ID, settings: SETTINGS, status: 'pending', reserved: 1, createdAt: Date.now() }, CREATED);
    const rec = await store.get(id, USER_ID);
    if (!rec) throw new Error('store lost a generation');
  }
  return n / ((performance.now() - t0) / 1000);
}

export async function oursSqlite(dir: string, n: number, tag: string): Promise<number> {
  const stores = createSqliteStores({ filename: path.join(dir, `ours-${tag}.db`) });
  try {
    return await storeLoop(stores.store, n);
  } finally {
    await stores.close();
  }
}

/** Copied from GENERATION_SQL.appendEvent: a create writes the generation and its `created` event in one transaction. */
export const SQLITE_APPEND_EVENT = `INSERT INTO events (generation_id, seq, owner_id, type, at, data) VALUES (?, ?, ?, ?, ?, ?)`;

/** better-sqlite3 alone, synchronous as its users call it; settings go through JSON both ways, as they must. */
export function rawSqliteRun(dir: string, n: number, tag: string): number {
  const db = rawSqlite(path.join(dir, `raw-${tag}.db`));
  try {
    const insertRow = db.prepare(SQLITE_INSERT);
    const appendEvent = db.prepare(SQLITE_APPEND_EVENT);
    // The same work as the store's insert: the row and its event, one IMMEDIATE transaction.
    const insert = db.transaction((row: { id: string; ownerId: string; modelId: string; settings: string; reserved: number; createdAt: number }) => {
      insertRow.run(row);
      appendEvent.run(row.id, 1, row.ownerId, 'created', row.createdAt, JSON.stringify({ modelId: row.modelId }));
    }).immediate;
    const get = db.prepare(SQLITE_GET);
    const t0 = performance.now();
    for (let i = 0; i < n; i++) {
      const id = randomBytes(16).toString('base64url');
      insert({ id, ownerId: USER_ID, modelId: MODEL_ID, settings: JSON.stringify(SETTINGS), reserved: 1, createdAt: Date.now() });
      const row = get.get(id, USER_ID) as { settings: string } | undefined;
      if (!row) throw new Error('raw sqlite lost a row');
      JSON.parse(row.settings);
    }
    return n / ((performance.now() - t0) / 1000);
  } finally {
    db.close();
  }
}

// ---------------------------------------------------------------- Postgres

/** Only to create and drop the bench's own databases: the maintenance database every server has. */
export const PG_ADMIN_URL = 'postgres://postgres@127.0.0.1:5432/postgres';
export const PG_POOL_SIZE = 10;
export const PG_CONCURRENCY = 10;

/** Creates a throwaway database; the returned function drops it. */
export async function throwawayDatabase(): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `genservice_bench_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: PG_ADMIN_URL });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  return {
    url: `postgres://postgres@127.0.0.1:5432/${name}`,
    drop: async () => {
      const a = new pg.Client({ connectionString: PG_ADMIN_URL });
      await a.connect();
      try {
        await a.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await a.end();
      }
    },
  };
}

/**
 * Copied from generationSql().insert in packages/store-postgres/src/generation-store.ts (no in-flight cap, no
 * metadata or webhook): the row and its `created` event (number 1 of the generation) in one statement. The same work
 * as the store, as the bench requires.
 */
export const PG_INSERT = (s: string): string => `WITH ins AS (
        INSERT INTO ${s}.generations
          (id, owner_id, model_id, settings, status, reserved, claims, created_at, updated_at, last_seq)
        VALUES ($1, $2, $3, $4::json, 'pending', $5, 0, $6, $6, 1)
        RETURNING id, owner_id, model_id),
      ev AS (INSERT INTO ${s}.events (generation_id, seq, owner_id, type, at, data)
        SELECT m.id, 1, m.owner_id, 'created', $6, jsonb_build_object('modelId', m.model_id) FROM ins m)
      SELECT count(*)::int AS inserted FROM ins`;
export const PG_GET = (s: string): string => `SELECT * FROM ${s}.generations WHERE id = $1 AND owner_id = $2`;

/** CPU time (user + system) this process spent per operation in the last `concurrently` run, in µs. */
export let lastCpuUsPerOp = NaN;

/** Runs `n` operations on `workers` concurrent loops; returns operations per second. */
async function concurrently(n: number, workers: number, op: () => Promise<void>): Promise<number> {
  let next = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: workers }, async () => {
      while (next < n) {
        next++;
        await op();
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  lastCpuUsPerOp = (cpu.user + cpu.system) / n;
  return n / seconds;
}

export interface PgBench {
  ours: (n: number) => Promise<number>;
  raw: (n: number) => Promise<number>;
  close: () => Promise<void>;
}

/** Our store (schema `genservice`, its own pool) and raw pg (schema `raw`, a pool of the same size), one database. */
export async function pgBench(url: string): Promise<PgBench> {
  const stores = await createPostgresStores({ connectionString: url, poolSize: PG_POOL_SIZE });
  const pool = new pg.Pool({ connectionString: url, max: PG_POOL_SIZE, connectionTimeoutMillis: 5000 });
  pool.on('error', () => {});
  // The store's own schema under another name: the schema is not what is measured, the statements are.
  await runPgMigrations(pool, 'raw');
  const insert = PG_INSERT('"raw"');
  const get = PG_GET('"raw"');
  return {
    ours: (n) =>
      concurrently(n, PG_CONCURRENCY, async () => {
        const id = newGenerationId();
        await stores.store.insert({ id, ownerId: USER_ID, modelId: MODEL_ID, settings: SETTINGS, status: 'pending', reserved: 1, createdAt: Date.now() }, CREATED);
        if (!(await stores.store.get(id, USER_ID))) throw new Error('pg store lost a generation');
      }),
    raw: (n) =>
      concurrently(n, PG_CONCURRENCY, async () => {
        const id = randomBytes(16).toString('base64url');
        const now = Date.now();
        await pool.query(insert, [id, USER_ID, MODEL_ID, JSON.stringify(SETTINGS), 1, now]);
        const { rows } = await pool.query(get, [id, USER_ID]);
        if (rows.length !== 1) throw new Error('raw pg lost a row');
      }),
    close: async () => {
      await stores.close();
      await pool.end();
    },
  };
}

// ---------------------------------------------------------------- BullMQ

export const REDIS_URL = 'redis://127.0.0.1:6379';
export const BULL_CONCURRENCY = 8;

function counter(n: number, timeoutMs: number): { hit: () => void; done: Promise<void> } {
  let count = 0;
  let resolve!: () => void;
  let reject!: (e: Error) => void;
  const done = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  const timer = setTimeout(() => reject(new Error(`only ${count}/${n} jobs processed in ${timeoutMs} ms`)), timeoutMs);
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

/** Deletes every key under `prefix:` (SCAN, bounded by the key count), after the queues are closed. */
export async function cleanRedisPrefix(prefix: string): Promise<number> {
  const { Queue } = await import('bullmq');
  const q = new Queue('cleanup', { prefix, connection: { url: REDIS_URL } });
  try {
    const client = await q.client;
    let cursor = '0';
    let deleted = 0;
    for (let i = 0; i < 100_000; i++) {
      // ioredis's typings for SCAN's variadic form are narrower than the command; the call is the documented one.
      const [next, keys] = (await (client as unknown as { scan: (...a: unknown[]) => Promise<[string, string[]]> }).scan(
        cursor,
        'MATCH',
        `${prefix}:*`,
        'COUNT',
        1000,
      ));
      if (keys.length > 0) deleted += await client.del(...keys);
      cursor = next;
      if (cursor === '0') break;
    }
    return deleted;
  } finally {
    await q.close();
  }
}

/**
 * `n` jobs through our BullMQQueue: `enqueue` in a loop, a no-op handler, until all ran. Jobs per second.
 */
export async function oursBullmq(prefix: string, queueName: string, n: number): Promise<number> {
  const { BullMQQueue } = await import('@genservice/queue-bullmq');
  const queue = new BullMQQueue({ connection: REDIS_URL, prefix, queueName, concurrency: BULL_CONCURRENCY });
  const c = counter(n, 300_000);
  const warm = counter(1, 60_000);
  let ready = false;
  try {
    await queue.start(async () => {
      if (ready) c.hit();
      else warm.hit();
    });
    // Both connections up and a job through, before the clock starts (the raw side waits until its queue and
    // worker are ready).
    await queue.enqueue({ generationId: newGenerationId(), modelId: MODEL_ID, ownerId: USER_ID }, { fresh: true });
    await warm.done;
    ready = true;
    const t0 = performance.now();
    // As Lifecycle.create enqueues every generation it has just created: with its owner, and fresh (no earlier job).
    for (let i = 0; i < n; i++) await queue.enqueue({ generationId: newGenerationId(), modelId: MODEL_ID, ownerId: USER_ID }, { fresh: true });
    await c.done;
    return n / ((performance.now() - t0) / 1000);
  } finally {
    await queue.stop({ timeoutMs: 5000 });
  }
}

/** The same on BullMQ alone: `Queue.add` with a jobId in a loop, a `Worker` with the same concurrency. */
export async function rawBullmq(prefix: string, queueName: string, n: number): Promise<number> {
  const { Queue, Worker } = await import('bullmq');
  const connection = { url: REDIS_URL };
  const queue = new Queue(queueName, { prefix, connection });
  const c = counter(n, 300_000);
  const worker = new Worker(
    queueName,
    async () => {
      c.hit();
    },
    { prefix, connection: { ...connection, maxRetriesPerRequest: null }, concurrency: BULL_CONCURRENCY },
  );
  worker.on('error', () => {});
  try {
    await queue.waitUntilReady();
    await worker.waitUntilReady();
    const t0 = performance.now();
    for (let i = 0; i < n; i++) {
      const id = randomBytes(16).toString('base64url');
      await queue.add('generation', { generationId: id, modelId: MODEL_ID }, { jobId: id, removeOnComplete: true, removeOnFail: { age: 86_400 } });
    }
    await c.done;
    return n / ((performance.now() - t0) / 1000);
  } finally {
    await worker.close();
    await queue.close();
  }
}
