import { afterEach, describe, expect, it } from 'vitest';
import { createGenerationService, type GenerationService, type ModelProvider } from '@genservice/core';
import { PgBossQueue } from '../src/index.js';
import { freshStores, type FreshStores } from './helpers.js';
import { until } from '@genservice/testing';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('cancellation with the pg-boss runner', () => {
  it('cancels on one instance a generation running on another: its signal fires, it fails with the fee, charged once', async () => {
    const stores: FreshStores = await freshStores('gs_pgboss_cancel');
    cleanups.push(() => stores.drop());
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
        queue: new PgBossQueue({ connectionString: stores.db.url, concurrency: 1, poolSize: 2 }),
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
    // The worker has concurrency 1, so this one waits in Postgres.
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
