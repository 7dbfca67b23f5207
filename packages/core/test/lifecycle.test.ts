import { afterEach, describe, expect, it } from 'vitest';
import {
  createGenerationService,
  MemoryApiKeyStore,
  MemoryGenerationStore,
  MemoryIdempotencyStore,
  MemoryLedger,
  ProviderError,
  type GenerationRecord,
  type GenerationContext,
  type GenerationOutput,
  type GenerationService,
  type ModelDefinition,
} from '@genservice/core';
import type { GenerationChange } from '@genservice/core/ports';
import { FakeClock, until } from '@genservice/testing';
import { stopOn } from './support/fake-time.js';

const model = (over: Partial<ModelDefinition> = {}): ModelDefinition => ({
  modelId: 'm',
  title: 'M',
  resultType: 'text',
  estimatedGenerationTime: 0.01,
  settings: [{ name: 'prompt', title: 'Prompt', fieldType: 'text', required: true }],
  price: 10,
  failureFee: 3,
  ...over,
});

const services: GenerationService[] = [];
/** The fake clock of a service that has one (its stop waits on it). */
const clocks = new Map<GenerationService, FakeClock>();
afterEach(async () => {
  await Promise.all(
    services.splice(0).map((s) => {
      const clock = clocks.get(s);
      clocks.delete(s);
      return clock ? stopOn(clock, s) : s.stop({ timeoutMs: 100 });
    }),
  );
});

function make(
  generate: (ctx: GenerationContext) => Promise<GenerationOutput>,
  extra: Parameters<typeof createGenerationService>[0] extends infer O ? Partial<O> : never = {},
  models: ModelDefinition[] = [model()],
) {
  const ledger = (extra.ledger as MemoryLedger | undefined) ?? new MemoryLedger({ balances: { alice: 100 } });
  const store = (extra.store as MemoryGenerationStore | undefined) ?? new MemoryGenerationStore();
  const service = createGenerationService({
    providers: [{ models, generate: (_input, ctx) => generate(ctx) }],
    apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'ka', userId: 'alice' }] }),
    runner: { retryBaseDelayMs: 5, leaseMs: 200 },
    recovery: { intervalMs: 0 },
    ...extra,
    ledger,
    store,
  });
  services.push(service);
  if (extra.clock instanceof FakeClock) clocks.set(service, extra.clock);
  return { service, ledger, store };
}

const terminal = (s: GenerationService, id: string) => until(() => s.details('alice', id), { accept: (g) => g.status === 'completed' || g.status === 'failed' });

describe('hostile-review defects', () => {
  it('charges a cancel by the state the store moved from, even when a worker claims between the read and the fail', async () => {
    // A store that lets a worker claim the generation just before the cancel's fail lands: the old code read
    // `pending` first and cancelled a processing generation for 0.
    class ClaimFirst extends MemoryGenerationStore {
      override async update(id: string, change: GenerationChange): Promise<GenerationRecord | null> {
        if (change.set.status === 'failed' && change.expect.status.includes('pending')) {
          const now = Date.now();
          await super.update(id, { expect: { status: ['pending'] }, set: { status: 'processing', claims: 1, leaseOwner: 'other-worker', leaseExpiresAt: now + 60_000 }, event: { type: 'processing', data: { claim: 1 } }, now });
        }
        return super.update(id, change);
      }
    }
    const { service, ledger } = make(async () => ({ text: 'never' }), { store: new ClaimFirst(), runner: { enabled: false } });
    await service.start();
    const { generationId } = await service.create('alice', { modelId: 'm', settings: { prompt: 'x' } });
    const out = await service.cancel('alice', generationId);
    expect(out).toEqual({ outcome: 'cancelled', generation: { status: 'failed', price: 3 } });
    expect(await ledger.account('alice')).toEqual({ balance: 97, reserved: 0, settled: 3 });
    expect((await service.details('alice', generationId)).error).toEqual({ code: 'cancelled', message: expect.any(String) });
  });

  it('records as the price of a failure what was settled: a failure fee above the reserve is cut to it', async () => {
    // A discounted (or cheap) generation whose model's failure fee is more than its reserve: the ledger can settle at
    // most the reserve, so that is the price the client must read (and a batch sums).
    const { service, ledger } = make(
      async () => {
        throw new ProviderError('upstream broke', { retryable: false });
      },
      {},
      [model({ price: 2, failureFee: 3 })],
    );
    await service.start();
    const { generationId } = await service.create('alice', { modelId: 'm', settings: { prompt: 'x' } });
    const done = await terminal(service, generationId);
    expect(await ledger.account('alice')).toEqual({ balance: 98, reserved: 0, settled: 2 });
    expect(done).toMatchObject({ status: 'failed', price: 2 });
  });

  for (const price of [Number.NaN, -1, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, '5' as unknown as number]) {
    it(`fails a generation whose provider priced it at ${String(price)}, charging the failure fee`, async () => {
      const { service, ledger } = make(async () => ({ text: 'ok', price }));
      await service.start();
      const { generationId } = await service.create('alice', { modelId: 'm', settings: { prompt: 'x' } });
      const done = await terminal(service, generationId);
      expect(done).toMatchObject({ status: 'failed', price: 3, error: { code: 'provider_error' } });
      expect(await ledger.account('alice')).toEqual({ balance: 97, reserved: 0, settled: 3 });
    });
  }

  it("refuses more media URLs than the model's own maxItems with a 400, and a maxItems above the service limit at startup", async () => {
    const remix = model({
      modelId: 'remix',
      settings: [{ name: 'images', title: 'Images', fieldType: 'image', required: true, maxItems: 4 }],
    });
    const { service, ledger } = make(async () => ({ text: 'ok' }), {}, [remix]);
    const urls = (n: number) => Array.from({ length: n }, (_, i) => `https://example.com/${i}.png`);
    await expect(service.create('alice', { modelId: 'remix', settings: { images: urls(5) } })).rejects.toMatchObject({
      code: 'invalid_settings',
      details: [{ field: 'settings.images', code: 'too_many', message: 'at most 4 items' }],
    });
    expect(await ledger.balance('alice')).toBe(100);
    await expect(service.create('alice', { modelId: 'remix', settings: { images: urls(4) } })).resolves.toHaveProperty('generationId');
    // The listing keeps the contract's exact descriptor fields.
    expect(service.listModels()[0]!.settings[0]).toStrictEqual({ name: 'images', title: 'Images', fieldType: 'image', required: true });
    expect(() =>
      createGenerationService({
        providers: [{ models: [model({ settings: [{ name: 'images', title: 'Images', fieldType: 'image', maxItems: 11 }] })], generate: async () => ({ text: '' }) }],
      }),
    ).toThrow(/more than limits.mediaUrls/);
  });
});

describe('Idempotency-Key after a crash', () => {
  const body = { modelId: 'm', settings: { prompt: 'x' } };

  it('returns the generation a crashed request stored, once a lease time has passed', async () => {
    const idempotency = new MemoryIdempotencyStore();
    const store = new MemoryGenerationStore();
    const ledger = new MemoryLedger({ balances: { alice: 100 } });
    // The first instance stores the generation, then "crashes" before recording it under the key: finish is lost.
    class LoseFinish extends MemoryIdempotencyStore {
      override async finish(): Promise<boolean> {
        throw new Error('process killed');
      }
      override async begin(...args: Parameters<MemoryIdempotencyStore['begin']>) {
        return idempotency.begin(...args);
      }
      override async abandon(): Promise<void> {
        // killed: nothing runs after the crash
      }
    }
    // Both instances on one clock: the lease time passes when the test moves it.
    const clock = new FakeClock();
    const first = make(async () => ({ text: 'done' }), { idempotency: new LoseFinish(), store, ledger, clock, runner: { enabled: false, leaseMs: 200 } });
    await expect(first.service.create('alice', body, { idempotencyKey: 'k' })).rejects.toThrow('process killed');
    const [stored] = await store.list('alice', { limit: 10 });
    expect(stored).toBeDefined();

    const second = make(async () => ({ text: 'done' }), { idempotency, store, ledger, clock, runner: { leaseMs: 200 } });
    await second.service.start();
    // Within the lease time the first request may still be alive: 409, up to the lease time's last millisecond.
    await expect(second.service.create('alice', body, { idempotencyKey: 'k' })).rejects.toMatchObject({ code: 'idempotency_conflict' });
    await clock.advance(200);
    await expect(second.service.create('alice', body, { idempotencyKey: 'k' })).rejects.toMatchObject({ code: 'idempotency_conflict' });
    await clock.advance(1);
    const again = await second.service.create('alice', body, { idempotencyKey: 'k' });
    expect(again.generationId).toBe(stored!.id);
    expect((await terminal(second.service, again.generationId)).status).toBe('completed');
    // And from then on it is simply done.
    expect(await second.service.create('alice', body, { idempotencyKey: 'k' })).toEqual(again);
    expect(await ledger.account('alice')).toEqual({ balance: 90, reserved: 0, settled: 10 });
    expect(await store.list('alice', { limit: 10 })).toHaveLength(1);
  });

  it('takes over a key whose request died before storing anything, under a fresh id', async () => {
    const idempotency = new MemoryIdempotencyStore();
    const ledger = new MemoryLedger({ balances: { alice: 100 } });
    // An instance that dies inside create after begin: its abandon never runs.
    class DiesAfterBegin extends MemoryIdempotencyStore {
      override async begin(...args: Parameters<MemoryIdempotencyStore['begin']>) {
        return idempotency.begin(...args);
      }
      override async abandon(): Promise<void> {}
    }
    class InsertCrashes extends MemoryGenerationStore {
      override async insert(): Promise<'inserted' | 'limit_reached'> {
        throw new Error('process killed');
      }
    }
    const clock = new FakeClock();
    const dead = make(async () => ({ text: 'done' }), { idempotency: new DiesAfterBegin(), ledger, store: new InsertCrashes(), clock, runner: { enabled: false, leaseMs: 200 } });
    await expect(dead.service.create('alice', body, { idempotencyKey: 'k' })).rejects.toThrow('process killed');
    // Its reserve was compensated by the dying request; a real SIGKILL would leave it to recovery as an orphan.
    expect(await ledger.account('alice')).toEqual({ balance: 100, reserved: 0, settled: 0 });

    const live = make(async () => ({ text: 'done' }), { idempotency, ledger, clock, runner: { leaseMs: 200 } });
    await live.service.start();
    await expect(live.service.create('alice', body, { idempotencyKey: 'k' })).rejects.toMatchObject({ code: 'idempotency_conflict' });
    await clock.advance(200);
    await expect(live.service.create('alice', body, { idempotencyKey: 'k' })).rejects.toMatchObject({ code: 'idempotency_conflict' });
    await clock.advance(1);
    const created = await live.service.create('alice', body, { idempotencyKey: 'k' });
    expect((await terminal(live.service, created.generationId)).status).toBe('completed');
    expect(await live.service.create('alice', body, { idempotencyKey: 'k' })).toEqual(created);
    expect(await ledger.account('alice')).toEqual({ balance: 90, reserved: 0, settled: 10 });
  });

  it('never runs the generation of a stalled request whose key a retry took over: one key, one charge', async () => {
    const idempotency = new MemoryIdempotencyStore();
    const ledger = new MemoryLedger({ balances: { alice: 100 } });
    // The stalled request's first insert waits at a barrier (a long GC pause, a lock wait) past a lease time.
    let arrived!: () => void;
    const stalled = new Promise<void>((r) => (arrived = r));
    let resume!: () => void;
    const barrier = new Promise<void>((r) => (resume = r));
    let stallNext = true;
    class StallsOnce extends MemoryGenerationStore {
      private async stall(): Promise<void> {
        if (!stallNext) return;
        stallNext = false;
        arrived();
        await barrier;
      }
      override async insertReserved(...args: Parameters<MemoryGenerationStore['insertReserved']>) {
        await this.stall();
        return super.insertReserved(...args);
      }
      override async insert(...args: Parameters<MemoryGenerationStore['insert']>) {
        await this.stall();
        return super.insert(...args);
      }
    }
    const store = new StallsOnce();
    const generated = new Set<string>();
    const provider = async (ctx: GenerationContext) => {
      generated.add(ctx.generationId);
      return { text: 'done' };
    };
    // The stalled request hears whether it still holds its key only after its generation could have been run (a
    // few turns of the event loop; to its end if it was), as a slow Idempotency store would answer.
    let planned: string | undefined;
    class SlowFinish extends MemoryIdempotencyStore {
      override begin(...args: Parameters<MemoryIdempotencyStore['begin']>) {
        planned = args[4];
        return idempotency.begin(...args);
      }
      override async finish(...args: Parameters<MemoryIdempotencyStore['finish']>): Promise<boolean> {
        for (let turn = 0; turn < 20 && !generated.has(planned!); turn++) await new Promise<void>((r) => setImmediate(r));
        if (generated.has(planned!)) await until(() => store.getById(planned!), { accept: (g) => g?.status === 'completed' || g?.status === 'failed' });
        return idempotency.finish(...args);
      }
      override abandon(...args: Parameters<MemoryIdempotencyStore['abandon']>) {
        return idempotency.abandon(...args);
      }
      override takeOver(...args: Parameters<MemoryIdempotencyStore['takeOver']>) {
        return idempotency.takeOver(...args);
      }
    }
    const clock = new FakeClock();
    const slow = make(provider, { idempotency: new SlowFinish(), store, ledger, clock, runner: { leaseMs: 200 } });
    const live = make(provider, { idempotency, store, ledger, clock, runner: { leaseMs: 200 } });
    await slow.service.start();
    await live.service.start();
    const first = slow.service.create('alice', body, { idempotencyKey: 'k' });
    await stalled;
    await clock.advance(201);
    // The retry takes the key over (the stalled request stored nothing yet) and creates under a fresh id.
    const retried = await live.service.create('alice', body, { idempotencyKey: 'k' });
    expect(retried.generationId).not.toBe(planned);
    expect((await terminal(live.service, retried.generationId)).status).toBe('completed');
    resume();
    // The stalled request wakes, learns it lost its key, and answers the retry's generation.
    expect(await first).toEqual(retried);
    expect(generated.has(planned!)).toBe(false);
    expect(await store.getById(planned!)).toMatchObject({ status: 'failed', price: 0, error: { code: 'cancelled' } });
    expect(await ledger.account('alice')).toEqual({ balance: 90, reserved: 0, settled: 10 });
  });
});

describe('progress', () => {
  it('records at most one progress event a second, the latest value winning, and shows it in details', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let clamped!: () => void;
    const reportedClamped = new Promise<void>((r) => (clamped = r));
    let finish!: () => void;
    const finishing = new Promise<void>((r) => (finish = r));
    // The progress interval runs on the service's clock: the test moves it, so no report races the end of a second.
    const clock = new FakeClock();
    const { service, store } = make(
      async (ctx) => {
        for (let i = 1; i <= 50; i++) ctx.progress(i / 100, `step ${i}`);
        await gate;
        ctx.progress(2, 'clamped');
        clamped();
        await finishing;
        return { text: 'done' };
      },
      { clock },
    );
    await service.start();
    const { generationId } = await service.create('alice', { modelId: 'm', settings: { prompt: 'x' } });
    const first = await until(() => service.details('alice', generationId), { accept: (g) => g.progress !== undefined });
    expect(first.progress).toEqual({ fraction: 0.01, message: 'step 1' });
    // The 49 later reports within the second collapse into one trailing event with the latest value, at its end.
    await clock.advance(999);
    expect((await service.details('alice', generationId)).progress).toEqual({ fraction: 0.01, message: 'step 1' });
    await clock.advance(1);
    expect((await service.details('alice', generationId)).progress).toEqual({ fraction: 0.5, message: 'step 50' });
    release();
    await reportedClamped;
    await clock.advance(1000);
    finish();
    await terminal(service, generationId);
    const events = await store.eventsOf(generationId);
    const progress = events.filter((e) => e.type === 'progress');
    expect(progress.map((e) => e.data)).toEqual([
      { fraction: 0.01, message: 'step 1' },
      { fraction: 0.5, message: 'step 50' },
      { fraction: 1, message: 'clamped' },
    ]);
    expect(progress.map((e) => e.at - progress[0]!.at)).toEqual([0, 1000, 2000]);
    expect(events.map((e) => e.type)).toEqual(['created', 'processing', 'progress', 'progress', 'progress', 'completed']);
  });

  it('ignores progress reported after the run has ended', async () => {
    let late!: GenerationContext;
    const clock = new FakeClock();
    const { service, store } = make(
      async (ctx) => {
        late = ctx;
        return { text: 'done' };
      },
      { clock },
    );
    await service.start();
    const { generationId } = await service.create('alice', { modelId: 'm', settings: { prompt: 'x' } });
    await terminal(service, generationId);
    late.progress(0.9);
    // Past any progress interval, with the writes it would start settled.
    await clock.advance(2000);
    expect((await store.eventsOf(generationId)).map((e) => e.type)).toEqual(['created', 'processing', 'completed']);
  });
});

describe('failure reasons', () => {
  it('shows a ProviderError publicMessage and code, and a generic sentence for anything else', async () => {
    const errors: unknown[] = [
      new ProviderError('upstream 500 with secret token abc', { publicMessage: 'The image service is down; try again later.' }),
      new ProviderError('could not decode', { code: 'invalid_input', publicMessage: 'The image could not be read.' }),
      new Error('TypeError: cannot read x of undefined at /srv/app.js:10'),
    ];
    let n = 0;
    const { service } = make(async () => {
      throw errors[n++];
    });
    await service.start();
    const out = [];
    for (let i = 0; i < errors.length; i++) {
      const { generationId } = await service.create('alice', { modelId: 'm', settings: { prompt: 'x' } });
      out.push(await terminal(service, generationId));
    }
    expect(out.map((g) => g.error)).toEqual([
      { code: 'provider_error', message: 'The image service is down; try again later.' },
      { code: 'invalid_input', message: 'The image could not be read.' },
      { code: 'provider_error', message: 'The model failed to generate a result.' },
    ]);
    expect(JSON.stringify(out)).not.toMatch(/secret token|app\.js|TypeError/);
  });

  it('says timeout for a run past its time limit, and worker_lost after too many lost runs', async () => {
    const { service, store } = make(async (ctx) => new Promise((_, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason))), {}, [
      model({ timeoutMs: 30 }),
    ]);
    await service.start();
    const { generationId } = await service.create('alice', { modelId: 'm', settings: { prompt: 'x' } });
    expect((await terminal(service, generationId)).error?.code).toBe('timeout');

    // A generation whose workers keep dying: claimed maxClaims (3) times, each lease long expired.
    const idle = make(async () => ({ text: 'never' }), { store, runner: { enabled: false } });
    const lost = await idle.service.create('alice', { modelId: 'm', settings: { prompt: 'y' } });
    const past = Date.now() - 60_000;
    for (let i = 0; i < 3; i++) {
      const now = past + i * 100;
      const claimed = await store.update(lost.generationId, {
        expect: i === 0 ? { status: ['pending'] } : { status: ['processing'], lease: 'free', claims: i },
        set: { status: 'processing', claims: i + 1, leaseOwner: `dead-${i}`, leaseExpiresAt: now + 10 },
        event: { type: 'processing', data: { claim: i + 1 } },
        now,
      });
      expect(claimed).not.toBeNull();
    }
    expect((await idle.service.recover()).failed).toBe(1);
    expect(await idle.service.details('alice', lost.generationId)).toMatchObject({ status: 'failed', price: 3, error: { code: 'worker_lost' } });
  });
});

describe('options', () => {
  it('lists every bad option in one error', () => {
    const bad = {
      providers: [{ models: [] }],
      runner: { concurrency: 0, leaseMs: -5, bogus: 1 },
      limits: { bodyBytes: 'big' },
      publicUrl: 'ftp://x',
      fileUrlSecret: 'short',
      store: {},
      retenton: {},
    };
    let error: (Error & { problems?: string[] }) | undefined;
    try {
      createGenerationService(bad as never);
    } catch (err) {
      error = err as Error & { problems?: string[] };
    }
    expect(error?.name).toBe('InvalidOptionsError');
    const text = error!.problems!.join('\n');
    for (const part of ['providers.0', 'runner.concurrency', 'runner.leaseMs', 'bogus', 'limits.bodyBytes', 'publicUrl', 'fileUrlSecret', 'store', 'retenton']) {
      expect(text).toContain(part);
    }
    expect(() => createGenerationService(undefined as never)).toThrow(/invalid options/);
  });

  it('hands the runner settings to the queue at start', async () => {
    const seen: unknown[] = [];
    const queue = {
      enqueue: async () => undefined,
      start: async (_h: unknown, settings: unknown) => void seen.push(settings),
      stop: async () => undefined,
    };
    const { service } = make(async () => ({ text: '' }), { queue, runner: { concurrency: 3, leaseMs: 1234 } }, [model({ concurrency: 2 })]);
    await service.start();
    expect(seen).toHaveLength(1);
    const s = seen[0] as { concurrency: number; leaseMs: number; modelConcurrency: (id: string) => number | undefined; logger: unknown };
    expect(s.concurrency).toBe(3);
    expect(s.leaseMs).toBe(1234);
    expect(s.modelConcurrency('m')).toBe(2);
    expect(s.modelConcurrency('nope')).toBeUndefined();
    expect(typeof (s.logger as { info: unknown }).info).toBe('function');
  });

  it('builds one instance of each component per service', async () => {
    const a = make(async () => ({ text: 'a' }));
    const b = make(async () => ({ text: 'b' }));
    await a.service.start();
    await b.service.start();
    const ga = await a.service.create('alice', { modelId: 'm', settings: { prompt: 'x' } });
    expect((await terminal(a.service, ga.generationId)).result).toBe('a');
    // Each service sees only its own store.
    await expect(b.service.get('alice', ga.generationId)).rejects.toMatchObject({ code: 'not_found' });
  });
});
