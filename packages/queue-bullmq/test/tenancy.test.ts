/**
 * Issue 40's "done when" on real parts: two service instances on one Postgres (generations, ledger with
 * organisations) and one Redis (the provider lane's counters), each with its in-process runner, a FakeClock moved by
 * the test. A provider lane of concurrency 2 and 30 requests a minute under 200 creates from three organisations of
 * weights 5 / 2 / 1: nothing fails, the upstream (a loopback server counting its own requests) never sees more than 2
 * at once or 30 in any minute.
 *
 * Not asserted here, because it does not hold yet: the 5 : 2 : 1 shares across the two instances. Each instance hands
 * out its own work in the fair order, but a job its runner cannot start (the shared lane is full, or its minute is
 * used up) goes back to its queue with a delay and is tagged again when it returns, so which instance's job gets the
 * next free slot is a race. Measured (this test, printing the prompts' organisations in the busy period): 79 / 60 / 54
 * and 80 / 44 / 35 where 5 : 2 : 1 asks for 62 % / 25 % / 12 %. On one instance the shares hold within 10 %
 * (packages/core/test/capacity-tenancy.test.ts).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { createPostgresStores } from '@genservice/store-postgres';
import { createGenerationService, InProcessQueue, type GenerationService } from '@genservice/core';
import { createFakeUpstream, createUpstreamProvider, FakeClock, stepClockUntil, until } from '@genservice/testing';
import { RedisCapacityStore } from '../src/index.js';
import { REDIS_URL, randomName } from './helpers.js';
import { createTestDatabase } from '../../store-postgres/test/helpers.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const ORGS = [
  { organizationId: 'gold', weight: 5, users: ['g1', 'g2'] },
  { organizationId: 'silver', weight: 2, users: ['s1', 's2'] },
  { organizationId: 'bronze', weight: 1, users: ['b1'] },
] as const;
const ASKS: Record<string, number> = { gold: 80, silver: 60, bronze: 60 };

describe('capacity and tenancy on Postgres and Redis, two instances (issue 40)', () => {
  it('200 creates from organisations weighted 5/2/1 through one lane of 2 at once and 30 a minute: nothing fails, the limits hold', async () => {
    const clock = new FakeClock(Date.UTC(2026, 0, 1));
    const up = await createFakeUpstream({ clock });
    cleanups.push(() => up.close());
    const db = await createTestDatabase('genservice_tenancy');
    cleanups.push(() => db.drop());
    const keyPrefix = randomName('gsten');
    cleanups.push(async () => {
      const redis = new Redis(REDIS_URL);
      try {
        const keys = await redis.keys(`${keyPrefix}:*`);
        if (keys.length > 0) await redis.del(...keys);
      } finally {
        await redis.quit();
      }
    });
    const schema = randomName('ten');
    const instances: Array<{ service: GenerationService; queue: InProcessQueue }> = [];
    for (let i = 0; i < 2; i++) {
      // Each instance its own pool and runner: the database and the lane's counters are what they share.
      const stores = await createPostgresStores({ connectionString: db.url, schema, poolSize: 3 });
      const capacity = new RedisCapacityStore({ connection: REDIS_URL, keyPrefix });
      const queue = new InProcessQueue({ clock });
      const service = createGenerationService({
        providers: [createUpstreamProvider(up.url, { lane: 'shared-account', concurrency: 2, requestsPerMinute: 30 })],
        clock,
        queue,
        capacity,
        store: stores.store,
        ledger: stores.ledger,
        recovery: { intervalMs: 0 },
        limits: { inFlightPerUser: 200 },
      });
      cleanups.push(async () => {
        await service.stop({ timeoutMs: 100 });
        await capacity.close();
        await stores.close();
      });
      instances.push({ service, queue });
    }
    const [a, b] = instances as [(typeof instances)[0], (typeof instances)[0]];
    for (const org of ORGS) {
      await a.service.accounts.createOrganization({ organizationId: org.organizationId, weight: org.weight });
      for (const userId of org.users) {
        await a.service.accounts.createUser({ userId, balance: 1000 });
        await a.service.accounts.addMember(org.organizationId, { userId });
      }
    }
    for (const inst of instances) await inst.service.start();

    // Each instance takes every other create of each organisation, so both have the same mix waiting.
    const made: Array<{ inst: GenerationService; owner: string; id: string }> = [];
    for (const org of ORGS) {
      for (let i = 0; i < ASKS[org.organizationId]!; i++) {
        const owner = org.users[i % org.users.length]!;
        const inst = i % 2 === 0 ? a.service : b.service;
        const { generationId } = await inst.create(owner, { modelId: 'upstream-text', settings: { prompt: `${org.organizationId}:${i}` } });
        made.push({ inst, owner, id: generationId });
      }
    }
    expect(made).toHaveLength(200);
    await stepClockUntil(clock, [a.queue, b.queue], () => up.completed === 200, { maxSteps: 1200 });
    await until(
      async () => {
        for (const m of made) if ((await m.inst.get(m.owner, m.id)).status !== 'completed') return false;
        return true;
      },
      { what: 'every generation completed', timeoutMs: 20_000, intervalMs: 50 },
    );
    expect(up.rateLimited).toBe(0);
    expect(up.maxInFlight).toBeLessThanOrEqual(2);
    expect(up.maxInWindow()).toBeLessThanOrEqual(30);
    expect(up.prompts).toHaveLength(200);
  }, 240_000);
});
