import { describe, expect, it } from 'vitest';
import type { NewGeneration } from '@genservice/core/ports';
import { T0, uid } from './harness.js';
import { claimFromPending, complete, CREATED, failFrom, PENDING, reclaim, UNHELD, type StoreKit } from './store-kit.js';

/** The list, the in-flight cap, finished records, and the lists maintenance walks. */
export function describeStoreReads({ store, newGen, inserted, claimed, read }: StoreKit): void {
  describe('list', () => {
    /** Generations of one owner at T0, T0+1, T0+1 (a tie), T0+2, another owner's, and a second model. */
    async function owned(): Promise<{ owner: string; ids: string[] }> {
      const owner = uid('owner');
      const ids: string[] = [];
      for (const [createdAt, modelId] of [
        [T0, 'model-a'],
        [T0 + 1, 'model-b'],
        [T0 + 1, 'model-a'],
        [T0 + 2, 'model-a'],
      ] as const) {
        ids.push((await inserted({ ownerId: owner, createdAt, modelId })).id);
      }
      await inserted({ ownerId: uid('someone-else'), createdAt: T0 + 5 });
      return { owner, ids };
    }

    const order = (ids: string[], createdAt: number[]): string[] =>
      ids
        .map((id, i) => ({ id, c: createdAt[i]! }))
        .sort((x, y) => y.c - x.c || (x.id < y.id ? 1 : x.id > y.id ? -1 : 0))
        .map((x) => x.id);

    it("lists only the owner's generations, newest first, ties by id descending", async () => {
      const { owner, ids } = await owned();
      const want = order(ids, [T0, T0 + 1, T0 + 1, T0 + 2]);
      expect((await store().list(owner, { limit: 10 })).map((r) => r.id)).toEqual(want);
      expect((await store().list(owner, { limit: 2 })).map((r) => r.id)).toEqual(want.slice(0, 2));
      expect(await store().list(uid('nobody'), { limit: 10 })).toEqual([]);
      const first = (await store().list(owner, { limit: 1 }))[0]!;
      expect(first).toEqual(await read(first.id));
    });

    it('pages with a cursor through every generation exactly once', async () => {
      const { owner, ids } = await owned();
      const want = order(ids, [T0, T0 + 1, T0 + 1, T0 + 2]);
      const seen: string[] = [];
      let before: { createdAt: number; id: string } | undefined;
      for (;;) {
        const page = await store().list(owner, { limit: 1, ...(before ? { before } : {}) });
        if (page.length === 0) break;
        seen.push(...page.map((r) => r.id));
        const last = page[page.length - 1]!;
        before = { createdAt: last.createdAt, id: last.id };
      }
      expect(seen).toEqual(want);
    });

    it('filters by status and by model, also with a cursor', async () => {
      const { owner, ids } = await owned();
      await store().update(ids[1]!, claimFromPending('w', T0 + 10));
      await store().update(ids[2]!, failFrom(PENDING, T0 + 10));
      expect((await store().list(owner, { limit: 10, status: 'processing' })).map((r) => r.id)).toEqual([ids[1]]);
      expect((await store().list(owner, { limit: 10, status: 'failed' })).map((r) => r.id)).toEqual([ids[2]]);
      expect((await store().list(owner, { limit: 10, status: 'pending' })).map((r) => r.id)).toEqual([ids[3], ids[0]]);
      expect(await store().list(owner, { limit: 10, status: 'completed' })).toEqual([]);
      const modelA = order([ids[0]!, ids[2]!, ids[3]!], [T0, T0 + 1, T0 + 2]);
      expect((await store().list(owner, { limit: 10, modelId: 'model-a' })).map((r) => r.id)).toEqual(modelA);
      const after = await store().list(owner, { limit: 10, modelId: 'model-a', before: { createdAt: T0 + 2, id: ids[3]! } });
      expect(after.map((r) => r.id)).toEqual(modelA.slice(1));
      expect((await store().list(owner, { limit: 10, modelId: 'model-a', status: 'pending' })).map((r) => r.id)).toEqual([ids[3], ids[0]]);
      expect(await store().list(owner, { limit: 10, modelId: "' OR 1=1 --" })).toEqual([]);
    });
  });

  describe('in-flight cap on insert', () => {
    it('refuses an insert once the owner has the maximum unfinished (no finishedAt), and counts only those', async () => {
      const owner = uid('owner');
      const a = newGen({ ownerId: owner });
      const b = newGen({ ownerId: owner });
      expect(await store().insert(a, CREATED, { maxUnfinishedPerOwner: 2 })).toBe('inserted');
      expect(await store().insert(b, CREATED, { maxUnfinishedPerOwner: 2 })).toBe('inserted');
      const c = newGen({ ownerId: owner });
      expect(await store().insert(c, CREATED, { maxUnfinishedPerOwner: 2 })).toBe('limit_reached');
      expect(await store().getById(c.id)).toBeNull();
      expect(await store().eventsOf(c.id)).toEqual([]);
      // Another owner is not affected; without the option there is no cap.
      expect(await store().insert(newGen(), CREATED, { maxUnfinishedPerOwner: 2 })).toBe('inserted');
      expect(await store().insert(newGen({ ownerId: owner }), CREATED)).toBe('inserted');
      // A change that sets finishedAt frees a place; any other change does not.
      await store().update(a.id, claimFromPending('w', T0 + 1));
      expect(await store().insert(newGen({ ownerId: owner }), CREATED, { maxUnfinishedPerOwner: 3 })).toBe('limit_reached');
      await store().update(a.id, complete('w', T0 + 2));
      await store().update(b.id, failFrom(PENDING, T0 + 3));
      expect(await store().insert(newGen({ ownerId: owner }), CREATED, { maxUnfinishedPerOwner: 3 })).toBe('inserted');
      expect(await store().insert(newGen({ ownerId: owner }), CREATED, { maxUnfinishedPerOwner: 3 })).toBe('inserted');
      expect(await store().insert(newGen({ ownerId: owner }), CREATED, { maxUnfinishedPerOwner: 3 })).toBe('limit_reached');
    });

    it('lets exactly the cap win among 40 racing inserts of one owner', async () => {
      const owner = uid('owner');
      const results = await Promise.all(Array.from({ length: 40 }, () => store().insert(newGen({ ownerId: owner }), CREATED, { maxUnfinishedPerOwner: 3 })));
      expect(results.filter((r) => r === 'inserted')).toHaveLength(3);
      expect(results.filter((r) => r === 'limit_reached')).toHaveLength(37);
      expect(await store().list(owner, { limit: 100 })).toHaveLength(3);
    });
  });

  describe('finished records never change through a status expectation', () => {
    it('refuses every change that expects an unfinished status once a generation is finished', async () => {
      const { gen } = await claimed('w1');
      expect(await store().update(gen.id, complete('w1', T0 + 1500, 5, { resultKey: 'k1' }))).not.toBeNull();
      const before = await read(gen.id);
      for (const now of [T0 + 1600, T0 + 10_000_000]) {
        expect(await store().update(gen.id, claimFromPending('w1', now))).toBeNull();
        expect(await store().update(gen.id, reclaim('w9', 1, now))).toBeNull();
        expect(await store().update(gen.id, complete('w1', now, 99))).toBeNull();
        expect(await store().update(gen.id, failFrom(UNHELD, now, 99))).toBeNull();
        expect(await store().update(gen.id, failFrom({ status: ['processing'] }, now, 99))).toBeNull();
        expect(await store().renewLeases([gen.id], 'w1', now + 1000, now)).toEqual([]);
      }
      expect(await read(gen.id)).toEqual(before);
    });
  });

  describe('listUnfinished', () => {
    it('returns only records without finishedAt, oldest first, up to the limit', async () => {
      const at = (n: number): Promise<NewGeneration> => inserted({ createdAt: T0 + n * 10 });
      // Inserted out of order so "oldest first" cannot come from insertion order.
      const g5 = await at(5);
      const g1 = await at(1);
      const g4 = await at(4);
      const g2 = await at(2);
      const g3 = await at(3);
      const g0 = await at(0);
      await store().update(g2.id, claimFromPending('w', T0 + 100));
      await store().update(g3.id, claimFromPending('w', T0 + 100));
      await store().update(g3.id, complete('w', T0 + 200));
      await store().update(g0.id, failFrom(PENDING, T0 + 200));
      const all = await store().listUnfinished(100);
      expect(all.map((r) => r.id)).toEqual([g1.id, g2.id, g4.id, g5.id]);
      expect(all.map((r) => r.status)).toEqual(['pending', 'processing', 'pending', 'pending']);
      expect((await store().listUnfinished(2)).map((r) => r.id)).toEqual([g1.id, g2.id]);
      expect(await store().listUnfinished(0)).toEqual([]);
    });

    it('pages with `after` through every unfinished generation exactly once, ties on createdAt included', async () => {
      const ids: string[] = [];
      // 23 generations over 5 distinct timestamps: most pages end in the middle of a tie.
      for (let i = 0; i < 23; i++) ids.push((await inserted({ createdAt: T0 + (i % 5) })).id);
      const finished = ids[7]!;
      await store().update(finished, failFrom(PENDING, T0 + 50));
      const seen: string[] = [];
      let after: string | undefined;
      for (let pages = 0; pages < 20; pages++) {
        const page = await store().listUnfinished(4, after);
        seen.push(...page.map((r) => r.id));
        if (page.length < 4) break;
        after = page[page.length - 1]!.id;
      }
      expect(seen).toHaveLength(22);
      expect(new Set(seen).size).toBe(22);
      expect(seen).not.toContain(finished);
      const createdAt = await Promise.all(seen.map(async (id) => (await store().getById(id))!.createdAt));
      expect(createdAt).toEqual([...createdAt].sort((a, b) => a - b));
      expect((await store().listUnfinished(100)).map((r) => r.id)).toEqual(seen);
      // A page after a generation that finished meanwhile still continues from where it stood.
      const firstPage = await store().listUnfinished(4);
      await store().update(firstPage[3]!.id, failFrom(PENDING, T0 + 60));
      expect((await store().listUnfinished(4, firstPage[3]!.id)).map((r) => r.id)).toEqual(seen.slice(4, 8));
      expect(await store().listUnfinished(4, 'no-such-generation')).toEqual([]);
    });
  });

  describe('listFinishedBefore', () => {
    it('answers only records finished before the time, oldest first, and changes nothing', async () => {
      const done = async (finishedAt: number, resultKey?: string): Promise<NewGeneration> => {
        const gen = await inserted();
        await store().update(gen.id, claimFromPending('w', T0, 10_000_000));
        expect(await store().update(gen.id, complete('w', finishedAt, 1, resultKey ? { resultKey } : { resultText: 'text' }))).not.toBeNull();
        return gen;
      };
      const oldText = await done(T0 + 200);
      const oldWithFile = await done(T0 + 100, 'key-old');
      const oldFailed = await inserted();
      await store().update(oldFailed.id, failFrom(PENDING, T0 + 300));
      await done(T0 + 1000, 'key-at-cutoff');
      await done(T0 + 5000, 'key-recent');
      await inserted({ createdAt: T0 - 1_000_000 });
      const ancientProcessing = await inserted({ createdAt: T0 - 1_000_000 });
      await store().update(ancientProcessing.id, claimFromPending('w', T0 - 999_999, 1));

      const found = await store().listFinishedBefore(T0 + 1000, 100);
      expect(found.map((r) => r.id)).toEqual([oldWithFile.id, oldText.id, oldFailed.id]);
      expect(found[0]).toMatchObject({ status: 'completed', resultKey: 'key-old', finishedAt: T0 + 100 });
      expect(found[2]).toMatchObject({ status: 'failed', finishedAt: T0 + 300 });
      // A read: asking again answers the same.
      expect((await store().listFinishedBefore(T0 + 1000, 100)).map((r) => r.id)).toEqual(found.map((r) => r.id));
      expect(await store().eventsOf(oldWithFile.id)).not.toEqual([]);
    });

    it('answers at most `limit`, and what remains once the first ones are removed', async () => {
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) {
        const gen = await inserted();
        await store().update(gen.id, failFrom(PENDING, T0 + i));
        ids.push(gen.id);
      }
      const first = await store().listFinishedBefore(T0 + 100, 2);
      expect(first.map((r) => r.id)).toEqual(ids.slice(0, 2));
      for (const r of first) expect(await store().remove(r.id, { status: ['failed'] })).toBe(true);
      expect((await store().listFinishedBefore(T0 + 100, 2)).map((r) => r.id)).toEqual(ids.slice(2, 4));
      expect(await store().listFinishedBefore(T0 + 100, 0)).toEqual([]);
    });
  });
}
