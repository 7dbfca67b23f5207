/**
 * Issue 40's "done when", all parts at once: a provider lane of concurrency 2 and 30 requests a minute under 200
 * creates from three organisations of weights 5 / 2 / 1. Nothing fails, the upstream (a loopback server counting its
 * own requests) never sees more than 2 at once or 30 in any minute, and while every organisation has work waiting the
 * lane's requests go to them within 10 % of 5 : 2 : 1. The clock is a FakeClock moved by the test; the judge of the
 * order is the upstream's own record of the prompts it answered.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createGenerationService, InProcessQueue, MemoryCapacityStore, MemoryGenerationStore, MemoryLedger } from '@genservice/core';
import { createFakeUpstream, createUpstreamProvider, FakeClock, stepClockUntil } from '@genservice/testing';

const T0 = Date.UTC(2026, 0, 1);
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const ORGS = [
  { organizationId: 'gold', weight: 5, users: ['g1', 'g2'] },
  { organizationId: 'silver', weight: 2, users: ['s1', 's2'] },
  { organizationId: 'bronze', weight: 1, users: ['b1'] },
] as const;

describe('capacity and tenancy together (issue 40)', () => {
  it('200 creates from three organisations weighted 5/2/1 through a lane of 2 at once and 30 a minute', async () => {
    const clock = new FakeClock(T0);
    const up = await createFakeUpstream({ clock });
    cleanups.push(() => up.close());
    const users = ORGS.flatMap((o) => o.users);
    const queue = new InProcessQueue({ clock });
    const service = createGenerationService({
      providers: [createUpstreamProvider(up.url, { lane: 'shared-account', concurrency: 2, requestsPerMinute: 30 })],
      clock,
      queue,
      capacity: new MemoryCapacityStore(),
      store: new MemoryGenerationStore(),
      ledger: new MemoryLedger({ balances: Object.fromEntries(users.map((u) => [u, 1000])), clock }),
      recovery: { intervalMs: 0 },
      limits: { inFlightPerUser: 200 },
    });
    for (const org of ORGS) {
      await service.accounts.createOrganization({ organizationId: org.organizationId, weight: org.weight });
      for (const userId of org.users) await service.accounts.addMember(org.organizationId, { userId });
    }
    await service.start();
    cleanups.push(() => service.stop({ timeoutMs: 100 }));

    // Every organisation asks for more than its share of the busy period: 80 / 60 / 60 (the users of one take turns).
    const asks = { gold: 80, silver: 60, bronze: 60 } as const;
    const made: Array<{ owner: string; id: string }> = [];
    for (const org of ORGS) {
      for (let i = 0; i < asks[org.organizationId]; i++) {
        const owner = org.users[i % org.users.length]!;
        const { generationId } = await service.create(owner, { modelId: 'upstream-text', settings: { prompt: `${org.organizationId}:${i}` } });
        made.push({ owner, id: generationId });
      }
    }
    expect(made).toHaveLength(200);

    const finished = async (): Promise<number> => {
      let n = 0;
      for (const m of made) if ((await service.get(m.owner, m.id)).status !== 'pending') n++;
      return n;
    };
    await stepClockUntil(clock, [queue], async () => up.completed === 200 && (await finished()) === 200);

    // Nothing failed, and the upstream's own counters kept the lane's limits.
    const statuses = new Map<string, number>();
    for (const m of made) {
      const s = (await service.get(m.owner, m.id)).status;
      statuses.set(s, (statuses.get(s) ?? 0) + 1);
    }
    expect(Object.fromEntries(statuses)).toEqual({ completed: 200 });
    expect(up.rateLimited).toBe(0);
    expect(up.maxInFlight).toBeLessThanOrEqual(2);
    expect(up.maxInWindow()).toBeLessThanOrEqual(30);
    expect(up.prompts).toHaveLength(200);

    // The busy period: until the first organisation has nothing left waiting (gold, which asked 80 of its 5/8).
    const orgOf = (prompt: string): string => prompt.split(':')[0]!;
    const served = { gold: 0, silver: 0, bronze: 0 } as Record<string, number>;
    let busy = 0;
    for (const prompt of up.prompts) {
      served[orgOf(prompt)]!++;
      busy++;
      if (Object.entries(served).some(([org, n]) => n === asks[org as keyof typeof asks])) break;
    }
    const weights = { gold: 5, silver: 2, bronze: 1 } as Record<string, number>;
    for (const org of Object.keys(weights)) {
      const expected = (busy * weights[org]!) / 8;
      expect(Math.abs(served[org]! - expected), `${org}: ${served[org]} of ${busy}, expected ${expected}`).toBeLessThanOrEqual(0.1 * expected);
    }
    expect(busy).toBeGreaterThanOrEqual(100);
  });
});
