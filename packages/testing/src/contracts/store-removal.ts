import { describe, expect, it } from 'vitest';
import type { NewGeneration } from '@genservice/core/ports';
import { T0, uid } from './harness.js';
import { claimFromPending, complete, CREATED, failFrom, PENDING, type StoreKit } from './store-kit.js';

/** A generation's own life (expiresAfterSeconds), removal, and the optional counts. */
export function describeStoreRemoval({ store, newGen, inserted, claimed, drain }: StoreKit): void {
  describe('expiresAfterSeconds and lifeEndsAt (a life asked for at create)', () => {
    it('keeps expiresAfterSeconds as inserted, on every read, and leaves it out when none was asked', async () => {
      const gen = await inserted({ expiresAfterSeconds: 3600 });
      const plain = await inserted({ ownerId: gen.ownerId, createdAt: T0 - 1 });
      expect(await store().get(gen.id, gen.ownerId)).toMatchObject({ expiresAfterSeconds: 3600 });
      expect(await store().getById(gen.id)).toMatchObject({ expiresAfterSeconds: 3600 });
      const listed = await store().list(gen.ownerId, { limit: 10 });
      expect(listed.map((r) => [r.id, r.expiresAfterSeconds])).toEqual([
        [gen.id, 3600],
        [plain.id, undefined],
      ]);
      const record = (await store().getById(plain.id))!;
      expect('expiresAfterSeconds' in record).toBe(false);
      expect('lifeEndsAt' in record).toBe(false);
      // A change writes lifeEndsAt with the finishing fields; expiresAfterSeconds stays as inserted.
      await store().update(gen.id, claimFromPending('w', T0 + 10, 10_000));
      const done = await store().update(gen.id, { ...complete('w', T0 + 20), set: { ...complete('w', T0 + 20).set, lifeEndsAt: T0 + 20 + 3_600_000 } });
      expect(done).toMatchObject({ status: 'completed', finishedAt: T0 + 20, lifeEndsAt: T0 + 20 + 3_600_000, expiresAfterSeconds: 3600 });
      expect(await store().getById(gen.id)).toMatchObject({ lifeEndsAt: T0 + 20 + 3_600_000, expiresAfterSeconds: 3600 });
      expect((await store().list(gen.ownerId, { limit: 1 }))[0]).toMatchObject({ lifeEndsAt: T0 + 20 + 3_600_000 });
    });

    it('listLifeEndedBefore answers only records whose lifeEndsAt is before the time, soonest first, at most limit', async () => {
      const ended = async (lifeEndsAt: number, finishedAt: number): Promise<NewGeneration> => {
        const gen = await inserted({ expiresAfterSeconds: 1 });
        await store().update(gen.id, { ...failFrom(PENDING, finishedAt), set: { ...failFrom(PENDING, finishedAt).set, lifeEndsAt } });
        return gen;
      };
      const later = await ended(T0 + 300, T0 + 1);
      const sooner = await ended(T0 + 100, T0 + 2);
      await ended(T0 + 1000, T0 + 3); // at the cutoff: not before it
      await ended(T0 + 5000, T0 + 4);
      // Finished long ago without a life of its own: never in this list (retention's listFinishedBefore finds it).
      const plain = await inserted();
      await store().update(plain.id, failFrom(PENDING, T0 - 1_000_000));
      await inserted({ expiresAfterSeconds: 1 }); // unfinished: no lifeEndsAt yet

      const found = await store().listLifeEndedBefore(T0 + 1000, 100);
      expect(found.map((r) => r.id)).toEqual([sooner.id, later.id]);
      expect(found[0]).toMatchObject({ status: 'failed', lifeEndsAt: T0 + 100, expiresAfterSeconds: 1 });
      // A read: asking again answers the same; a limit cuts it; removing the first leaves the rest.
      expect((await store().listLifeEndedBefore(T0 + 1000, 100)).map((r) => r.id)).toEqual([sooner.id, later.id]);
      expect((await store().listLifeEndedBefore(T0 + 1000, 1)).map((r) => r.id)).toEqual([sooner.id]);
      expect(await store().listLifeEndedBefore(T0 + 1000, 0)).toEqual([]);
      expect(await store().remove(sooner.id, { status: ['failed'] })).toBe(true);
      expect((await store().listLifeEndedBefore(T0 + 1000, 100)).map((r) => r.id)).toEqual([later.id]);
    });

    it('a change may clear lifeEndsAt (null), and the record leaves the list', async () => {
      const gen = await inserted({ expiresAfterSeconds: 5 });
      await store().update(gen.id, { ...failFrom(PENDING, T0 + 1), set: { ...failFrom(PENDING, T0 + 1).set, lifeEndsAt: T0 + 5001 } });
      expect((await store().listLifeEndedBefore(T0 + 10_000, 10)).map((r) => r.id)).toEqual([gen.id]);
      await store().update(gen.id, { expect: { status: ['failed'] }, set: { lifeEndsAt: null }, now: T0 + 2 });
      expect(await store().listLifeEndedBefore(T0 + 10_000, 10)).toEqual([]);
      expect('lifeEndsAt' in (await store().getById(gen.id))!).toBe(false);
    });
  });

  describe('remove', () => {
    it('deletes one generation and all its events when its status matches, and only then', async () => {
      const start = await store().feedHead();
      const { gen } = await claimed('w');
      await store().update(gen.id, complete('w', T0 + 1500, 1, { resultKey: 'key-1' }));
      const other = await inserted({ ownerId: gen.ownerId });
      expect(await store().remove(gen.id, { status: ['pending', 'processing'] })).toBe(false);
      expect(await store().getById(gen.id)).not.toBeNull();
      expect(await store().remove(gen.id, { status: ['completed', 'failed'] })).toBe(true);
      expect(await store().getById(gen.id)).toBeNull();
      expect(await store().get(gen.id, gen.ownerId)).toBeNull();
      expect(await store().eventsOf(gen.id)).toEqual([]);
      expect((await store().list(gen.ownerId, { limit: 10 })).map((r) => r.id)).toEqual([other.id]);
      expect((await drain(start, 1)).events.map((e) => e.generationId)).not.toContain(gen.id);
      expect(await store().update(gen.id, failFrom({ status: ['completed'] }, T0 + 2000))).toBeNull();
      // Idempotent: the second remove finds nothing.
      expect(await store().remove(gen.id, { status: ['completed', 'failed'] })).toBe(false);
      expect(await store().getById(other.id)).not.toBeNull();
      expect(await store().eventsOf(other.id)).toHaveLength(1);
    });

    it('frees a place under the in-flight cap when it removes an unfinished one', async () => {
      const owner = uid('owner');
      const a = newGen({ ownerId: owner });
      expect(await store().insert(a, CREATED, { maxUnfinishedPerOwner: 1 })).toBe('inserted');
      expect(await store().insert(newGen({ ownerId: owner }), CREATED, { maxUnfinishedPerOwner: 1 })).toBe('limit_reached');
      expect(await store().remove(a.id, { status: ['pending'] })).toBe(true);
      expect(await store().insert(newGen({ ownerId: owner }), CREATED, { maxUnfinishedPerOwner: 1 })).toBe('inserted');
    });

    it('of racing removes and changes exactly one wins', async () => {
      const gen = await inserted();
      const results = await Promise.all([
        store().remove(gen.id, { status: ['pending'] }),
        store().remove(gen.id, { status: ['pending'] }),
        store().update(gen.id, failFrom(PENDING, T0 + 10)),
      ]);
      const removed = results.filter((r) => r === true).length;
      const failed = results[2] !== null;
      expect(removed + (failed ? 1 : 0)).toBe(1);
      if (failed) expect(await store().getById(gen.id)).toMatchObject({ status: 'failed' });
      else expect(await store().getById(gen.id)).toBeNull();
    });
  });

  describe('countByStatus (optional)', () => {
    it('counts every status when implemented', async () => {
      const s = store();
      if (!s.countByStatus) return;
      const a = await inserted();
      await inserted();
      const { gen: b } = await claimed('w');
      await claimed('w');
      await s.update(b.id, complete('w', T0 + 1500));
      await s.update(a.id, failFrom(PENDING, T0));
      expect(await s.countByStatus()).toEqual({ pending: 1, processing: 1, completed: 1, failed: 1 });
    });
  });
}
