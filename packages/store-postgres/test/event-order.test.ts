import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GenerationEvent } from '@genservice/core/ports';
import { PostgresGenerationStore, runMigrations } from '../src/index.js';
import { createTestDatabase, lifecycleOps, newGeneration, readFeedUntil, type TestDatabase, quietPool } from './helpers.js';
import { until } from '@genservice/testing';

const WRITERS = 32;
const PER_WRITER = 6;
const T0 = 1_700_000_000_000;

let db: TestDatabase;
let writerPool: pg.Pool;
let readerPool: pg.Pool;

beforeAll(async () => {
  db = await createTestDatabase('genservice_events');
  writerPool = quietPool({ connectionString: db.url, max: WRITERS });
  readerPool = quietPool({ connectionString: db.url, max: 2 });
  writerPool.on('error', () => {});
  readerPool.on('error', () => {});
  await runMigrations(readerPool, 'ev');
}, 60_000);

afterAll(async () => {
  await writerPool?.end();
  await readerPool?.end();
  await db?.drop();
});

/**
 * A pool whose every query runs in an explicit transaction that stays open a random 0-8 ms after the statement, so
 * transactions commit in an order unrelated to the order they wrote in: what many instances under load look like.
 * The store runs its own statements through it.
 */
function slowCommitPool(pool: pg.Pool, random: () => number): pg.Pool {
  return {
    async query(text: string, values?: unknown[]) {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const result = await client.query(text, values);
        await new Promise((r) => setTimeout(r, Math.floor(random() * 8)));
        await client.query('COMMIT');
        return result;
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw err;
      } finally {
        client.release();
      }
    },
  } as unknown as pg.Pool;
}

/** A small seeded generator: the delays differ between writers but the test is the same on every run. */
function seeded(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1_664_525) + 1_013_904_223) >>> 0;
    return s / 2 ** 32;
  };
}

describe('the event feed under concurrent writers with random commit delays', () => {
  it(`gives a reader walking it every event exactly once, each generation's in order (${WRITERS} writers)`, { timeout: 120_000 }, async () => {
    const reader = new PostgresGenerationStore(readerPool, { schema: 'ev' });
    const seen: GenerationEvent[] = [];
    let cursor = await reader.feedHead();
    let pages = 0;
    let writing = true;
    const walk = async (): Promise<number> => {
      const page = await reader.readFeed(cursor, 50);
      seen.push(...page.events);
      cursor = page.cursor;
      pages++;
      return page.events.length;
    };
    const reading = (async () => {
      while (writing) await walk();
    })();
    await Promise.all(
      Array.from({ length: WRITERS }, async (_, w) => {
        const store = new PostgresGenerationStore(slowCommitPool(writerPool, seeded(w + 1)), { schema: 'ev' });
        const ops = lifecycleOps(store);
        for (let i = 0; i < PER_WRITER; i++) {
          const id = `gen-${w}-${i}`;
          const now = T0 + i * 10;
          await store.insert(...newGeneration(id, { ownerId: `owner-${w % 4}`, createdAt: now }));
          expect(await ops.claim(id, { workerId: `w${w}`, leaseMs: 60_000, now: now + 1 })).not.toBeNull();
          expect(await ops.progress(id, { workerId: `w${w}`, fraction: 0.5, now: now + 2 })).toBe(true);
          expect(await ops.complete(id, { workerId: `w${w}`, price: 1, resultText: 'x', now: now + 3 })).toBe(true);
        }
      }),
    );
    writing = false;
    await reading;
    // Until the feed is drained: the server's other transactions (other tests') may hold its horizon back a moment.
    const total = WRITERS * PER_WRITER * 4;
    await until(async () => {
        await walk();
        return seen.length;
      }, { accept: (n) => n >= total, timeoutMs: 20_000, intervalMs: 10 }).catch(() => undefined);

    expect(pages).toBeGreaterThan(10);
    expect(seen).toHaveLength(total);
    const keys = seen.map((e) => `${e.generationId}#${e.seq}`);
    expect(new Set(keys).size).toBe(total);
    const byGeneration = new Map<string, GenerationEvent[]>();
    for (const e of seen) byGeneration.set(e.generationId, [...(byGeneration.get(e.generationId) ?? []), e]);
    expect(byGeneration.size).toBe(WRITERS * PER_WRITER);
    for (const [id, events] of byGeneration) {
      expect(events.map((e) => `${e.seq}:${e.type}`), id).toEqual(['1:created', '2:processing', '3:progress', '4:completed']);
      expect(await reader.eventsOf(id)).toEqual(events);
    }
    // Nothing more behind the last cursor.
    expect((await reader.readFeed(cursor, 50)).events).toEqual([]);
  });

  it('orders by transaction id as a number, also where its digits grow (9 before 10)', async () => {
    await runMigrations(readerPool, 'digits');
    const reader = new PostgresGenerationStore(readerPool, { schema: 'digits' });
    // Transaction ids set by hand (long committed, so below every running one), across a change in digit count.
    await readerPool.query(
      `INSERT INTO "digits".events (generation_id, seq, owner_id, type, at, data, tx, pos) VALUES
        ('a', 1, 'u', 'created', 1, '{}', '9', 1), ('b', 1, 'u', 'created', 2, '{}', '10', 2), ('a', 2, 'u', 'processing', 3, '{}', '11', 3)`,
    );
    const all = await reader.readFeed('', 10);
    expect(all.events.map((e) => `${e.generationId}${e.seq}`)).toEqual(['a1', 'b1', 'a2']);
    const seen: string[] = [];
    let cursor = '';
    for (let i = 0; i < 5; i++) {
      const page = await reader.readFeed(cursor, 1);
      seen.push(...page.events.map((e) => `${e.generationId}${e.seq}`));
      cursor = page.cursor;
    }
    expect(seen).toEqual(['a1', 'b1', 'a2']);
    expect(cursor).toBe(all.cursor);
  });

  it("keeps a generation's events in seq order when the later change's transaction has the smaller id", async () => {
    await runMigrations(readerPool, 'race');
    const reader = new PostgresGenerationStore(readerPool, { schema: 'race' });
    await reader.insert(...newGeneration('g'));
    const a = await writerPool.connect();
    const b = await writerPool.connect();
    const on = (c: pg.PoolClient) => new PostgresGenerationStore({ query: (t: string, v?: unknown[]) => c.query(t, v) } as unknown as pg.Pool, { schema: 'race' });
    try {
      // B has its transaction id first; A then changes the generation and holds its row lock; B's change waits for it.
      await b.query('BEGIN');
      await b.query('SELECT pg_current_xact_id()');
      await a.query('BEGIN');
      const now = T0 + 1;
      expect(await on(a).update('g', { expect: { status: ['pending'] }, set: { status: 'processing' }, event: { type: 'processing', data: { claim: 1 } }, now })).not.toBeNull();
      const bPid = (await b.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
      // (Expecting either status, so B's statement matches the row it sees and waits, instead of skipping it.)
      const later = on(b).update('g', { expect: { status: ['pending', 'processing'] }, set: { progress: { fraction: 0.5 } }, event: { type: 'progress', data: { fraction: 0.5 } }, now });
      let waiting = false;
      for (let i = 0; i < 500 && !waiting; i++) {
        const { rows } = await readerPool.query(`SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1`, [bPid]);
        waiting = rows[0]?.wait_event_type === 'Lock';
      }
      expect(waiting).toBe(true);
      await a.query('COMMIT');
      expect(await later).not.toBeNull();
      await b.query('COMMIT');
    } finally {
      a.release();
      b.release();
    }
    const page = await readFeedUntil(reader, '', 3);
    expect(page.events.map((e) => `${e.seq}:${e.type}`)).toEqual(['1:created', '2:processing', '3:progress']);
  });
});
