/**
 * Time-driven behaviour on a clock the test owns (issue 35, item 4): leases, the progress interval, retry backoff,
 * expiry, key budget windows across a day and a month boundary, the circuit breaker and rate limits. Nothing here
 * sleeps: the service gets a `FakeClock` as its `clock` (or, for the rate limiter that reads `Date.now` itself, vitest's
 * fake timers), and each test moves time to exactly one millisecond before and at the instant a rule changes.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  createGenerationService,
  MemoryApiKeyStore,
  MemoryGenerationStore,
  MemoryLedger,
  ProviderError,
  type GenerationContext,
  type GenerationOutput,
  type GenerationService,
  type GenerationServiceOptions,
  type HttpRequest,
  type ModelDefinition,
  type ModelProvider,
} from '@genservice/core';
import { FakeClock, until } from '@genservice/testing';
import { stopOn } from './support/fake-time.js';

const T0 = Date.UTC(2026, 0, 15, 12, 0, 0);

const model = (over: Partial<ModelDefinition> = {}): ModelDefinition => ({
  modelId: 'm',
  title: 'M',
  resultType: 'text',
  estimatedGenerationTime: 1,
  settings: [],
  price: 10,
  failureFee: 2,
  ...over,
});

const provider = (models: ModelDefinition[], generate: (ctx: GenerationContext, modelId: string) => Promise<GenerationOutput>): ModelProvider => ({
  models,
  generate: (input, ctx) => generate(ctx, input.model.modelId),
});

/** A promise and its resolver, for a provider to tell the test what happened (and for the test to let it go on). */
function signal<T = void>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

const running: Array<{ service: GenerationService; clock: FakeClock }> = [];
afterEach(async () => {
  for (const { service, clock } of running.splice(0)) await stopOn(clock, service);
});

function make(clock: FakeClock, options: Partial<GenerationServiceOptions> & { providers: ModelProvider[] }): GenerationService {
  const service = createGenerationService({
    apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'ka', userId: 'alice' }], clock }),
    ledger: new MemoryLedger({ balances: { alice: 1000 }, clock }),
    recovery: { intervalMs: 0 },
    ...options,
    clock,
  });
  running.push({ service, clock });
  return service;
}

/**
 * For tests that move the clock by days: the event feed's and webhook sender's polls (1 s by default) and the sweep
 * run hourly, so a day is a few dozen timer runs rather than two hundred thousand.
 */
const hourly = {
  push: { pollIntervalMs: 3_600_000 },
  webhooks: { pollIntervalMs: 3_600_000 },
} satisfies Partial<GenerationServiceOptions>;

const get = (service: GenerationService, id: string, key = 'ka') =>
  service.handle({ method: 'GET', path: `/v1/generations/${id}`, headers: { authorization: `Bearer ${key}` } });

describe('leases on a fake clock', () => {
  it('a lease a stalled worker stopped renewing expires at leaseMs; recovery then requeues it and another worker completes it', async () => {
    const leaseMs = 1_000;
    const store = new MemoryGenerationStore();
    const ledger = new MemoryLedger({ balances: { alice: 100 } });
    // Worker A's process is frozen: its clock never moves, so it neither renews its lease nor times the run out.
    const frozen = new FakeClock(T0);
    const startedOnA = signal();
    const releaseA = signal();
    const a = make(frozen, {
      store,
      ledger,
      runner: { leaseMs },
      providers: [
        provider([model()], async () => {
          startedOnA.resolve();
          await releaseA.promise;
          return { text: 'from A' };
        }),
      ],
    });
    const clock = new FakeClock(T0);
    let callsOnB = 0;
    const b = make(clock, {
      store,
      ledger,
      runner: { leaseMs },
      recovery: { intervalMs: 100 },
      providers: [
        provider([model()], async () => {
          callsOnB++;
          return { text: 'from B' };
        }),
      ],
    });
    await a.start();
    const { generationId } = await a.create('alice', { modelId: 'm' });
    await startedOnA.promise;
    expect(await store.getById(generationId)).toMatchObject({ status: 'processing', claims: 1, leaseExpiresAt: T0 + leaseMs });
    await b.start();
    // Recovery passes every 100 ms up to 1 ms before the lease ends: each sees a live lease and leaves it.
    await clock.advance(leaseMs - 1);
    expect(callsOnB).toBe(0);
    expect(await store.getById(generationId)).toMatchObject({ status: 'processing', claims: 1 });
    // At the instant it ends, the next pass requeues it and B claims and completes it.
    await clock.advance(1);
    expect(await until(() => b.get('alice', generationId), { accept: (g) => g.status === 'completed' })).toEqual({ status: 'completed', result: 'from B', price: 10 });
    expect(callsOnB).toBe(1);
    expect(await store.getById(generationId)).toMatchObject({ claims: 2 });
    // A wakes up with a result for a lease it lost: refused, and nothing is charged twice.
    releaseA.resolve();
    await a.stop({ timeoutMs: 100 });
    expect(await b.get('alice', generationId)).toEqual({ status: 'completed', result: 'from B', price: 10 });
    expect(await ledger.account('alice')).toEqual({ balance: 90, reserved: 0, settled: 10 });
  });

  it('a worker that keeps running renews its lease, so recovery never takes the generation while it runs', async () => {
    const leaseMs = 1_000;
    const clock = new FakeClock(T0);
    const store = new MemoryGenerationStore();
    const started = signal();
    const release = signal();
    let calls = 0;
    const service = make(clock, {
      store,
      runner: { leaseMs },
      recovery: { intervalMs: 100 },
      providers: [
        provider([model({ timeoutMs: 60_000 })], async () => {
          calls++;
          started.resolve();
          await release.promise;
          return { text: 'done' };
        }),
      ],
    });
    await service.start();
    const { generationId } = await service.create('alice', { modelId: 'm' });
    await started.promise;
    // Ten lease lengths: the renewal every leaseMs/3 keeps it ahead of every recovery pass.
    for (let i = 0; i < 10; i++) await clock.advance(leaseMs);
    const rec = await store.getById(generationId);
    expect(rec).toMatchObject({ status: 'processing', claims: 1 });
    expect(rec!.leaseExpiresAt).toBeGreaterThan(clock.now());
    expect(calls).toBe(1);
    release.resolve();
    expect(await until(() => service.get('alice', generationId), { accept: (g) => g.status === 'completed' })).toMatchObject({ result: 'done' });
  });
});

describe('the progress interval on a fake clock', () => {
  it('writes the first report at once and at most one a second after it, the latest value winning', async () => {
    const clock = new FakeClock(T0);
    const store = new MemoryGenerationStore();
    let ctx!: GenerationContext;
    const started = signal();
    const release = signal();
    const service = make(clock, {
      store,
      providers: [
        provider([model({ timeoutMs: 60_000 })], async (c) => {
          ctx = c;
          started.resolve();
          await release.promise;
          return { text: 'done' };
        }),
      ],
    });
    await service.start();
    const { generationId } = await service.create('alice', { modelId: 'm' });
    await started.promise;
    const progress = async () => (await store.eventsOf(generationId)).filter((e) => e.type === 'progress').map((e) => ({ at: e.at - T0, ...(e.data as object) }));

    for (let i = 1; i <= 50; i++) ctx.progress(i / 100, `step ${i}`);
    await clock.advance(0);
    expect(await progress()).toEqual([{ at: 0, fraction: 0.01, message: 'step 1' }]);
    // The 49 others wait for the end of the interval: nothing more 1 ms before it, the latest one at it.
    await clock.advance(999);
    expect(await progress()).toHaveLength(1);
    await clock.advance(1);
    expect(await progress()).toEqual([
      { at: 0, fraction: 0.01, message: 'step 1' },
      { at: 1000, fraction: 0.5, message: 'step 50' },
    ]);
    // A report 1.5 s later is past the interval: written at once.
    await clock.advance(1500);
    ctx.progress(0.6);
    await clock.advance(0);
    expect((await progress()).map((p) => p.at)).toEqual([0, 1000, 2500]);
    // Reports every 100 ms from 2.6 s to 4.5 s: one write a second, at the end of each interval, with the latest
    // report before it (the one at 3.4 s, then at 4.4 s); the report at 4.5 s waits for the next interval's end.
    const value = (at: number) => 0.6 + (at - 2500) / 10_000;
    for (let at = 2600; at <= 4500; at += 100) {
      await clock.advance(100);
      ctx.progress(value(at));
    }
    expect((await progress()).slice(3)).toEqual([
      { at: 3500, fraction: value(3400) },
      { at: 4500, fraction: value(4400) },
    ]);
    await clock.advance(999);
    expect(await progress()).toHaveLength(5);
    await clock.advance(1);
    expect((await progress()).slice(5)).toEqual([{ at: 5500, fraction: value(4500) }]);
    release.resolve();
    await until(() => service.get('alice', generationId), { accept: (g) => g.status === 'completed' });
    // None after the run ended, however long one waits.
    ctx.progress(0.99);
    await clock.advance(5000);
    expect(await progress()).toHaveLength(6);
  });
});

describe('retries with backoff on a fake clock', () => {
  it('calls the provider again exactly retryBaseDelayMs, then 2x, then 4x later (capped by retryMaxDelayMs), never before', async () => {
    const clock = new FakeClock(T0);
    const calls: number[] = [];
    let called = signal();
    const service = make(clock, {
      runner: { retryBaseDelayMs: 100, retryMaxDelayMs: 300 },
      providers: [
        provider([model({ maxAttempts: 5, timeoutMs: 60_000 })], async () => {
          calls.push(clock.now() - T0);
          called.resolve();
          if (calls.length < 5) throw new ProviderError('busy', { retryable: true });
          return { text: 'ok' };
        }),
      ],
    });
    await service.start();
    const { generationId } = await service.create('alice', { modelId: 'm' });
    await called.promise;
    // Delays 100, 200, then 400 capped at 300, and 300 again.
    for (const delay of [100, 200, 300, 300]) {
      const before = calls.length;
      called = signal();
      await clock.advance(delay - 1);
      expect(calls).toHaveLength(before);
      await clock.advance(1);
      await called.promise;
      expect(calls).toHaveLength(before + 1);
    }
    expect(calls).toEqual([0, 100, 300, 600, 900]);
    expect(await until(() => service.get('alice', generationId), { accept: (g) => g.status === 'completed' })).toEqual({ status: 'completed', result: 'ok', price: 10 });
  });

  it('fails with the failure fee after maxAttempts, the last attempt at the end of its backoff', async () => {
    const clock = new FakeClock(T0);
    const calls: number[] = [];
    const service = make(clock, {
      runner: { retryBaseDelayMs: 1000 },
      providers: [
        provider([model({ maxAttempts: 3, timeoutMs: 60_000 })], async () => {
          calls.push(clock.now() - T0);
          throw new ProviderError('busy', { retryable: true });
        }),
      ],
    });
    await service.start();
    const { generationId } = await service.create('alice', { modelId: 'm' });
    await until(async () => calls.length, { accept: (n) => n === 1 });
    await clock.advance(2999);
    expect(calls).toEqual([0, 1000]);
    expect((await service.get('alice', generationId)).status).toBe('processing');
    await clock.advance(1);
    expect(await until(() => service.get('alice', generationId), { accept: (g) => g.status === 'failed' })).toEqual({ status: 'failed', price: 2 });
    expect(calls).toEqual([0, 1000, 3000]);
  });
});

describe('expiry on a fake clock', () => {
  it('retention.finishedTtlMs: readable 1 ms before it ends, 404 (like a deleted one) at it; the sweep then removes it', async () => {
    const clock = new FakeClock(T0);
    const store = new MemoryGenerationStore();
    const ttl = 60_000;
    const service = make(clock, {
      store,
      retention: { finishedTtlMs: ttl, sweepIntervalMs: 30_000 },
      providers: [provider([model()], async () => ({ text: 'ok' }))],
    });
    await service.start();
    const { generationId } = await service.create('alice', { modelId: 'm' });
    const rec = await until(() => store.getById(generationId), { accept: (g) => g?.status === 'completed' });
    expect(rec!.finishedAt).toBe(T0);
    expect((await service.details('alice', generationId)).expiresAt).toBe(new Date(T0 + ttl).toISOString());
    await clock.advance(ttl - 1);
    expect((await get(service, generationId)).status).toBe(200);
    expect((await service.list('alice', {})).data).toHaveLength(1);
    // The sweep at 30 s found nothing expired; the record is still there.
    expect(await store.getById(generationId)).not.toBeNull();
    await clock.advance(1);
    const gone = await get(service, generationId);
    expect(gone.status).toBe(404);
    expect(gone.body).toBe((await get(service, 'A'.repeat(22))).body);
    expect((await service.list('alice', {})).data).toEqual([]);
    // Expired but not yet swept (the sweep at 60 s ran just before this read's instant or at it; the next is at 90 s).
    await clock.advance(30_000);
    expect(await store.getById(generationId)).toBeNull();
  });

  it('expiresAfterSeconds at create: readable 1 ms before its life ends, 404 at it, while another generation lives on', async () => {
    const clock = new FakeClock(T0);
    const store = new MemoryGenerationStore();
    const service = make(clock, { ...hourly, store, retention: { sweepIntervalMs: 3_600_000 }, providers: [provider([model()], async () => ({ text: 'ok' }))] });
    await service.start();
    const short = await service.create('alice', { modelId: 'm', expiresAfterSeconds: 30 });
    const forever = await service.create('alice', { modelId: 'm' });
    for (const id of [short.generationId, forever.generationId]) await until(() => store.getById(id), { accept: (g) => g?.status === 'completed' });
    expect((await service.details('alice', short.generationId)).expiresAt).toBe(new Date(T0 + 30_000).toISOString());
    await clock.advance(29_999);
    expect((await get(service, short.generationId)).status).toBe(200);
    await clock.advance(1);
    expect((await get(service, short.generationId)).status).toBe(404);
    expect((await get(service, forever.generationId)).status).toBe(200);
    await clock.advance(86_400_000);
    expect((await get(service, forever.generationId)).status).toBe(200);
  });
});

describe('key budget windows on a fake clock', () => {
  async function withBudget(start: number, period: 'day' | 'month') {
    const clock = new FakeClock(start);
    // The service's own in-memory ledger and key store: both take the service's clock.
    const service = make(clock, {
      ...hourly,
      apiKeys: undefined,
      ledger: undefined,
      retention: { sweepIntervalMs: 3_600_000 },
      providers: [provider([model({ price: 10 })], async () => ({ text: 'ok' }))],
    });
    await service.start();
    await service.accounts.createUser({ userId: 'alice', balance: 1000 });
    const key = await service.accounts.createKey('alice', { name: 'ci', budget: { amount: 10, period } });
    const create = async (): Promise<{ status: number; code?: string; message?: string }> => {
      const res = await service.handle({
        method: 'POST',
        path: '/v1/generations',
        headers: { authorization: `Bearer ${key.apiKey}`, 'content-type': 'application/json' },
        body: '{"modelId":"m"}',
      });
      const body = JSON.parse(String(res.body)) as { error?: { code: string; message: string } };
      return { status: res.status, ...(body.error ? { code: body.error.code, message: body.error.message } : {}) };
    };
    return { clock, service, create };
  }

  it('a daily budget spent at 23:59 UTC refuses until 23:59:59.999 and creates again at 00:00', async () => {
    const { clock, create } = await withBudget(Date.UTC(2026, 0, 15, 23, 59), 'day');
    expect((await create()).status).toBe(201);
    const refused = await create();
    expect(refused).toMatchObject({ status: 402, code: 'budget_exceeded' });
    expect(refused.message).toContain('resets at 2026-01-16T00:00:00.000Z');
    await clock.advanceTo(Date.UTC(2026, 0, 16) - 1);
    expect(await create()).toMatchObject({ status: 402, code: 'budget_exceeded' });
    await clock.advance(1);
    expect((await create()).status).toBe(201);
    expect(await create()).toMatchObject({ status: 402, code: 'budget_exceeded' });
  });

  it('a monthly budget survives the turn of a day and resets at the turn of the month (31 January to 1 February)', async () => {
    const { clock, service, create } = await withBudget(Date.UTC(2026, 0, 30, 23, 59), 'month');
    expect((await create()).status).toBe(201);
    // A new day in the same month: still spent.
    await clock.advanceTo(Date.UTC(2026, 0, 31));
    expect(await create()).toMatchObject({ status: 402, code: 'budget_exceeded' });
    await clock.advanceTo(Date.UTC(2026, 0, 31, 23, 59, 59, 999));
    const refused = await create();
    expect(refused).toMatchObject({ status: 402, code: 'budget_exceeded' });
    expect(refused.message).toContain('resets at 2026-02-01T00:00:00.000Z');
    await clock.advance(1);
    expect((await create()).status).toBe(201);
    expect(await create()).toMatchObject({ status: 402, code: 'budget_exceeded' });
    // Two windows spent, each once: the balance shows exactly two charges.
    await until(() => service.accounts.usage('alice', { from: '2026-01-01', to: '2026-02-28' }), { accept: (u) => u.total.count === 2 });
  });

  it('a daily budget crossing the turn of the year and of a month at once (31 December 23:59 UTC)', async () => {
    const { clock, create } = await withBudget(Date.UTC(2025, 11, 31, 23, 59), 'day');
    expect((await create()).status).toBe(201);
    expect((await create()).status).toBe(402);
    await clock.advance(60_000 - 1);
    expect((await create()).status).toBe(402);
    await clock.advance(1);
    expect((await create()).status).toBe(201);
  });
});

describe('the circuit breaker on a fake clock', () => {
  it('opens after failureThreshold retryable failures, stays open openMs, then lets one trial through (half-open)', async () => {
    const clock = new FakeClock(T0);
    const calls = { main: 0, backup: 0 };
    let mainFails = true;
    const service = make(clock, {
      runner: { circuit: { failureThreshold: 2, openMs: 10_000 } },
      providers: [
        provider([model({ modelId: 'main', maxAttempts: 1, fallbacks: ['backup'] })], async () => {
          calls.main++;
          if (mainFails) throw new ProviderError('outage', { retryable: true });
          return { text: 'from main' };
        }),
        provider([model({ modelId: 'backup' })], async () => {
          calls.backup++;
          return { text: 'from backup' };
        }),
      ],
    });
    await service.start();
    const run = async (): Promise<string | undefined> => {
      const { generationId } = await service.create('alice', { modelId: 'main' });
      return (await until(() => service.get('alice', generationId), { accept: (g) => g.status === 'completed' })).result;
    };
    // Two failures in a row (the threshold) open the circuit; each generation is served by the fallback.
    expect(await run()).toBe('from backup');
    expect(await run()).toBe('from backup');
    expect(calls).toEqual({ main: 2, backup: 2 });
    // Open: main is not called at all, up to 1 ms before openMs has passed.
    expect(await run()).toBe('from backup');
    await clock.advance(10_000 - 1);
    expect(await run()).toBe('from backup');
    expect(calls).toEqual({ main: 2, backup: 4 });
    // Half-open at openMs: one trial; it fails, so the circuit opens for another full openMs.
    await clock.advance(1);
    expect(await run()).toBe('from backup');
    expect(calls).toEqual({ main: 3, backup: 5 });
    await clock.advance(10_000 - 1);
    expect(await run()).toBe('from backup');
    expect(calls).toEqual({ main: 3, backup: 6 });
    // The next trial succeeds and closes it: main serves again, every time.
    mainFails = false;
    await clock.advance(1);
    expect(await run()).toBe('from main');
    expect(await run()).toBe('from main');
    expect(calls).toEqual({ main: 5, backup: 6 });
  });
});

describe('rate limits on vitest fake timers (rate-limiter-flexible reads Date.now itself)', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('refuses the request past the window budget until the window ends, then allows it again', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'], now: T0 });
    // The default clock follows the fake timers (it reads Date.now and the global timers at each call).
    const service = createGenerationService({
      providers: [provider([model({ price: 1 })], async () => ({ text: 'ok' }))],
      apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'ka', userId: 'alice' }] }),
      ledger: new MemoryLedger({ balances: { alice: 100 } }),
      recovery: { intervalMs: 0 },
      rateLimits: { read: { points: 2, durationSeconds: 60 } },
    });
    const read: HttpRequest = { method: 'GET', path: '/v1/balance', headers: { authorization: 'Bearer ka' }, remoteAddress: '203.0.113.7' };
    expect((await service.handle(read)).status).toBe(200);
    await vi.advanceTimersByTimeAsync(30_000);
    expect((await service.handle(read)).status).toBe(200);
    const limited = await service.handle(read);
    expect(limited.status).toBe(429);
    // The window started with the first request: 30 s of it are left.
    expect(limited.headers['retry-after']).toBe('30');
    await vi.advanceTimersByTimeAsync(30_000 - 1);
    expect((await service.handle(read)).status).toBe(429);
    await vi.advanceTimersByTimeAsync(1);
    const again = await service.handle(read);
    expect(again.status).toBe(200);
    expect(again.headers.ratelimit).toBe('"read";r=1;t=60');
  });
});
