import { afterEach, describe, expect, it, vi } from 'vitest';
import { createGenerationService, MemoryGenerationStore, MemoryLedger, type GenerationService, type ModelDefinition } from '@genservice/core';

/**
 * Issue 36: a memory store holds and settles a memory ledger's reserves in its own steps (memory/in-store-ledger.ts),
 * as the Postgres store does the Postgres ledger's: one step for reserve, insert and event, one for the finish and its
 * settle. Exactly what the ledger's own reserve and settle would do, or nothing at all.
 */
const gen = (id: string, ownerId = 'alice') => ({ id, ownerId, modelId: 'm', settings: {}, status: 'pending' as const, reserved: 4, createdAt: 1000 });
const CREATED = { type: 'created' as const, data: { modelId: 'm' } };
const DAY = '1970-01-01';

function linked(balance = 10): { store: MemoryGenerationStore; ledger: MemoryLedger } {
  const store = new MemoryGenerationStore();
  const ledger = new MemoryLedger({ balances: { alice: balance } });
  expect(store.settleWith(ledger)).toBe(true);
  return { store, ledger };
}

describe('MemoryGenerationStore with a linked MemoryLedger', () => {
  it('holds the reserve with the insert, and refuses with nothing written: balance, in-flight cap, a duplicate id', async () => {
    const { store, ledger } = linked();
    expect(store.settlesFor(ledger)).toBe(true);
    expect(store.settlesFor(new MemoryLedger())).toBe(false);
    expect(await store.insertReserved(gen('g1'), CREATED, { amount: 4, now: 1000, maxInFlight: 2 })).toBe('ok');
    expect(await ledger.account('alice')).toEqual({ balance: 6, reserved: 4, settled: 0 });
    expect((await store.eventsOf('g1')).map((e) => e.type)).toEqual(['created']);
    // More than the balance: refused, nothing stored and nothing held.
    expect(await store.insertReserved({ ...gen('g2'), reserved: 7 }, CREATED, { amount: 7, now: 1000, maxInFlight: 2 })).toBe('insufficient');
    expect(await store.getById('g2')).toBeNull();
    // At the in-flight cap (one open reserve, cap 1): refused the same way.
    expect(await store.insertReserved(gen('g3'), CREATED, { amount: 4, now: 1000, maxInFlight: 1 })).toBe('in_flight_limit');
    expect(await store.getById('g3')).toBeNull();
    expect(await ledger.account('alice')).toEqual({ balance: 6, reserved: 4, settled: 0 });
    // A duplicate id rejects before anything is held.
    await expect(store.insertReserved(gen('g1'), CREATED, { amount: 4, now: 1000 })).rejects.toThrow(/already exists/);
    expect(await ledger.account('alice')).toEqual({ balance: 6, reserved: 4, settled: 0 });
    // Another user's reserve of the same id is a caller bug, refused as the ledger's own reserve refuses it.
    await ledger.reserve('bob', 'g9', 0, 1000);
    await expect(store.insertReserved(gen('g9'), CREATED, { amount: 4, now: 1000 })).rejects.toThrow(/another user/);
    expect(await store.getById('g9')).toBeNull();
  });

  it('answers limited, holding nothing, for an owner with limits of its own: the full reserve is the caller’s to take', async () => {
    const { store, ledger } = linked();
    await ledger.setUserLimits('alice', { maxInFlight: 5 });
    expect(await store.insertReserved(gen('g1'), CREATED, { amount: 4, now: 1000 })).toBe('limited');
    expect(await store.getById('g1')).toBeNull();
    expect(await ledger.account('alice')).toEqual({ balance: 10, reserved: 0, settled: 0 });
  });

  it('settles in the change that finishes, exactly as the ledger would: clamped, once, rolled up into usage', async () => {
    const { store, ledger } = linked();
    await store.insertReserved(gen('g1'), CREATED, { amount: 4, now: 1000, keyId: 'key_a' });
    const finish = { expect: { status: ['pending' as const] }, set: { status: 'completed' as const, price: 9 }, event: { type: 'completed' as const, data: { price: 9 } }, now: 2000, settle: 9 };
    expect(await store.update('g1', finish)).toMatchObject({ status: 'completed' });
    // Clamped to the reserve (4), and no second settle: the change's expectation no longer holds.
    expect(await ledger.account('alice')).toEqual({ balance: 6, reserved: 0, settled: 4 });
    expect(await store.update('g1', finish)).toBeNull();
    expect(await ledger.settle('g1', 1)).toBe(4);
    expect(await ledger.openReserves(10)).toEqual([]);
    expect(await ledger.usage('alice', { from: DAY, to: DAY, groupBy: 'key' })).toEqual({ rows: [{ group: 'key_a', count: 1, tokens: 4 }], total: { count: 1, tokens: 4 } });
  });

  it('refuses a settle it cannot make before writing anything: no ledger linked, or an amount that is not finite', async () => {
    const store = new MemoryGenerationStore();
    await store.insert(gen('g1'), CREATED);
    const change = { expect: { status: ['pending' as const] }, set: { status: 'completed' as const }, now: 2000, settle: 1 };
    await expect(store.update('g1', change)).rejects.toThrow(/no ledger linked/);
    const { store: other } = linked();
    await other.insertReserved(gen('g2'), CREATED, { amount: 4, now: 1000 });
    await expect(other.update('g2', { ...change, settle: Number.NaN })).rejects.toThrow(RangeError);
    expect((await store.getById('g1'))!.status).toBe('pending');
    expect((await other.getById('g2'))!.status).toBe('pending');
  });

  it('keeps the first ledger it was linked to', () => {
    const { store, ledger } = linked();
    expect(store.settleWith(new MemoryLedger())).toBe(false);
    expect(store.settlesFor(ledger)).toBe(true);
  });
});

describe('the service links a memory store to a memory ledger (issue 36)', () => {
  const model: ModelDefinition = { modelId: 'echo', title: 'Echo', resultType: 'text', estimatedGenerationTime: 1, settings: [], price: 3 };
  const services: GenerationService[] = [];
  afterEach(async () => {
    for (const s of services.splice(0)) await s.stop({ timeoutMs: 1000 });
  });
  async function run(store: MemoryGenerationStore, ledger: MemoryLedger, balance = 10): Promise<GenerationService> {
    await ledger.credit('alice', balance);
    const service = createGenerationService({ store, ledger, providers: [{ models: [model], generate: async () => ({ text: 'ok' }) }] });
    services.push(service);
    await service.start();
    return service;
  }
  const done = async (service: GenerationService, id: string) => {
    for (let i = 0; i < 1000; i++) {
      const g = await service.get('alice', id);
      if (g.status === 'completed' || g.status === 'failed') return g;
      await new Promise((r) => setTimeout(r, 1));
    }
    throw new Error('not finished');
  };

  it('creates and completes in the store’s own steps; a 402 writes nothing', async () => {
    const store = new MemoryGenerationStore();
    const ledger = new MemoryLedger();
    const service = await run(store, ledger, 4);
    expect(store.settlesFor(ledger)).toBe(true);
    const { generationId } = await service.create('alice', { modelId: 'echo', settings: {} });
    expect(await done(service, generationId)).toEqual({ status: 'completed', result: 'ok', price: 3 });
    expect(await ledger.account('alice')).toEqual({ balance: 1, reserved: 0, settled: 3 });
    await expect(service.create('alice', { modelId: 'echo', settings: {} })).rejects.toMatchObject({ code: 'insufficient_funds' });
    expect(await store.countByStatus()).toMatchObject({ pending: 0, processing: 0, completed: 1 });
  });

  it('does not link a ledger whose settle was replaced: the replacement is what settles', async () => {
    const store = new MemoryGenerationStore();
    const ledger = new MemoryLedger();
    const settle = vi.spyOn(ledger, 'settle');
    const service = await run(store, ledger);
    expect(store.settlesFor(ledger)).toBe(false);
    const { generationId } = await service.create('alice', { modelId: 'echo', settings: {} });
    await done(service, generationId);
    expect(settle).toHaveBeenCalledWith(generationId, 3);
    expect(await ledger.account('alice')).toEqual({ balance: 7, reserved: 0, settled: 3 });
  });
});
