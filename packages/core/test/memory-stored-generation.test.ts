import { describe, expect, it } from 'vitest';
import { MemoryGenerationStore, MemoryLedger, type GenerationRecord, type WebhookEventType } from '@genservice/core';
import type { GenerationPatch } from '../src/ports/store.js';
import { copy, StoredGeneration, Timestamps } from '../src/memory/stored-generation.js';

/**
 * Issue 36: the memory store keeps a generation as one `StoredGeneration` (every field declared, five timestamps in the
 * store's Float64Array) and hands out `copy()`s. What it keeps must read back exactly as a plain record would.
 */
const NEW = {
  id: 'g1',
  ownerId: 'alice',
  modelId: 'm',
  settings: { prompt: 'p', sizes: ['a'] },
  status: 'pending' as const,
  reserved: 4,
  createdAt: 1_790_000_000_000.5,
  metadata: { a: 'b' },
  webhook: { url: 'https://example.com/h', events: ['generation.completed'] as WebhookEventType[] },
  expiresAfterSeconds: 60,
  batchId: 'b1',
  traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
  priority: 'low' as const,
  deadlineAt: 1_790_000_100_000,
};
const CREATED = { type: 'created' as const, data: { modelId: 'm' } };
/** The bookkeeping a stored generation keeps beside the record's fields: never handed out. */
const BOOKKEEPING = ['times', 'at', 'order', 'slot', 'events', 'p1', 'p2', 'p3', 'p4', 'later'];

describe('the memory store’s stored generation', () => {
  it('hands out every field a record can have, and only those: set, cleared, and absent', async () => {
    const store = new MemoryGenerationStore();
    await store.insert(NEW, CREATED);
    const set = {
      status: 'failed' as const,
      price: 2,
      resultText: 't',
      resultKey: 'k',
      failureReason: 'r',
      error: { code: 'provider_error' as const, message: 'm' },
      progress: { fraction: 0.5, message: 'half' },
      startedAt: 1_790_000_000_001,
      remoteHandle: { job: 'j', n: [1] },
      parkedUntil: 1_790_000_000_002,
      claims: 2,
      leaseOwner: 'w',
      leaseExpiresAt: 1_790_000_000_003,
      finishedAt: 1_790_000_000_004,
      lifeEndsAt: 1_790_000_000_005,
      servedModelId: 'm2',
    };
    const full = await store.update('g1', { expect: { status: ['pending'] }, set, now: 1_790_000_000_006 });
    const expected: GenerationRecord = { ...NEW, ...set, updatedAt: 1_790_000_000_006 };
    expect(full).toStrictEqual(expected);
    expect(await store.getById('g1')).toStrictEqual(expected);

    // Every field the stored object declares is one a copy carries (a field added to the record but not to copy() fails here).
    const stored = new StoredGeneration(NEW, 0, new Timestamps());
    const declared = [...Object.keys(stored), 'createdAt', 'updatedAt', 'startedAt', 'leaseExpiresAt', 'finishedAt'].filter((k) => !BOOKKEEPING.includes(k));
    expect(declared.sort()).toEqual(Object.keys(expected).sort());

    const cleared = await store.update('g1', {
      expect: { status: ['failed'] },
      set: { leaseOwner: null, leaseExpiresAt: null, startedAt: null, remoteHandle: null, parkedUntil: null, progress: null },
      now: 1_790_000_000_007,
    });
    const { leaseOwner, leaseExpiresAt, startedAt, remoteHandle, parkedUntil, progress, ...rest } = expected;
    expect(cleared).toStrictEqual({ ...rest, updatedAt: 1_790_000_000_007 });
    const bare = copy(new StoredGeneration({ id: 'g2', ownerId: 'bob', modelId: 'm', settings: {}, status: 'pending', reserved: 0, createdAt: 5 }, 1, new Timestamps()));
    expect(bare).toStrictEqual({ id: 'g2', ownerId: 'bob', modelId: 'm', settings: {}, status: 'pending', reserved: 0, claims: 0, createdAt: 5, updatedAt: 5 });
  });

  it('ignores a key a patch does not have, as the Postgres store does: it cannot reach the store’s bookkeeping', async () => {
    const store = new MemoryGenerationStore();
    await store.insert(NEW, CREATED);
    const odd = { status: 'processing', slot: 99, events: 0, at: 5, order: -1, bogus: 'x' } as unknown as GenerationPatch;
    const out = await store.update('g1', { expect: { status: ['pending'] }, set: odd, event: { type: 'processing', data: {} }, now: 1_790_000_000_001 });
    expect(out).toStrictEqual({ ...NEW, status: 'processing', claims: 0, updatedAt: 1_790_000_000_001 });
    expect((await store.eventsOf('g1')).map((e) => [e.seq, e.type])).toEqual([[1, 'created'], [2, 'processing']]);
    expect((await store.list('alice', { limit: 10 })).map((g) => g.id)).toEqual(['g1']);
  });

  it('keeps nothing a caller holds: what went in and what came out can be changed without reaching the store', async () => {
    const store = new MemoryGenerationStore();
    const gen = structuredClone(NEW);
    await store.insert(gen, CREATED);
    gen.settings.sizes.push('x');
    gen.metadata.a = 'changed';
    gen.webhook.events.push('generation.failed');
    const out = (await store.getById('g1'))!;
    (out.settings.sizes as string[]).push('y');
    out.metadata!.a = 'changed too';
    expect(await store.getById('g1')).toMatchObject({ settings: NEW.settings, metadata: NEW.metadata, webhook: NEW.webhook });
  });

  it('reads data that is its generation’s own { modelId } as that, on any event, and any other data as given', async () => {
    const store = new MemoryGenerationStore();
    await store.insert(NEW, CREATED);
    await store.update('g1', { expect: { status: ['pending'] }, set: {}, event: { type: 'progress', data: { modelId: 'm' } }, now: 2000 });
    await store.insert({ ...NEW, id: 'g2' }, { type: 'created', data: { modelId: 'other' } });
    await store.insert({ ...NEW, id: 'g3' }, { type: 'created', data: { modelId: 'm', extra: 1 } });
    expect((await store.eventsOf('g1')).map((e) => [e.type, e.data])).toEqual([['created', { modelId: 'm' }], ['progress', { modelId: 'm' }]]);
    expect((await store.eventsOf('g2')).map((e) => e.data)).toEqual([{ modelId: 'other' }]);
    expect((await store.eventsOf('g3')).map((e) => e.data)).toEqual([{ modelId: 'm', extra: 1 }]);
    const page = await store.readFeed('', 10);
    expect(page.events.map((e) => [e.generationId, e.data])).toEqual([
      ['g1', { modelId: 'm' }],
      ['g1', { modelId: 'm' }],
      ['g2', { modelId: 'other' }],
      ['g3', { modelId: 'm', extra: 1 }],
    ]);
    page.events[0]!.data.modelId = 'changed';
    expect((await store.eventsOf('g1'))[0]!.data).toEqual({ modelId: 'm' });
  });

  it('numbers a long history past the four positions kept inline, and reads it back in order', async () => {
    const store = new MemoryGenerationStore();
    await store.insert(NEW, CREATED);
    await store.insert({ ...NEW, id: 'other' }, CREATED);
    for (let i = 0; i < 9; i++) await store.update('g1', { expect: { status: ['pending'] }, set: {}, event: { type: 'output', data: { delta: String(i) } }, now: 2000 + i });
    const events = await store.eventsOf('g1');
    expect(events.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(events.slice(1).map((e) => e.data.delta)).toEqual(['0', '1', '2', '3', '4', '5', '6', '7', '8']);
    expect((await store.eventsOf('g1', 6)).map((e) => e.seq)).toEqual([7, 8, 9, 10]);
  });

  it('gives a removed generation’s timestamps to the next one, which starts with none of them', async () => {
    const store = new MemoryGenerationStore();
    await store.insert(NEW, CREATED);
    await store.update('g1', { expect: { status: ['pending'] }, set: { status: 'completed', startedAt: 10, finishedAt: 20, leaseExpiresAt: 30 }, now: 40 });
    expect(await store.remove('g1', { status: ['completed'] })).toBe(true);
    await store.insert({ ...NEW, id: 'g2', createdAt: 50 }, CREATED);
    const g2 = (await store.getById('g2'))!;
    expect(g2).toMatchObject({ createdAt: 50, updatedAt: 50 });
    expect(g2).not.toHaveProperty('startedAt');
    expect(g2).not.toHaveProperty('finishedAt');
    expect(g2).not.toHaveProperty('leaseExpiresAt');
    expect(await store.countByStatus()).toMatchObject({ pending: 1, completed: 0 });
  });

  it('keeps every timestamp of thousands of generations apart as its place grows', async () => {
    const store = new MemoryGenerationStore();
    for (let i = 0; i < 3000; i++) await store.insert({ ...NEW, id: `g${i}`, createdAt: 1_790_000_000_000 + i }, CREATED);
    for (let i = 0; i < 3000; i += 7) await store.update(`g${i}`, { expect: { status: ['pending'] }, set: { status: 'completed', finishedAt: 3_000_000 + i }, now: 4_000_000 + i });
    for (let i = 0; i < 3000; i += 499) {
      const g = (await store.getById(`g${i}`))!;
      expect(g.createdAt).toBe(1_790_000_000_000 + i);
      expect(g.finishedAt).toBe(i % 7 === 0 ? 3_000_000 + i : undefined);
      expect(g.updatedAt).toBe(i % 7 === 0 ? 4_000_000 + i : 1_790_000_000_000 + i);
    }
  });
});

describe('the memory ledger’s settled reserves', () => {
  it('answers each settle’s own charge, per owner, however many share one', async () => {
    const ledger = new MemoryLedger({ balances: { alice: 100, bob: 100 } });
    for (const [user, id, amount, charge] of [['alice', 'a1', 5, 3], ['alice', 'a2', 5, 3], ['bob', 'b1', 5, 3], ['alice', 'a3', 5, 5]] as const) {
      await ledger.reserve(user, id, amount);
      expect(await ledger.settle(id, charge)).toBe(charge);
    }
    expect(await ledger.settle('a1', 4)).toBe(3);
    expect(await ledger.settle('a3', 0)).toBe(5);
    await expect(ledger.reserve('bob', 'a1', 1)).rejects.toThrow(/another user/);
    expect(await ledger.account('alice')).toEqual({ balance: 89, reserved: 0, settled: 11 });
  });
});
