import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  GenerationFailedError,
  InternalServerError,
  NotFoundError,
  TimeoutError,
  UnauthorizedError,
  ServiceUnavailableError,
  pollSchedule,
  type GenerationStatus,
} from '../src/index.js';
import { Backoff } from '../src/backoff.js';
import { MODELS, completed, errorBody, failed, fakeServer, hang, json, model, pending, processing, scripted, type FakeRequest } from './helpers.js';

/** Fake time of each generation poll, relative to the first call of the test. */
function pollTimes(calls: FakeRequest[], polls: FakeRequest[]): number[] {
  const start = calls[0].at;
  return polls.map((c) => c.at - start);
}

/** Settles a promise's rejection handler now, so a later rejection is not reported as unhandled. */
function settle<T>(promise: Promise<T>): Promise<{ value?: T; error?: unknown }> {
  return promise.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
}

beforeEach(() => {
  vi.useFakeTimers({ now: Date.parse('2030-01-01T00:00:00Z') });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('poll schedule', () => {
  it('starts at half the estimate and grows 1.5x up to the estimate, within bounds', () => {
    expect(pollSchedule(4)).toEqual({ initialMs: 2000, maxMs: 4000, factor: 1.5 });
    // A tiny estimate: no faster than 100 ms, and the cap stays at 2 s in case the job overruns.
    expect(pollSchedule(0.05)).toEqual({ initialMs: 100, maxMs: 2000, factor: 1.5 });
    // A long estimate: the first poll within 5 s, never more than 15 s between polls.
    expect(pollSchedule(600)).toEqual({ initialMs: 5000, maxMs: 15000, factor: 1.5 });
    expect(pollSchedule(undefined)).toEqual({ initialMs: 1000, maxMs: 5000, factor: 1.5 });
    expect(pollSchedule(4, { pollIntervalMs: 300, maxPollIntervalMs: 1000 })).toEqual({
      initialMs: 300,
      maxMs: 1000,
      factor: 1.5,
    });
    const backoff = new Backoff(pollSchedule(4));
    expect(Array.from({ length: 5 }, () => backoff.next())).toEqual([2000, 3000, 4000, 4000, 4000]);
  });

  it('waitFor polls at once, then on the schedule of the model that created the generation', async () => {
    const { client, calls, polls } = fakeServer(
      scripted([pending, processing, processing, processing, processing, completed]),
      { models: [model('m', 4)] },
    );
    const { generationId } = await client.generations.create({ modelId: 'm' });
    const done = settle(client.generations.waitFor(generationId));
    await vi.advanceTimersByTimeAsync(60_000);
    expect((await done).value).toMatchObject({ status: 'completed', result: 'done', price: 3 });
    expect(pollTimes(calls, polls())).toEqual([0, 2000, 5000, 9000, 13000, 17000]);
    // The models list was fetched once, to learn the estimate.
    expect(calls.filter((c) => c.path === '/v1/models')).toHaveLength(1);
  });

  it('run waits the first delay before its first poll (the generation was just created)', async () => {
    const { client, calls, polls } = fakeServer(scripted([processing, processing, completed]), {
      models: [model('m', 1)],
    });
    const done = settle(client.generations.run({ modelId: 'm', settings: { prompt: 'x' } }));
    await vi.advanceTimersByTimeAsync(60_000);
    expect((await done).value).toEqual({ generationId: 'g1', status: 'completed', result: 'done', price: 3 });
    // estimate 1 s: 500, then 750, then 1125
    expect(pollTimes(calls, polls())).toEqual([500, 1250, 2375]);
  });

  it('uses pollIntervalMs and maxPollIntervalMs when given', async () => {
    const { client, calls, polls } = fakeServer(scripted([pending, pending, pending, pending, completed]));
    const done = settle(client.generations.waitFor('g1', { modelId: 'm', pollIntervalMs: 100, maxPollIntervalMs: 200 }));
    await vi.advanceTimersByTimeAsync(10_000);
    expect((await done).value?.status).toBe('completed');
    expect(pollTimes(calls, polls())).toEqual([0, 100, 250, 450, 650]);
  });

  it('falls back to the default schedule when the model is unknown or the models list fails', async () => {
    const { client, calls, polls } = fakeServer((r) => {
      if (r.path === '/v1/models') return json(500, errorBody('internal'));
      return polls().length < 3 ? pending() : completed();
    });
    const done = settle(client.generations.waitFor('g1', { modelId: 'm' }));
    await vi.advanceTimersByTimeAsync(10_000);
    expect((await done).value?.status).toBe('completed');
    expect(pollTimes(calls, polls())).toEqual([0, 1000, 2500]);
  });

  it('returns at once for a generation that is already finished', async () => {
    const { client, polls } = fakeServer(scripted([failed(2)]));
    await expect(client.generations.waitFor('g1')).resolves.toEqual({ generationId: 'g1', status: 'failed', price: 2 });
    expect(polls()).toHaveLength(1);
  });
});

describe('onStatus', () => {
  it('is called once per change, in order, the terminal status included', async () => {
    const { client } = fakeServer(scripted([pending, pending, processing, processing, processing, completed]));
    const seen: Array<[GenerationStatus, string]> = [];
    const done = settle(
      client.generations.waitFor('g1', {
        onStatus: (status, generation) => seen.push([status, generation.status]),
      }),
    );
    await vi.advanceTimersByTimeAsync(60_000);
    expect((await done).error).toBeUndefined();
    expect(seen).toEqual([
      ['pending', 'pending'],
      ['processing', 'processing'],
      ['completed', 'completed'],
    ]);
  });

  it('a listener that throws stops the wait with its error', async () => {
    const { client, polls } = fakeServer(scripted([pending, completed]));
    const boom = new Error('listener bug');
    const done = settle(client.generations.waitFor('g1', { onStatus: () => { throw boom; } }));
    await vi.advanceTimersByTimeAsync(10_000);
    expect((await done).error).toBe(boom);
    expect(polls()).toHaveLength(1);
  });
});

describe('transient errors', () => {
  it('retries network errors, 5xx and 429 on the backoff schedule and gets through', async () => {
    const { client, calls, polls } = fakeServer(
      scripted([
        pending,
        () => {
          throw new TypeError('fetch failed');
        },
        () => json(500, errorBody('internal')),
        () => json(503, errorBody('unavailable')),
        () => new Response('bad gateway', { status: 502 }),
        () => json(429, errorBody('rate_limited')),
        processing,
        completed,
      ]),
    );
    const statuses: GenerationStatus[] = [];
    const done = settle(client.generations.waitFor('g1', { modelId: 'm', timeoutMs: 120_000, onStatus: (s) => statuses.push(s) }));
    await vi.advanceTimersByTimeAsync(120_000);
    expect((await done).value?.status).toBe('completed');
    expect(polls()).toHaveLength(8);
    expect(statuses).toEqual(['pending', 'processing', 'completed']);
    expect(pollTimes(calls, polls())).toEqual([0, 2000, 5000, 9000, 13000, 17000, 21000, 25000]);
  });

  it('waits at least Retry-After', async () => {
    const { client, calls, polls } = fakeServer(
      scripted([() => json(429, errorBody('rate_limited'), { 'retry-after': '10' }), completed]),
    );
    const done = settle(client.generations.waitFor('g1', { modelId: 'm' }));
    await vi.advanceTimersByTimeAsync(60_000);
    expect((await done).value?.status).toBe('completed');
    expect(pollTimes(calls, polls())).toEqual([0, 10_000]);
  });

  it('a request that hangs is abandoned after requestTimeoutMs and retried', async () => {
    const { client, polls } = fakeServer(scripted([(r) => hang(r.signal), completed]), {
      clientOptions: { requestTimeoutMs: 1000 },
    });
    const done = settle(client.generations.waitFor('g1', { modelId: 'm' }));
    await vi.advanceTimersByTimeAsync(10_000);
    expect((await done).value?.status).toBe('completed');
    expect(polls()).toHaveLength(2);
  });

  it('gives up with a TimeoutError carrying the last error when the outage outlasts timeoutMs', async () => {
    const { client, polls } = fakeServer(scripted([processing, () => json(503, errorBody('unavailable'))]));
    const done = settle(client.generations.waitFor('g1', { modelId: 'm', timeoutMs: 20_000 }));
    await vi.advanceTimersByTimeAsync(30_000);
    const { error } = await done;
    expect(error).toBeInstanceOf(TimeoutError);
    expect(error).toMatchObject({ generationId: 'g1', lastStatus: 'processing' });
    expect((error as TimeoutError).cause).toBeInstanceOf(ServiceUnavailableError);
    const count = polls().length;
    await vi.advanceTimersByTimeAsync(60_000);
    expect(polls()).toHaveLength(count);
  });

  it('without a timeout, gives up after maxOutageMs of errors and throws the last one', async () => {
    const { client } = fakeServer(scripted([pending, () => json(500, errorBody('internal'))]));
    const done = settle(client.generations.waitFor('g1', { modelId: 'm', maxOutageMs: 10_000 }));
    await vi.advanceTimersByTimeAsync(60_000);
    expect((await done).error).toBeInstanceOf(InternalServerError);
  });

  it.each([
    [401, 'unauthorized', UnauthorizedError],
    [404, 'not_found', NotFoundError],
  ])('does not retry a %i', async (status, code, type) => {
    const { client, polls } = fakeServer(scripted([pending, () => json(status, errorBody(code)), completed]));
    const done = settle(client.generations.waitFor('g1', { timeoutMs: 60_000 }));
    await vi.advanceTimersByTimeAsync(60_000);
    expect((await done).error).toBeInstanceOf(type);
    expect(polls()).toHaveLength(2);
  });
});

describe('abort and timeout', () => {
  it('an abort during a sleep rejects at once with the signal reason, and polls no more', async () => {
    const { client, polls } = fakeServer(scripted([pending]));
    const controller = new AbortController();
    const done = settle(client.generations.waitFor('g1', { signal: controller.signal }));
    await vi.advanceTimersByTimeAsync(100);
    expect(polls()).toHaveLength(1);
    controller.abort();
    // No timers advanced: the rejection must not wait for the sleep to end.
    const { error } = await done;
    expect(error).toBeInstanceOf(DOMException);
    expect((error as DOMException).name).toBe('AbortError');
    await vi.advanceTimersByTimeAsync(60_000);
    expect(polls()).toHaveLength(1);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('an abort during a request aborts that request and rejects with the caller reason', async () => {
    let requestSignal: AbortSignal | undefined;
    const { client } = fakeServer(
      scripted([
        (r) => {
          requestSignal = r.signal;
          return hang(r.signal);
        },
      ]),
    );
    const controller = new AbortController();
    const reason = new Error('user left');
    const done = settle(client.generations.waitFor('g1', { modelId: 'm', signal: controller.signal }));
    await vi.advanceTimersByTimeAsync(0);
    expect(requestSignal?.aborted).toBe(false);
    controller.abort(reason);
    expect((await done).error).toBe(reason);
    expect(requestSignal?.aborted).toBe(true);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('an already aborted signal makes no request', async () => {
    const { client, calls } = fakeServer(scripted([completed]));
    const reason = new Error('no');
    await expect(client.generations.waitFor('g1', { signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
    await expect(client.generations.run({ modelId: 'm' }, { signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
    expect(calls).toHaveLength(0);
  });

  it('times out with a TimeoutError during a sleep, at the deadline', async () => {
    const { client, polls } = fakeServer(scripted([processing]));
    const done = settle(client.generations.waitFor('g1', { modelId: 'm', timeoutMs: 5_500 }));
    await vi.advanceTimersByTimeAsync(5_499);
    expect(polls()).toHaveLength(3); // 0, 2000, 5000
    await vi.advanceTimersByTimeAsync(1);
    const { error } = await done;
    expect(error).toBeInstanceOf(TimeoutError);
    expect(error).toMatchObject({ name: 'TimeoutError', generationId: 'g1', lastStatus: 'processing' });
    expect(vi.getTimerCount()).toBe(0);
  });

  it('times out during a hanging request, at the deadline', async () => {
    const { client } = fakeServer(scripted([(r) => hang(r.signal)]));
    const done = settle(client.generations.waitFor('g1', { modelId: 'm', timeoutMs: 2_000 }));
    await vi.advanceTimersByTimeAsync(2_000);
    expect((await done).error).toBeInstanceOf(TimeoutError);
  });

  it('the caller abort wins over the deadline', async () => {
    const { client } = fakeServer(scripted([pending]));
    const controller = new AbortController();
    const done = settle(client.generations.waitFor('g1', { signal: controller.signal, timeoutMs: 1000 }));
    await vi.advanceTimersByTimeAsync(500);
    controller.abort();
    expect(((await done).error as Error).name).toBe('AbortError');
  });

  it('leaves no listener on a long-lived signal after many polls', async () => {
    const controller = new AbortController();
    let added = 0;
    let removed = 0;
    const add = controller.signal.addEventListener.bind(controller.signal);
    const remove = controller.signal.removeEventListener.bind(controller.signal);
    controller.signal.addEventListener = ((...args: Parameters<typeof add>) => {
      added++;
      add(...args);
    }) as typeof add;
    controller.signal.removeEventListener = ((...args: Parameters<typeof remove>) => {
      removed++;
      remove(...args);
    }) as typeof remove;
    const { client } = fakeServer(scripted([...Array(20).fill(processing), completed]));
    const done = settle(client.generations.waitFor('g1', { modelId: 'm', signal: controller.signal, pollIntervalMs: 10 }));
    await vi.advanceTimersByTimeAsync(600_000);
    expect((await done).value?.status).toBe('completed');
    expect(added).toBeGreaterThan(0);
    expect(removed).toBe(added);
  });
});

describe('run', () => {
  it('throws GenerationFailedError with id and price for a failed generation', async () => {
    const { client } = fakeServer(scripted([processing, failed(1)]));
    const done = settle(client.generations.run({ modelId: 'm' }));
    await vi.advanceTimersByTimeAsync(60_000);
    const { error } = await done;
    expect(error).toBeInstanceOf(GenerationFailedError);
    expect(error).toMatchObject({ generationId: 'g1', price: 1, generation: { status: 'failed', price: 1 } });
  });

  it('returns a failed generation with throwOnFailure: false', async () => {
    const { client } = fakeServer(scripted([failed(0)]));
    const done = settle(client.generations.run({ modelId: 'm' }, { throwOnFailure: false }));
    await vi.advanceTimersByTimeAsync(60_000);
    expect((await done).value).toEqual({ generationId: 'g1', status: 'failed', price: 0 });
  });

  it('sends a random Idempotency-Key and retries the create with the same key after transient errors and 409', async () => {
    const answers = [
      () => Promise.reject(new TypeError('fetch failed')),
      () => json(503, errorBody('unavailable')),
      () => json(409, errorBody('idempotency_conflict')),
      () => json(201, { generationId: 'g7' }),
    ];
    let creates = 0;
    const { client, calls } = fakeServer((r) => {
      if (r.path === '/v1/models') return MODELS();
      if (r.method === 'POST') return answers[creates++]();
      return completed();
    });
    const created: string[] = [];
    const done = settle(client.generations.run({ modelId: 'm' }, { onCreated: (id) => created.push(id) }));
    await vi.advanceTimersByTimeAsync(60_000);
    expect((await done).value).toMatchObject({ generationId: 'g7', status: 'completed' });
    const keys = calls.filter((c) => c.method === 'POST').map((c) => c.headers['idempotency-key']);
    expect(keys).toHaveLength(4);
    expect(new Set(keys).size).toBe(1);
    expect(keys[0]).toMatch(/^[0-9a-f-]{32,36}$/);
    expect(created).toEqual(['g7']);
  });

  it('uses the caller Idempotency-Key and does not retry a 4xx create', async () => {
    const { client, calls } = fakeServer((r) =>
      r.path === '/v1/models' ? MODELS() : json(402, errorBody('insufficient_funds')),
    );
    await expect(client.generations.run({ modelId: 'm' }, { idempotencyKey: 'mine' })).rejects.toMatchObject({
      name: 'InsufficientFundsError',
      status: 402,
    });
    const posts = calls.filter((c) => c.method === 'POST');
    expect(posts).toHaveLength(1);
    expect(posts[0].headers['idempotency-key']).toBe('mine');
  });

  it('timeoutMs covers the create too; the TimeoutError has no id when nothing was created', async () => {
    const { client } = fakeServer((r) => (r.path === '/v1/models' ? MODELS() : hang(r.signal)));
    const done = settle(client.generations.run({ modelId: 'm' }, { timeoutMs: 3000 }));
    await vi.advanceTimersByTimeAsync(3000);
    const { error } = await done;
    expect(error).toBeInstanceOf(TimeoutError);
    expect((error as TimeoutError).generationId).toBeUndefined();
  });

  it('cancelOnAbort cancels the generation when the caller gives up', async () => {
    const { client, calls } = fakeServer((r) => {
      if (r.path === '/v1/models') return MODELS();
      if (r.path === '/v1/generations') return json(201, { generationId: 'g1' });
      if (r.path.endsWith('/cancel')) return json(200, { status: 'failed', price: 0, cancelled: true });
      return processing();
    });
    const controller = new AbortController();
    const done = settle(client.generations.run({ modelId: 'm' }, { signal: controller.signal, cancelOnAbort: true }));
    await vi.advanceTimersByTimeAsync(3000);
    controller.abort();
    expect(((await done).error as Error).name).toBe('AbortError');
    await vi.advanceTimersByTimeAsync(0);
    expect(calls.filter((c) => c.path === '/v1/generations/g1/cancel')).toHaveLength(1);
  });

  it('cancelOnAbort: an abort during the create returns at once and cancels what the create made', async () => {
    let answerCreate: (() => void) | undefined;
    const { client, calls } = fakeServer((r) => {
      if (r.path === '/v1/models') return MODELS();
      if (r.path === '/v1/generations') {
        return new Promise<Response>((resolve) => {
          answerCreate = () => resolve(json(201, { generationId: 'g9' }));
        });
      }
      if (r.path.endsWith('/cancel')) return json(200, { status: 'failed', price: 0, cancelled: true });
      return processing();
    });
    const controller = new AbortController();
    const done = settle(client.generations.run({ modelId: 'm' }, { signal: controller.signal, cancelOnAbort: true }));
    await vi.advanceTimersByTimeAsync(10);
    expect(answerCreate).toBeDefined();
    controller.abort();
    expect(((await done).error as Error).name).toBe('AbortError');
    expect(calls.some((c) => c.path.endsWith('/cancel'))).toBe(false);
    answerCreate?.();
    await vi.advanceTimersByTimeAsync(0);
    expect(calls.filter((c) => c.path === '/v1/generations/g9/cancel')).toHaveLength(1);
    expect(calls.filter((c) => c.method === 'GET' && c.path.startsWith('/v1/generations/'))).toHaveLength(0);
  });

  it('without cancelOnAbort an abort leaves the generation alone', async () => {
    const { client, calls } = fakeServer(scripted([processing]));
    const controller = new AbortController();
    const done = settle(client.generations.run({ modelId: 'm' }, { signal: controller.signal }));
    await vi.advanceTimersByTimeAsync(3000);
    controller.abort();
    await done;
    await vi.advanceTimersByTimeAsync(0);
    expect(calls.some((c) => c.path.endsWith('/cancel'))).toBe(false);
  });
});
