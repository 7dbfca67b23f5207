import { afterEach, describe, expect, it } from 'vitest';
import {
  createGenerationService,
  DomainError,
  MemoryApiKeyStore,
  MemoryGenerationStore,
  MemoryLedger,
  ProviderError,
  type GenerationService,
  type ModelDefinition,
  type ModelProvider,
  type GenerationOutput,
  type GenerationContext,
  type GenerationInput,
} from '@genservice/core';
import { FakeClock, until } from '@genservice/testing';
import { stopOn } from './support/fake-time.js';

const textModel = (over: Partial<ModelDefinition> = {}): ModelDefinition => ({
  modelId: 'echo',
  title: 'Echo',
  resultType: 'text',
  estimatedGenerationTime: 0.01,
  settings: [
    { name: 'prompt', title: 'Prompt', fieldType: 'text', required: true },
    { name: 'style', title: 'Style', fieldType: 'select', options: ['a', 'b'] },
    { name: 'images', title: 'Images', fieldType: 'image' },
  ],
  price: 10,
  failureFee: 2,
  ...over,
});

function provider(
  models: ModelDefinition[],
  generate: (input: GenerationInput, ctx: GenerationContext) => Promise<GenerationOutput>,
): ModelProvider {
  return { models, generate };
}

const services: GenerationService[] = [];
/** The fake clock of a service that has one: its stop waits on that clock, so afterEach moves it. */
const clocks = new Map<GenerationService, FakeClock>();
function make(p: ModelProvider, extra: Record<string, unknown> = {}): { service: GenerationService; ledger: MemoryLedger; store: MemoryGenerationStore } {
  const ledger = new MemoryLedger({ balances: { alice: 100, bob: 100 } });
  const store = new MemoryGenerationStore();
  const service = createGenerationService({
    providers: [p],
    ledger,
    store,
    apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'ka', userId: 'alice' }] }),
    publicUrl: 'http://files.test/api',
    runner: { retryBaseDelayMs: 5, leaseMs: 1000 },
    ...extra,
  });
  services.push(service);
  if (extra.clock instanceof FakeClock) clocks.set(service, extra.clock);
  return { service, ledger, store };
}

afterEach(async () => {
  await Promise.all(
    services.splice(0).map((s) => {
      const clock = clocks.get(s);
      clocks.delete(s);
      return clock ? stopOn(clock, s) : s.stop({ timeoutMs: 100 });
    }),
  );
});

describe('createGenerationService', () => {
  it('runs a text generation to completion and settles its price', async () => {
    const { service, ledger } = make(provider([textModel({ price: 10 })], async (input) => ({ text: `hi ${String(input.settings.prompt)}`, price: 7 })));
    await service.start();
    const { generationId } = await service.create('alice', { modelId: 'echo', settings: { prompt: 'x' } });
    const done = await until(() => service.get('alice', generationId), { accept: (g) => g.status === 'completed' });
    expect(done).toEqual({ status: 'completed', result: 'hi x', price: 7 });
    expect(await ledger.account('alice')).toEqual({ balance: 93, reserved: 0, settled: 7 });
  });

  it('stores file results and answers a signed absolute URL', async () => {
    const { service } = make(provider([textModel({ modelId: 'img', resultType: 'image' })], async () => ({ bytes: new Uint8Array([1, 2, 3]), mimeType: 'image/png' })));
    await service.start();
    const { generationId } = await service.create('alice', { modelId: 'img', settings: { prompt: 'x' } });
    const done = await until(() => service.get('alice', generationId), { accept: (g) => g.status === 'completed' });
    expect(done.result).toMatch(/^http:\/\/files\.test\/api\/v1\/files\/[A-Za-z0-9_-]+\?exp=\d+&sig=[A-Za-z0-9_-]{43}&owner=[A-Za-z0-9_-]{43}$/);
    const res = await service.handle({ method: 'GET', path: done.result!.slice('http://files.test/api'.length), headers: {} });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('image/png');
    expect([...(res.body as Uint8Array)]).toEqual([1, 2, 3]);
    const path = done.result!.slice('http://files.test/api'.length);
    const tampered = path.replace(/sig=(.)/, (_m, c: string) => `sig=${c === 'A' ? 'B' : 'A'}`);
    expect((await service.handle({ method: 'GET', path: tampered, headers: {} })).status).toBe(403);
  });

  it('lists every bad setting and charges nothing', async () => {
    const { service, ledger } = make(provider([textModel()], async () => ({ text: 'x' })));
    const err = await service.create('alice', { modelId: 'echo', settings: { style: 'c', extra: 1, images: ['ftp://x', 'http://ok.test/a.png'] } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DomainError);
    const details = (err as DomainError).details!;
    expect(details.map((d) => `${d.field}:${d.code}`).sort()).toEqual(
      ['settings.extra:unknown_setting', 'settings.images.0:invalid_url', 'settings.prompt:required', 'settings.style:invalid_option'].sort(),
    );
    expect(await ledger.balance('alice')).toBe(100);
  });

  it('retries retryable provider errors with backoff, then succeeds', async () => {
    let calls = 0;
    const { service } = make(
      provider([textModel({ maxAttempts: 3 })], async () => {
        calls++;
        if (calls < 3) throw new ProviderError('busy', { retryable: true });
        return { text: 'ok' };
      }),
    );
    await service.start();
    const { generationId } = await service.create('alice', { modelId: 'echo', settings: { prompt: 'x' } });
    expect(await until(() => service.get('alice', generationId), { accept: (g) => g.status === 'completed' })).toMatchObject({ result: 'ok' });
    expect(calls).toBe(3);
  });

  it('fails with the failure fee after the last retryable attempt, and at once for a non-retryable error', async () => {
    const { service, ledger } = make(
      provider([textModel({ maxAttempts: 2 }), textModel({ modelId: 'hard' })], async (input) => {
        throw new ProviderError('nope', { retryable: input.model.modelId === 'echo' });
      }),
    );
    await service.start();
    const a = await service.create('alice', { modelId: 'echo', settings: { prompt: 'x' } });
    const b = await service.create('alice', { modelId: 'hard', settings: { prompt: 'x' } });
    expect(await until(() => service.get('alice', a.generationId), { accept: (g) => g.status === 'failed' })).toEqual({ status: 'failed', price: 2 });
    expect(await until(() => service.get('alice', b.generationId), { accept: (g) => g.status === 'failed' })).toEqual({ status: 'failed', price: 2 });
    expect(await ledger.account('alice')).toEqual({ balance: 96, reserved: 0, settled: 4 });
  });

  it('aborts a run past its timeout and fails it', async () => {
    let aborted = false;
    const { service } = make(
      provider([textModel({ timeoutMs: 50 })], (_i, ctx) => new Promise((_r, reject) => ctx.signal.addEventListener('abort', () => { aborted = true; reject(new Error('aborted')); }))),
    );
    await service.start();
    const { generationId } = await service.create('alice', { modelId: 'echo', settings: { prompt: 'x' } });
    expect(await until(() => service.get('alice', generationId), { accept: (g) => g.status === 'failed' })).toEqual({ status: 'failed', price: 2 });
    expect(aborted).toBe(true);
  });

  it('cancels a pending generation for free and a processing one for the failure fee', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let seenAbort = false;
    const { service, ledger } = make(
      provider([textModel({ concurrency: 1 })], async (_i, ctx) => {
        ctx.signal.addEventListener('abort', () => (seenAbort = true));
        await gate;
        return { text: 'late' };
      }),
    );
    await service.start();
    const running = await service.create('alice', { modelId: 'echo', settings: { prompt: 'x' } });
    const waiting = await service.create('alice', { modelId: 'echo', settings: { prompt: 'y' } });
    await until(() => service.get('alice', running.generationId), { accept: (g) => g.status === 'processing' });
    expect(await service.cancel('alice', waiting.generationId)).toEqual({ outcome: 'cancelled', generation: { status: 'failed', price: 0 } });
    expect(await service.cancel('alice', running.generationId)).toEqual({ outcome: 'cancelled', generation: { status: 'failed', price: 2 } });
    expect(seenAbort).toBe(true);
    release();
    // The released run ends (stop waits for it): its late result is refused.
    await service.stop({ timeoutMs: 5000 });
    expect(await service.get('alice', running.generationId)).toEqual({ status: 'failed', price: 2 });
    expect(await service.cancel('alice', running.generationId)).toMatchObject({ outcome: 'already_finished' });
    await expect(service.cancel('bob', running.generationId)).rejects.toMatchObject({ code: 'not_found' });
    expect(await ledger.account('alice')).toEqual({ balance: 98, reserved: 0, settled: 2 });
  });

  it('recovers pending work and settles forgotten reserves on start', async () => {
    const ledger = new MemoryLedger({ balances: { alice: 100 } });
    const store = new MemoryGenerationStore();
    const p = provider([textModel()], async () => ({ text: 'done' }));
    // A first instance accepted work but never ran it (no worker).
    const first = createGenerationService({ providers: [p], ledger, store, runner: { enabled: false } });
    const { generationId } = await first.create('alice', { modelId: 'echo', settings: { prompt: 'x' } });
    // A terminal generation whose reserve was never settled (crash between the two writes).
    await ledger.reserve('alice', 'g-crashed-000000000000', 10);
    await store.insert({ id: 'g-crashed-000000000000', ownerId: 'alice', modelId: 'echo', settings: {}, status: 'pending', reserved: 10, createdAt: Date.now() }, { type: 'created', data: { modelId: 'echo' } });
    const error = { code: 'provider_error', message: 'failed' } as const;
    const now = Date.now();
    await store.update('g-crashed-000000000000', { expect: { status: ['pending'] }, set: { status: 'failed', price: 2, failureReason: 'x', error, finishedAt: now }, event: { type: 'failed', data: { price: 2, error } }, now });
    const second = createGenerationService({ providers: [p], ledger, store });
    services.push(second);
    await second.start();
    expect(await until(() => second.get('alice', generationId), { accept: (g) => g.status === 'completed' })).toMatchObject({ result: 'done', price: 10 });
    expect(await ledger.account('alice')).toEqual({ balance: 88, reserved: 0, settled: 12 });
  });

  it('answers the first generation again for a repeated Idempotency-Key, even when requests race', async () => {
    const { service, ledger } = make(provider([textModel()], async () => ({ text: 'x' })));
    const results = await Promise.allSettled(
      Array.from({ length: 10 }, () => service.create('alice', { modelId: 'echo', settings: { prompt: 'x' } }, { idempotencyKey: 'k1' })),
    );
    const ok = results.filter((r) => r.status === 'fulfilled').map((r) => (r as PromiseFulfilledResult<{ generationId: string }>).value.generationId);
    const conflicts = results.filter((r) => r.status === 'rejected' && (r.reason as DomainError).code === 'idempotency_conflict');
    expect(ok.length + conflicts.length).toBe(10);
    expect(new Set(ok).size).toBe(1);
    const again = await service.create('alice', { modelId: 'echo', settings: { prompt: 'x' } }, { idempotencyKey: 'k1' });
    expect(again.generationId).toBe(ok[0]);
    await expect(service.create('alice', { modelId: 'echo', settings: { prompt: 'other' } }, { idempotencyKey: 'k1' })).rejects.toMatchObject({ code: 'idempotency_mismatch' });
    expect(await ledger.account('alice')).toMatchObject({ reserved: 10, balance: 90 });
  });

  it('stop() waits for running generations', async () => {
    let finished = false;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const clock = new FakeClock();
    const { service } = make(
      provider([textModel()], async () => {
        await gate;
        finished = true;
        return { text: 'x' };
      }),
      { clock },
    );
    await service.start();
    const { generationId } = await service.create('alice', { modelId: 'echo', settings: { prompt: 'x' } });
    await until(() => service.get('alice', generationId), { accept: (g) => g.status === 'processing' });
    let stopped = false;
    const stopping = service.stop({ timeoutMs: 2000 }).then(() => (stopped = true));
    // 1 ms short of its timeout, stop is still waiting for the run.
    await clock.advance(1999);
    expect(stopped).toBe(false);
    release();
    await stopping;
    expect(finished).toBe(true);
    expect((await service.get('alice', generationId)).status).toBe('completed');
  });
});

describe('settings validation', () => {
  it('tells a missing setting from one of the wrong type', async () => {
    const { service } = make(provider([textModel()], async () => ({ text: 'x' })));
    const err = (await service.create('alice', { modelId: 'echo', settings: { prompt: 5, style: ['a'], images: 'http://x.test/a.png' } }).catch((e: unknown) => e)) as DomainError;
    expect(err.details!.map((d) => `${d.field}:${d.code}`).sort()).toEqual(
      ['settings.images:invalid_type', 'settings.prompt:invalid_type', 'settings.style:invalid_option'].sort(),
    );
    const many = (await service.create('alice', { modelId: 'echo', settings: { prompt: 'x', images: Array(11).fill('http://x.test/a.png') } }).catch((e: unknown) => e)) as DomainError;
    expect(many.details).toEqual([expect.objectContaining({ field: 'settings.images', code: 'too_many' })]);
    const long = (await service.create('alice', { modelId: 'echo', settings: { prompt: 'x', images: [`http://x.test/${'a'.repeat(3000)}`] } }).catch((e: unknown) => e)) as DomainError;
    expect(long.details).toEqual([expect.objectContaining({ field: 'settings.images.0', code: 'too_long' })]);
    for (const bad of ['javascript:alert(1)', 'file:///etc/passwd', 'http://user:pw@x.test/', '//x.test/a', 'data:image/png;base64,AAAA']) {
      const e = (await service.create('alice', { modelId: 'echo', settings: { prompt: 'x', images: [bad] } }).catch((x: unknown) => x)) as DomainError;
      expect(e.details, bad).toEqual([expect.objectContaining({ field: 'settings.images.0', code: 'invalid_url' })]);
    }
  });

  it('refuses a model with an unknown field type at construction, and accepts a registered one', async () => {
    const { z } = await import('zod');
    const def = textModel({ settings: [{ name: 'seed', title: 'Seed', fieldType: 'integer' }] });
    expect(() => createGenerationService({ providers: [provider([def], async () => ({ text: 'x' }))] })).toThrow(/unknown fieldType "integer"/);
    const s = createGenerationService({
      providers: [provider([def], async () => ({ text: 'x' }))],
      fieldTypes: { integer: () => z.number().int() },
      ledger: new MemoryLedger({ balances: { alice: 100 } }),
    });
    await expect(s.create('alice', { modelId: 'echo', settings: { seed: 1.5 } })).rejects.toMatchObject({ code: 'invalid_settings' });
    await expect(s.create('alice', { modelId: 'echo', settings: { seed: 2 } })).resolves.toHaveProperty('generationId');
  });
});

describe('InProcessQueue before start', () => {
  it('keeps at most backlogLimit jobs; the rest are left to recovery', async () => {
    const { InProcessQueue } = await import('@genservice/core');
    const q = new InProcessQueue({ backlogLimit: 2 });
    for (const id of ['a', 'b', 'c', 'd']) await q.enqueue({ generationId: id, modelId: 'm' });
    expect(q.size).toBe(2);
    const ran: string[] = [];
    await q.start(async (job) => {
      ran.push(job.generationId);
    });
    await q.stop({ timeoutMs: 1000 });
    expect(ran).toEqual(['a', 'b']);
  });
});

describe('retention', () => {
  it('deletes finished generations and their files after finishedTtlMs, and keeps unfinished ones', async () => {
    const { MemoryBlobStore } = await import('@genservice/core');
    const blobs = new MemoryBlobStore();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    // On a clock of its own: the life ends when the test moves the clock, never while the test is reading.
    const clock = new FakeClock();
    const { service, store } = make(
      provider([textModel({ modelId: 'img', resultType: 'image' }), textModel({ modelId: 'slow', timeoutMs: 3_600_000 })], async (input) => {
        if (input.model.modelId === 'slow') {
          await gate;
          return { text: 'late' };
        }
        return { bytes: new Uint8Array([9]), mimeType: 'image/png' };
      }),
      { blobs, clock, retention: { finishedTtlMs: 20_000, sweepIntervalMs: 10_000 } },
    );
    // The result file's key, taken as it is written.
    const keys: string[] = [];
    const put = blobs.put.bind(blobs);
    blobs.put = async (bytes, mimeType) => {
      const key = await put(bytes, mimeType);
      keys.push(key);
      return key;
    };
    await service.start();
    const done = await service.create('alice', { modelId: 'img', settings: { prompt: 'x' } });
    const slow = await service.create('alice', { modelId: 'slow', settings: { prompt: 'x' } });
    expect(await until(() => service.get('alice', done.generationId), { accept: (g) => g.status === 'completed' })).toMatchObject({ status: 'completed' });
    await until(() => service.get('alice', slow.generationId), { accept: (g) => g.status === 'processing' });
    expect(keys).toHaveLength(1);
    // The sweeps at 10 s and 20 s find nothing past its life (the sweep takes those that ended before its time).
    await clock.advance(20_000);
    expect(await store.getById(done.generationId)).not.toBeNull();
    expect(await blobs.get(keys[0]!)).not.toBeNull();
    // The sweep at 30 s deletes both. The store itself, not the client's view, which hides an expired generation
    // before the sweep removes it.
    await clock.advance(9_999);
    expect(await store.getById(done.generationId)).not.toBeNull();
    await clock.advance(1);
    expect(await store.getById(done.generationId)).toBeNull();
    expect(await blobs.get(keys[0]!)).toBeNull();
    // The unfinished one is never swept, and finishes normally later.
    await clock.advance(60_000);
    expect(await store.getById(slow.generationId)).not.toBeNull();
    release();
    await until(() => service.get('alice', slow.generationId), { accept: (g) => g.status === 'completed' });
  });

  it('shows expiresAt; an expired generation reads exactly like a deleted one before the sweep comes by', async () => {
    const ttl = 300;
    const clock = new FakeClock();
    const { service, store } = make(provider([textModel({ modelId: 'img', resultType: 'image' })], async () => ({ bytes: new Uint8Array([9]), mimeType: 'image/png' })), {
      clock,
      // A sweep that never runs during the test: what is asserted is the reads, not the deletion.
      retention: { finishedTtlMs: ttl, sweepIntervalMs: 3_600_000 },
    });
    await service.start();
    const { generationId } = await service.create('alice', { modelId: 'img', settings: { prompt: 'x' } });
    const rec = (await until(() => store.getById(generationId), { accept: (g) => g?.status === 'completed' }))!;
    // Read before it expired: the clock stands still until the test moves it.
    const item = await service.details('alice', generationId);
    expect(item.expiresAt).toBe(new Date(rec.finishedAt! + ttl).toISOString());
    const exp = Number(new URL(item.result!).searchParams.get('exp'));
    expect(exp * 1000).toBeLessThanOrEqual(rec.finishedAt! + ttl);
    expect((await service.list('alice', {})).data.map((g) => g.expiresAt)).toEqual([item.expiresAt]);
    await clock.advance(ttl - 1);
    expect((await service.get('alice', generationId)).status).toBe('completed');
    await clock.advance(1);
    await expect(service.get('alice', generationId)).rejects.toMatchObject({ code: 'not_found' });
    const gone = await service.handle({ method: 'GET', path: `/v1/generations/${generationId}`, headers: { authorization: 'Bearer ka' } });
    const missing = await service.handle({ method: 'GET', path: `/v1/generations/${'A'.repeat(22)}`, headers: { authorization: 'Bearer ka' } });
    expect(gone.status).toBe(404);
    expect(gone.body).toBe(missing.body);
    expect((await service.list('alice', {})).data).toEqual([]);
    expect((await service.handle({ method: 'DELETE', path: `/v1/generations/${generationId}`, headers: { authorization: 'Bearer ka' } })).status).toBe(404);
    // Still stored: the sweep has not run, yet nobody can read it.
    expect(await store.getById(generationId)).not.toBeNull();
  });
});

describe('retention sweep', () => {
  /**
   * Moves the service's clock past the expiry of every one of these (finished with `finishedTtlMs: 1`): the sweep
   * takes those whose life ended before its time.
   */
  const pastExpiry = async (clock: FakeClock, finishedAt: number[]): Promise<void> => {
    await clock.advanceTo(Math.max(...finishedAt) + 2);
  };
  const imageProvider = (price = 10): ModelProvider =>
    provider([textModel({ modelId: 'img', resultType: 'image', price })], async () => ({ bytes: new Uint8Array([9]), mimeType: 'image/png' }));

  it('deletes files before rows: a blob store outage leaves every expired record for the next sweep', async () => {
    const { MemoryBlobStore, UnavailableError } = await import('@genservice/core');
    const blobs = new MemoryBlobStore();
    const clock = new FakeClock();
    const { service, store } = make(imageProvider(), { blobs, clock, retention: { finishedTtlMs: 1, sweepIntervalMs: 3_600_000 } });
    await service.start();
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await service.create('alice', { modelId: 'img', settings: { prompt: 'x' } })).generationId);
    const recs = await Promise.all(ids.map((id) => until(() => store.getById(id), { accept: (g) => g?.status === 'completed' })));
    await pastExpiry(clock, recs.map((r) => r!.finishedAt!));
    const deleteMany = blobs.deleteMany.bind(blobs);
    blobs.deleteMany = async () => {
      throw new UnavailableError('blob store down');
    };
    await expect(service.sweep()).rejects.toThrow('blob store down');
    for (const r of recs) {
      expect(await store.getById(r!.id)).not.toBeNull();
      expect(await blobs.get(r!.resultKey!)).not.toBeNull();
    }
    blobs.deleteMany = deleteMany;
    expect(await service.sweep()).toBe(3);
    for (const r of recs) {
      expect(await store.getById(r!.id)).toBeNull();
      expect(await blobs.get(r!.resultKey!)).toBeNull();
    }
  });

  it('works in bounded batches: one batched file delete per batch of 200', async () => {
    const { MemoryBlobStore } = await import('@genservice/core');
    const blobs = new MemoryBlobStore();
    const clock = new FakeClock();
    const { service, store } = make(imageProvider(0), { blobs, clock, retention: { finishedTtlMs: 1, sweepIntervalMs: 3_600_000 }, limits: { inFlightPerUser: 1000 } });
    await service.start();
    const ids: string[] = [];
    for (let i = 0; i < 450; i++) ids.push((await service.create('alice', { modelId: 'img', settings: { prompt: 'x' } })).generationId);
    const finished: number[] = [];
    for (const id of ids) finished.push((await until(() => store.getById(id), { accept: (g) => g?.status === 'completed' }))!.finishedAt!);
    await pastExpiry(clock, finished);
    const batches: number[] = [];
    const deleteMany = blobs.deleteMany.bind(blobs);
    blobs.deleteMany = async (keys) => {
      batches.push(keys.length);
      return deleteMany(keys);
    };
    expect(await service.sweep()).toBe(450);
    expect(batches).toEqual([200, 200, 50]);
  });

  it('the timer sweeps once per interval across instances that share the stores', async () => {
    const { MemoryIdempotencyStore } = await import('@genservice/core');
    const shared = { idempotency: new MemoryIdempotencyStore() };
    const elections: Array<{ key: string; state: string }> = [];
    const begin = shared.idempotency.begin.bind(shared.idempotency);
    shared.idempotency.begin = async (user, key, hash, now, gen) => {
      const out = await begin(user, key, hash, now, gen);
      if (user === 'genservice:maintenance') elections.push({ key, state: out.state });
      return out;
    };
    let lists = 0;
    class Counted extends MemoryGenerationStore {
      override listFinishedBefore(before: number, limit: number) {
        lists++;
        return super.listFinishedBefore(before, limit);
      }
    }
    const counted = new Counted();
    // Both instances on one clock, as two processes share the time.
    const clock = new FakeClock();
    for (let i = 0; i < 2; i++) {
      const { service } = make(imageProvider(), { store: counted, clock, idempotency: shared.idempotency, retention: { finishedTtlMs: 60_000, sweepIntervalMs: 20_000 } });
      await service.start();
    }
    await clock.advance(19_999);
    expect(elections).toEqual([]);
    // Four intervals: both timers fire in each, and the store elects exactly one sweeper per interval.
    await clock.advance(4 * 20_000 - 19_999);
    const won = elections.filter((e) => e.state === 'new').map((e) => e.key);
    const last = Math.floor(clock.now() / 20_000);
    expect(won).toEqual([last - 3, last - 2, last - 1, last].map((w) => `sweep:${w}`));
    expect(elections).toHaveLength(8);
    // Only elected sweepers read the store (once each: nothing to delete).
    expect(lists).toBe(4);
  });
});

describe('apiKeyCache', () => {
  it('is off by default: a revoked key fails on its very next request', async () => {
    const keys = new MemoryApiKeyStore({ keys: [{ apiKey: 'k1', userId: 'u' }] });
    const s = createGenerationService({ providers: [], apiKeys: keys });
    const req = { method: 'GET', path: '/v1/models', headers: { authorization: 'Bearer k1' } };
    expect((await s.handle(req)).status).toBe(200);
    await keys.revokeKey('k1');
    expect((await s.handle(req)).status).toBe(401);
  });

  it('with a TTL, trusts a resolved key until it expires, and never caches a refusal', async () => {
    let calls = 0;
    const keys = new MemoryApiKeyStore({ keys: [{ apiKey: 'k1', userId: 'u' }] });
    const counting = { resolve: (k: string) => (calls++, keys.resolve(k)) };
    const clock = new FakeClock();
    const s = createGenerationService({ providers: [], apiKeys: counting, apiKeyCache: { ttlMs: 50 }, clock });
    const req = (k: string) => ({ method: 'GET', path: '/v1/models', headers: { authorization: `Bearer ${k}` } });
    expect((await s.handle(req('k1'))).status).toBe(200);
    expect((await s.handle(req('k1'))).status).toBe(200);
    expect(calls).toBe(1);
    expect((await s.handle(req('k2'))).status).toBe(401);
    await keys.addKey('k2', 'v');
    expect((await s.handle(req('k2'))).status).toBe(200);
    await keys.revokeKey('k1');
    // Trusted for the whole TTL after it was resolved, asked again once it has passed.
    await clock.advance(50);
    expect((await s.handle(req('k1'))).status).toBe(200);
    expect(calls).toBe(3);
    await clock.advance(1);
    expect((await s.handle(req('k1'))).status).toBe(401);
    expect(calls).toBe(4);
  });

  it('never trusts a cached key past its expiresAt: from then on it is 401, as the store answers', async () => {
    const clock = new FakeClock(Date.UTC(2026, 10, 28, 9));
    const keys = new MemoryApiKeyStore({ clock });
    const s = createGenerationService({ providers: [], apiKeys: keys, apiKeyCache: { ttlMs: 60_000 }, clock });
    const expiresAt = new Date(clock.now() + 1000).toISOString();
    const { apiKey } = await s.accounts.createKey('u', { name: 'short', expiresAt });
    const req = { method: 'GET', path: '/v1/models', headers: { authorization: `Bearer ${apiKey}` } };
    expect((await s.handle(req)).status).toBe(200);
    await clock.advance(999);
    expect((await s.handle(req)).status).toBe(200);
    await clock.advance(1);
    expect(await keys.resolve(apiKey)).toBeNull();
    expect((await s.handle(req)).status).toBe(401);
  });

  it('a lookup that was under way when the key was revoked here is not cached: the next request is 401', async () => {
    let gate: Promise<void> | undefined;
    class GatedKeys extends MemoryApiKeyStore {
      override resolve(apiKey: string, now?: number): ReturnType<MemoryApiKeyStore['resolve']> {
        const found = super.resolve(apiKey, now);
        return gate ? gate.then(() => found) : found;
      }
    }
    const clock = new FakeClock(Date.UTC(2026, 10, 28, 9));
    const keys = new GatedKeys({ clock });
    const s = createGenerationService({ providers: [], apiKeys: keys, apiKeyCache: { ttlMs: 60_000 }, clock });
    const { keyId, apiKey } = await s.accounts.createKey('u', { name: 'k' });
    const req = { method: 'GET', path: '/v1/models', headers: { authorization: `Bearer ${apiKey}` } };
    let open!: () => void;
    gate = new Promise<void>((r) => (open = r));
    // The store answered (the key was valid then); the answer reaches the cache only after the revoke.
    const first = s.handle(req);
    await s.accounts.revokeKey(keyId);
    gate = undefined;
    open();
    expect((await first).status).toBe(200);
    expect((await s.handle(req)).status).toBe(401);
  });
});

describe('Idempotency-Key while the first request is in progress', () => {
  it('answers 409 for the same body and 422 for another body', async () => {
    const { MemoryIdempotencyStore } = await import('@genservice/core');
    const idempotency = new MemoryIdempotencyStore();
    let hold!: () => void;
    const held = new Promise<void>((r) => (hold = r));
    // A ledger whose reserve waits, so the first create stays in progress while the others arrive.
    const ledger = new MemoryLedger({ balances: { alice: 100 } });
    let reserving!: () => void;
    const reserveCalled = new Promise<void>((r) => (reserving = r));
    const slowLedger = Object.assign(Object.create(ledger) as MemoryLedger, {
      reserve: async (...args: Parameters<MemoryLedger['reserve']>) => {
        reserving();
        await held;
        return ledger.reserve(...args);
      },
    });
    const s = createGenerationService({ providers: [provider([textModel()], async () => ({ text: 'x' }))], ledger: slowLedger, idempotency });
    const first = s.create('alice', { modelId: 'echo', settings: { prompt: 'a' } }, { idempotencyKey: 'k' });
    // The first create holds its key and waits in the ledger.
    await reserveCalled;
    await expect(s.create('alice', { modelId: 'echo', settings: { prompt: 'a' } }, { idempotencyKey: 'k' })).rejects.toMatchObject({ code: 'idempotency_conflict' });
    await expect(s.create('alice', { modelId: 'echo', settings: { prompt: 'b' } }, { idempotencyKey: 'k' })).rejects.toMatchObject({ code: 'idempotency_mismatch' });
    hold();
    const { generationId } = await first;
    expect((await s.create('alice', { modelId: 'echo', settings: { prompt: 'a' } }, { idempotencyKey: 'k' })).generationId).toBe(generationId);
  });
});

describe('recovery of a large backlog', () => {
  it('walks every unfinished generation, page by page, not just the oldest page', async () => {
    const ledger = new MemoryLedger({ balances: { alice: 1e9 } });
    const store = new MemoryGenerationStore();
    const p = provider([textModel({ price: 1 })], async () => ({ text: 'ok' }));
    const api = createGenerationService({ providers: [p], ledger, store, runner: { enabled: false }, limits: { inFlightPerUser: 10_000 } });
    for (let i = 0; i < 1234; i++) await api.create('alice', { modelId: 'echo', settings: { prompt: String(i) } });
    const worker = createGenerationService({ providers: [p], ledger, store, recovery: { onStart: false, intervalMs: 0 } });
    services.push(worker);
    await worker.start();
    expect((await worker.recover()).requeued).toBe(1234);
    await until(() => store.countByStatus!(), { accept: (c) => c.completed === 1234, timeoutMs: 20_000 });
    expect(await ledger.account('alice')).toEqual({ balance: 1e9 - 1234, reserved: 0, settled: 1234 });
  });
});
