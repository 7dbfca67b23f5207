import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { Expectation, FeedPage, GenerationPatch, GenerationRecord, GenerationStore, NewEvent, NewGeneration } from '@genservice/core/ports';
import { until } from '@genservice/testing';

/**
 * The database tests connect to in order to create their own (and only for that): `DATABASE_URL` when set, else the
 * local server's `postgres` maintenance database, which every PostgreSQL server has (libpq `PG*` variables override
 * host, port, user and database). No test needs a database that exists before it.
 */
export function adminUrl(): string {
  if (process.env.DATABASE_URL) return process.env.DATABASE_URL;
  const host = process.env.PGHOST ?? '127.0.0.1';
  const port = process.env.PGPORT ?? '5432';
  const user = process.env.PGUSER ?? 'postgres';
  const database = process.env.PGDATABASE ?? 'postgres';
  return `postgres://${encodeURIComponent(user)}@${host}:${port}/${database}`;
}

export function randomName(prefix: string): string {
  return `${prefix}_${randomBytes(6).toString('hex')}`;
}

export interface TestDatabase {
  name: string;
  url: string;
  drop(): Promise<void>;
}

/** A database of its own for one test file, dropped (even with connections left open) afterwards. */
export async function createTestDatabase(prefix = 'genservice_test'): Promise<TestDatabase> {
  const name = randomName(prefix);
  const admin = new pg.Client({ connectionString: adminUrl() });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE "${name}"`);
  } finally {
    await admin.end();
  }
  const url = new URL(adminUrl());
  url.pathname = `/${name}`;
  return {
    name,
    url: url.toString(),
    async drop(): Promise<void> {
      const client = new pg.Client({ connectionString: adminUrl() });
      await client.connect();
      try {
        await client.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      } finally {
        await client.end();
      }
    },
  };
}

/**
 * The changes core's Lifecycle hands a store (packages/core/src/lifecycle/lifecycle.ts), with the clock given: what these tests
 * ask the store through `update`, as the Lifecycle would.
 */
export function lifecycleOps(store: GenerationStore) {
  const held = (workerId: string): Expectation => ({ status: ['processing'], lease: { heldBy: workerId } });
  return {
    /** From pending, or a lost (expired) lease with one more claim; null when neither applies. */
    async claim(id: string, o: { workerId: string; leaseMs: number; now: number }): Promise<GenerationRecord | null> {
      const lease = { leaseOwner: o.workerId, leaseExpiresAt: o.now + o.leaseMs };
      const fresh = await store.update(id, {
        expect: { status: ['pending'] },
        set: { status: 'processing', claims: 1, startedAt: o.now, ...lease },
        event: { type: 'processing', data: { claim: 1 } },
        now: o.now,
      });
      if (fresh) return fresh;
      const rec = await store.getById(id);
      if (!rec || rec.status !== 'processing') return null;
      return store.update(id, {
        expect: { status: ['processing'], lease: 'free', parked: false, claims: rec.claims },
        set: { claims: rec.claims + 1, ...lease },
        event: { type: 'processing', data: { claim: rec.claims + 1 } },
        now: o.now,
      });
    },
    async progress(id: string, o: { workerId: string; fraction: number; message?: string; now: number }): Promise<boolean> {
      const progress = o.message === undefined ? { fraction: o.fraction } : { fraction: o.fraction, message: o.message };
      return (await store.update(id, { expect: held(o.workerId), set: { progress }, event: { type: 'progress', data: { ...progress } }, now: o.now })) !== null;
    },
    async complete(id: string, o: { workerId: string; price: number; resultText?: string; now: number }): Promise<boolean> {
      const set: GenerationPatch = { status: 'completed', price: o.price, finishedAt: o.now };
      if (o.resultText !== undefined) set.resultText = o.resultText;
      return (await store.update(id, { expect: held(o.workerId), set, event: { type: 'completed', data: { price: o.price } }, now: o.now })) !== null;
    },
    async renew(id: string, workerId: string, leaseMs: number, now: number): Promise<boolean> {
      return (await store.renewLeases([id], workerId, now + leaseMs, now)).length === 1;
    },
  };
}

/** A new generation as the Lifecycle inserts it, with its `created` event. */
export function newGeneration(id: string, overrides: Partial<NewGeneration> = {}): [NewGeneration, NewEvent] {
  const gen: NewGeneration = { id, ownerId: 'u1', modelId: 'm', settings: { prompt: 'p' }, status: 'pending', reserved: 10, createdAt: 1_700_000_000_000, ...overrides };
  return [gen, { type: 'created', data: { modelId: gen.modelId } }];
}

/**
 * Reads the feed from `cursor` until `count` events came back: an event reaches the feed once every older transaction
 * of the whole server has ended, and other tests' transactions may be running.
 */
export function readFeedUntil(store: GenerationStore, cursor: string, count: number): Promise<FeedPage> {
  return until(() => store.readFeed(cursor, 1000), { accept: (page) => page.events.length >= count, what: `${count} events from the feed` });
}

/**
 * A pool for a test, with the error listener every pool needs: `pool.end()` resolves before its idle connections have
 * closed, so the test database's forced drop right after may end one of them, and a pool without a listener would
 * throw that as an uncaught exception.
 */
export function quietPool(config: pg.PoolConfig): pg.Pool {
  const pool = new pg.Pool(config);
  pool.on('error', () => undefined);
  return pool;
}
