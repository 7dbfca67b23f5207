import { describe, expect, it } from 'vitest';
import type { GenerationRecord, GenerationStore, NewGeneration } from '@genservice/core';
import { T0, uid, useFresh } from './harness.js';

/** A client-safe failure reason, for the fail calls that are not about it. */
const FAILED = { code: 'provider_error', message: 'The model failed to generate a result.' } as const;

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
        reserved: 10,
        createdAt: T0,
        ...overrides,
      };
    }

    async function inserted(overrides: Partial<NewGeneration> = {}): Promise<NewGeneration> {
      const gen = newGen(overrides);
      await store().insert(gen);
      return gen;
    }

    /** A generation claimed by `workerId` at T0 + 1000 with a 1000 ms lease (held until T0 + 2000). */
    async function claimed(workerId = 'w1'): Promise<{ gen: NewGeneration; record: GenerationRecord }> {
      const gen = await inserted();
      const record = await store().claim(gen.id, { workerId, leaseMs: 1000, now: T0 + 1000 });
      expect(record).not.toBeNull();
      return { gen, record: record! };
    }

    async function read(id: string): Promise<GenerationRecord> {
      const record = await store().getById(id);
      expect(record).not.toBeNull();
      return record!;
    }

    describe('insert and read', () => {
      it('stores a pending generation with no attempts, price or result', async () => {
        const gen = await inserted();
        const record = await store().get(gen.id, gen.ownerId);
        expect(record).toMatchObject({
          id: gen.id,
          ownerId: gen.ownerId,
          modelId: gen.modelId,
          settings: gen.settings,
          status: 'pending',
          reserved: 10,
          attempts: 0,
          createdAt: T0,
        });
        expect(record?.price).toBeUndefined();
        expect(record?.resultText).toBeUndefined();
        expect(record?.resultKey).toBeUndefined();
        expect(record?.finishedAt).toBeUndefined();
        expect(await store().getById(gen.id)).toEqual(record);
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
        }
      });

      it('rejects a duplicate id and keeps the first', async () => {
        const gen = await inserted();
        await expect(store().insert({ ...gen, ownerId: uid('intruder'), reserved: 99 })).rejects.toThrow();
        await expect(store().insert(gen)).rejects.toThrow();
        expect(await read(gen.id)).toMatchObject({ ownerId: gen.ownerId, reserved: 10, status: 'pending' });
      });

      it('rejects all but one of concurrent inserts of one id', async () => {
        const gen = newGen();
        const results = await Promise.allSettled(
          Array.from({ length: 20 }, (_, i) => store().insert({ ...gen, ownerId: `${gen.ownerId}-${i}` })),
        );
        expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      });

      it('hands out copies: mutating an input or a result never changes what is stored', async () => {
        const gen = newGen();
        await store().insert(gen);
        (gen.settings as { prompt: string }).prompt = 'mutated input';
        const first = await read(gen.id);
        first.status = 'completed';
        (first.settings as { nested: { n: number } }).nested.n = 42;
        const again = await read(gen.id);
        expect(again.status).toBe('pending');
        expect(again.settings).toEqual({ prompt: 'a cat', images: ['https://example.com/a.png'], nested: { n: 1 } });
      });
    });

    describe('claim', () => {
      it('moves pending to processing with a lease and one attempt', async () => {
        const gen = await inserted();
        const record = await store().claim(gen.id, { workerId: 'w1', leaseMs: 500, now: T0 + 10 });
        expect(record).toMatchObject({ id: gen.id, status: 'processing', attempts: 1, leaseOwner: 'w1', leaseExpiresAt: T0 + 510 });
        expect(await read(gen.id)).toMatchObject({ status: 'processing', attempts: 1, leaseOwner: 'w1', leaseExpiresAt: T0 + 510 });
      });

      it('returns null for a missing generation', async () => {
        expect(await store().claim(uid('missing'), { workerId: 'w1', leaseMs: 500, now: T0 })).toBeNull();
      });

      it('refuses a generation whose lease is still held, by anyone', async () => {
        const { gen } = await claimed('w1');
        expect(await store().claim(gen.id, { workerId: 'w2', leaseMs: 1000, now: T0 + 1999 })).toBeNull();
        expect(await store().claim(gen.id, { workerId: 'w1', leaseMs: 1000, now: T0 + 1500 })).toBeNull();
        expect(await read(gen.id)).toMatchObject({ attempts: 1, leaseOwner: 'w1', leaseExpiresAt: T0 + 2000 });
      });

      it('lets exactly one of 50 concurrent claims win', async () => {
        const gen = await inserted();
        const results = await Promise.all(
          Array.from({ length: 50 }, (_, i) => store().claim(gen.id, { workerId: `w${i}`, leaseMs: 1000, now: T0 + 1 })),
        );
        const winners = results.filter((r): r is GenerationRecord => r !== null);
        expect(winners).toHaveLength(1);
        expect(await read(gen.id)).toMatchObject({ status: 'processing', attempts: 1, leaseOwner: winners[0]!.leaseOwner });
      });

      it('re-claims an expired lease, counting a new attempt, and locks out the lost worker', async () => {
        const { gen } = await claimed('w1');
        const reclaimed = await store().claim(gen.id, { workerId: 'w2', leaseMs: 1000, now: T0 + 2000 });
        expect(reclaimed).toMatchObject({ status: 'processing', attempts: 2, leaseOwner: 'w2', leaseExpiresAt: T0 + 3000 });
        // The lost worker comes back while w2 still holds the new lease: every move it tries is refused.
        expect(await store().renewLease(gen.id, 'w1', 1000, T0 + 2100)).toBe(false);
        expect(await store().complete(gen.id, { workerId: 'w1', price: 10, resultText: 'stale', now: T0 + 2100 })).toBe(false);
        expect(await store().fail(gen.id, { workerId: 'w1', price: 0, reason: 'stale', error: FAILED, now: T0 + 2100 })).toBe(false);
        expect(await read(gen.id)).toMatchObject({ status: 'processing', attempts: 2, leaseOwner: 'w2' });
        expect(await store().complete(gen.id, { workerId: 'w2', price: 7, resultText: 'fresh', now: T0 + 2200 })).toBe(true);
        expect(await read(gen.id)).toMatchObject({ status: 'completed', price: 7, resultText: 'fresh', attempts: 2 });
      });

      it('lets exactly one of 30 concurrent re-claims of an expired lease win, adding one attempt', async () => {
        const { gen } = await claimed('w0');
        const results = await Promise.all(
          Array.from({ length: 30 }, (_, i) => store().claim(gen.id, { workerId: `r${i}`, leaseMs: 1000, now: T0 + 5000 })),
        );
        expect(results.filter((r) => r !== null)).toHaveLength(1);
        expect(await read(gen.id)).toMatchObject({ status: 'processing', attempts: 2 });
      });

      it('counts every claim across several lost workers', async () => {
        const gen = await inserted();
        for (let i = 1; i <= 4; i++) {
          const record = await store().claim(gen.id, { workerId: `w${i}`, leaseMs: 100, now: T0 + i * 1000 });
          expect(record?.attempts).toBe(i);
        }
      });
    });

    describe('renewLease', () => {
      it('extends the lease of the holder, so others cannot claim at the old expiry', async () => {
        const { gen } = await claimed('w1');
        expect(await store().renewLease(gen.id, 'w1', 1000, T0 + 1900)).toBe(true);
        expect(await read(gen.id)).toMatchObject({ leaseOwner: 'w1', leaseExpiresAt: T0 + 2900, attempts: 1 });
        expect(await store().claim(gen.id, { workerId: 'w2', leaseMs: 1000, now: T0 + 2000 })).toBeNull();
        expect(await store().claim(gen.id, { workerId: 'w2', leaseMs: 1000, now: T0 + 2900 })).not.toBeNull();
      });

      it('refuses another worker, a pending, a missing and a finished generation', async () => {
        const { gen } = await claimed('w1');
        expect(await store().renewLease(gen.id, 'w2', 1000, T0 + 1500)).toBe(false);
        const pending = await inserted();
        expect(await store().renewLease(pending.id, 'w1', 1000, T0 + 1500)).toBe(false);
        expect(await store().renewLease(uid('missing'), 'w1', 1000, T0 + 1500)).toBe(false);
        expect(await store().complete(gen.id, { workerId: 'w1', price: 1, now: T0 + 1500 })).toBe(true);
        expect(await store().renewLease(gen.id, 'w1', 1000, T0 + 1600)).toBe(false);
      });

      it('refuses the holder once its lease has expired', async () => {
        const { gen } = await claimed('w1');
        expect(await store().renewLease(gen.id, 'w1', 1000, T0 + 2000)).toBe(false);
      });
    });

    describe('complete', () => {
      it('finishes a claimed generation with its price and result', async () => {
        const { gen } = await claimed('w1');
        expect(await store().complete(gen.id, { workerId: 'w1', price: 8, resultKey: 'blob-key', now: T0 + 1500 })).toBe(true);
        const record = await store().get(gen.id, gen.ownerId);
        expect(record).toMatchObject({ status: 'completed', price: 8, resultKey: 'blob-key', finishedAt: T0 + 1500, attempts: 1 });
        expect(record?.resultText).toBeUndefined();
      });

      it('stores a text result', async () => {
        const { gen } = await claimed('w1');
        const text = 'ünïcødé ✓\n'.repeat(1000);
        expect(await store().complete(gen.id, { workerId: 'w1', price: 0, resultText: text, now: T0 + 1500 })).toBe(true);
        expect(await read(gen.id)).toMatchObject({ status: 'completed', price: 0, resultText: text });
      });

      it('refuses a pending, a missing, or another worker\'s generation', async () => {
        const pending = await inserted();
        expect(await store().complete(pending.id, { workerId: 'w1', price: 1, now: T0 + 1500 })).toBe(false);
        expect(await store().complete(uid('missing'), { workerId: 'w1', price: 1, now: T0 + 1500 })).toBe(false);
        const { gen } = await claimed('w1');
        expect(await store().complete(gen.id, { workerId: 'w2', price: 1, now: T0 + 1500 })).toBe(false);
        expect(await store().complete(gen.id, { workerId: '', price: 1, now: T0 + 1500 })).toBe(false);
        expect((await read(pending.id)).status).toBe('pending');
        expect((await read(gen.id)).status).toBe('processing');
      });

      it('refuses the holder once its lease has expired', async () => {
        const { gen } = await claimed('w1');
        expect(await store().complete(gen.id, { workerId: 'w1', price: 1, now: T0 + 2000 })).toBe(false);
        expect((await read(gen.id)).status).toBe('processing');
      });

      it('lets exactly one of 50 concurrent completes and fails win', async () => {
        const { gen } = await claimed('w1');
        const calls = Array.from({ length: 50 }, (_, i) =>
          i % 2 === 0
            ? store().complete(gen.id, { workerId: 'w1', price: i, resultText: `r${i}`, now: T0 + 1500 })
            : store().fail(gen.id, { workerId: 'w1', price: i, reason: `f${i}`, error: FAILED, now: T0 + 1500 }),
        );
        const results = await Promise.all(calls);
        expect(results.filter(Boolean)).toHaveLength(1);
        const winner = results.indexOf(true);
        const record = await read(gen.id);
        expect(record.price).toBe(winner);
        if (winner % 2 === 0) {
          expect(record).toMatchObject({ status: 'completed', resultText: `r${winner}` });
        } else {
          expect(record).toMatchObject({ status: 'failed', failureReason: `f${winner}` });
          expect(record.resultText).toBeUndefined();
        }
      });
    });

    describe('fail', () => {
      it('fails a pending generation without a worker (cancel)', async () => {
        const gen = await inserted();
        expect(await store().fail(gen.id, { price: 0, reason: 'cancelled', error: FAILED, now: T0 + 5 })).toBe(true);
        const record = await read(gen.id);
        expect(record).toMatchObject({ status: 'failed', price: 0, failureReason: 'cancelled', finishedAt: T0 + 5, attempts: 0 });
        expect(await store().claim(gen.id, { workerId: 'w1', leaseMs: 1000, now: T0 + 6 })).toBeNull();
      });

      it('refuses a worker failing a generation it never claimed', async () => {
        const gen = await inserted();
        expect(await store().fail(gen.id, { workerId: 'w1', price: 0, reason: 'x', error: FAILED, now: T0 + 5 })).toBe(false);
        expect((await read(gen.id)).status).toBe('pending');
      });

      it('fails a processing generation by its worker while the lease is held', async () => {
        const { gen } = await claimed('w1');
        expect(await store().fail(gen.id, { workerId: 'w2', price: 1, reason: 'x', error: FAILED, now: T0 + 1500 })).toBe(false);
        expect(await store().fail(gen.id, { workerId: 'w1', price: 2, reason: 'provider said no', error: FAILED, now: T0 + 1500 })).toBe(true);
        expect(await read(gen.id)).toMatchObject({ status: 'failed', price: 2, failureReason: 'provider said no' });
      });

      it('without a worker, fails a processing generation only once its lease expired, or with force', async () => {
        const { gen } = await claimed('w1');
        expect(await store().fail(gen.id, { price: 0, reason: 'recovery', error: FAILED, now: T0 + 1999 })).toBe(false);
        expect((await read(gen.id)).status).toBe('processing');
        expect(await store().fail(gen.id, { price: 0, reason: 'recovery', error: FAILED, now: T0 + 2000 })).toBe(true);
        expect((await read(gen.id)).status).toBe('failed');

        const other = await claimed('w1');
        expect(await store().fail(other.gen.id, { force: true, price: 3, reason: 'cancelled', error: FAILED, now: T0 + 1100 })).toBe(true);
        expect(await read(other.gen.id)).toMatchObject({ status: 'failed', price: 3 });
        // The cancelled worker's late answer is refused.
        expect(await store().complete(other.gen.id, { workerId: 'w1', price: 9, now: T0 + 1200 })).toBe(false);
      });

      it('lets exactly one of concurrent claims and a cancel of a pending generation win', async () => {
        const gen = await inserted();
        const calls: Array<Promise<unknown>> = Array.from({ length: 25 }, (_, i) =>
          store().claim(gen.id, { workerId: `w${i}`, leaseMs: 1000, now: T0 + 1 }),
        );
        calls.splice(12, 0, store().fail(gen.id, { price: 0, reason: 'cancelled', error: FAILED, now: T0 + 1 }));
        const results = await Promise.all(calls);
        const wins = results.filter((r) => r !== null && r !== false);
        expect(wins).toHaveLength(1);
        const record = await read(gen.id);
        if (results[12] === true) expect(record).toMatchObject({ status: 'failed', attempts: 0 });
        else expect(record).toMatchObject({ status: 'processing', attempts: 1 });
      });
    });

    describe('fail records the reason and a price that follows the state it moved from', () => {
      it('records the client-safe error beside the internal reason', async () => {
        const { gen } = await claimed('w1');
        const error = { code: 'timeout', message: 'The generation took longer than 30 s.' } as const;
        expect(await store().fail(gen.id, { workerId: 'w1', price: 2, reason: 'timed out after 30000 ms', error, now: T0 + 1500 })).toBe(true);
        expect(await read(gen.id)).toMatchObject({ status: 'failed', price: 2, failureReason: 'timed out after 30000 ms', error });
      });

      it('charges pendingPrice from pending and price from processing', async () => {
        const pending = await inserted();
        expect(await store().fail(pending.id, { force: true, price: 5, pendingPrice: 0, reason: 'cancelled', error: FAILED, now: T0 + 5 })).toBe(true);
        expect((await read(pending.id)).price).toBe(0);
        const { gen } = await claimed('w1');
        expect(await store().fail(gen.id, { force: true, price: 5, pendingPrice: 0, reason: 'cancelled', error: FAILED, now: T0 + 1100 })).toBe(true);
        expect((await read(gen.id)).price).toBe(5);
        expect((await store().eventsOf(gen.id)).at(-1)?.data).toEqual({ price: 5, error: FAILED });
      });

      it('charges by the state the generation really left when a cancel races a claim', async () => {
        for (let round = 0; round < 10; round++) {
          const gen = await inserted();
          const [claim, cancel] = await Promise.all([
            store().claim(gen.id, { workerId: 'w1', leaseMs: 1000, now: T0 + 1 }),
            store().fail(gen.id, { force: true, price: 7, pendingPrice: 0, reason: 'cancelled', error: FAILED, now: T0 + 1 }),
          ]);
          const record = await read(gen.id);
          expect(cancel).toBe(true); // force fails from pending and from processing alike
          expect(record.status).toBe('failed');
          // Claimed first: the worker had it, so the fee. Cancelled first: free, and the claim lost.
          expect(record.price).toBe(claim === null ? 0 : 7);
          const types = (await store().eventsOf(gen.id)).map((e) => e.type);
          expect(types).toEqual(claim === null ? ['created', 'failed'] : ['created', 'processing', 'failed']);
        }
      });
    });

    describe('progress', () => {
      it('records progress only for the worker holding the lease', async () => {
        const { gen } = await claimed('w1');
        expect(await store().progress(gen.id, { workerId: 'w2', fraction: 0.5, now: T0 + 1100 })).toBe(false);
        expect(await store().progress(gen.id, { workerId: 'w1', fraction: 0.25, now: T0 + 1100 })).toBe(true);
        expect((await read(gen.id)).progress).toEqual({ fraction: 0.25 });
        expect(await store().progress(gen.id, { workerId: 'w1', fraction: 0.5, message: 'step 2 of 4', now: T0 + 1200 })).toBe(true);
        expect((await read(gen.id)).progress).toEqual({ fraction: 0.5, message: 'step 2 of 4' });
        // Lease expired: refused, and nothing appended.
        expect(await store().progress(gen.id, { workerId: 'w1', fraction: 0.9, now: T0 + 2000 })).toBe(false);
        const events = await store().eventsOf(gen.id);
        expect(events.map((e) => e.type)).toEqual(['created', 'processing', 'progress', 'progress']);
        expect(events[3]!.data).toEqual({ fraction: 0.5, message: 'step 2 of 4' });
      });

      it('refuses progress on pending, finished and missing generations', async () => {
        const pending = await inserted();
        expect(await store().progress(pending.id, { workerId: 'w1', fraction: 0.1, now: T0 + 1 })).toBe(false);
        const { gen } = await claimed('w1');
        await store().complete(gen.id, { workerId: 'w1', price: 1, resultText: 'ok', now: T0 + 1500 });
        expect(await store().progress(gen.id, { workerId: 'w1', fraction: 0.1, now: T0 + 1600 })).toBe(false);
        expect(await store().progress(uid('missing'), { workerId: 'w1', fraction: 0.1, now: T0 + 1600 })).toBe(false);
        expect((await store().eventsOf(pending.id)).map((e) => e.type)).toEqual(['created']);
      });
    });

    describe('metadata and timestamps', () => {
      it('keeps metadata as given and sets startedAt on the first claim only', async () => {
        const metadata = { order: 'A-17', 'utm source': 'newsletter', empty: '' };
        const gen = await inserted({ metadata });
        expect((await read(gen.id)).metadata).toEqual(metadata);
        expect((await read(gen.id)).startedAt).toBeUndefined();
        await store().claim(gen.id, { workerId: 'w1', leaseMs: 1000, now: T0 + 1000 });
        expect((await read(gen.id)).startedAt).toBe(T0 + 1000);
        // A lost worker's generation re-claimed later keeps its first start.
        await store().claim(gen.id, { workerId: 'w2', leaseMs: 1000, now: T0 + 5000 });
        expect((await read(gen.id)).startedAt).toBe(T0 + 1000);
        const plain = await inserted();
        expect((await read(plain.id)).metadata).toBeUndefined();
        expect((await read(plain.id)).webhook).toBeUndefined();
      });

      it('keeps the webhook a generation was created with', async () => {
        const webhook = { url: 'https://hooks.example.com/gen?token=a%20b', events: ['generation.completed', 'generation.failed'] as const };
        const gen = await inserted({ webhook: { url: webhook.url, events: [...webhook.events] } });
        expect((await read(gen.id)).webhook).toEqual({ url: webhook.url, events: [...webhook.events] });
        expect((await store().list(gen.ownerId, { limit: 1 }))[0]!.webhook).toEqual({ url: webhook.url, events: [...webhook.events] });
      });
    });

    describe('event log', () => {
      it('appends one event per transition, with its data, in order', async () => {
        const gen = await inserted();
        await store().claim(gen.id, { workerId: 'w1', leaseMs: 1000, now: T0 + 1000 });
        await store().renewLease(gen.id, 'w1', 1000, T0 + 1300);
        await store().progress(gen.id, { workerId: 'w1', fraction: 0.5, now: T0 + 1400 });
        await store().complete(gen.id, { workerId: 'w1', price: 4, resultText: 'done', now: T0 + 1500 });
        const events = await store().eventsOf(gen.id);
        expect(events.map(({ generationId, ownerId, type, at, data }) => ({ generationId, ownerId, type, at, data }))).toEqual([
          { generationId: gen.id, ownerId: gen.ownerId, type: 'created', at: T0, data: { modelId: 'model-a' } },
          { generationId: gen.id, ownerId: gen.ownerId, type: 'processing', at: T0 + 1000, data: { attempt: 1 } },
          { generationId: gen.id, ownerId: gen.ownerId, type: 'progress', at: T0 + 1400, data: { fraction: 0.5 } },
          { generationId: gen.id, ownerId: gen.ownerId, type: 'completed', at: T0 + 1500, data: { price: 4 } },
        ]);
        for (let i = 1; i < events.length; i++) expect(events[i]!.seq).toBeGreaterThan(events[i - 1]!.seq);
        expect(events.every((e) => Number.isSafeInteger(e.seq) && e.seq > 0)).toBe(true);
        expect(await store().eventsOf(gen.id, events[1]!.seq)).toEqual(events.slice(2));
        expect(await store().eventsOf(uid('missing'))).toEqual([]);
      });

      it('appends nothing for a transition that loses or changes nothing', async () => {
        const { gen } = await claimed('w1');
        const before = await store().eventsOf(gen.id);
        expect(await store().claim(gen.id, { workerId: 'w2', leaseMs: 1000, now: T0 + 1100 })).toBeNull();
        expect(await store().complete(gen.id, { workerId: 'w2', price: 1, now: T0 + 1100 })).toBe(false);
        expect(await store().fail(gen.id, { workerId: 'w2', price: 1, reason: 'x', error: FAILED, now: T0 + 1100 })).toBe(false);
        expect(await store().fail(gen.id, { price: 1, reason: 'x', error: FAILED, now: T0 + 1100 })).toBe(false);
        expect(await store().eventsOf(gen.id)).toEqual(before);
        await store().fail(gen.id, { workerId: 'w1', price: 1, reason: 'x', error: FAILED, now: T0 + 1200 });
        const last = await store().lastSeq();
        expect(await store().complete(gen.id, { workerId: 'w1', price: 1, now: T0 + 1300 })).toBe(false);
        expect(await store().fail(gen.id, { force: true, price: 1, reason: 'x', error: FAILED, now: T0 + 1300 })).toBe(false);
        expect(await store().lastSeq()).toBe(last);
        expect((await store().eventsOf(gen.id)).map((e) => e.type)).toEqual(['created', 'processing', 'failed']);
      });

      it('reads the whole log forward from a cursor, every owner, in pages', async () => {
        const start = await store().lastSeq();
        const a = await inserted();
        const b = await inserted();
        await store().claim(a.id, { workerId: 'w1', leaseMs: 1000, now: T0 + 1000 });
        await store().fail(b.id, { price: 0, reason: 'x', error: FAILED, now: T0 + 1001 });
        const all = await store().readEvents(start, 100);
        expect(all.map((e) => [e.generationId, e.type])).toEqual([
          [a.id, 'created'],
          [b.id, 'created'],
          [a.id, 'processing'],
          [b.id, 'failed'],
        ]);
        expect(await store().lastSeq()).toBe(all[3]!.seq);
        const paged = [...(await store().readEvents(start, 3)), ...(await store().readEvents(all[2]!.seq, 3))];
        expect(paged).toEqual(all);
        expect(await store().readEvents(all[3]!.seq, 10)).toEqual([]);
        expect(await store().readEvents(start, 0)).toEqual([]);
        expect(all[3]!.data).toEqual({ price: 0, error: FAILED });
      });

      it('gives concurrent transitions exactly one event per winner, each with its own seq', async () => {
        const start = await store().lastSeq();
        const gens = await Promise.all(Array.from({ length: 8 }, () => inserted()));
        // Per generation: 6 racing claims and a racing cancel; exactly one wins.
        await Promise.all(
          gens.flatMap((g, gi) => [
            ...Array.from({ length: 6 }, (_, i) => store().claim(g.id, { workerId: `w${gi}-${i}`, leaseMs: 1000, now: T0 + 10 })),
            store().fail(g.id, { price: 0, reason: 'cancelled', error: FAILED, now: T0 + 10 }),
          ]),
        );
        const events = await store().readEvents(start, 1000);
        expect(events).toHaveLength(16);
        const seqs = events.map((e) => e.seq);
        expect(new Set(seqs).size).toBe(16);
        expect([...seqs].sort((x, y) => x - y)).toEqual(seqs);
        for (const g of gens) {
          const mine = events.filter((e) => e.generationId === g.id).map((e) => e.type);
          expect(mine[0]).toBe('created');
          expect(mine).toHaveLength(2);
          const rec = await read(g.id);
          expect(mine[1]).toBe(rec.status === 'failed' ? 'failed' : 'processing');
        }
      });

      it('deletes a generation\u2019s events with it, and never reuses a seq', async () => {
        const gen = await inserted();
        await store().fail(gen.id, { price: 0, reason: 'x', error: FAILED, now: T0 + 10 });
        const last = await store().lastSeq();
        expect((await store().eventsOf(gen.id)).length).toBe(2);
        const { deleted, ids } = await store().deleteFinishedBefore(T0 + 11, 1000);
        expect(deleted).toBeGreaterThanOrEqual(1);
        expect(ids).toContain(gen.id);
        expect(ids).toHaveLength(deleted);
        expect(await store().eventsOf(gen.id)).toEqual([]);
        expect((await store().readEvents(0, 100_000)).some((e) => e.generationId === gen.id)).toBe(false);
        expect(await store().lastSeq()).toBe(last);
        const next = await inserted();
        const [created] = await store().eventsOf(next.id);
        expect(created!.seq).toBeGreaterThan(last);
      });
    });

    describe('list', () => {
      /** Three generations of one owner at T0, T0+1, T0+1 (a tie), another owner's, and a second model. */
      async function owned(): Promise<{ owner: string; ids: string[] }> {
        const owner = uid('owner');
        const ids: string[] = [];
        for (const [createdAt, modelId] of [
          [T0, 'model-a'],
          [T0 + 1, 'model-b'],
          [T0 + 1, 'model-a'],
          [T0 + 2, 'model-a'],
        ] as const) {
          const g = await inserted({ ownerId: owner, createdAt, modelId });
          ids.push(g.id);
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
        await store().claim(ids[1]!, { workerId: 'w', leaseMs: 1000, now: T0 + 10 });
        await store().fail(ids[2]!, { price: 0, reason: 'x', error: FAILED, now: T0 + 10 });
        expect((await store().list(owner, { limit: 10, status: 'processing' })).map((r) => r.id)).toEqual([ids[1]]);
        expect((await store().list(owner, { limit: 10, status: 'failed' })).map((r) => r.id)).toEqual([ids[2]]);
        expect((await store().list(owner, { limit: 10, status: 'pending' })).map((r) => r.id)).toEqual([ids[3], ids[0]]);
        expect((await store().list(owner, { limit: 10, status: 'completed' }))).toEqual([]);
        const modelA = order([ids[0]!, ids[2]!, ids[3]!], [T0, T0 + 1, T0 + 2]);
        expect((await store().list(owner, { limit: 10, modelId: 'model-a' })).map((r) => r.id)).toEqual(modelA);
        const after = await store().list(owner, { limit: 10, modelId: 'model-a', before: { createdAt: T0 + 2, id: ids[3]! } });
        expect(after.map((r) => r.id)).toEqual(modelA.slice(1));
        expect((await store().list(owner, { limit: 10, modelId: 'model-a', status: 'pending' })).map((r) => r.id)).toEqual([ids[3], ids[0]]);
        expect(await store().list(owner, { limit: 10, modelId: "' OR 1=1 --" })).toEqual([]);
      });
    });

    describe('in-flight cap on insert', () => {
      it('refuses an insert once the owner has the maximum unfinished, and counts only unfinished ones', async () => {
        const owner = uid('owner');
        const a = newGen({ ownerId: owner });
        const b = newGen({ ownerId: owner });
        expect(await store().insert(a, { maxUnfinishedPerOwner: 2 })).toBe('inserted');
        expect(await store().insert(b, { maxUnfinishedPerOwner: 2 })).toBe('inserted');
        const c = newGen({ ownerId: owner });
        expect(await store().insert(c, { maxUnfinishedPerOwner: 2 })).toBe('limit_reached');
        expect(await store().getById(c.id)).toBeNull();
        expect(await store().eventsOf(c.id)).toEqual([]);
        // Another owner is not affected; without the option there is no cap.
        expect(await store().insert(newGen(), { maxUnfinishedPerOwner: 2 })).toBe('inserted');
        expect(await store().insert(newGen({ ownerId: owner }))).toBe('inserted');
        // Finishing one (completed or failed) frees a place; processing still counts.
        await store().claim(a.id, { workerId: 'w', leaseMs: 1000, now: T0 + 1 });
        expect(await store().insert(newGen({ ownerId: owner }), { maxUnfinishedPerOwner: 3 })).toBe('limit_reached');
        await store().complete(a.id, { workerId: 'w', price: 1, resultText: 'x', now: T0 + 2 });
        await store().fail(b.id, { price: 0, reason: 'x', error: FAILED, now: T0 + 3 });
        expect(await store().insert(newGen({ ownerId: owner }), { maxUnfinishedPerOwner: 3 })).toBe('inserted');
        expect(await store().insert(newGen({ ownerId: owner }), { maxUnfinishedPerOwner: 3 })).toBe('inserted');
        expect(await store().insert(newGen({ ownerId: owner }), { maxUnfinishedPerOwner: 3 })).toBe('limit_reached');
      });

      it('lets exactly the cap win among 40 racing inserts of one owner', async () => {
        const owner = uid('owner');
        const results = await Promise.all(
          Array.from({ length: 40 }, () => store().insert(newGen({ ownerId: owner }), { maxUnfinishedPerOwner: 3 })),
        );
        expect(results.filter((r) => r === 'inserted')).toHaveLength(3);
        expect(results.filter((r) => r === 'limit_reached')).toHaveLength(37);
        expect(await store().list(owner, { limit: 100 })).toHaveLength(3);
      });
    });

    describe('remote jobs: handle and parking', () => {
      it('stores a handle once, only for the lease holder, and keeps it across claims', async () => {
        const { gen } = await claimed('w1');
        const handle = { id: 'pred_123', urls: { get: "https://api.example.com/p/123?x='1'" }, n: [1, 2] };
        expect(await store().setRemoteHandle(gen.id, 'w2', { id: 'other' }, T0 + 1100)).toBe(false);
        expect(await store().setRemoteHandle(gen.id, 'w1', handle, T0 + 1100)).toBe(true);
        expect(await store().setRemoteHandle(gen.id, 'w1', { id: 'second' }, T0 + 1200)).toBe(false);
        expect((await read(gen.id)).remoteHandle).toEqual(handle);
        // A lost worker's successor sees the same handle.
        const again = await store().claim(gen.id, { workerId: 'w2', leaseMs: 1000, now: T0 + 2500 });
        expect(again?.remoteHandle).toEqual(handle);
        expect(await store().setRemoteHandle(gen.id, 'w1', { id: 'late' }, T0 + 2600)).toBe(false);
        // No event for either.
        expect((await store().eventsOf(gen.id)).map((e) => e.type)).toEqual(['created', 'processing', 'processing']);
        const pending = await inserted();
        expect(await store().setRemoteHandle(pending.id, 'w1', { id: 'x' }, T0)).toBe(false);
      });

      it('parks a processing generation without a lease; its next claim is not an attempt and appends nothing', async () => {
        const { gen } = await claimed('w1');
        expect(await store().park(gen.id, 'w2', T0 + 5000, T0 + 1100)).toBe(false);
        expect(await store().park(gen.id, 'w1', T0 + 5000, T0 + 1100)).toBe(true);
        const parked = await read(gen.id);
        expect(parked).toMatchObject({ status: 'processing', attempts: 1, parkedUntil: T0 + 5000 });
        expect(parked.leaseOwner).toBeUndefined();
        expect(parked.leaseExpiresAt).toBeUndefined();
        // The parked worker holds nothing any more.
        expect(await store().complete(gen.id, { workerId: 'w1', price: 1, now: T0 + 1200 })).toBe(false);
        expect(await store().renewLease(gen.id, 'w1', 1000, T0 + 1200)).toBe(false);
        const resumed = await store().claim(gen.id, { workerId: 'w3', leaseMs: 1000, now: T0 + 5000 });
        expect(resumed).toMatchObject({ status: 'processing', attempts: 1, leaseOwner: 'w3' });
        expect(resumed?.parkedUntil).toBeUndefined();
        expect((await store().eventsOf(gen.id)).map((e) => e.type)).toEqual(['created', 'processing']);
        // Exactly one of racing claims resumes it.
        expect(await store().park(gen.id, 'w3', T0 + 9000, T0 + 5100)).toBe(true);
        const racers = await Promise.all(Array.from({ length: 10 }, (_, i) => store().claim(gen.id, { workerId: `r${i}`, leaseMs: 1000, now: T0 + 9000 })));
        expect(racers.filter((r) => r !== null)).toHaveLength(1);
        // A crash after resuming is a lost worker again: that claim counts.
        const lost = await store().claim(gen.id, { workerId: 'r-next', leaseMs: 1000, now: T0 + 20_000 });
        expect(lost?.attempts).toBe(2);
        // Listed as unfinished while parked; a parked one can be cancelled.
        expect(await store().park(gen.id, 'r-next', T0 + 30_000, T0 + 20_001)).toBe(true);
        expect((await store().listUnfinished(1000)).some((r) => r.id === gen.id)).toBe(true);
        expect(await store().fail(gen.id, { force: true, price: 2, pendingPrice: 0, reason: 'cancelled', error: FAILED, now: T0 + 20_002 })).toBe(true);
        expect(await read(gen.id)).toMatchObject({ status: 'failed', price: 2 });
        expect((await read(gen.id)).parkedUntil).toBeUndefined();
      });
    });

    describe('terminal generations never change', () => {
      for (const ending of ['completed', 'failed-by-worker', 'failed-pending', 'failed-forced'] as const) {
        it(`refuses every transition after ${ending}`, async () => {
          const { gen } = await claimed('w1');
          let ok: boolean;
          if (ending === 'completed') {
            ok = await store().complete(gen.id, { workerId: 'w1', price: 5, resultKey: 'k1', now: T0 + 1500 });
          } else if (ending === 'failed-by-worker') {
            ok = await store().fail(gen.id, { workerId: 'w1', price: 1, reason: 'r', error: FAILED, now: T0 + 1500 });
          } else if (ending === 'failed-forced') {
            ok = await store().fail(gen.id, { force: true, price: 1, reason: 'r', error: FAILED, now: T0 + 1500 });
          } else {
            const pending = await inserted();
            ok = await store().fail(pending.id, { price: 0, reason: 'r', error: FAILED, now: T0 + 1500 });
            gen.id = pending.id;
          }
          expect(ok).toBe(true);
          const before = await read(gen.id);
          const later = [T0 + 1600, T0 + 10_000_000];
          for (const now of later) {
            expect(await store().claim(gen.id, { workerId: 'w1', leaseMs: 1000, now })).toBeNull();
            expect(await store().claim(gen.id, { workerId: 'w9', leaseMs: 1000, now })).toBeNull();
            expect(await store().renewLease(gen.id, 'w1', 1000, now)).toBe(false);
            expect(await store().complete(gen.id, { workerId: 'w1', price: 99, resultText: 'late', now })).toBe(false);
            expect(await store().fail(gen.id, { workerId: 'w1', price: 99, reason: 'late', error: FAILED, now })).toBe(false);
            expect(await store().fail(gen.id, { price: 99, reason: 'late', error: FAILED, now })).toBe(false);
            expect(await store().fail(gen.id, { force: true, price: 99, reason: 'late', error: FAILED, now })).toBe(false);
          }
          expect(await read(gen.id)).toEqual(before);
        });
      }
    });

    describe('listUnfinished', () => {
      it('returns only pending and processing generations, oldest first, up to the limit', async () => {
        const at = (n: number): Promise<NewGeneration> => inserted({ createdAt: T0 + n * 10 });
        // Inserted out of order so "oldest first" cannot come from insertion order.
        const g5 = await at(5);
        const g1 = await at(1);
        const g4 = await at(4);
        const g2 = await at(2);
        const g3 = await at(3);
        const g0 = await at(0);
        await store().claim(g2.id, { workerId: 'w', leaseMs: 1000, now: T0 + 100 });
        await store().claim(g3.id, { workerId: 'w', leaseMs: 1000, now: T0 + 100 });
        await store().complete(g3.id, { workerId: 'w', price: 1, now: T0 + 200 });
        await store().fail(g0.id, { price: 0, reason: 'cancelled', error: FAILED, now: T0 + 200 });

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
        await store().fail(finished, { price: 0, reason: 'x', error: FAILED, now: T0 + 50 });
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
        // The same walk in one page gives the same order.
        expect((await store().listUnfinished(100)).map((r) => r.id)).toEqual(seen);
        // A page after a generation that finished meanwhile still continues from where it stood.
        const firstPage = await store().listUnfinished(4);
        await store().fail(firstPage[3]!.id, { price: 0, reason: 'x', error: FAILED, now: T0 + 60 });
        expect((await store().listUnfinished(4, firstPage[3]!.id)).map((r) => r.id)).toEqual(seen.slice(4, 8));
        expect(await store().listUnfinished(4, 'no-such-generation')).toEqual([]);
      });
    });

    describe('deleteFinishedBefore', () => {
      it('deletes only terminal generations finished before the time, and returns their result keys', async () => {
        const done = async (finishedAt: number, resultKey?: string): Promise<NewGeneration> => {
          const gen = await inserted();
          await store().claim(gen.id, { workerId: 'w', leaseMs: 10_000_000, now: T0 });
          expect(await store().complete(gen.id, { workerId: 'w', price: 1, resultKey, resultText: resultKey ? undefined : 'text', now: finishedAt })).toBe(true);
          return gen;
        };
        const oldWithFile = await done(T0 + 100, 'key-old');
        const oldText = await done(T0 + 200);
        const oldFailed = await inserted();
        await store().fail(oldFailed.id, { price: 0, reason: 'x', error: FAILED, now: T0 + 300 });
        const atCutoff = await done(T0 + 1000, 'key-at-cutoff');
        const recent = await done(T0 + 5000, 'key-recent');
        const ancientPending = await inserted({ createdAt: T0 - 1_000_000 });
        const ancientProcessing = await inserted({ createdAt: T0 - 1_000_000 });
        await store().claim(ancientProcessing.id, { workerId: 'w', leaseMs: 1, now: T0 - 999_999 });

        const result = await store().deleteFinishedBefore(T0 + 1000, 100);
        expect(result.deleted).toBe(3);
        expect(result.resultKeys).toEqual(['key-old']);
        expect([...result.ids].sort()).toEqual([oldWithFile.id, oldText.id, oldFailed.id].sort());
        for (const gone of [oldWithFile, oldText, oldFailed]) expect(await store().getById(gone.id)).toBeNull();
        for (const kept of [atCutoff, recent, ancientPending, ancientProcessing]) expect(await store().getById(kept.id)).not.toBeNull();
        expect(await store().deleteFinishedBefore(T0 + 1000, 100)).toEqual({ deleted: 0, resultKeys: [], ids: [] });
      });

      it('deletes at most `limit` at a time', async () => {
        for (let i = 0; i < 5; i++) {
          const gen = await inserted();
          await store().fail(gen.id, { price: 0, reason: 'x', error: FAILED, now: T0 + i });
        }
        expect((await store().deleteFinishedBefore(T0 + 100, 2)).deleted).toBe(2);
        expect((await store().deleteFinishedBefore(T0 + 100, 2)).deleted).toBe(2);
        expect((await store().deleteFinishedBefore(T0 + 100, 2)).deleted).toBe(1);
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
        await s.complete(b.id, { workerId: 'w', price: 1, now: T0 + 1500 });
        await s.fail(a.id, { price: 0, reason: 'x', error: FAILED, now: T0 });
        expect(await s.countByStatus()).toEqual({ pending: 1, processing: 1, completed: 1, failed: 1 });
      });
    });
  });
}
