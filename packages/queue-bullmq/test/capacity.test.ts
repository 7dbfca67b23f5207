import { afterEach, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { createGenerationService, InProcessQueue, MemoryGenerationStore, MemoryLedger, type GenerationService } from '@genservice/core';
import { createFakeUpstream, createUpstreamProvider, FakeClock, runCapacityContract, stepClockUntil } from '@genservice/testing';
import { RedisCapacityStore } from '../src/index.js';
import { REDIS_URL, randomName } from './helpers.js';

/** Deletes every key under a test's prefix. */
async function dropKeys(keyPrefix: string): Promise<void> {
  const redis = new Redis(REDIS_URL);
  try {
    const keys = await redis.keys(`${keyPrefix}:*`);
    if (keys.length > 0) await redis.del(...keys);
  } finally {
    await redis.quit();
  }
}

// Two connections on one key prefix: the second stands for another instance.
runCapacityContract('RedisCapacityStore', async () => {
  const keyPrefix = randomName('gscap');
  const capacity = new RedisCapacityStore({ connection: REDIS_URL, keyPrefix });
  const other = new RedisCapacityStore({ connection: REDIS_URL, keyPrefix });
  return {
    capacity,
    other,
    async close(): Promise<void> {
      await capacity.close();
      await other.close();
      await dropKeys(keyPrefix);
    },
  };
});

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('provider capacity across two instances sharing Redis', () => {
  it('concurrency 2 and 30 a minute hold for both together: the upstream never sees more, nothing fails', async () => {
    const clock = new FakeClock(Date.UTC(2026, 0, 1));
    const up = await createFakeUpstream({ clock });
    cleanups.push(() => up.close());
    const keyPrefix = randomName('gscap');
    cleanups.push(() => dropKeys(keyPrefix));
    const instances: Array<{ service: GenerationService; queue: InProcessQueue }> = [];
    for (let i = 0; i < 2; i++) {
      // Each instance its own connection, store and ledger: only the lane's counters are shared.
      const capacity = new RedisCapacityStore({ connection: REDIS_URL, keyPrefix });
      const queue = new InProcessQueue({ clock });
      const service = createGenerationService({
        providers: [createUpstreamProvider(up.url, { lane: 'shared-account', concurrency: 2, requestsPerMinute: 30 })],
        clock,
        queue,
        capacity,
        store: new MemoryGenerationStore(),
        ledger: new MemoryLedger({ balances: { ann: 1000, bob: 1000 }, clock }),
        recovery: { intervalMs: 0 },
      });
      await service.start();
      cleanups.push(async () => {
        await service.stop({ timeoutMs: 100 });
        await capacity.close();
      });
      instances.push({ service, queue });
    }
    const made: Array<{ i: number; owner: string; id: string }> = [];
    for (let n = 0; n < 40; n++) {
      const owner = n % 3 === 0 ? 'bob' : 'ann';
      const { generationId } = await instances[n % 2]!.service.create(owner, { modelId: 'upstream-text', settings: { prompt: `p${n}` } });
      made.push({ i: n % 2, owner, id: generationId });
    }
    const completed = async (): Promise<number> => {
      let c = 0;
      for (const m of made) if ((await instances[m.i]!.service.details(m.owner, m.id)).status === 'completed') c++;
      return c;
    };
    const queues = instances.map((i) => i.queue);
    await stepClockUntil(clock, queues, () => up.completed >= 30, { maxSteps: 59 });
    expect(up.completed).toBe(30);
    expect(await completed()).toBe(30);
    await stepClockUntil(clock, queues, async () => (await completed()) === 40);
    expect(up.maxInFlight).toBeLessThanOrEqual(2);
    expect(up.maxInWindow()).toBeLessThanOrEqual(30);
    expect(up.arrivals).toHaveLength(40);
    for (const m of made) expect((await instances[m.i]!.service.details(m.owner, m.id)).status).toBe('completed');
  });
});
