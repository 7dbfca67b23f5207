import { afterEach, describe, expect, it } from 'vitest';
import {
  createGenerationService,
  MemoryGenerationStore,
  MemoryLedger,
  ProviderError,
  type GenerationService,
  type RemoteJobProvider,
  type RemoteJobStatus,
} from '@genservice/core';
import type { GenerationContext } from '@genservice/core';
import { FakeClock, until } from '@genservice/testing';
import { stopOn } from './support/fake-time.js';

/** An upstream that runs jobs for `checksToFinish` checks, and counts every call. */
function upstream(options: { checksToFinish?: number; startFailures?: number; result?: (id: string) => RemoteJobStatus } = {}) {
  const jobs = new Map<string, { checks: number; cancelled: boolean }>();
  const calls = { start: 0, check: 0, cancel: 0 };
  let startFailures = options.startFailures ?? 0;
  let next = 0;
  const provider: RemoteJobProvider = {
    models: [{ modelId: 'remote', title: 'Remote', resultType: 'text', estimatedGenerationTime: 0.2, settings: [], price: 10, failureFee: 2 }],
    async start(_input, ctx) {
      calls.start++;
      if (startFailures > 0) {
        startFailures--;
        throw new ProviderError('upstream 503', { retryable: true });
      }
      const id = `job-${++next}`;
      jobs.set(id, { checks: 0, cancelled: false });
      ctx.progress(0.05, 'queued upstream');
      return { handle: { id } };
    },
    async check(handle) {
      calls.check++;
      const job = jobs.get((handle as { id: string }).id)!;
      job.checks++;
      if (job.cancelled) return { status: 'failed', error: new ProviderError('cancelled upstream') };
      if (job.checks < (options.checksToFinish ?? 3)) return { status: 'running', progress: job.checks / 4, message: `step ${job.checks}` };
      return options.result?.((handle as { id: string }).id) ?? { status: 'done', output: { text: `result of ${(handle as { id: string }).id}` } };
    },
    async cancel(handle) {
      calls.cancel++;
      jobs.get((handle as { id: string }).id)!.cancelled = true;
    },
  };
  return { provider, calls, jobs };
}

const services: GenerationService[] = [];
afterEach(async () => {
  await Promise.all(services.splice(0).map((s) => s.stop({ timeoutMs: 100 })));
});

function make(provider: RemoteJobProvider, extra: Record<string, unknown> = {}) {
  const store = (extra.store as MemoryGenerationStore) ?? new MemoryGenerationStore();
  const ledger = (extra.ledger as MemoryLedger) ?? new MemoryLedger({ balances: { alice: 1000 } });
  const service = createGenerationService({ providers: [provider], recovery: { intervalMs: 0 }, runner: { retryBaseDelayMs: 5 }, ...extra, store, ledger });
  services.push(service);
  return { service, store, ledger };
}

const done = (s: GenerationService, id: string) => until(() => s.details('alice', id), { accept: (g) => g.status === 'completed' || g.status === 'failed' });

describe('remote jobs (two-phase providers)', () => {
  it('starts the upstream job once, checks it until done, and settles the price', async () => {
    const up = upstream();
    const { service, store, ledger } = make(up.provider);
    await service.start();
    const { generationId } = await service.create('alice', { modelId: 'remote' });
    const final = await done(service, generationId);
    expect(final).toMatchObject({ status: 'completed', result: 'result of job-1', price: 10 });
    expect(up.calls.start).toBe(1);
    expect(up.calls.check).toBe(3);
    expect(await ledger.account('alice')).toEqual({ balance: 990, reserved: 0, settled: 10 });
    const rec = await store.getById(generationId);
    expect(rec?.remoteHandle).toEqual({ id: 'job-1' });
    expect(rec?.claims).toBe(1);
    // Progress from start and from check reached the log; the planned checks added no processing events.
    const types = (await store.eventsOf(generationId)).map((e) => e.type);
    expect(types[0]).toBe('created');
    expect(types.filter((t) => t === 'processing')).toHaveLength(1);
    expect(types).toContain('progress');
    expect(types.at(-1)).toBe('completed');
  });

  it('holds no concurrency slot between checks: many remote jobs wait at once on a runner of one', async () => {
    const up = upstream({ checksToFinish: 4 });
    const { service } = make(up.provider, { runner: { concurrency: 1, retryBaseDelayMs: 5 } });
    await service.start();
    const ids = [];
    for (let i = 0; i < 20; i++) ids.push((await service.create('alice', { modelId: 'remote' })).generationId);
    // All 20 get started upstream while the first is still running: waiting holds no slot.
    await until(async () => up.calls.start, { accept: (n) => n === 20, timeoutMs: 5000 });
    const results = await Promise.all(ids.map((id) => done(service, id)));
    expect(results.every((r) => r.status === 'completed')).toBe(true);
    expect(up.calls.start).toBe(20);
  });

  it('after a crash resumes checking the same upstream job, never starting another', async () => {
    const up = upstream({ checksToFinish: 6 });
    const store = new MemoryGenerationStore();
    const ledger = new MemoryLedger({ balances: { alice: 1000 } });
    const first = make(up.provider, { store, ledger, instanceId: 'first' });
    await first.service.start();
    const { generationId } = await first.service.create('alice', { modelId: 'remote' });
    await until(() => store.getById(generationId), { accept: (r) => r?.remoteHandle !== undefined && r.parkedUntil !== undefined });
    // The instance dies: its in-process timers are gone with it.
    await first.service.stop({ timeoutMs: 10 });
    services.splice(services.indexOf(first.service), 1);
    const second = make(up.provider, { store, ledger, instanceId: 'second' });
    await second.service.start(); // recovery reschedules the parked check
    const final = await done(second.service, generationId);
    expect(final.status).toBe('completed');
    expect(up.calls.start).toBe(1);
    expect(await ledger.account('alice')).toEqual({ balance: 990, reserved: 0, settled: 10 });
  });

  it('retries a start that failed retryably, and charges once', async () => {
    const up = upstream({ startFailures: 2 });
    const { service } = make(up.provider);
    await service.start();
    const { generationId } = await service.create('alice', { modelId: 'remote' });
    expect((await done(service, generationId)).status).toBe('completed');
    expect(up.calls.start).toBe(3);
    expect(up.jobs.size).toBe(1);
  });

  it('cancels the upstream job when its owner cancels, and charges the failure fee', async () => {
    const up = upstream({ checksToFinish: 1000 });
    const { service, ledger } = make(up.provider);
    await service.start();
    const { generationId } = await service.create('alice', { modelId: 'remote' });
    await until(async () => up.calls.check, { accept: (n) => n >= 1 });
    const out = await service.cancel('alice', generationId);
    expect(out.outcome).toBe('cancelled');
    expect(up.calls.cancel).toBe(1);
    expect(await ledger.account('alice')).toEqual({ balance: 998, reserved: 0, settled: 2 });
    expect((await service.details('alice', generationId)).error?.code).toBe('cancelled');
  });

  it('fails with timeout past the model time limit counted from the first start, and cancels upstream', async () => {
    const up = upstream({ checksToFinish: 1_000_000 });
    up.provider.models[0]!.timeoutMs = 600;
    const { service } = make(up.provider);
    await service.start();
    const { generationId } = await service.create('alice', { modelId: 'remote' });
    const final = await done(service, generationId);
    expect(final).toMatchObject({ status: 'failed', price: 2, error: { code: 'timeout' } });
    expect(up.calls.cancel).toBe(1);
  });

  it("reports an upstream failure with the provider's public message", async () => {
    const up = upstream({
      checksToFinish: 1,
      result: () => ({ status: 'failed', error: new ProviderError('NSFW filter tripped (internal id 77)', { publicMessage: 'The prompt was refused by the model.' }) }),
    });
    const { service } = make(up.provider);
    await service.start();
    const { generationId } = await service.create('alice', { modelId: 'remote' });
    const final = await done(service, generationId);
    expect(final).toMatchObject({ status: 'failed', price: 2, error: { code: 'provider_error', message: 'The prompt was refused by the model.' } });
    expect(JSON.stringify(final)).not.toContain('internal id');
  });
});

describe('in-flight cap per user', () => {
  it('answers 429 rate_limited with Retry-After past limits.inFlightPerUser; exact under 40 racing creates', async () => {
    const up = upstream({ checksToFinish: 1_000_000 });
    const { service, ledger } = make(up.provider, { limits: { inFlightPerUser: 3 }, apiKeys: undefined });
    const results = await Promise.allSettled(Array.from({ length: 40 }, () => service.create('alice', { modelId: 'remote' })));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(3);
    const refused = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    expect(refused).toHaveLength(37);
    for (const r of refused) expect(r.reason).toMatchObject({ code: 'rate_limited', retryAfterSeconds: 1 });
    // Only the three are charged.
    expect(await ledger.account('alice')).toMatchObject({ reserved: 30, balance: 970 });
  });
});

describe('leases of remote jobs', () => {
  it("does not abort a job's next check on this instance for a renewal that answered about its previous turn", async () => {
    // A gate the test opens: one per step it must order.
    const gate = () => {
      let open!: () => void;
      const shut = new Promise<void>((r) => (open = r));
      return { shut, open };
    };
    const [firstCheck, renewAsked, renewRead, renewAnswer, secondCheck] = [gate(), gate(), gate(), gate(), gate()];
    let checks = 0;
    const checking: { signal?: AbortSignal; called: boolean }[] = [{ called: false }, { called: false }];
    const provider: RemoteJobProvider = {
      models: [{ modelId: 'remote', title: 'Remote', resultType: 'text', estimatedGenerationTime: 0.2, settings: [], price: 10 }],
      async start() {
        return { handle: { id: 'job' } };
      },
      async check(_handle, ctx: GenerationContext) {
        const n = checks++;
        checking[n] = { signal: ctx.signal, called: true };
        if (n === 0) {
          await firstCheck.shut;
          return { status: 'running' };
        }
        await secondCheck.shut;
        return { status: 'done', output: { text: 'ok' } };
      },
    };
    // The first renewal is asked while the first turn holds the lease, reads the store after that turn parked, and
    // answers after the next turn claimed it again.
    let renewals = 0;
    let read = false;
    class SlowRenewal extends MemoryGenerationStore {
      override async renewLeases(...args: Parameters<MemoryGenerationStore['renewLeases']>): Promise<string[]> {
        if (renewals++ > 0) return super.renewLeases(...args);
        renewAsked.open();
        await renewRead.shut;
        const renewed = await super.renewLeases(...args);
        read = true;
        await renewAnswer.shut;
        return renewed;
      }
    }
    const clock = new FakeClock();
    const store = new SlowRenewal();
    const service = createGenerationService({
      providers: [provider],
      store,
      ledger: new MemoryLedger({ balances: { alice: 1000 } }),
      clock,
      recovery: { intervalMs: 0 },
      runner: { leaseMs: 3000 },
    });
    try {
      await service.start();
      const { generationId } = await service.create('alice', { modelId: 'remote' });
      await until(() => checking[0]!.called);
      await clock.advance(1000); // the renewal timer: the first turn holds the lease
      await renewAsked.shut;
      firstCheck.open(); // still running upstream: the turn parks (its lease let go) and ends
      await until(() => store.getById(generationId), { accept: (g) => g?.parkedUntil !== undefined });
      renewRead.open();
      await until(() => read);
      await clock.advance(250); // the next check is due: a new turn on this instance claims it again
      await until(() => checking[1]!.called);
      renewAnswer.open(); // the renewal of the parked turn answers: not renewed
      for (let turn = 0; turn < 10; turn++) await new Promise<void>((r) => setImmediate(r));
      expect(checking[1]!.signal!.aborted).toBe(false);
      secondCheck.open();
      const final = await until(() => service.details('alice', generationId), { accept: (g) => g.status === 'completed' || g.status === 'failed' });
      expect(final).toMatchObject({ status: 'completed', price: 10 });
      expect((await store.getById(generationId))?.claims).toBe(1);
    } finally {
      firstCheck.open();
      renewRead.open();
      renewAnswer.open();
      secondCheck.open();
      await stopOn(clock, service);
    }
  });
});
