import { describe, expect, it } from 'vitest';
import type { GenerationChange, GenerationEvent, GenerationRecord, GenerationStore, NewEvent, NewGeneration } from '@genservice/core/ports';
import { T0, uid, useFresh } from './harness.js';

/** A client-safe failure reason, for the changes that are not about it. */
const FAILED = { code: 'provider_error', message: 'The model failed to generate a result.' } as const;
const CREATED: NewEvent = { type: 'created', data: { modelId: 'model-a' } };

/*
 * The store holds no rules: these helpers build the kind of compare-and-set core's Lifecycle sends, so the tests read
 * like the life of a generation, but every assertion is about what the store guarantees: an expectation is checked
 * and the write and its event happen atomically, or nothing happens.
 */
const lease = (holder: string, now: number, ms = 1000) => ({ leaseOwner: holder, leaseExpiresAt: now + ms });
const claimFromPending = (holder: string, now: number, ms = 1000): GenerationChange => ({
  expect: { status: ['pending'] },
  set: { status: 'processing', claims: 1, startedAt: now, ...lease(holder, now, ms) },
  event: { type: 'processing', data: { claim: 1 } },
  now,
});
const reclaim = (holder: string, claims: number, now: number, ms = 1000): GenerationChange => ({
  expect: { status: ['processing'], lease: 'free', parked: false, claims },
  set: { claims: claims + 1, ...lease(holder, now, ms) },
  event: { type: 'processing', data: { claim: claims + 1 } },
  now,
});
const complete = (holder: string, now: number, price = 1, result: { resultText?: string; resultKey?: string } = { resultText: 'ok' }): GenerationChange => ({
  expect: { status: ['processing'], lease: { heldBy: holder } },
  set: { status: 'completed', price, finishedAt: now, ...result },
  event: { type: 'completed', data: { price } },
  now,
});
const failFrom = (expect: GenerationChange['expect'], now: number, price = 0, reason = 'x'): GenerationChange => ({
  expect,
  set: { status: 'failed', price, failureReason: reason, error: FAILED, parkedUntil: null, finishedAt: now },
  event: { type: 'failed', data: { price, error: FAILED } },
  now,
});
const held = (holder: string): GenerationChange['expect'] => ({ status: ['processing'], lease: { heldBy: holder } });
const PENDING: GenerationChange['expect'] = { status: ['pending'] };
const UNHELD: GenerationChange['expect'] = { status: ['pending', 'processing'], lease: 'free' };

/** The GenerationStore half of `runPortContracts`. */
export function describeStoreContract(make: () => Promise<{ store: GenerationStore; close(): Promise<void> }>): void {
  describe('GenerationStore', () => {
    const ports = useFresh(make);
    const store = (): GenerationStore => ports().store;

    function newGen(overrides: Partial<NewGeneration> = {}): NewGeneration {
      return {
        id: uid('gen'),
        ownerId: uid('user'),
        modelId: 'model-a',
        settings: { prompt: 'a cat', images: ['https://example.com/a.png'], nested: { n: 1 } },
        status: 'pending',
        reserved: 10,
        createdAt: T0,
        ...overrides,
      };
    }

    async function inserted(overrides: Partial<NewGeneration> = {}): Promise<NewGeneration> {
      const gen = newGen(overrides);
      expect(await store().insert(gen, CREATED)).toBe('inserted');
      return gen;
    }

    /** A generation claimed by `holder` at T0 + 1000 with a 1000 ms lease (held until T0 + 2000). */
    async function claimed(holder = 'w1'): Promise<{ gen: NewGeneration; record: GenerationRecord }> {
      const gen = await inserted();
      const record = await store().update(gen.id, claimFromPending(holder, T0 + 1000));
      expect(record).not.toBeNull();
      return { gen, record: record! };
    }

    async function read(id: string): Promise<GenerationRecord> {
      const record = await store().getById(id);
      expect(record).not.toBeNull();
      return record!;
    }

    const types = async (id: string): Promise<string[]> => (await store().eventsOf(id)).map((e) => e.type);

    /**
     * Every event of the feed from `cursor` on, in pages of `page`, and the cursor after the last. An event becomes
     * readable once it is committed and the store can tell nothing older is still being written (on Postgres: once every
     * older transaction of the server has ended), so this reads until at least `expected` events came, for a while.
     */
    async function drain(cursor: string, expected = 0, page = 1000): Promise<{ events: GenerationEvent[]; cursor: string }> {
      const events: GenerationEvent[] = [];
      const deadline = Date.now() + 30_000;
      for (let i = 0; i < 100_000; i++) {
        const next = await store().readFeed(cursor, page);
        events.push(...next.events);
        if (next.events.length === 0) {
          expect(next.cursor).toBe(cursor);
          if (events.length >= expected || Date.now() > deadline) return { events, cursor };
          await new Promise((r) => setTimeout(r, 10));
          continue;
        }
        cursor = next.cursor;
      }
      throw new Error('the feed did not end');
    }

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
        expect(fed.events.filter((e) => e.generationId === gen.id).map((e) => e.type)).toEqual(['output', 'preview']);
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
            if (page.events.length === 0) await new Promise((r) => setTimeout(r, 1));
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
  });
}
