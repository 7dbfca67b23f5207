import { expect } from 'vitest';
import type { GenerationChange, GenerationEvent, GenerationRecord, GenerationStore, NewEvent, NewGeneration } from '@genservice/core/ports';
import { until } from '../until.js';
import { T0, uid } from './harness.js';

/** A client-safe failure reason, for the changes that are not about it. */
export const FAILED = { code: 'provider_error', message: 'The model failed to generate a result.' } as const;
export const CREATED: NewEvent = { type: 'created', data: { modelId: 'model-a' } };

/*
 * The store holds no rules: these helpers build the kind of compare-and-set core's Lifecycle sends, so the tests read
 * like the life of a generation, but every assertion is about what the store guarantees: an expectation is checked
 * and the write and its event happen atomically, or nothing happens.
 */
export const lease = (holder: string, now: number, ms = 1000) => ({ leaseOwner: holder, leaseExpiresAt: now + ms });
export const claimFromPending = (holder: string, now: number, ms = 1000): GenerationChange => ({
  expect: { status: ['pending'] },
  set: { status: 'processing', claims: 1, startedAt: now, ...lease(holder, now, ms) },
  event: { type: 'processing', data: { claim: 1 } },
  now,
});
export const reclaim = (holder: string, claims: number, now: number, ms = 1000): GenerationChange => ({
  expect: { status: ['processing'], lease: 'free', parked: false, claims },
  set: { claims: claims + 1, ...lease(holder, now, ms) },
  event: { type: 'processing', data: { claim: claims + 1 } },
  now,
});
export const complete = (holder: string, now: number, price = 1, result: { resultText?: string; resultKey?: string } = { resultText: 'ok' }): GenerationChange => ({
  expect: { status: ['processing'], lease: { heldBy: holder } },
  set: { status: 'completed', price, finishedAt: now, ...result },
  event: { type: 'completed', data: { price } },
  now,
});
export const failFrom = (expect: GenerationChange['expect'], now: number, price = 0, reason = 'x'): GenerationChange => ({
  expect,
  set: { status: 'failed', price, failureReason: reason, error: FAILED, parkedUntil: null, finishedAt: now },
  event: { type: 'failed', data: { price, error: FAILED } },
  now,
});
export const held = (holder: string): GenerationChange['expect'] => ({ status: ['processing'], lease: { heldBy: holder } });
export const PENDING: GenerationChange['expect'] = { status: ['pending'] };
export const UNHELD: GenerationChange['expect'] = { status: ['pending', 'processing'], lease: 'free' };

/** What every part of the GenerationStore contract works with: the store of the current test and ways to fill it. */
export interface StoreKit {
  store(): GenerationStore;
  /** A new generation (not inserted): pending, owned by a fresh user, created at T0. */
  newGen(overrides?: Partial<NewGeneration>): NewGeneration;
  /** `newGen`, inserted with its `created` event. */
  inserted(overrides?: Partial<NewGeneration>): Promise<NewGeneration>;
  /** A generation claimed by `holder` at T0 + 1000 with a 1000 ms lease (held until T0 + 2000). */
  claimed(holder?: string): Promise<{ gen: NewGeneration; record: GenerationRecord }>;
  /** The record, which must exist. */
  read(id: string): Promise<GenerationRecord>;
  /** The types of a generation's events, in order. */
  types(id: string): Promise<string[]>;
  /**
   * Every event of the feed from `cursor` on, in pages of `page`, and the cursor after the last. An event becomes
   * readable once it is committed and the store can tell nothing older is still being written (on Postgres: once every
   * older transaction of the server has ended), so this reads until at least `expected` events came.
   */
  drain(cursor: string, expected?: number, page?: number): Promise<{ events: GenerationEvent[]; cursor: string }>;
}

export function storeKit(store: () => GenerationStore): StoreKit {
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

  async function drain(cursor: string, expected = 0, page = 1000): Promise<{ events: GenerationEvent[]; cursor: string }> {
    const events: GenerationEvent[] = [];
    let pages = 0;
    /** Reads pages up to the feed's end for now (an empty page, which keeps the cursor); true once enough came. */
    const readToEnd = async (): Promise<boolean> => {
      for (;;) {
        if (++pages > 100_000) throw new Error('the feed did not end');
        const next = await store().readFeed(cursor, page);
        if (next.events.length === 0) {
          expect(next.cursor).toBe(cursor);
          return events.length >= expected;
        }
        events.push(...next.events);
        cursor = next.cursor;
      }
    };
    await until(readToEnd, { what: () => `${expected} events from the feed (${events.length} came)`, timeoutMs: 30_000 });
    return { events, cursor };
  }

  return { store, newGen, inserted, claimed, read, types, drain };
}
