/**
 * Provider capacity (issue 40, item 3): a provider declares its upstream's limits (`provider.capacity`); the runner
 * keeps every call within them, work beyond them waits pending and never fails, and a 429 with `Retry-After` pauses
 * the lane and costs no attempt. The judge is a loopback fake upstream (OpenAI's chat completions wire format) that
 * counts its own requests in flight and per minute, by a FakeClock that moves only when the test says so.
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  createGenerationService,
  InProcessQueue,
  MemoryCapacityStore,
  MemoryGenerationStore,
  MemoryLedger,
  type CapacityStore,
  type GenerationService,
} from '@genservice/core';
import { createFakeUpstream, createGate, createUpstreamProvider, FakeClock, fakeModel, stepClockUntil, until, type FakeUpstream } from '@genservice/testing';

const T0 = Date.UTC(2026, 0, 1);
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

interface Instance {
  service: GenerationService;
  queue: InProcessQueue;
}

async function instance(clock: FakeClock, url: string, capacity: CapacityStore, limits: { concurrency?: number; requestsPerMinute?: number }): Promise<Instance> {
  const queue = new InProcessQueue({ clock });
  const service = createGenerationService({
    providers: [createUpstreamProvider(url, { lane: 'fake-upstream', ...limits })],
    clock,
    queue,
    capacity,
    store: new MemoryGenerationStore(),
    ledger: new MemoryLedger({ balances: { ann: 1000, bob: 1000, cat: 1000 }, clock }),
    recovery: { intervalMs: 0 },
  });
  await service.start();
  cleanups.push(() => service.stop({ timeoutMs: 100 }));
  return { service, queue };
}

async function createMany(instances: Instance[], n: number): Promise<Array<{ service: GenerationService; owner: string; id: string }>> {
  const owners = ['ann', 'bob', 'cat'];
  const made = [];
  for (let i = 0; i < n; i++) {
    const inst = instances[i % instances.length]!;
    const owner = owners[i % owners.length]!;
    const { generationId } = await inst.service.create(owner, { modelId: 'upstream-text', settings: { prompt: `p${i}` } });
    made.push({ service: inst.service, owner, id: generationId });
  }
  return made;
}

async function statuses(made: Array<{ service: GenerationService; owner: string; id: string }>): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const m of made) {
    const s = (await m.service.details(m.owner, m.id)).status;
    out[s] = (out[s] ?? 0) + 1;
  }
  return out;
}

async function upstream(clock: FakeClock): Promise<FakeUpstream> {
  const up = await createFakeUpstream({ clock });
  cleanups.push(() => up.close());
  return up;
}

describe('provider capacity', () => {
  it('concurrency 2 and 30 a minute under 200 creates from three owners: nothing fails, the upstream never sees more', async () => {
    const clock = new FakeClock(T0);
    const up = await upstream(clock);
    const inst = await instance(clock, up.url, new MemoryCapacityStore(), { concurrency: 2, requestsPerMinute: 30 });
    const made = await createMany([inst], 200);
    // In the first minute exactly 30 run; the rest wait, pending.
    await stepClockUntil(clock, [inst.queue], async () => up.completed >= 30, { maxSteps: 59 });
    expect(up.completed).toBe(30);
    await clock.advance(0);
    const early = await statuses(made);
    expect(early).toEqual({ completed: 30, pending: 170 });
    await stepClockUntil(clock, [inst.queue], async () => (await statuses(made)).completed === 200);
    expect(await statuses(made)).toEqual({ completed: 200 });
    expect(up.maxInFlight).toBeLessThanOrEqual(2);
    expect(up.maxInWindow()).toBeLessThanOrEqual(30);
    expect(up.arrivals).toHaveLength(200);
    // 200 at 30 a minute: the last ones start six minutes after the first.
    expect(up.arrivals.at(-1)! - up.arrivals[0]!).toBeGreaterThanOrEqual(360_000);
  });

  it('a 429 with Retry-After pauses the lane and costs no attempt (the model has one)', async () => {
    const clock = new FakeClock(T0);
    const up = await upstream(clock);
    const inst = await instance(clock, up.url, new MemoryCapacityStore(), { concurrency: 2 });
    up.rateLimitNext(1, 30);
    const first = await createMany([inst], 1);
    await until(() => up.rateLimited === 1, 'the 429');
    await until(() => inst.queue.active === 0, 'the run to park');
    // It waits (parked, processing), and nothing else reaches the upstream while the lane is paused: this instance
    // holds the lane's jobs back (its slots are paused), and the lane's counters would refuse them anyway.
    const more = await createMany([inst], 3);
    await until(() => inst.queue.active === 0 && inst.queue.size === 3, 'the others to be held back');
    await clock.advance(29_000);
    expect(up.arrivals).toHaveLength(1);
    expect((await first[0]!.service.details('ann', first[0]!.id)).status).toBe('processing');
    expect(await statuses(more)).toEqual({ pending: 3 });
    await stepClockUntil(clock, [inst.queue], async () => (await statuses([...first, ...more])).completed === 4);
    expect(up.arrivals).toHaveLength(5);
    expect(up.arrivals[1]! - up.arrivals[0]!).toBeGreaterThanOrEqual(30_000);
    expect(await first[0]!.service.details('ann', first[0]!.id)).toMatchObject({ status: 'completed', price: 1 });
  });

  it("a 429 on one instance pauses the lane on another sharing the counters (its own queue knows nothing of it)", async () => {
    const clock = new FakeClock(T0);
    const up = await upstream(clock);
    const shared = new MemoryCapacityStore();
    const a = await instance(clock, up.url, shared, { concurrency: 2 });
    const b = await instance(clock, up.url, shared, { concurrency: 2 });
    up.rateLimitNext(1, 20);
    const first = await createMany([a], 1);
    await until(() => up.rateLimited === 1 && a.queue.active === 0, 'the 429 and the park');
    const onB = await createMany([b], 4);
    await stepClockUntil(clock, [a.queue, b.queue], () => clock.now() >= T0 + 19_000);
    expect(up.arrivals).toHaveLength(1);
    expect(await statuses(onB)).toEqual({ pending: 4 });
    await stepClockUntil(clock, [a.queue, b.queue], async () => (await statuses([...first, ...onB])).completed === 5);
    expect(up.arrivals.slice(1).every((t) => t >= T0 + 20_000)).toBe(true);
    expect(up.maxInFlight).toBeLessThanOrEqual(2);
  });

  it('low priority takes spare capacity only: never the last slot of a lane, which normal work still gets', async () => {
    const clock = new FakeClock(T0);
    const gate = createGate();
    const queue = new InProcessQueue({ clock });
    const service = createGenerationService({
      providers: [{ models: [fakeModel({ modelId: 'laned' })], capacity: { lane: 'spare-test', concurrency: 2 }, generate: async (input, ctx) => gate.script(input, ctx) }],
      clock,
      queue,
      ledger: new MemoryLedger({ balances: { ann: 100 }, clock }),
      recovery: { intervalMs: 0 },
    });
    await service.start();
    cleanups.push(async () => {
      gate.open();
      await service.stop({ timeoutMs: 100 });
    });
    const first = await service.create('ann', { modelId: 'laned' });
    await gate.reached(1);
    const low = await service.create('ann', { modelId: 'laned', priority: 'low' });
    await until(() => queue.active === 1, 'the low one to be handed back');
    expect((await service.details('ann', low.generationId)).status).toBe('pending');
    const second = await service.create('ann', { modelId: 'laned' });
    await gate.reached(2);
    expect((await service.details('ann', second.generationId)).status).toBe('processing');
    expect((await service.details('ann', low.generationId)).status).toBe('pending');
    gate.open();
    await stepClockUntil(clock, [queue], async () => (await service.details('ann', low.generationId)).status === 'completed');
    expect((await service.details('ann', first.generationId)).status).toBe('completed');
  });

  it("storing a file result is not a request of the lane (only the provider's calls are)", async () => {
    const clock = new FakeClock(T0);
    const service = createGenerationService({
      providers: [{ models: [fakeModel({ modelId: 'pic', resultType: 'image' })], capacity: { lane: 'one-a-minute', requestsPerMinute: 1 }, generate: async () => ({ bytes: new Uint8Array([1, 2, 3]), mimeType: 'image/png' }) }],
      clock,
      ledger: new MemoryLedger({ balances: { ann: 100 }, clock }),
      publicUrl: 'https://api.example.com/gen',
      recovery: { intervalMs: 0 },
    });
    await service.start();
    cleanups.push(() => service.stop({ timeoutMs: 100 }));
    const { generationId } = await service.create('ann', { modelId: 'pic' });
    // Completed at the same instant: the upload took none of the minute's one request.
    expect(await until(() => service.details('ann', generationId), { accept: (g) => g.status === 'completed' })).toMatchObject({ status: 'completed', price: 1 });
    expect(clock.now()).toBe(T0);
  });

  it('two instances sharing the counters respect one limit', async () => {
    const clock = new FakeClock(T0);
    const up = await upstream(clock);
    const shared = new MemoryCapacityStore();
    const a = await instance(clock, up.url, shared, { concurrency: 2, requestsPerMinute: 30 });
    const b = await instance(clock, up.url, shared, { concurrency: 2, requestsPerMinute: 30 });
    const made = await createMany([a, b], 40);
    await stepClockUntil(clock, [a.queue, b.queue], async () => up.completed >= 30, { maxSteps: 59 });
    expect(up.completed).toBe(30);
    await stepClockUntil(clock, [a.queue, b.queue], async () => (await statuses(made)).completed === 40);
    expect(up.maxInFlight).toBeLessThanOrEqual(2);
    expect(up.maxInWindow()).toBeLessThanOrEqual(30);
  });
});
