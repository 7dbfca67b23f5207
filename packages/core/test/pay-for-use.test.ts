// Issue 36 (pay for what you use): with nobody listening (no webhook, no stream, no long-poll) the event log is never
// read for a generation, and a create with a webhook turns the outbox on. Counters, not time.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createGenerationService, MemoryApiKeyStore, MemoryGenerationStore, MemoryLedger, MemoryWebhookStore, type GenerationService } from '@genservice/core';
import type { FeedPage, NewDelivery } from '@genservice/core/ports';
import { until } from '@genservice/testing';

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

class CountingStore extends MemoryGenerationStore {
  readFeedCalls = 0;
  feedHeadCalls = 0;
  override async readFeed(after: string, limit: number): Promise<FeedPage> {
    this.readFeedCalls++;
    return super.readFeed(after, limit);
  }
  override async feedHead(): Promise<string> {
    this.feedHeadCalls++;
    return super.feedHead();
  }
}

class CountingHooks extends MemoryWebhookStore {
  added = 0;
  override async addDeliveries(deliveries: NewDelivery[]): Promise<void> {
    this.added += deliveries.length;
    return super.addDeliveries(deliveries);
  }
}

function make(store: CountingStore, hooks: CountingHooks): GenerationService {
  const service = createGenerationService({
    providers: [
      {
        models: [{ modelId: 'ok', title: 'OK', resultType: 'text', estimatedGenerationTime: 0.01, settings: [], price: 1 }],
        generate: async () => ({ text: 'hello' }),
      },
    ],
    store,
    apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'ka', userId: 'alice' }] }),
    ledger: new MemoryLedger({ balances: { alice: 10_000 } }),
    recovery: { intervalMs: 0 },
    webhookStore: hooks,
    webhooks: { allowHttp: true, allowPrivateUrls: true, pollIntervalMs: 10 },
    push: { pollIntervalMs: 10 },
  });
  cleanups.push(() => service.stop({ timeoutMs: 500 }));
  return service;
}

async function completed(service: GenerationService, id: string): Promise<void> {
  await until(async () => (await service.get('alice', id))?.status === 'completed', { what: `${id} completed` });
}

describe('nobody listening, nothing read (issue 36)', () => {
  it('50 generations with no webhook, stream or long-poll: no read of the log, no delivery; the polls only read its head', async () => {
    const store = new CountingStore();
    const hooks = new CountingHooks();
    const service = make(store, hooks);
    await service.start();
    const ids: string[] = [];
    for (let i = 0; i < 50; i++) ids.push((await service.create('alice', { modelId: 'ok' })).generationId);
    for (const id of ids) await completed(service, id);
    const heads = store.feedHeadCalls;
    await until(() => store.feedHeadCalls >= heads + 4, { what: 'idle polls of the feed and the outbox' });
    expect(store.readFeedCalls).toBe(0);
    expect(hooks.added).toBe(0);
  });

  it('a create with a webhook turns the outbox on, its flag kept in the webhook store for every instance', async () => {
    const got: string[] = [];
    const server: Server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        got.push(req.url ?? '');
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanups.push(() => new Promise((r) => server.close(r)));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
    const store = new CountingStore();
    const hooks = new CountingHooks();
    const service = make(store, hooks);
    await service.start();
    await completed(service, (await service.create('alice', { modelId: 'ok' })).generationId);
    expect(store.readFeedCalls).toBe(0);
    const { generationId: id } = await service.create('alice', { modelId: 'ok', webhook: { url, events: ['generation.completed'] } });
    await completed(service, id);
    await until(() => got.length === 1, { what: 'the completed webhook' });
    expect(store.readFeedCalls).toBeGreaterThan(0);
    expect(await hooks.getCursor('webhooks.in-use')).not.toBe('');
  });
});
