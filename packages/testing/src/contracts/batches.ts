import { describe, expect, it } from 'vitest';
import type { GenerationChange, GenerationStore, Ledger, NewBatch, NewEvent, NewGeneration } from '@genservice/core/ports';
import { T0, uid, useFresh } from './harness.js';

const CREATED: NewEvent = { type: 'created', data: { modelId: 'model-a' } };

/**
 * Batches in the GenerationStore (`insertBatch`, `getBatch`, `batchCounts`, `completeBatch`, `list` by batch) and the
 * Ledger's `reserveMany`: a batch goes in whole or not at all, on both.
 */
export function describeBatchContract(make: () => Promise<{ store: GenerationStore; ledger: Ledger; close(): Promise<void> }>): void {
  describe('batches', () => {
    const ports = useFresh(make);
    const store = (): GenerationStore => ports().store;
    const ledger = (): Ledger => ports().ledger;

    function batchOf(n: number, ownerId = uid('user')) {
      const batchId = uid('batch');
      const gens: NewGeneration[] = Array.from({ length: n }, (_, i) => ({
        id: uid('gen'),
        ownerId,
        modelId: i % 2 === 0 ? 'model-a' : 'model-b',
        settings: { prompt: `p${i}` },
        status: 'pending',
        reserved: 2,
        createdAt: T0 + i,
        batchId,
        ...(i === 0 ? { metadata: { n: '0' } } : {}),
      }));
      return { batch: { id: batchId, ownerId, generationIds: gens.map((g) => g.id), createdAt: T0 }, gens, events: gens.map(() => CREATED) };
    }

    const finish = (price: number, status: 'completed' | 'failed', now: number): GenerationChange => ({
      expect: { status: ['pending'] },
      set: status === 'completed' ? { status, price, finishedAt: now, resultText: 'ok' } : { status, price, finishedAt: now, error: { code: 'cancelled', message: 'x' } },
      event: status === 'completed' ? { type: 'completed', data: { price } } : { type: 'failed', data: { price } },
      now,
    });

    const cancelPending = (now: number): GenerationChange => ({
      expect: { status: ['pending'] },
      set: { status: 'failed', price: 0, finishedAt: now, failureReason: 'cancelled by its owner', error: { code: 'cancelled', message: 'x' } },
      event: { type: 'failed', data: { price: 0 } },
      now,
    });
    const claim = (now: number): GenerationChange => ({
      expect: { status: ['pending'] },
      set: { status: 'processing', claims: 1, startedAt: now, leaseOwner: 'w', leaseExpiresAt: now + 1000 },
      event: { type: 'processing', data: { claim: 1 } },
      now,
    });

    it('updateBatchMembers changes every member whose expectation holds, each with its event, and no other', async () => {
      const { batch, gens, events } = batchOf(6);
      const other = batchOf(2, batch.ownerId);
      await store().insertBatch(batch, gens, events);
      await store().insertBatch(other.batch, other.gens, other.events);
      expect(await store().update(gens[1]!.id, claim(T0 + 5))).not.toBeNull();
      expect(await store().update(gens[2]!.id, finish(3, 'completed', T0 + 6))).not.toBeNull();
      const changed = await store().updateBatchMembers(batch.id, cancelPending(T0 + 10));
      expect(changed.map((r) => r.id).sort()).toEqual([gens[0]!.id, gens[3]!.id, gens[4]!.id, gens[5]!.id].sort());
      for (const rec of changed) expect(rec).toMatchObject({ status: 'failed', price: 0, finishedAt: T0 + 10, updatedAt: T0 + 10, batchId: batch.id, error: { code: 'cancelled' } });
      for (const i of [0, 3]) {
        expect((await store().eventsOf(gens[i]!.id)).map((e) => [e.seq, e.type, e.at])).toEqual([[1, 'created', T0 + i], [2, 'failed', T0 + 10]]);
      }
      expect((await store().getById(gens[1]!.id))?.status).toBe('processing');
      expect((await store().getById(gens[2]!.id))?.status).toBe('completed');
      expect(await store().eventsOf(gens[1]!.id)).toHaveLength(2);
      for (const g of other.gens) expect((await store().getById(g.id))?.status).toBe('pending');
      expect((await store().batchCounts(batch.id)).counts).toMatchObject({ pending: 0, processing: 1, completed: 1, failed: 4 });
      // Again: nothing is pending any more.
      expect(await store().updateBatchMembers(batch.id, cancelPending(T0 + 11))).toEqual([]);
      expect(await store().updateBatchMembers(uid('batch'), cancelPending(T0 + 11))).toEqual([]);
    });

    it('a member claimed while its batch is cancelled is either claimed or cancelled, never both', async () => {
      const { batch, gens, events } = batchOf(200);
      await store().insertBatch(batch, gens, events);
      const claims = gens.map((g, i) => (i % 2 === 0 ? store().update(g.id, claim(T0 + 20)) : null));
      const [cancelled, ...claimed] = await Promise.all([store().updateBatchMembers(batch.id, cancelPending(T0 + 20)), ...claims]);
      const cancelledIds = new Set(cancelled.map((r) => r.id));
      const claimedIds = new Set(claimed.filter((r) => r !== null).map((r) => r!.id));
      for (const g of gens) {
        const rec = await store().getById(g.id);
        const kinds = (await store().eventsOf(g.id)).map((e) => e.type);
        if (claimedIds.has(g.id)) {
          expect(cancelledIds.has(g.id)).toBe(false);
          expect(rec?.status).toBe('processing');
          expect(kinds).toEqual(['created', 'processing']);
        } else {
          expect(cancelledIds.has(g.id)).toBe(true);
          expect(rec?.status).toBe('failed');
          expect(kinds).toEqual(['created', 'failed']);
        }
      }
      expect(cancelledIds.size + claimedIds.size).toBe(200);
    });

    it('stores a batch of 1,000 generations with their first events in one call, owner-scoped', async () => {
      const { batch, gens, events } = batchOf(1000);
      await store().insertBatch({ ...batch, webhook: { url: 'https://example.com/hook' } }, gens, events);
      const got = await store().getBatch(batch.id, batch.ownerId);
      expect(got).toEqual({ ...batch, webhook: { url: 'https://example.com/hook' } });
      expect(await store().getBatch(batch.id, uid('other'))).toBeNull();
      expect(await store().getBatch(uid('batch'), batch.ownerId)).toBeNull();
      const first = await store().get(gens[0]!.id, batch.ownerId);
      expect(first).toMatchObject({ id: gens[0]!.id, batchId: batch.id, status: 'pending', claims: 0, metadata: { n: '0' }, settings: { prompt: 'p0' } });
      const last = await store().getById(gens[999]!.id);
      expect(last?.batchId).toBe(batch.id);
      expect((await store().eventsOf(gens[999]!.id)).map((e) => [e.seq, e.type])).toEqual([[1, 'created']]);
      expect(await store().batchCounts(batch.id)).toEqual({ counts: { pending: 1000, processing: 0, completed: 0, failed: 0 }, price: 0 });
    });

    it('inserts all or nothing: a generation id that exists refuses the whole batch', async () => {
      const owner = uid('user');
      const existing: NewGeneration = { id: uid('gen'), ownerId: owner, modelId: 'model-a', settings: {}, status: 'pending', reserved: 1, createdAt: T0 };
      expect(await store().insert(existing, CREATED)).toBe('inserted');
      const { batch, gens, events } = batchOf(5, owner);
      gens[3] = { ...gens[3]!, id: existing.id };
      await expect(store().insertBatch({ ...batch, generationIds: gens.map((g) => g.id) }, gens, events)).rejects.toThrow();
      expect(await store().getBatch(batch.id, owner)).toBeNull();
      for (const g of [gens[0]!, gens[1]!, gens[4]!]) expect(await store().getById(g.id)).toBeNull();
      expect((await store().getById(existing.id))?.batchId).toBeUndefined();
    });

    it("counts a batch's generations by status and sums the price of the finished ones", async () => {
      const { batch, gens, events } = batchOf(6);
      await store().insertBatch(batch, gens, events);
      expect(await store().update(gens[0]!.id, finish(3, 'completed', T0 + 10))).not.toBeNull();
      expect(await store().update(gens[1]!.id, finish(1, 'failed', T0 + 10))).not.toBeNull();
      expect(await store().update(gens[2]!.id, { expect: { status: ['pending'] }, set: { status: 'processing', claims: 1 }, event: { type: 'processing', data: { claim: 1 } }, now: T0 + 11 })).not.toBeNull();
      expect(await store().batchCounts(batch.id)).toEqual({ counts: { pending: 3, processing: 1, completed: 1, failed: 1 }, price: 4 });
      expect(await store().batchCounts(uid('batch'))).toEqual({ counts: { pending: 0, processing: 0, completed: 0, failed: 0 }, price: 0 });
    });

    it("lists only the batch's generations, newest first, a page at a time", async () => {
      const { batch, gens, events } = batchOf(7);
      await store().insertBatch(batch, gens, events);
      // Another generation of the same owner, outside the batch.
      expect(await store().insert({ id: uid('gen'), ownerId: batch.ownerId, modelId: 'model-a', settings: {}, status: 'pending', reserved: 1, createdAt: T0 + 100 }, CREATED)).toBe('inserted');
      const page1 = await store().list(batch.ownerId, { limit: 4, batchId: batch.id });
      expect(page1.map((r) => r.id)).toEqual([...gens].reverse().slice(0, 4).map((g) => g.id));
      const last = page1[3]!;
      const page2 = await store().list(batch.ownerId, { limit: 4, batchId: batch.id, before: { createdAt: last.createdAt, id: last.id } });
      expect(page2.map((r) => r.id)).toEqual([...gens].reverse().slice(4).map((g) => g.id));
      expect(await store().list(uid('other'), { limit: 10, batchId: batch.id })).toEqual([]);
      expect(await store().list(batch.ownerId, { limit: 10, batchId: batch.id, status: 'completed' })).toEqual([]);
    });

    it('marks a batch completed once: exactly one of 10 racing calls wins', async () => {
      const { batch, gens, events } = batchOf(2);
      await store().insertBatch(batch, gens, events);
      const results = await Promise.all(Array.from({ length: 10 }, (_, i) => store().completeBatch(batch.id, T0 + 50 + i)));
      expect(results.filter(Boolean)).toHaveLength(1);
      const got = await store().getBatch(batch.id, batch.ownerId);
      expect(got?.completedAt).toBe(T0 + 50 + results.indexOf(true));
      expect(await store().completeBatch(uid('batch'), T0)).toBe(false);
    });

    it('lists open batches oldest first, before a time, a page at a time, without completed ones', async () => {
      // Its own stretch of time, far from the other tests' batches (at T0), in case a backend keeps data between tests.
      const base = T0 - 1_000_000_000 + Math.floor(Math.random() * 1_000_000) * 100;
      const made: NewBatch[] = [];
      for (const at of [base + 30, base + 10, base + 20, base + 40, base + 50]) {
        const { batch, gens, events } = batchOf(2);
        const stored = { ...batch, createdAt: at, ...(at === base + 20 ? { webhook: { url: 'https://example.com/hook' } } : {}) };
        await store().insertBatch(stored, gens, events);
        made.push(stored);
      }
      const [b30, b10, b20, b40, b50] = made as [NewBatch, NewBatch, NewBatch, NewBatch, NewBatch];
      // Completed ones are never listed.
      expect(await store().completeBatch(b40.id, base + 60)).toBe(true);
      const ids = (page: { id: string }[]) => page.map((b) => b.id);
      const open = (await store().listOpenBatches(base + 100, 10)).filter((b) => b.createdAt >= base);
      expect(ids(open)).toEqual([b10.id, b20.id, b30.id, b50.id]);
      expect(open[1]).toEqual(b20);
      expect(open.every((b) => b.completedAt === undefined)).toBe(true);
      // createdBefore is exclusive.
      expect(ids((await store().listOpenBatches(base + 30, 10)).filter((b) => b.createdAt >= base))).toEqual([b10.id, b20.id]);
      // The page after a batch, a limit on it, and after a batch completed since.
      expect(ids(await store().listOpenBatches(base + 100, 2, b20.id))).toEqual([b30.id, b50.id]);
      expect(await store().completeBatch(b30.id, base + 70)).toBe(true);
      expect(ids(await store().listOpenBatches(base + 100, 10, b30.id))).toEqual([b50.id]);
      expect(ids(await store().listOpenBatches(base + 100, 1, b10.id))).toEqual([b20.id]);
      expect(await store().listOpenBatches(base + 100, 10, b50.id)).toEqual([]);
      expect(await store().listOpenBatches(base + 100, 10, uid('batch'))).toEqual([]);
      expect(await store().listOpenBatches(base + 100, 0)).toEqual([]);
    });

    it('limits the open batches to the oldest ones', async () => {
      const base = T0 - 2_000_000_000 + Math.floor(Math.random() * 1_000_000) * 100;
      const made: string[] = [];
      for (let i = 0; i < 4; i++) {
        const { batch, gens, events } = batchOf(1);
        const stored = { ...batch, createdAt: base + i };
        await store().insertBatch(stored, gens, events);
        made.push(stored.id);
      }
      // Nothing older than base is this test's, and other tests' batches are at T0: the first page is exactly these.
      const page = await store().listOpenBatches(base + 3, 2);
      expect(page.map((b) => b.id)).toEqual(made.slice(0, 2));
      expect((await store().listOpenBatches(base + 3, 10, made[1])).map((b) => b.id)).toEqual([made[2]]);
    });

    describe('Ledger.reserveMany', () => {
      const items = (n: number, amount: number) => Array.from({ length: n }, () => ({ generationId: uid('gen'), amount, modelId: 'model-a' }));

      it('holds every reserve at once; each settles on its own', async () => {
        const user = uid('user');
        await ledger().credit(user, 100);
        const batch = items(10, 10);
        expect(await ledger().reserveMany(user, batch, T0)).toBe('ok');
        expect(await ledger().account(user)).toEqual({ balance: 0, reserved: 100, settled: 0 });
        expect(await ledger().settle(batch[0]!.generationId, 4, T0)).toBe(4);
        expect(await ledger().release(batch[1]!.generationId, T0)).toBe(0);
        expect(await ledger().account(user)).toEqual({ balance: 16, reserved: 80, settled: 4 });
        // A retry of the same batch holds nothing more.
        expect(await ledger().reserveMany(user, batch, T0)).toBe('ok');
        expect(await ledger().account(user)).toEqual({ balance: 16, reserved: 80, settled: 4 });
      });

      it('holds nothing when the balance cannot cover the total', async () => {
        const user = uid('user');
        await ledger().credit(user, 99);
        const batch = items(10, 10);
        expect(await ledger().reserveMany(user, batch, T0)).toBe('insufficient');
        expect(await ledger().account(user)).toEqual({ balance: 99, reserved: 0, settled: 0 });
        for (const item of batch) expect(await ledger().settle(item.generationId, 0, T0)).toBeNull();
      });

      it("holds nothing when the key's budget cannot cover the total", async () => {
        const user = uid('user');
        const keyId = uid('key');
        await ledger().credit(user, 1000);
        const limit = { amount: 50, windowStart: T0 };
        expect(await ledger().reserveMany(user, items(6, 10), T0, { keyId, keyLimit: limit })).toBe('budget_exceeded');
        expect(await ledger().keySpend(keyId, T0)).toBe(0);
        expect(await ledger().account(user)).toEqual({ balance: 1000, reserved: 0, settled: 0 });
        expect(await ledger().reserveMany(user, items(5, 10), T0, { keyId, keyLimit: limit })).toBe('ok');
        expect(await ledger().keySpend(keyId, T0)).toBe(50);
      });

      it('of two racing batches that each fit but not together, exactly one is held', async () => {
        const user = uid('user');
        await ledger().credit(user, 100);
        const results = await Promise.all([ledger().reserveMany(user, items(6, 10), T0), ledger().reserveMany(user, items(6, 10), T0)]);
        expect(results.sort()).toEqual(['insufficient', 'ok']);
        expect(await ledger().account(user)).toEqual({ balance: 40, reserved: 60, settled: 0 });
      });
    });
  });
}
