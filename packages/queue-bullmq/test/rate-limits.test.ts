import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { createGenerationService, MemoryApiKeyStore, MemoryLedger, type GenerationService } from '@genservice/core';
import { REDIS_URL, randomName } from './helpers.js';

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

function service(client: Redis, keyPrefix: string, failOpen = true): GenerationService {
  const s = createGenerationService({
    providers: [
      {
        models: [{ modelId: 'm', title: 'M', resultType: 'text', estimatedGenerationTime: 1, settings: [], price: 1 }],
        generate: async () => ({ text: 'ok' }),
      },
    ],
    apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'ka', userId: 'alice' }] }),
    ledger: new MemoryLedger({ balances: { alice: 100 } }),
    recovery: { intervalMs: 0 },
    runner: { enabled: false },
    rateLimits: { backend: { type: 'redis', client }, keyPrefix, read: { points: 4, durationSeconds: 60 }, failOpen },
  });
  cleanups.push(() => s.stop({ timeoutMs: 100 }));
  return s;
}

const balance = { method: 'GET', path: '/v1/balance', headers: { authorization: 'Bearer ka' } };

describe('rate limits on Redis', () => {
  it('share one budget across instances', async () => {
    const client = new Redis(REDIS_URL);
    cleanups.push(() => client.quit());
    const prefix = randomName('gsrl');
    cleanups.push(async () => {
      const keys = await client.keys(`${prefix}*`);
      if (keys.length > 0) await client.del(...keys);
    });
    const a = service(client, prefix);
    const b = service(client, prefix);
    const statuses: number[] = [];
    for (const s of [a, b, a, b, a, b]) statuses.push((await s.handle(balance)).status);
    expect(statuses).toEqual([200, 200, 200, 200, 429, 429]);
  });

  it('lets requests through when Redis is down with failOpen, and answers 503 without it', async () => {
    const dead = new Redis('redis://127.0.0.1:1', { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
    dead.on('error', () => undefined);
    cleanups.push(async () => dead.disconnect());
    const open = service(dead, randomName('gsrl'), true);
    expect((await open.handle(balance)).status).toBe(200);
    const closed = service(dead, randomName('gsrl'), false);
    const r = await closed.handle(balance);
    expect(r.status).toBe(503);
    expect(JSON.parse(String(r.body)).error.code).toBe('unavailable');
  });
});
