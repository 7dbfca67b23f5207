import { afterEach, describe, expect, it } from 'vitest';
import { createGenerationService, type GenerationService, type GenerationServiceOptions, type ModelProvider } from '@genservice/core';
import type { JobQueue } from '@genservice/core/ports';
import { until } from '../until.js';

/** What the cancellation case needs: shared stores, and queues on one backend. */
export interface CancelSetup {
  stores: Required<Pick<GenerationServiceOptions, 'store' | 'ledger' | 'apiKeys' | 'idempotency'>>;
  /**
   * A new queue on the setup's backend, running one job at a time (`concurrency: 1`) with a lock or retry delay as
   * short as the backend allows (the service's lease is 600 ms). Two are asked for: an API-only service's and a worker's.
   */
  queue(): JobQueue;
  /** Drops what the setup made (the services are stopped before). */
  close(): Promise<void>;
}

/**
 * Cancellation across instances on a distributed queue: one service accepts and cancels, another runs. A cancelled
 * generation that runs on the other instance sees its signal fire and fails with its failure fee, charged once; a
 * cancelled one that waits in the queue is claimed by nobody. Every distributed queue runs it.
 */
export function runCancelAcrossInstances(name: string, setupOf: () => Promise<CancelSetup>): void {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  describe(`${name}: cancellation across instances`, () => {
    it('cancels on one instance a generation running on another: its signal fires, it fails with the fee, charged once', async () => {
      const setup = await setupOf();
      cleanups.push(() => setup.close());
      const stores = setup.stores;
      await stores.ledger.credit('u', 100);
      let aborted = 0;
      let started = 0;
      const provider: ModelProvider = {
        models: [
          {
            modelId: 'slow',
            title: 'Slow',
            resultType: 'text',
            estimatedGenerationTime: 10,
            settings: [],
            price: 10,
            failureFee: 2,
          },
        ],
        generate: (_input, ctx) =>
          new Promise((_resolve, reject) => {
            started++;
            ctx.signal.addEventListener('abort', () => {
              aborted++;
              reject(new Error('aborted'));
            });
          }),
      };
      const make = (runs: boolean): GenerationService => {
        const service = createGenerationService({
          providers: [provider],
          store: stores.store,
          ledger: stores.ledger,
          apiKeys: stores.apiKeys,
          idempotency: stores.idempotency,
          queue: setup.queue(),
          runner: { enabled: runs, leaseMs: 600, concurrency: 1 },
          recovery: { intervalMs: 0 },
        });
        cleanups.push(() => service.stop({ timeoutMs: 2000 }));
        return service;
      };
      const api = make(false);
      const worker = make(true);
      await api.start();
      await worker.start();

      const running = await api.create('u', { modelId: 'slow' });
      await until(async () => (await api.get('u', running.generationId)).status === 'processing', { what: 'the worker to start it', timeoutMs: 10_000, intervalMs: 50 });
      // The worker has concurrency 1, so this one waits in the queue.
      const waiting = await api.create('u', { modelId: 'slow' });

      expect(await api.cancel('u', waiting.generationId)).toEqual({ outcome: 'cancelled', generation: { status: 'failed', price: 0 } });
      expect(await api.cancel('u', running.generationId)).toEqual({ outcome: 'cancelled', generation: { status: 'failed', price: 2 } });
      // The worker notices at its next lease renewal (leaseMs / 3) and aborts the provider.
      await until(() => aborted === 1, { what: 'the running provider to see its signal', timeoutMs: 5000, intervalMs: 20 });
      // The cancelled waiting job is claimed by nobody: its claim finds a terminal generation.
      await until(async () => (await stores.ledger.account('u')).reserved === 0, { what: 'every reserve to settle', timeoutMs: 5000, intervalMs: 50 });
      expect(started).toBe(1);
      expect(await api.get('u', running.generationId)).toEqual({ status: 'failed', price: 2 });
      expect(await stores.ledger.account('u')).toEqual({ balance: 98, reserved: 0, settled: 2 });
    }, 30_000);
  });
}
