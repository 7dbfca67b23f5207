import { describe, expect, it } from 'vitest';
import { createGenerationService, type GenerationService } from '@genservice/core';
import type { GenerationStore } from '@genservice/core/ports';
import type { IdempotencyStore, Ledger } from '@genservice/core/ports';
import { until } from '../until.js';
import { uid, useFresh } from './harness.js';

interface ScenarioPorts {
  store: GenerationStore;
  ledger: Ledger;
  idempotency: IdempotencyStore;
  close(): Promise<void>;
}

/** The same object with some methods replaced: how a test makes a port "die" at one step. */
function wrap<T extends object>(target: T, over: Partial<Record<keyof T, unknown>>): T {
  return new Proxy(target, {
    get(t, p, r) {
      if (Object.prototype.hasOwnProperty.call(over, p)) return over[p as keyof T];
      const v = Reflect.get(t, p, r) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
    },
  });
}

const LEASE_MS = 300;
const PRICE = 7;

function service(ports: Pick<ScenarioPorts, 'store' | 'ledger' | 'idempotency'>, runner: boolean, leaseMs = LEASE_MS): GenerationService {
  return createGenerationService({
    providers: [
      {
        models: [{ modelId: 'm', title: 'M', resultType: 'text', estimatedGenerationTime: 0.01, settings: [], price: PRICE }],
        generate: async () => ({ text: 'done' }),
      },
    ],
    store: ports.store,
    ledger: ports.ledger,
    idempotency: ports.idempotency,
    runner: { enabled: runner, leaseMs },
    recovery: { onStart: false, intervalMs: 0, orphanReserveMs: 0 },
  });
}

/** Creates with an Idempotency-Key until the key's lease (LEASE_MS from the crashed create) has run out: a conflict until then. */
function createOnceTheLeaseRanOut(live: GenerationService, user: string, idempotencyKey: string): Promise<{ generationId: string }> {
  const attempt = (): Promise<{ generationId: string } | undefined> =>
    live.create(user, { modelId: 'm' }, { idempotencyKey }).catch((err: { code?: string }) => {
      if (err.code === 'idempotency_conflict') return undefined;
      throw err;
    });
  return until(attempt, `the create with key ${idempotencyKey} to be taken once the crashed create's lease ran out`);
}

/**
 * Whole-service scenarios every store set runs (part of `runPortContracts`): what a crash at each step of a create
 * with an Idempotency-Key leaves behind, and that a retry after a lease time finishes it, charging once.
 */
export function describeServiceScenarios(make: () => Promise<ScenarioPorts>): void {
  describe('service scenarios: a batch of 1,000', () => {
    const ports = useFresh(make);

    it('creates 1,000 generations at once, completes them all with exact counts, one ledger entry each', async () => {
      const p = ports();
      const user = uid('user');
      await p.ledger.credit(user, 1000 * PRICE + 5);
      // A lease long enough for a slow shared database: a lease lost under load is recovery's to finish, not this test's.
      const live = service(p, true, 30_000);
      await live.start();
      try {
        const { batchId, generationIds } = await live.batches.create(user, { requests: Array.from({ length: 1000 }, () => ({ modelId: 'm' })) });
        expect(generationIds).toHaveLength(1000);
        expect(new Set(generationIds).size).toBe(1000);
        const view = await until(() => live.batches.get(user, batchId), { accept: (v) => v.status === 'completed', timeoutMs: 60_000, what: 'the batch to complete' });
        expect(view).toEqual({ status: 'completed', counts: { pending: 0, processing: 0, completed: 1000, failed: 0 }, price: 1000 * PRICE });
        await until(() => p.ledger.account(user), { accept: (a) => a.reserved === 0, what: 'the last settle' });
        expect(await p.ledger.account(user)).toEqual({ balance: 5, reserved: 0, settled: 1000 * PRICE });
        expect(await p.ledger.openReserves(10)).toEqual([]);
        const day = new Date().toISOString().slice(0, 10);
        expect((await p.ledger.usage(user, { from: day, to: day, groupBy: 'model' })).total).toEqual({ count: 1000, tokens: 1000 * PRICE });
      } finally {
        await live.stop({ timeoutMs: 500 });
      }
    }, 120_000);

    it('refuses a batch the balance cannot cover as a whole: nothing is created or held', async () => {
      const p = ports();
      const user = uid('user');
      await p.ledger.credit(user, 10 * PRICE - 1);
      const live = service(p, false);
      await expect(live.batches.create(user, { requests: Array.from({ length: 10 }, () => ({ modelId: 'm' })) })).rejects.toMatchObject({ code: 'insufficient_funds' });
      expect(await p.ledger.account(user)).toEqual({ balance: 10 * PRICE - 1, reserved: 0, settled: 0 });
      expect(await p.store.list(user, { limit: 10 })).toEqual([]);
    });
  });


  describe('service scenarios: Idempotency-Key after a crash', () => {
    const ports = useFresh(make);

    it('a retry returns the generation a crashed create had stored, once a lease time has passed', async () => {
      const p = ports();
      const user = uid('user');
      await p.ledger.credit(user, 100);
      // The first instance dies right after storing the generation: it never records it under the key.
      const dying = service({ ...p, idempotency: wrap(p.idempotency, { finish: async () => Promise.reject(new Error('killed')), abandon: async () => undefined }) }, false);
      await expect(dying.create(user, { modelId: 'm' }, { idempotencyKey: 'k' })).rejects.toThrow('killed');
      const [stored] = await p.store.list(user, { limit: 10 });
      expect(stored).toBeDefined();

      const live = service(p, true);
      await live.start();
      try {
        await expect(live.create(user, { modelId: 'm' }, { idempotencyKey: 'k' })).rejects.toMatchObject({ code: 'idempotency_conflict' });
        const retried = await createOnceTheLeaseRanOut(live, user, 'k');
        expect(retried.generationId).toBe(stored!.id);
        await live.recover(); // the crashed create never enqueued it on this instance
        await until(() => live.get(user, retried.generationId), { accept: (g) => g.status === 'completed', what: 'the generation to complete' });
        expect(await live.create(user, { modelId: 'm' }, { idempotencyKey: 'k' })).toEqual(retried);
        expect(await p.store.list(user, { limit: 10 })).toHaveLength(1);
        // The status is visible a moment before the settle that follows it lands.
        await until(() => p.ledger.account(user), { accept: (a) => a.reserved === 0, what: 'the settle' });
        expect(await p.ledger.account(user)).toEqual({ balance: 100 - PRICE, reserved: 0, settled: PRICE });
      } finally {
        await live.stop({ timeoutMs: 500 });
      }
    });

    it('a retry creates the generation a crashed create never stored, and the crash\u2019s reserve is released, not reused', async () => {
      const p = ports();
      const user = uid('user');
      await p.ledger.credit(user, 100);
      // The first instance dies after reserving, before the insert commits: nothing of it runs afterwards.
      const dying = service(
        {
          store: wrap(p.store, { insert: async () => Promise.reject(new Error('killed')) }),
          ledger: wrap(p.ledger, { release: async () => null }),
          idempotency: wrap(p.idempotency, { abandon: async () => undefined }),
        },
        false,
      );
      await expect(dying.create(user, { modelId: 'm' }, { idempotencyKey: 'k2' })).rejects.toThrow('killed');
      expect(await p.ledger.account(user)).toMatchObject({ reserved: PRICE });

      const live = service(p, true);
      await live.start();
      try {
        const created = await createOnceTheLeaseRanOut(live, user, 'k2');
        await until(() => live.get(user, created.generationId), { accept: (g) => g.status === 'completed', what: 'the generation to complete' });
        // Recovery releases the orphaned reserve of the crash; the user is charged once.
        await live.recover();
        // The status is visible a moment before the settle that follows it lands.
        await until(() => p.ledger.account(user), { accept: (a) => a.reserved === 0, what: 'the settle' });
        expect(await p.ledger.account(user)).toEqual({ balance: 100 - PRICE, reserved: 0, settled: PRICE });
        expect(await p.store.list(user, { limit: 10 })).toHaveLength(1);
        expect(await live.create(user, { modelId: 'm' }, { idempotencyKey: 'k2' })).toEqual(created);
      } finally {
        await live.stop({ timeoutMs: 500 });
      }
    });
  });
}
