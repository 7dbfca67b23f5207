import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MemoryGenerationStore, type GenerationRecord } from '@genservice/core';
import type { Expectation, GenerationStore } from '@genservice/core/ports';

const GENS = ['a', 'b', 'c'] as const;
const WORKERS = ['w0', 'w1', 'w2'] as const;

type Op =
  | { kind: 'claim'; gen: number; worker: number; leaseMs: number }
  | { kind: 'renew'; gen: number; worker: number; leaseMs: number }
  | { kind: 'complete'; gen: number; worker: number; price: number }
  | { kind: 'fail'; gen: number; worker: number | null; force: boolean; price: number }
  | { kind: 'tick'; ms: number };

const gen = fc.integer({ min: 0, max: GENS.length - 1 });
const worker = fc.integer({ min: 0, max: WORKERS.length - 1 });
const leaseMs = fc.integer({ min: 1, max: 200 });
const price = fc.integer({ min: 0, max: 10 });

const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('claim' as const), gen, worker, leaseMs }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('renew' as const), gen, worker, leaseMs }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('complete' as const), gen, worker, price }) },
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant('fail' as const), gen, worker: fc.option(worker), force: fc.boolean(), price }),
  },
  // Time jumps: small ones stay inside a lease, large ones expire it, 0 lands exactly on boundaries.
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('tick' as const), ms: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 400 })) }) },
);

/** One op at a time, or several fired at the same instant with Promise.all. */
const step = fc.oneof({ weight: 3, arbitrary: op.map((o) => [o]) }, { weight: 1, arbitrary: fc.array(op, { minLength: 2, maxLength: 12 }) });

const RANK = { pending: 0, processing: 1, completed: 2, failed: 2 } as const;

/** The spec as a model: what each call must answer, given the state before it. */
function expected(r: GenerationRecord, o: Exclude<Op, { kind: 'tick' }>, now: number): boolean {
  const held = (w: string): boolean => r.status === 'processing' && r.leaseOwner === w && now < r.leaseExpiresAt!;
  const expired = r.status === 'processing' && now >= r.leaseExpiresAt!;
  switch (o.kind) {
    case 'claim':
      return r.status === 'pending' || expired;
    case 'renew':
    case 'complete':
      return held(WORKERS[o.worker]!);
    case 'fail':
      if (r.status === 'pending') return o.worker === null;
      if (r.status !== 'processing') return false;
      if (o.force) return true;
      return o.worker === null ? expired : held(WORKERS[o.worker]!);
  }
}

/**
 * Each call as the Lifecycle makes it: a compare-and-set whose expectation is the transition's precondition. The
 * store holds no rules, so this checks that those expectations, applied atomically, give the spec's answers.
 */
async function apply(store: GenerationStore, o: Exclude<Op, { kind: 'tick' }>, now: number): Promise<boolean> {
  const id = GENS[o.gen]!;
  const error = { code: 'provider_error', message: 'property' } as const;
  switch (o.kind) {
    case 'claim': {
      const set = { status: 'processing' as const, leaseOwner: WORKERS[o.worker]!, leaseExpiresAt: now + o.leaseMs };
      const fresh = await store.update(id, { expect: { status: ['pending'] }, set: { ...set, claims: 1 }, event: { type: 'processing', data: { claim: 1 } }, now });
      if (fresh) return true;
      const rec = (await store.getById(id))!;
      const claims = rec.claims + 1;
      return (await store.update(id, { expect: { status: ['processing'], lease: 'free', claims: rec.claims }, set: { ...set, claims }, event: { type: 'processing', data: { claim: claims } }, now })) !== null;
    }
    case 'renew':
      return (await store.renewLeases([id], WORKERS[o.worker]!, now + o.leaseMs, now)).length === 1;
    case 'complete':
      return (
        (await store.update(id, {
          expect: { status: ['processing'], lease: { heldBy: WORKERS[o.worker]! } },
          set: { status: 'completed', price: o.price, resultText: `by ${o.worker}`, finishedAt: now },
          event: { type: 'completed', data: { price: o.price } },
          now,
        })) !== null
      );
    case 'fail': {
      // A worker fails only what it claimed; a forced failure (a cancel) ignores the lease; anyone else needs it unheld.
      const expect: Expectation =
        o.worker !== null
          ? o.force
            ? { status: ['processing'] }
            : { status: ['processing'], lease: { heldBy: WORKERS[o.worker]! } }
          : o.force
            ? { status: ['pending', 'processing'] }
            : { status: ['pending', 'processing'], lease: 'free' };
      return (
        (await store.update(id, {
          expect,
          set: { status: 'failed', price: o.price, failureReason: 'property', error, finishedAt: now },
          event: { type: 'failed', data: { price: o.price, error } },
          now,
        })) !== null
      );
    }
  }
}

async function snapshot(store: GenerationStore): Promise<GenerationRecord[]> {
  return Promise.all(GENS.map(async (id) => (await store.getById(id))!));
}

describe('the lifecycle\'s compare-and-set transitions on MemoryGenerationStore', () => {
  it('answers every sequential call as the spec says', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 60 }), async (ops) => {
        const store = new MemoryGenerationStore();
        let now = 1_000;
        for (const id of GENS) await store.insert({ id, ownerId: 'u', modelId: 'm', settings: {}, status: 'pending', reserved: 10, createdAt: now }, { type: 'created', data: {} });
        for (const o of ops) {
          if (o.kind === 'tick') {
            now += o.ms;
            continue;
          }
          const before = (await store.getById(GENS[o.gen]!))!;
          const ok = await apply(store, o, now);
          expect(ok).toBe(expected(before, o, now));
          const after = (await store.getById(GENS[o.gen]!))!;
          if (!ok) expect(after).toEqual(before);
          if (ok && o.kind === 'claim') expect(after).toMatchObject({ claims: before.claims + 1, leaseOwner: WORKERS[o.worker], leaseExpiresAt: now + o.leaseMs });
        }
      }),
      { numRuns: 400 },
    );
  });

  it('never moves a generation backwards nor changes a terminal one, under concurrent calls and time jumps', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 40 }), async (steps) => {
        const store = new MemoryGenerationStore();
        let now = 1_000;
        for (const id of GENS) await store.insert({ id, ownerId: 'u', modelId: 'm', settings: {}, status: 'pending', reserved: 10, createdAt: now }, { type: 'created', data: {} });
        let previous = await snapshot(store);
        for (const batch of steps) {
          const calls = batch.filter((o): o is Exclude<Op, { kind: 'tick' }> => o.kind !== 'tick');
          now += batch.reduce((s, o) => s + (o.kind === 'tick' ? o.ms : 0), 0);
          const results = await Promise.all(calls.map((o) => apply(store, o, now)));
          const current = await snapshot(store);
          for (const [i, rec] of current.entries()) {
            const prev = previous[i]!;
            expect(RANK[rec.status]).toBeGreaterThanOrEqual(RANK[prev.status]);
            if (RANK[prev.status] === 2) expect(rec).toEqual(prev);
            const wins = (kind: Op['kind']): number => calls.filter((c, j) => c.gen === i && c.kind === kind && results[j]).length;
            // At one instant at most one finishing call wins per generation.
            expect(wins('complete') + wins('fail')).toBeLessThanOrEqual(1);
            // Claims at one instant can only follow each other if an earlier one in the batch held no lease (leaseMs >= 1).
            expect(wins('claim')).toBeLessThanOrEqual(1);
            expect(rec.claims).toBe(prev.claims + wins('claim'));
            if (RANK[rec.status] === 2) expect(rec.finishedAt).toBeDefined();
          }
          previous = current;
        }
      }),
      { numRuns: 300 },
    );
  });
});
