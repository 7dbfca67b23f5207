import { describe, expect, it } from 'vitest';
import type { GenerationEvent } from '@genservice/core/ports';
import { T0, uid } from './harness.js';
import { claimFromPending, complete, FAILED, failFrom, held, PENDING, UNHELD, type StoreKit } from './store-kit.js';

/** Each generation's events, and the feed across generations. */
export function describeStoreFeed({ store, inserted, claimed, read, types, drain }: StoreKit): void {
  describe("a generation's events", () => {
    it('numbers them 1, 2, 3, ... with their data, and reads them from a seq', async () => {
      const gen = await inserted();
      await store().update(gen.id, claimFromPending('w1', T0 + 1000));
      await store().renewLeases([gen.id], 'w1', T0 + 2300, T0 + 1300);
      await store().update(gen.id, { expect: held('w1'), set: { progress: { fraction: 0.5 } }, event: { type: 'progress', data: { fraction: 0.5 } }, now: T0 + 1400 });
      await store().update(gen.id, complete('w1', T0 + 1500, 4, { resultText: 'done' }));
      const events = await store().eventsOf(gen.id);
      const base = { generationId: gen.id, ownerId: gen.ownerId };
      expect(events).toEqual([
        { ...base, seq: 1, type: 'created', at: T0, data: { modelId: 'model-a' } },
        { ...base, seq: 2, type: 'processing', at: T0 + 1000, data: { claim: 1 } },
        { ...base, seq: 3, type: 'progress', at: T0 + 1400, data: { fraction: 0.5 } },
        { ...base, seq: 4, type: 'completed', at: T0 + 1500, data: { price: 4 } },
      ]);
      expect(await store().eventsOf(gen.id, 2)).toEqual(events.slice(2));
      expect(await store().eventsOf(gen.id, 4)).toEqual([]);
      expect(await store().eventsOf(uid('missing'))).toEqual([]);
    });

    it('appends nothing for a change that does not apply, or carries no event', async () => {
      const { gen } = await claimed('w1');
      expect(await store().update(gen.id, claimFromPending('w2', T0 + 1100))).toBeNull();
      expect(await store().update(gen.id, complete('w2', T0 + 1100))).toBeNull();
      expect(await store().update(gen.id, failFrom(UNHELD, T0 + 1100))).toBeNull();
      expect(await store().update(gen.id, { expect: held('w1'), set: { remoteHandle: { id: 1 } }, now: T0 + 1200 })).not.toBeNull();
      expect(await types(gen.id)).toEqual(['created', 'processing']);
    });

    it('appends an event-only change (partial output: an empty patch) with its data, in the feed too, changing no field but updatedAt', async () => {
      const { gen, record } = await claimed('w1');
      const head = await store().feedHead();
      const delta = 'Hello, \u4e16\u754c "quoted" \\ \n line';
      const after = await store().update(gen.id, { expect: held('w1'), set: {}, event: { type: 'output', data: { delta } }, now: T0 + 1200 });
      expect(after).toEqual({ ...record, updatedAt: T0 + 1200 });
      await store().update(gen.id, { expect: held('w1'), set: {}, event: { type: 'preview', data: { key: 'blob-1', mimeType: 'image/png' } }, now: T0 + 1300 });
      // Refused like any change: the lease holder only.
      expect(await store().update(gen.id, { expect: held('w2'), set: {}, event: { type: 'output', data: { delta: 'x' } }, now: T0 + 1300 })).toBeNull();
      const events = await store().eventsOf(gen.id, 2);
      expect(events.map((e) => [e.seq, e.type, e.data])).toEqual([
        [3, 'output', { delta }],
        [4, 'preview', { key: 'blob-1', mimeType: 'image/png' }],
      ]);
      const fed = await drain(head, 2);
      // The head is held below the oldest open transaction of the whole server (Postgres), so the claim's own event may
      // still come after it when another client's transaction was open at the claim: the ones this test appended are
      // what must be there, in order.
      expect(fed.events.filter((e) => e.generationId === gen.id && e.seq >= 3).map((e) => e.type)).toEqual(['output', 'preview']);
    });

    it('gives racing changes exactly one event per winner, numbered without gaps', async () => {
      const gens = await Promise.all(Array.from({ length: 8 }, () => inserted()));
      await Promise.all(
        gens.flatMap((g, gi) => [
          ...Array.from({ length: 6 }, (_, i) => store().update(g.id, claimFromPending(`w${gi}-${i}`, T0 + 10))),
          store().update(g.id, failFrom(PENDING, T0 + 10)),
        ]),
      );
      for (const g of gens) {
        const events = await store().eventsOf(g.id);
        expect(events.map((e) => e.seq)).toEqual([1, 2]);
        const rec = await read(g.id);
        expect(events[1]!.type).toBe(rec.status === 'failed' ? 'failed' : 'processing');
      }
    });
  });

  describe('the feed across generations', () => {
    it('reads every event of every owner from a cursor, in pages, each generation in seq order', async () => {
      const start = await store().feedHead();
      const a = await inserted();
      const b = await inserted();
      await store().update(a.id, claimFromPending('w1', T0 + 1000));
      await store().update(b.id, failFrom(PENDING, T0 + 1001));
      await store().update(a.id, complete('w1', T0 + 1002));
      const all = (await drain(start, 5)).events;
      expect(all.map((e) => [e.generationId, e.seq, e.type])).toEqual([
        [a.id, 1, 'created'],
        [b.id, 1, 'created'],
        [a.id, 2, 'processing'],
        [b.id, 2, 'failed'],
        [a.id, 3, 'completed'],
      ]);
      expect(all[3]!.data).toEqual({ price: 0, error: FAILED });
      expect((await drain(start, 5, 2)).events).toEqual(all);
      const first = await store().readFeed(start, 3);
      expect(first.events).toEqual(all.slice(0, 3));
      expect((await store().readFeed(first.cursor, 100)).events).toEqual(all.slice(3));
      expect((await store().readFeed(start, 0)).events).toEqual([]);
    });

    it('starts a reader from feedHead with every event committed after it, and moves only forward', async () => {
      const old = await inserted();
      const head = await store().feedHead();
      const fresh = await inserted();
      await store().update(old.id, claimFromPending('w', T0 + 1));
      const { events, cursor } = await drain(head, 2);
      // A store may hand out some events committed just before feedHead was asked (a Postgres feed does while older
      // transactions run): never fewer than those committed after it, each once, in order.
      const mine = events.filter((e) => e.generationId === fresh.id || (e.generationId === old.id && e.seq > 1));
      expect(mine.map((e) => [e.generationId, e.type])).toEqual([
        [fresh.id, 'created'],
        [old.id, 'processing'],
      ]);
      expect((await store().readFeed(cursor, 100)).events).toEqual([]);
      expect(await store().feedHead()).not.toBe(head);
    });

    it('hands a concurrent reader every event exactly once while many writers race', async () => {
      const start = await store().feedHead();
      const gens = await Promise.all(Array.from({ length: 12 }, () => inserted()));
      const seen: GenerationEvent[] = [];
      let cursor = start;
      let writing = true;
      const reader = (async () => {
        for (let i = 0; i < 100_000 && (writing || i === 0); i++) {
          const page = await store().readFeed(cursor, 7);
          seen.push(...page.events);
          cursor = page.cursor;
          // An empty page: let the writers on (a turn of the event loop, not a wait for time).
          if (page.events.length === 0) await new Promise((r) => setImmediate(r));
        }
      })();
      await Promise.all(
        gens.map(async (g, gi) => {
          await store().update(g.id, claimFromPending(`w${gi}`, T0 + 1));
          for (let p = 1; p <= 5; p++) {
            await store().update(g.id, { expect: held(`w${gi}`), set: { progress: { fraction: p / 10 } }, event: { type: 'progress', data: { fraction: p / 10 } }, now: T0 + 1 + p });
          }
          await store().update(g.id, complete(`w${gi}`, T0 + 10));
        }),
      );
      writing = false;
      await reader;
      seen.push(...(await drain(cursor, 12 * 8 - seen.length)).events);
      const keys = seen.map((e) => `${e.generationId}#${e.seq}`);
      expect(new Set(keys).size).toBe(keys.length);
      for (const g of gens) {
        expect(seen.filter((e) => e.generationId === g.id).map((e) => e.seq)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
      }
      expect(seen).toHaveLength(12 * 8);
    });
  });
}
