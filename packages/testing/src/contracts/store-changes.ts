import { describe, expect, it } from 'vitest';
import type { GenerationChange, GenerationRecord } from '@genservice/core/ports';
import { T0, uid } from './harness.js';
import { claimFromPending, complete, CREATED, failFrom, held, lease, PENDING, reclaim, UNHELD, type StoreKit } from './store-kit.js';

/** Insert, the compare-and-set update (its expectation, its patch, its races) and lease renewal. */
export function describeStoreChanges({ store, newGen, inserted, claimed, read, types }: StoreKit): void {
  describe('insert and read', () => {
    it('stores the record as given, with no claims, lease, price or result, and its first event', async () => {
      const gen = await inserted();
      const record = await store().get(gen.id, gen.ownerId);
      expect(record).toMatchObject({ id: gen.id, ownerId: gen.ownerId, modelId: gen.modelId, settings: gen.settings, status: 'pending', reserved: 10, claims: 0, createdAt: T0, updatedAt: T0 });
      for (const absent of ['price', 'resultText', 'resultKey', 'finishedAt', 'leaseOwner', 'leaseExpiresAt', 'parkedUntil', 'remoteHandle'] as const) {
        expect(record?.[absent]).toBeUndefined();
      }
      expect(await store().getById(gen.id)).toEqual(record);
      const events = await store().eventsOf(gen.id);
      expect(events).toEqual([{ seq: 1, generationId: gen.id, ownerId: gen.ownerId, type: 'created', at: T0, data: { modelId: 'model-a' } }]);
    });

    it("reads another user's generation as null, exactly like a missing one", async () => {
      const gen = await inserted();
      expect(await store().get(gen.id, uid('other-user'))).toBeNull();
      expect(await store().get(gen.id, '')).toBeNull();
      expect(await store().get(gen.id, gen.ownerId.toUpperCase())).toBeNull();
      expect(await store().get(uid('missing'), gen.ownerId)).toBeNull();
      expect(await store().getById(uid('missing'))).toBeNull();
    });

    it('answers odd ids with null instead of throwing', async () => {
      const gen = await inserted();
      for (const id of ['', '__proto__', 'constructor', "' OR 1=1 --", `${gen.id}%`, `${gen.id} `, '%', '*', 'x'.repeat(5000)]) {
        expect(await store().get(id, gen.ownerId)).toBeNull();
        expect(await store().getById(id)).toBeNull();
        expect(await store().update(id, claimFromPending('w', T0))).toBeNull();
      }
    });

    it('rejects a duplicate id and keeps the first', async () => {
      const gen = await inserted();
      await expect(store().insert({ ...gen, ownerId: uid('intruder'), reserved: 99 }, CREATED)).rejects.toThrow();
      await expect(store().insert(gen, CREATED)).rejects.toThrow();
      expect(await read(gen.id)).toMatchObject({ ownerId: gen.ownerId, reserved: 10, status: 'pending' });
      expect(await store().eventsOf(gen.id)).toHaveLength(1);
    });

    it('rejects all but one of concurrent inserts of one id', async () => {
      const gen = newGen();
      const results = await Promise.allSettled(Array.from({ length: 20 }, (_, i) => store().insert({ ...gen, ownerId: `${gen.ownerId}-${i}` }, CREATED)));
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      expect(await store().eventsOf(gen.id)).toHaveLength(1);
    });

    it('hands out copies: mutating an input or a result never changes what is stored', async () => {
      const gen = newGen();
      const change = claimFromPending('w1', T0 + 1);
      await store().insert(gen, CREATED);
      (gen.settings as { prompt: string }).prompt = 'mutated input';
      const first = await read(gen.id);
      first.status = 'completed';
      (first.settings as { nested: { n: number } }).nested.n = 42;
      const after = await store().update(gen.id, change);
      (change.set as { leaseOwner: string }).leaseOwner = 'mutated';
      after!.claims = 99;
      const again = await read(gen.id);
      expect(again).toMatchObject({ status: 'processing', claims: 1, leaseOwner: 'w1' });
      expect(again.settings).toEqual({ prompt: 'a cat', images: ['https://example.com/a.png'], nested: { n: 1 } });
    });
  });

  describe('update: the expectation', () => {
    it('applies the change and answers the record as written, with updatedAt and the event', async () => {
      const gen = await inserted();
      const after = await store().update(gen.id, claimFromPending('w1', T0 + 10, 500));
      expect(after).toMatchObject({ id: gen.id, status: 'processing', claims: 1, leaseOwner: 'w1', leaseExpiresAt: T0 + 510, startedAt: T0 + 10, updatedAt: T0 + 10 });
      expect(await read(gen.id)).toEqual(after);
      expect((await store().eventsOf(gen.id))[1]).toEqual({ seq: 2, generationId: gen.id, ownerId: gen.ownerId, type: 'processing', at: T0 + 10, data: { claim: 1 } });
    });

    it('refuses when the status is not one of those expected, and for a missing generation', async () => {
      const gen = await inserted();
      expect(await store().update(gen.id, { expect: { status: ['processing', 'completed'] }, set: { price: 1 }, now: T0 + 1 })).toBeNull();
      expect(await store().update(gen.id, { expect: { status: [] }, set: { price: 1 }, now: T0 + 1 })).toBeNull();
      expect(await store().update(uid('missing'), claimFromPending('w', T0))).toBeNull();
      expect(await read(gen.id)).toMatchObject({ status: 'pending', updatedAt: T0 });
      expect((await read(gen.id)).price).toBeUndefined();
      expect(await store().update(gen.id, { expect: { status: ['failed', 'pending'] }, set: { price: 1 }, now: T0 + 2 })).toMatchObject({ price: 1, status: 'pending' });
    });

    it('lease held: only by its holder, only before it expires (now < leaseExpiresAt)', async () => {
      const { gen } = await claimed('w1');
      const touch = (holder: string, now: number) => store().update(gen.id, { expect: held(holder), set: { progress: { fraction: now - T0 } }, now });
      expect(await touch('w2', T0 + 1500)).toBeNull();
      expect(await touch('', T0 + 1500)).toBeNull();
      expect(await touch('w1', T0 + 2000)).toBeNull();
      expect(await touch('w1', T0 + 1999)).toMatchObject({ progress: { fraction: 1999 } });
      const pending = await inserted();
      expect(await store().update(pending.id, { expect: { status: ['pending', 'processing'], lease: { heldBy: 'w1' } }, set: { price: 1 }, now: T0 })).toBeNull();
    });

    it('lease free: no lease, or expired at now (leaseExpiresAt <= now); never while it is held', async () => {
      const { gen } = await claimed('w1');
      expect(await store().update(gen.id, failFrom(UNHELD, T0 + 1999))).toBeNull();
      expect((await read(gen.id)).status).toBe('processing');
      expect(await store().update(gen.id, failFrom(UNHELD, T0 + 2000))).toMatchObject({ status: 'failed' });
      const pending = await inserted();
      expect(await store().update(pending.id, failFrom(UNHELD, T0))).toMatchObject({ status: 'failed' });
    });

    it('parked: whether parkedUntil is set', async () => {
      const { gen } = await claimed('w1');
      expect(await store().update(gen.id, { expect: { status: ['processing'], parked: true }, set: { price: 1 }, now: T0 + 1100 })).toBeNull();
      expect(await store().update(gen.id, { expect: held('w1'), set: { leaseOwner: null, leaseExpiresAt: null, parkedUntil: T0 + 5000 }, now: T0 + 1100 })).not.toBeNull();
      expect(await store().update(gen.id, { expect: { status: ['processing'], parked: false }, set: { price: 1 }, now: T0 + 1200 })).toBeNull();
      expect(await store().update(gen.id, reclaim('w2', 1, T0 + 1300))).toBeNull();
      const resumed = await store().update(gen.id, { expect: { status: ['processing'], lease: 'free', parked: true }, set: { parkedUntil: null, ...lease('w2', T0 + 5000) }, now: T0 + 5000 });
      expect(resumed).toMatchObject({ claims: 1, leaseOwner: 'w2' });
      expect(resumed?.parkedUntil).toBeUndefined();
    });

    it('claims: equal to the expected count', async () => {
      const { gen } = await claimed('w1');
      expect(await store().update(gen.id, reclaim('w2', 0, T0 + 3000))).toBeNull();
      expect(await store().update(gen.id, reclaim('w2', 2, T0 + 3000))).toBeNull();
      expect(await store().update(gen.id, reclaim('w2', 1, T0 + 3000))).toMatchObject({ claims: 2, leaseOwner: 'w2' });
    });

    it('noRemoteHandle: only while no handle is stored', async () => {
      const { gen } = await claimed('w1');
      const handle = { id: 'pred_123', urls: { get: "https://api.example.com/p/123?x='1'" }, n: [1, 2], ok: true, none: null };
      const setHandle = (h: unknown) => store().update(gen.id, { expect: { ...held('w1'), noRemoteHandle: true }, set: { remoteHandle: h }, now: T0 + 1100 });
      expect(await setHandle(handle)).toMatchObject({ remoteHandle: handle });
      expect(await setHandle({ id: 'second' })).toBeNull();
      expect((await read(gen.id)).remoteHandle).toEqual(handle);
    });

    it('every condition must hold at once', async () => {
      const { gen } = await claimed('w1');
      const change = (expect: GenerationChange['expect']) => store().update(gen.id, { expect, set: { price: 3 }, now: T0 + 1500 });
      expect(await change({ status: ['processing'], lease: { heldBy: 'w1' }, claims: 2 })).toBeNull();
      expect(await change({ status: ['pending'], lease: { heldBy: 'w1' }, claims: 1 })).toBeNull();
      expect(await change({ status: ['processing'], lease: { heldBy: 'w1' }, claims: 1, parked: true })).toBeNull();
      expect(await change({ status: ['processing'], lease: 'free', claims: 1 })).toBeNull();
      expect(await change({ status: ['processing'], lease: { heldBy: 'w1' }, claims: 1, parked: false, noRemoteHandle: true })).toMatchObject({ price: 3 });
    });
  });

  describe('update: the patch', () => {
    it('writes the fields given, clears those given as null, and leaves the rest', async () => {
      const { gen } = await claimed('w1');
      const text = 'ünïcødé ✓\n'.repeat(1000);
      const done = await store().update(gen.id, complete('w1', T0 + 1500, 8, { resultText: text, resultKey: 'blob-key' }));
      expect(done).toMatchObject({ status: 'completed', price: 8, resultText: text, resultKey: 'blob-key', finishedAt: T0 + 1500, claims: 1, leaseOwner: 'w1', startedAt: T0 + 1000 });
      const error = { code: 'timeout', message: 'The generation took longer than 30 s.' } as const;
      const other = (await claimed('w1')).gen;
      await store().update(other.id, { expect: held('w1'), set: { progress: { fraction: 0.5, message: 'half' }, parkedUntil: T0 + 9 }, now: T0 + 1100 });
      const failed = await store().update(other.id, {
        expect: held('w1'),
        set: { status: 'failed', price: 2, failureReason: 'timed out after 30000 ms', error, parkedUntil: null, leaseOwner: null, finishedAt: T0 + 1500 },
        now: T0 + 1500,
      });
      expect(failed).toMatchObject({ status: 'failed', price: 2, failureReason: 'timed out after 30000 ms', error, progress: { fraction: 0.5, message: 'half' } });
      expect(failed?.parkedUntil).toBeUndefined();
      expect(failed?.leaseOwner).toBeUndefined();
      expect(await read(other.id)).toEqual(failed);
    });

    it('keeps metadata and the webhook a generation was created with', async () => {
      const metadata = { order: 'A-17', 'utm source': 'newsletter', empty: '' };
      const webhook = { url: 'https://hooks.example.com/gen?token=a%20b', events: ['generation.completed' as const, 'generation.failed' as const] };
      const gen = await inserted({ metadata, webhook });
      await store().update(gen.id, claimFromPending('w1', T0 + 1));
      expect(await read(gen.id)).toMatchObject({ metadata, webhook });
      expect((await store().list(gen.ownerId, { limit: 1 }))[0]).toMatchObject({ metadata, webhook });
      const plain = await inserted();
      expect((await read(plain.id)).metadata).toBeUndefined();
      expect((await read(plain.id)).webhook).toBeUndefined();
    });

    it("keeps the create's traceparent through every change, and reads it back on another instance's read", async () => {
      const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
      const gen = await inserted({ traceparent });
      expect((await store().getById(gen.id))?.traceparent).toBe(traceparent);
      await store().update(gen.id, claimFromPending('w1', T0 + 1));
      expect(await read(gen.id)).toMatchObject({ traceparent, status: 'processing' });
      expect((await store().list(gen.ownerId, { limit: 1 }))[0]).toMatchObject({ traceparent });
      expect((await read((await inserted()).id)).traceparent).toBeUndefined();
    });

    it("keeps the create's priority and deadline through every change; a create without them has neither", async () => {
      const gen = await inserted({ priority: 'low', deadlineAt: T0 + 3_600_000 });
      expect(await store().getById(gen.id)).toMatchObject({ priority: 'low', deadlineAt: T0 + 3_600_000 });
      await store().update(gen.id, claimFromPending('w1', T0 + 1));
      expect(await read(gen.id)).toMatchObject({ priority: 'low', deadlineAt: T0 + 3_600_000, status: 'processing' });
      expect((await store().listUnfinished(10)).find((r) => r.id === gen.id)).toMatchObject({ priority: 'low' });
      const high = await read((await inserted({ priority: 'high' })).id);
      expect(high.priority).toBe('high');
      expect(high.deadlineAt).toBeUndefined();
      const plain = await read((await inserted()).id);
      expect(plain.priority).toBeUndefined();
      expect(plain.deadlineAt).toBeUndefined();
    });
  });

  describe('update: races', () => {
    it('lets exactly one of 50 concurrent changes with the same expectation win', async () => {
      const gen = await inserted();
      const results = await Promise.all(Array.from({ length: 50 }, (_, i) => store().update(gen.id, claimFromPending(`w${i}`, T0 + 1))));
      const winners = results.filter((r): r is GenerationRecord => r !== null);
      expect(winners).toHaveLength(1);
      expect(await read(gen.id)).toMatchObject({ status: 'processing', claims: 1, leaseOwner: winners[0]!.leaseOwner });
      expect(await types(gen.id)).toEqual(['created', 'processing']);
    });

    it('lets exactly one of 50 concurrent completes and fails by the holder win', async () => {
      const { gen } = await claimed('w1');
      const results = await Promise.all(
        Array.from({ length: 50 }, (_, i) => store().update(gen.id, i % 2 === 0 ? complete('w1', T0 + 1500, i, { resultText: `r${i}` }) : failFrom(held('w1'), T0 + 1500, i, `f${i}`))),
      );
      expect(results.filter(Boolean)).toHaveLength(1);
      const winner = results.findIndex((r) => r !== null);
      const record = await read(gen.id);
      expect(record.price).toBe(winner);
      if (winner % 2 === 0) expect(record).toMatchObject({ status: 'completed', resultText: `r${winner}` });
      else expect(record).toMatchObject({ status: 'failed', failureReason: `f${winner}` });
      expect(await types(gen.id)).toEqual(['created', 'processing', winner % 2 === 0 ? 'completed' : 'failed']);
    });

    it('lets exactly one of 30 concurrent re-claims with the same claims count win', async () => {
      const { gen } = await claimed('w0');
      const results = await Promise.all(Array.from({ length: 30 }, (_, i) => store().update(gen.id, reclaim(`r${i}`, 1, T0 + 5000))));
      expect(results.filter((r) => r !== null)).toHaveLength(1);
      expect(await read(gen.id)).toMatchObject({ status: 'processing', claims: 2 });
      expect(await types(gen.id)).toEqual(['created', 'processing', 'processing']);
    });

    it('lets exactly one of racing claims and a cancel of a pending generation win', async () => {
      const gen = await inserted();
      const calls = Array.from({ length: 25 }, (_, i) => store().update(gen.id, claimFromPending(`w${i}`, T0 + 1)));
      calls.splice(12, 0, store().update(gen.id, failFrom(PENDING, T0 + 1)));
      const results = await Promise.all(calls);
      expect(results.filter((r) => r !== null)).toHaveLength(1);
      const record = await read(gen.id);
      if (results[12] !== null) expect(record).toMatchObject({ status: 'failed', claims: 0 });
      else expect(record).toMatchObject({ status: 'processing', claims: 1 });
    });
  });

  describe('renewLeases', () => {
    it('extends every lease the holder still holds, in one call, and answers those ids', async () => {
      const a = (await claimed('w1')).gen;
      const b = (await claimed('w1')).gen;
      const other = (await claimed('w2')).gen;
      const pending = await inserted();
      const renewed = await store().renewLeases([a.id, b.id, other.id, pending.id, uid('missing')], 'w1', T0 + 2900, T0 + 1900);
      expect([...renewed].sort()).toEqual([a.id, b.id].sort());
      expect(await read(a.id)).toMatchObject({ leaseOwner: 'w1', leaseExpiresAt: T0 + 2900, claims: 1 });
      expect(await read(other.id)).toMatchObject({ leaseOwner: 'w2', leaseExpiresAt: T0 + 2000 });
      // Renewed: nobody may take it at the old expiry.
      expect(await store().update(a.id, reclaim('w3', 1, T0 + 2000))).toBeNull();
      expect(await store().update(a.id, reclaim('w3', 1, T0 + 2900))).not.toBeNull();
      expect(await store().renewLeases([], 'w1', T0 + 5000, T0 + 1950)).toEqual([]);
      expect(await types(b.id)).toEqual(['created', 'processing']);
    });

    it('refuses a lease that expired (now >= leaseExpiresAt) or was taken over', async () => {
      const { gen } = await claimed('w1');
      expect(await store().renewLeases([gen.id], 'w1', T0 + 3000, T0 + 2000)).toEqual([]);
      expect(await read(gen.id)).toMatchObject({ leaseExpiresAt: T0 + 2000 });
      await store().update(gen.id, reclaim('w2', 1, T0 + 2000));
      expect(await store().renewLeases([gen.id], 'w1', T0 + 3000, T0 + 2100)).toEqual([]);
      expect(await store().renewLeases([gen.id], 'w2', T0 + 3500, T0 + 2100)).toEqual([gen.id]);
    });
  });
}
