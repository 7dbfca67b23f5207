import { describe, expect, it } from 'vitest';
import type { GenerationChange, GenerationStore, Ledger, NewGeneration } from '@genservice/core/ports';
import { T0, uid, useFresh } from './harness.js';

/** A store and the ledger whose reserves it holds and settles in its own steps (`settlesFor(ledger)` is true). */
export interface SettlingPortsUnderTest {
  store: GenerationStore;
  ledger: Ledger;
  close(): Promise<void>;
}

const DAY = new Date(T0).toISOString().slice(0, 10);

/**
 * For a store that holds a ledger's reserves (`insertReserved`) and settles them in its own changes (`change.settle`):
 * exactly what the ledger's own `reserve` and `settle` would do, in the same atomic step, or nothing at all. Run it
 * for every such pair (the Postgres store with its ledger, the memory store linked to a memory ledger).
 */
export function runSettlingStoreContract(name: string, make: () => Promise<SettlingPortsUnderTest>): void {
  describe(`${name}: a store that settles its ledger's reserves`, () => {
    const ports = useFresh(make);

    async function setup(balance: number): Promise<{ store: GenerationStore; ledger: Ledger; user: string; gen: (reserved?: number) => NewGeneration }> {
      const { store, ledger } = ports();
      expect(store.settlesFor?.(ledger)).toBe(true);
      const user = uid('user');
      await ledger.credit(user, balance);
      const gen = (reserved = 4): NewGeneration => ({ id: uid('gen'), ownerId: user, modelId: 'm', settings: {}, status: 'pending', reserved, createdAt: T0 });
      return { store, ledger, user, gen };
    }
    const created = { type: 'created' as const, data: { modelId: 'm' } };

    it('holds the reserve with the insert, and refuses with nothing written: the balance, the in-flight cap', async () => {
      const { store, ledger, user, gen } = await setup(10);
      const first = gen();
      expect(await store.insertReserved!(first, created, { amount: 4, now: T0, maxInFlight: 2 })).toBe('ok');
      expect(await ledger.account(user)).toEqual({ balance: 6, reserved: 4, settled: 0 });
      expect((await store.eventsOf(first.id)).map((e) => e.type)).toEqual(['created']);
      const tooDear = gen(7);
      expect(await store.insertReserved!(tooDear, created, { amount: 7, now: T0, maxInFlight: 2 })).toBe('insufficient');
      expect(await store.getById(tooDear.id)).toBeNull();
      const overCap = gen();
      expect(await store.insertReserved!(overCap, created, { amount: 4, now: T0, maxInFlight: 1 })).toBe('in_flight_limit');
      expect(await store.getById(overCap.id)).toBeNull();
      expect(await ledger.account(user)).toEqual({ balance: 6, reserved: 4, settled: 0 });
    });

    it('rejects a duplicate id holding nothing more, and another user’s reserve of the id writing nothing', async () => {
      const { store, ledger, user, gen } = await setup(10);
      const first = gen();
      await store.insertReserved!(first, created, { amount: 4, now: T0 });
      await expect(store.insertReserved!(first, created, { amount: 4, now: T0 })).rejects.toThrow();
      expect(await ledger.account(user)).toEqual({ balance: 6, reserved: 4, settled: 0 });
      const other = uid('other');
      await ledger.credit(other, 1);
      const taken = gen();
      expect(await ledger.reserve(other, taken.id, 1, T0)).toBe('ok');
      await expect(store.insertReserved!(taken, created, { amount: 4, now: T0 })).rejects.toThrow(/another user/);
      expect(await store.getById(taken.id)).toBeNull();
      expect(await ledger.account(user)).toEqual({ balance: 6, reserved: 4, settled: 0 });
    });

    it('settles in the change that finishes, as the ledger would: clamped to the reserve, once, rolled up into usage', async () => {
      const { store, ledger, user, gen } = await setup(10);
      const g = gen();
      await store.insertReserved!(g, created, { amount: 4, now: T0, keyId: 'key-a' });
      const finish: GenerationChange = {
        expect: { status: ['pending'] },
        set: { status: 'completed', price: 9, finishedAt: T0 + 1 },
        event: { type: 'completed', data: { price: 9 } },
        now: T0 + 1,
        settle: 9,
      };
      expect(await store.update(g.id, finish)).toMatchObject({ status: 'completed' });
      expect(await ledger.account(user)).toEqual({ balance: 6, reserved: 0, settled: 4 });
      // Its expectation no longer holds: no change, and no second settle.
      expect(await store.update(g.id, finish)).toBeNull();
      expect(await ledger.account(user)).toEqual({ balance: 6, reserved: 0, settled: 4 });
      expect(await ledger.settle(g.id, 1)).toBe(4);
      expect((await ledger.openReserves(1000)).filter((r) => r.generationId === g.id)).toEqual([]);
      expect(await ledger.usage(user, { from: DAY, to: DAY, groupBy: 'key' })).toEqual({ rows: [{ group: 'key-a', count: 1, tokens: 4 }], total: { count: 1, tokens: 4 } });
    });

    it('of racing completions and cancels that settle, exactly one applies, and its price is what was settled, once', async () => {
      const { store, ledger, user, gen } = await setup(10);
      const g = gen();
      await store.insertReserved!(g, created, { amount: 4, now: T0 });
      const now = T0 + 1;
      await store.update(g.id, { expect: { status: ['pending'] }, set: { status: 'processing', claims: 1, leaseOwner: 'w', leaseExpiresAt: now + 60_000 }, now });
      const finish = (price: number, status: 'completed' | 'failed', expect: GenerationChange['expect']): GenerationChange => ({
        expect,
        set: { status, price, finishedAt: now },
        event: { type: status, data: { price } },
        now,
        settle: price,
      });
      const racing = Array.from({ length: 12 }, (_, i) =>
        i % 2 === 0
          ? store.update(g.id, finish(3, 'completed', { status: ['processing'], lease: { heldBy: 'w' } }))
          : store.update(g.id, finish(1, 'failed', { status: ['processing'] })),
      );
      const won = (await Promise.all(racing)).filter((r) => r !== null);
      expect(won).toHaveLength(1);
      const price = won[0]!.price!;
      expect(await ledger.account(user)).toEqual({ balance: 10 - price, reserved: 0, settled: price });
      expect((await store.eventsOf(g.id)).filter((e) => e.type === 'completed' || e.type === 'failed')).toHaveLength(1);
      expect(await ledger.settle(g.id, 4)).toBe(price);
    });

    it('settles nothing when the change does not apply', async () => {
      const { store, ledger, user, gen } = await setup(10);
      const g = gen();
      await store.insertReserved!(g, created, { amount: 4, now: T0 });
      const wrong: GenerationChange = { expect: { status: ['processing'] }, set: { status: 'completed', price: 4 }, now: T0 + 1, settle: 4 };
      expect(await store.update(g.id, wrong)).toBeNull();
      expect(await ledger.account(user)).toEqual({ balance: 6, reserved: 4, settled: 0 });
      expect((await store.getById(g.id))!.status).toBe('pending');
    });
  });
}
