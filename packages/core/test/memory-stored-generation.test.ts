import { describe, expect, it } from 'vitest';
import { MemoryGenerationStore, MemoryLedger, type GenerationRecord, type WebhookEventType } from '@genservice/core';
import type { GenerationPatch } from '../src/ports/store.js';
import { Chunked, NumberBlocks, numberSlots, objectSlots } from '../src/memory/chunked.js';
import { copy, StoredGeneration } from '../src/memory/stored-generation.js';

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
const BOOKKEEPING = ['rare', 'block', 'at', 'order', 'slot', 'events', 'p1', 'p2', 'p3', 'p4', 'later'];

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
    const stored = new StoredGeneration(NEW, 0, new NumberBlocks(5));
    // The fields behind accessors (the timestamps, the rare ones) are the prototype's.
    const accessors = Object.entries(Object.getOwnPropertyDescriptors(StoredGeneration.prototype)).filter(([, d]) => d.get && d.set);
    const declared = [...Object.keys(stored), ...accessors.map(([k]) => k)].filter((k) => !BOOKKEEPING.includes(k));
    expect(declared.sort()).toEqual(Object.keys(expected).sort());

    const cleared = await store.update('g1', {
      expect: { status: ['failed'] },
      set: { leaseOwner: null, leaseExpiresAt: null, startedAt: null, remoteHandle: null, parkedUntil: null, progress: null },
      now: 1_790_000_000_007,
    });
    const { leaseOwner, leaseExpiresAt, startedAt, remoteHandle, parkedUntil, progress, ...rest } = expected;
    expect(cleared).toStrictEqual({ ...rest, updatedAt: 1_790_000_000_007 });
    const plain = new StoredGeneration({ id: 'g2', ownerId: 'bob', modelId: 'm', settings: {}, status: 'pending', reserved: 0, createdAt: 5 }, 1, new NumberBlocks(5));
    // A generation with none of the rare fields keeps no object for them, also once one was set to nothing.
    plain.resultKey = undefined;
    expect((plain as unknown as { rare: unknown }).rare).toBeUndefined();
    const bare = copy(plain);
    expect(bare).toStrictEqual({ id: 'g2', ownerId: 'bob', modelId: 'm', settings: {}, status: 'pending', reserved: 0, claims: 0, createdAt: 5, updatedAt: 5 });
  });

  it('ignores a key a patch does not have, as the Postgres store does: it cannot reach the store’s bookkeeping', async () => {
    const store = new MemoryGenerationStore();
    await store.insert(NEW, CREATED);
    const odd = { status: 'processing', slot: 99, events: 0, at: 5, order: -1, rare: {}, block: null, p1: 7, later: [1], bogus: 'x' } as unknown as GenerationPatch;
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
    // A patch's objects are copied in too (each field is written by name: applyField).
    const set = { status: 'failed' as const, error: { code: 'provider_error' as const, message: 'm' }, remoteHandle: { job: 'j', n: [1] }, progress: { fraction: 0.5, message: 'half' } };
    await store.update('g1', { expect: { status: ['pending'] }, set, now: 1_790_000_000_001 });
    set.error.message = 'changed';
    set.remoteHandle.n.push(2);
    set.progress.message = 'changed';
    expect(await store.getById('g1')).toMatchObject({ error: { message: 'm' }, remoteHandle: { job: 'j', n: [1] }, progress: { fraction: 0.5, message: 'half' } });
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

describe('the memory store’s chunked columns (chunked.ts)', () => {
  it('keeps every value across chunks, and keeps the first n on truncate, whatever chunk n ends in', () => {
    const B = 16_384;
    for (const list of [new Chunked<number>(objectSlots), new Chunked(numberSlots)]) {
      for (let i = 0; i < 3 * B + 5; i++) list.push(i * 2);
      expect(list.length).toBe(3 * B + 5);
      expect([list.at(0), list.at(B - 1), list.at(B), list.at(3 * B + 4)]).toEqual([0, 2 * B - 2, 2 * B, 6 * B + 8]);
      list.set(B, -1);
      expect(list.at(B)).toBe(-1);
      for (const n of [2 * B + 7, 2 * B, B + 1, B, 100, 1, 0]) {
        list.truncate(n);
        expect(list.length).toBe(n);
        list.push(7);
        expect(list.at(n)).toBe(7);
        if (n > 0) expect(list.at(n - 1)).toBe(n - 1 === B ? -1 : (n - 1) * 2);
        list.truncate(n);
      }
      for (let i = 0; i < B + 3; i++) list.push(i);
      expect([list.length, list.at(B + 2)]).toEqual([B + 3, B + 2]);
    }
  });

  it('hands out runs of numbers that never span two blocks, NaN at first, and gives a freed run out again', () => {
    const blocks = new NumberBlocks(5);
    const runs: number[] = [];
    for (let i = 0; i < 2000; i++) {
      const at = blocks.take();
      expect((at & 4095) + 5).toBeLessThanOrEqual(4096);
      const block = blocks.blockOf(at);
      for (let k = 0; k < 5; k++) expect(block[(at & 4095) + k]).toBeNaN();
      block.fill(i, at & 4095, (at & 4095) + 5);
      runs.push(at);
    }
    expect(new Set(runs).size).toBe(2000);
    expect(blocks.blockOf(runs[1000]!)[runs[1000]! & 4095]).toBe(1000);
    blocks.free(runs[3]!);
    expect(blocks.take()).toBe(runs[3]);
  });

  it('pages the feed in order across chunks, also after a removal compacts it', async () => {
    const store = new MemoryGenerationStore();
    for (let i = 0; i < 20_000; i++) await store.insert({ ...NEW, id: `g${i}`, status: 'completed', createdAt: 1000 + i }, { type: 'created', data: { modelId: 'm' } });
    expect(await store.remove('g10', { status: ['completed'] })).toBe(true);
    const seen: string[] = [];
    let cursor = '';
    for (let page = 0; page < 40; page++) {
      const { events, cursor: next } = await store.readFeed(cursor, 700);
      seen.push(...events.map((e) => e.generationId));
      if (events.length === 0) break;
      cursor = next;
    }
    expect(seen).toHaveLength(19_999);
    expect(seen).toEqual(Array.from({ length: 20_000 }, (_, i) => `g${i}`).filter((id) => id !== 'g10'));
    expect((await store.eventsOf('g19999')).map((e) => e.at)).toEqual([20_999]);
    expect((await store.list('alice', { limit: 2 })).map((g) => g.id)).toEqual(['g19999', 'g19998']);
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
