import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runWebhookStoreContract, until } from '@genservice/testing';
import { createGenerationService, MemoryApiKeyStore, MemoryGenerationStore, MemoryLedger } from '@genservice/core';
import { createPostgresStores, PostgresNotifier, PostgresWebhookStore } from '../src/index.js';
import { createTestDatabase, type TestDatabase, quietPool } from './helpers.js';

let db: TestDatabase;
let pool: pg.Pool;
beforeAll(async () => {
  db = await createTestDatabase('genservice_wh');
  pool = quietPool({ connectionString: db.url, max: 8 });
  pool.on('error', () => undefined);
  await createPostgresStores({ pool, schema: 'wh' });
}, 60_000);
afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

runWebhookStoreContract('PostgresWebhookStore', async () => ({ webhooks: new PostgresWebhookStore(pool, { schema: 'wh' }), close: async () => undefined }));

describe('PostgresNotifier', () => {
  it("wakes a stream on one instance when another instance's worker finishes, without waiting for the log poll", async () => {
    const store = new MemoryGenerationStore();
    const ledger = new MemoryLedger({ balances: { alice: 100 } });
    const apiKeys = new MemoryApiKeyStore({ keys: [{ apiKey: 'ka', userId: 'alice' }] });
    let finish: (() => void) | undefined;
    const provider = {
      models: [{ modelId: 'm', title: 'M', resultType: 'text' as const, estimatedGenerationTime: 1, settings: [], price: 1 }],
      generate: () => new Promise<{ text: string }>((resolve) => (finish = () => resolve({ text: 'from the worker' }))),
    };
    const channel = `gs_${Math.random().toString(36).slice(2, 10)}`;
    const make = (runner: boolean) =>
      createGenerationService({
        providers: [provider],
        store,
        ledger,
        apiKeys,
        runner: { enabled: runner },
        recovery: { intervalMs: 0 },
        push: { notifier: new PostgresNotifier({ connectionString: db.url, pool, channel }), pollIntervalMs: 600_000 },
      });
    const worker = make(true);
    const api = make(false);
    await worker.start();
    await api.start();
    try {
      const { generationId } = await worker.create('alice', { modelId: 'm' });
      await until(() => finish !== undefined, { what: 'the worker to start the run', timeoutMs: 2000, intervalMs: 10 });
      const res = await api.handle({ method: 'GET', path: `/v1/generations/${generationId}/events`, headers: { authorization: 'Bearer ka' } });
      const it = (res.body as AsyncIterable<string>)[Symbol.asyncIterator]();
      expect(String((await it.next()).value)).toContain('event: processing');
      finish!();
      let text = '';
      for (;;) {
        const r = await it.next();
        if (r.done) break;
        text += String(r.value);
      }
      expect(text).toContain('event: completed');
    } finally {
      await worker.stop({ timeoutMs: 100 });
      await api.stop({ timeoutMs: 100 });
    }
  });

  it('keeps no connection when stopped while its listening connection is still being made, or started again at once', async () => {
    const listeners = async (): Promise<number> =>
      Number((await pool.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'genservice-notifier'`)).rows[0].n);
    const channel = `gs_${Math.random().toString(36).slice(2, 10)}`;
    const n = new PostgresNotifier({ connectionString: db.url, pool, channel });
    const first = n.start(() => undefined);
    await n.stop(); // before the connection of `first` is made
    await first;
    // Started again before the earlier start's connection was made: exactly one listens afterwards.
    const again = n.start(() => undefined);
    const third = n.start(() => undefined);
    await Promise.all([again, third]);
    await n.stop();
    await until(async () => (await listeners()) === 0, { what: 'the listening connection to close', timeoutMs: 2000, intervalMs: 10 }).catch(() => undefined);
    expect(await listeners()).toBe(0);
  });
});

