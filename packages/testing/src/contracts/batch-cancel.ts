import { describe, expect, it } from 'vitest';
import { createGenerationService } from '@genservice/core';
import type { GenerationStore, IdempotencyStore, Ledger } from '@genservice/core/ports';
import { until } from '../until.js';
import { uid, useFresh } from './harness.js';

interface CancelPorts {
  store: GenerationStore;
  ledger: Ledger;
  idempotency: IdempotencyStore;
  close(): Promise<void>;
}

const ITEMS = 300;
const PRICE = 5;
const FAILURE_FEE = 2;
const CONCURRENCY = 4;

/** The store, counting every call by method. */
function counted(store: GenerationStore, calls: Map<string, number>): GenerationStore {
  return new Proxy(store, {
    get(t, p, r) {
      const v = Reflect.get(t, p, r) as unknown;
      if (typeof v !== 'function') return v;
      return (...args: unknown[]) => {
        calls.set(String(p), (calls.get(String(p)) ?? 0) + 1);
        return (v as (...a: unknown[]) => unknown).apply(t, args);
      };
    },
  });
}

/**
 * Cancelling a big batch while its first members run (part of `runPortContracts`): every member no worker started is
 * cancelled free in a few set-based store calls, the running ones are charged their cancel fee, and nothing of the
 * batch starts after the cancel.
 */
export function describeBatchCancel(make: () => Promise<CancelPorts>): void {
  describe('service scenarios: cancelling a batch of 300 while it runs', () => {
    const ports = useFresh(make);

    it('cancels every member not started free, in a few store calls; only the running ones are charged', async () => {
      const p = ports();
      const user = uid('user');
      await p.ledger.credit(user, 10_000);
      let started = 0;
      const runnerCalls = new Map<string, number>();
      const cancelCalls = new Map<string, number>();
      const options = {
        providers: [
          {
            models: [{ modelId: 'slow', title: 'Slow', resultType: 'text', estimatedGenerationTime: 60, settings: [], price: PRICE, failureFee: FAILURE_FEE }],
            // Runs until its cancel aborts it.
            generate: (_settings, ctx) => {
              started++;
              return new Promise((_resolve, reject) => ctx.signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true }));
            },
          },
        ],
        ledger: p.ledger,
        idempotency: p.idempotency,
        recovery: { onStart: false, intervalMs: 0, orphanReserveMs: 0 },
      } satisfies Partial<Parameters<typeof createGenerationService>[0]>;
      // Two instances on the same stores: one runs the batch, the other (no runner) answers the cancel, so its store
      // calls are the cancel's own. The runner sees its runs cancelled when it next renews their leases.
      const live = createGenerationService({ ...options, store: counted(p.store, runnerCalls), runner: { enabled: true, concurrency: CONCURRENCY, leaseMs: 1500 } });
      const front = createGenerationService({ ...options, store: counted(p.store, cancelCalls), runner: { enabled: false } });
      await live.start();
      try {
        const { batchId, generationIds } = await live.batches.create(user, { requests: Array.from({ length: ITEMS }, () => ({ modelId: 'slow' })) });
        await until(() => live.batches.get(user, batchId), { accept: (v) => v.counts.processing === CONCURRENCY, what: 'the first members running' });
        const readsBefore = runnerCalls.get('getById') ?? 0;
        const answer = await front.batches.cancel(user, batchId);
        const calls = cancelCalls;
        expect(answer.cancelled).toBe(ITEMS);
        expect(answer.status).toBe('completed');
        expect(answer.counts).toEqual({ pending: 0, processing: 0, completed: 0, failed: ITEMS });
        // The running ones charged their cancel fee, every other member free.
        expect(answer.price).toBe(CONCURRENCY * FAILURE_FEE);
        // Set-based: one call for every pending member, then a few per running one (never one per member).
        expect(calls.get('updateBatchMembers')).toBe(1);
        expect(calls.get('getById') ?? 0).toBe(0);
        expect(calls.get('get') ?? 0).toBe(0);
        const total = [...calls.values()].reduce((a, b) => a + b, 0);
        expect(total).toBeLessThanOrEqual(10 + 6 * CONCURRENCY);

        const recs = await Promise.all(generationIds.map((id) => p.store.getById(id)));
        const free = recs.filter((r) => r?.price === 0);
        expect(free).toHaveLength(ITEMS - CONCURRENCY);
        for (const r of free) {
          expect(r).toMatchObject({ status: 'failed', error: { code: 'cancelled' } });
          expect(r?.startedAt).toBeUndefined();
        }
        expect(recs.filter((r) => r?.price === FAILURE_FEE && r.startedAt !== undefined)).toHaveLength(CONCURRENCY);
        await until(() => p.ledger.account(user), { accept: (a) => a.reserved === 0, what: 'every reserve settled' });
        expect(await p.ledger.account(user)).toEqual({ balance: 10_000 - CONCURRENCY * FAILURE_FEE, reserved: 0, settled: CONCURRENCY * FAILURE_FEE });
        // The queue still held the other members' jobs: each one's claim was refused (the runner then reads the record
        // once to see why), and none of them started.
        await until(() => (runnerCalls.get('getById') ?? 0) - readsBefore >= ITEMS - CONCURRENCY, { what: 'every queued job tried' });
        expect(started).toBe(CONCURRENCY);
      } finally {
        await Promise.all([live.stop(), front.stop()]);
      }
    });
  });
}
