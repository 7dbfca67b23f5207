import { afterEach, describe, expect, it, vi } from 'vitest';
import { createGenerationService, MemoryGenerationStore, MemoryLedger, type GenerationService, type ModelDefinition } from '@genservice/core';
import { until } from '@genservice/testing';

/**
 * Issue 36: a memory store holds and settles a memory ledger's reserves in its own steps (memory/in-store-ledger.ts),
 * as the Postgres store does the Postgres ledger's. What every such pair must do (refusals that write nothing, the
 * settle in the finishing change) is the shared contract (`runSettlingStoreContract`, memory-contracts.test.ts); here,
 * what is the memory store's own: its link, and what it refuses without one.
 */
const gen = (id: string, ownerId = 'alice') => ({ id, ownerId, modelId: 'm', settings: {}, status: 'pending' as const, reserved: 4, createdAt: 1000 });
const CREATED = { type: 'created' as const, data: { modelId: 'm' } };

function linked(balance = 10): { store: MemoryGenerationStore; ledger: MemoryLedger } {
  const store = new MemoryGenerationStore();
  const ledger = new MemoryLedger({ balances: { alice: balance } });
  expect(store.settleWith(ledger)).toBe(true);
  return { store, ledger };
}

describe('MemoryGenerationStore with a linked MemoryLedger', () => {
  it('answers limited, holding nothing, for an owner with limits of its own: the full reserve is the caller’s to take', async () => {
    const { store, ledger } = linked();
    await ledger.setUserLimits('alice', { maxInFlight: 5 });
    expect(await store.insertReserved(gen('g1'), CREATED, { amount: 4, now: 1000 })).toBe('limited');
    expect(await store.getById('g1')).toBeNull();
    expect(await ledger.account('alice')).toEqual({ balance: 10, reserved: 0, settled: 0 });
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
  const done = (service: GenerationService, id: string) =>
    until(() => service.get('alice', id), { accept: (g) => g.status === 'completed' || g.status === 'failed', what: `${id} to finish` });

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
    expect(settle).toHaveBeenCalledWith(generationId, 3, expect.any(Number));
    expect(await ledger.account('alice')).toEqual({ balance: 7, reserved: 0, settled: 3 });
  });
});
