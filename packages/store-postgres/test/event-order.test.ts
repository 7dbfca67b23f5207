import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GenerationEvent } from '@genservice/core';
import { createPostgresStores, type PostgresStores } from '../src/index.js';
import { createTestDatabase, type TestDatabase } from './helpers.js';

let db: TestDatabase;
const pools: pg.Pool[] = [];
const stores: PostgresStores[] = [];

beforeAll(async () => {
  db = await createTestDatabase('genservice_events');
  // Four pools: four independent sets of connections, as four instances would have.
  for (let i = 0; i < 4; i++) {
    const pool = new pg.Pool({ connectionString: db.url, max: 4 });
    pool.on('error', () => {});
    pools.push(pool);
    stores.push(await createPostgresStores({ pool, schema: 'ev' }));
  }
}, 60_000);

afterAll(async () => {
  for (const p of pools) await p.end();
  await db?.drop();
});

describe('the event log under concurrent writers', () => {
  it('never lets a reader walking forward from a cursor skip an event that commits late', { timeout: 60_000 }, async () => {
    const reader = stores[0]!.store;
    const seen: GenerationEvent[] = [];
    let cursor = await reader.lastSeq();
    const start = cursor;
    let writing = true;
    const reading = (async () => {
      while (writing) {
        const page = await reader.readEvents(cursor, 1000);
        for (const e of page) {
          seen.push(e);
          cursor = e.seq;
        }
      }
    })();
    const T0 = Date.now();
    await Promise.all(
      stores.map(async (s, w) => {
        await Promise.all(
          Array.from({ length: 4 }, async (_, lane) => {
            for (let i = 0; i < 15; i++) {
              const id = `gen-${w}-${lane}-${i}`;
              await s.store.insert({ id, ownerId: `owner-${w}`, modelId: 'm', settings: {}, reserved: 1, createdAt: T0 + i });
              await s.store.claim(id, { workerId: `w${w}`, leaseMs: 60_000, now: T0 + i + 1 });
              await s.store.progress(id, { workerId: `w${w}`, fraction: 0.5, now: T0 + i + 2 });
              await s.store.complete(id, { workerId: `w${w}`, price: 1, resultText: 'x', now: T0 + i + 3 });
            }
          }),
        );
      }),
    );
    writing = false;
    await reading;
    for (;;) {
      const page = await reader.readEvents(cursor, 1000);
      if (page.length === 0) break;
      for (const e of page) {
        seen.push(e);
        cursor = e.seq;
      }
    }
    const all = await reader.readEvents(start, 100_000);
    expect(all).toHaveLength(4 * 4 * 15 * 4);
    // What the walker saw, page by page, is the whole log, in order, with nothing skipped.
    expect(seen.map((e) => e.seq)).toEqual(all.map((e) => e.seq));
    for (let i = 1; i < all.length; i++) expect(all[i]!.seq).toBeGreaterThan(all[i - 1]!.seq);
  });
});
