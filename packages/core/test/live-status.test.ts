import { afterEach, describe, expect, it } from 'vitest';
import {
  createGenerationService,
  MemoryApiKeyStore,
  MemoryGenerationStore,
  MemoryLedger,
  type GenerationService,
  type HttpResponse,
  type ModelDefinition,
} from '@genservice/core';

const model: ModelDefinition = {
  modelId: 'm',
  title: 'M',
  resultType: 'text',
  estimatedGenerationTime: 0.01,
  settings: [{ name: 'prompt', title: 'Prompt', fieldType: 'text', required: true }],
  price: 10,
  failureFee: 1,
};

/** A provider whose runs wait for the test: `step()` lets the oldest waiting run report progress, `finish()` end it. */
function gated() {
  const waiting: Array<{ progress: (f: number) => void; done: (text: string) => void }> = [];
  return {
    provider: {
      models: [model],
      generate: (_input: unknown, ctx: { progress: (f: number) => void; signal: AbortSignal }) =>
        new Promise<{ text: string }>((resolve, reject) => {
          waiting.push({ progress: ctx.progress, done: (text) => resolve({ text }) });
          ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason));
        }),
    },
    async started(n = 1): Promise<void> {
      for (let i = 0; i < 500 && waiting.length < n; i++) await new Promise((r) => setTimeout(r, 5));
      if (waiting.length < n) throw new Error('the run did not start');
    },
    progress(f: number): void {
      waiting[0]!.progress(f);
    },
    finish(text = 'done'): void {
      waiting.shift()!.done(text);
    },
  };
}

const services: GenerationService[] = [];
afterEach(async () => {
  await Promise.all(services.splice(0).map((s) => s.stop({ timeoutMs: 100 })));
});

function make(provider: ReturnType<typeof gated>['provider'], extra: Record<string, unknown> = {}) {
  const service = createGenerationService({
    providers: [provider as never],
    apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'ka', userId: 'alice' }, { apiKey: 'kb', userId: 'bob' }] }),
    ledger: new MemoryLedger({ balances: { alice: 100, bob: 100 } }),
    recovery: { intervalMs: 0 },
    ...extra,
  });
  services.push(service);
  return service;
}

const auth = { authorization: 'Bearer ka' };

/** Reads SSE messages from a streamed body until `until` says stop or the stream ends. */
async function readEvents(res: HttpResponse, count = Infinity): Promise<{ messages: Array<{ id?: string; event?: string; data?: any; comment?: string }>; ended: boolean }> {
  const body = res.body as AsyncIterable<string>;
  const it = body[Symbol.asyncIterator]();
  const messages: Array<{ id?: string; event?: string; data?: any; comment?: string }> = [];
  let buffer = '';
  let ended = false;
  while (messages.length < count) {
    const r = await it.next();
    if (r.done) {
      ended = true;
      break;
    }
    buffer += String(r.value);
    let i: number;
    while ((i = buffer.indexOf('\n\n')) !== -1) {
      const block = buffer.slice(0, i);
      buffer = buffer.slice(i + 2);
      const msg: { id?: string; event?: string; data?: any; comment?: string } = {};
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) msg.comment = line.slice(1).trim();
        else if (line.startsWith('id: ')) msg.id = line.slice(4);
        else if (line.startsWith('event: ')) msg.event = line.slice(7);
        else if (line.startsWith('data: ')) msg.data = JSON.parse(line.slice(6));
      }
      messages.push(msg);
    }
  }
  if (!ended && messages.length >= count) await it.return?.();
  return { messages, ended };
}

async function create(service: GenerationService, key = 'ka'): Promise<string> {
  const r = await service.handle({
    method: 'POST',
    path: '/v1/generations',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: '{"modelId":"m","settings":{"prompt":"x"}}',
  });
  expect(r.status).toBe(201);
  return JSON.parse(String(r.body)).generationId;
}

describe('GET /v1/generations/:id/events', () => {
  it('streams the current state, every transition with the details object, and ends after the terminal event', async () => {
    const g = gated();
    const service = make(g.provider);
    await service.start();
    const id = await create(service);
    await g.started();
    const res = await service.handle({ method: 'GET', path: `/v1/generations/${id}/events`, headers: auth });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    expect(res.headers['cache-control']).toBe('no-store');
    const reading = readEvents(res);
    await new Promise((r) => setTimeout(r, 20));
    g.progress(0.5);
    await new Promise((r) => setTimeout(r, 20));
    g.finish('hello');
    const { messages, ended } = await reading;
    expect(ended).toBe(true);
    expect(messages.map((m) => m.event)).toEqual(['processing', 'progress', 'completed']);
    expect(messages[0]!.data).toMatchObject({ generationId: id, status: 'processing' });
    expect(messages[1]!.data).toMatchObject({ status: 'processing', progress: { fraction: 0.5 } });
    expect(messages[2]!.data).toMatchObject({ status: 'completed', result: 'hello', price: 10 });
    const ids = messages.map((m) => Number(m.id));
    expect(ids.every((n) => Number.isSafeInteger(n) && n > 0)).toBe(true);
    expect([...ids].sort((a, b) => a - b)).toEqual(ids);
    expect(service.stats()).toEqual({ openStreams: 0, watchers: 0 });
  });

  it('answers a finished generation with its final state and ends at once', async () => {
    const g = gated();
    const service = make(g.provider);
    await service.start();
    const id = await create(service);
    await g.started();
    g.finish('x');
    for (let i = 0; i < 100 && (await service.get('alice', id)).status !== 'completed'; i++) await new Promise((r) => setTimeout(r, 5));
    const { messages, ended } = await readEvents(await service.handle({ method: 'GET', path: `/v1/generations/${id}/events`, headers: auth }));
    expect(ended).toBe(true);
    expect(messages).toHaveLength(1);
    expect(messages[0]).toMatchObject({ event: 'completed', data: { status: 'completed', result: 'x' } });
  });

  it('resumes after Last-Event-ID with every missed event', async () => {
    const g = gated();
    const service = make(g.provider);
    await service.start();
    const id = await create(service);
    await g.started();
    const first = await readEvents(await service.handle({ method: 'GET', path: `/v1/generations/${id}/events`, headers: auth }), 1);
    expect(first.messages[0]!.event).toBe('processing');
    g.progress(0.3);
    await new Promise((r) => setTimeout(r, 20));
    g.finish('y');
    for (let i = 0; i < 100 && (await service.get('alice', id)).status !== 'completed'; i++) await new Promise((r) => setTimeout(r, 5));
    const resumed = await readEvents(
      await service.handle({ method: 'GET', path: `/v1/generations/${id}/events`, headers: { ...auth, 'last-event-id': first.messages[0]!.id! } }),
    );
    expect(resumed.ended).toBe(true);
    expect(resumed.messages.map((m) => m.event)).toEqual(['progress', 'completed']);
    const created = await readEvents(await service.handle({ method: 'GET', path: `/v1/generations/${id}/events`, headers: { ...auth, 'last-event-id': '0' } }));
    expect(created.messages.map((m) => m.event)).toEqual(['created', 'processing', 'progress', 'completed']);
  });

  it('answers 401 and 404 as JSON before any stream, the same for a missing and another user\u2019s generation', async () => {
    const g = gated();
    const service = make(g.provider);
    await service.start();
    const id = await create(service);
    const anon = await service.handle({ method: 'GET', path: `/v1/generations/${id}/events`, headers: {} });
    expect(anon.status).toBe(401);
    const theirs = await service.handle({ method: 'GET', path: `/v1/generations/${id}/events`, headers: { authorization: 'Bearer kb' } });
    const missing = await service.handle({ method: 'GET', path: `/v1/generations/${'Z'.repeat(22)}/events`, headers: { authorization: 'Bearer kb' } });
    expect(theirs.status).toBe(404);
    expect(theirs.headers['content-type']).toMatch(/^application\/json/);
    expect(theirs.body).toBe(missing.body);
    expect((await service.handle({ method: 'POST', path: `/v1/generations/${id}/events`, headers: auth })).status).toBe(405);
    expect(service.stats().watchers).toBe(0);
  });

  it('releases everything when the client goes away, and a HEAD holds nothing', async () => {
    const g = gated();
    const service = make(g.provider);
    await service.start();
    const id = await create(service);
    await g.started();
    for (let i = 0; i < 50; i++) {
      const res = await service.handle({ method: 'GET', path: `/v1/generations/${id}/events`, headers: auth });
      await readEvents(res, 1);
    }
    expect(service.stats()).toEqual({ openStreams: 0, watchers: 0 });
    const head = await service.handle({ method: 'HEAD', path: `/v1/generations/${id}/events`, headers: auth });
    expect(head.status).toBe(200);
    expect(head.body).toBe('');
    expect(service.stats()).toEqual({ openStreams: 0, watchers: 0 });
  });

  it('sends a keep-alive comment while nothing happens', async () => {
    const g = gated();
    const service = make(g.provider, { push: { keepAliveMs: 30 } });
    await service.start();
    const id = await create(service);
    await g.started();
    const { messages } = await readEvents(await service.handle({ method: 'GET', path: `/v1/generations/${id}/events`, headers: auth }), 3);
    expect(messages[0]!.event).toBe('processing');
    expect(messages.slice(1).map((m) => m.comment)).toEqual(['keepalive', 'keepalive']);
  });

  it('sees transitions made by another instance sharing the store, through the log', async () => {
    const store = new MemoryGenerationStore();
    const ledger = new MemoryLedger({ balances: { alice: 100 } });
    const g = gated();
    const apiKeys = new MemoryApiKeyStore({ keys: [{ apiKey: 'ka', userId: 'alice' }] });
    const worker = make(g.provider, { store, ledger, apiKeys });
    const api = make(g.provider, { store, ledger, apiKeys, runner: { enabled: false }, push: { pollIntervalMs: 20 } });
    await worker.start();
    await api.start();
    const id = await create(worker);
    await g.started();
    const reading = readEvents(await api.handle({ method: 'GET', path: `/v1/generations/${id}/events`, headers: auth }));
    await new Promise((r) => setTimeout(r, 30));
    g.finish('remote');
    const { messages, ended } = await reading;
    expect(ended).toBe(true);
    expect(messages.map((m) => m.event)).toEqual(['processing', 'completed']);
    expect(messages[1]!.data.result).toBe('remote');
  });
});

describe('Prefer: wait=N', () => {
  it('answers as soon as the status changes, with Preference-Applied', async () => {
    const g = gated();
    const service = make(g.provider, { runner: { enabled: true } });
    await service.start();
    const id = await create(service);
    await g.started();
    // wait=60 is past the test's own timeout (30 s): an answer at the deadline instead of at the change fails the test.
    const waiting = service.handle({ method: 'GET', path: `/v1/generations/${id}`, headers: { ...auth, prefer: 'respond-async, wait=60' } });
    await new Promise((r) => setTimeout(r, 30));
    g.progress(0.4); // not a status change: still waiting
    await new Promise((r) => setTimeout(r, 30));
    g.finish('z');
    const res = await waiting;
    expect(res.status).toBe(200);
    expect(res.headers['preference-applied']).toBe('wait=60');
    expect(JSON.parse(String(res.body))).toEqual({ status: 'completed', result: 'z', price: 10 });
    expect(service.stats().watchers).toBe(0);
  });

  it('answers after N seconds with the unchanged state, caps N, and gives details when asked', async () => {
    const g = gated();
    const service = make(g.provider, { push: { maxWaitSeconds: 1 } });
    await service.start();
    const id = await create(service);
    await g.started();
    const res = await service.handle({ method: 'GET', path: `/v1/generations/${id}?include=details`, headers: { ...auth, prefer: 'wait=600' } });
    expect(res.headers['preference-applied']).toBe('wait=1');
    expect(JSON.parse(String(res.body))).toMatchObject({ generationId: id, status: 'processing' });
    // Finished ones answer at once; a malformed preference is ignored.
    g.finish('done');
    for (let i = 0; i < 100 && (await service.get('alice', id)).status !== 'completed'; i++) await new Promise((r) => setTimeout(r, 5));
    const now = await service.handle({ method: 'GET', path: `/v1/generations/${id}`, headers: { ...auth, prefer: 'wait=1' } });
    expect(JSON.parse(String(now.body)).status).toBe('completed');
    const ignored = await service.handle({ method: 'GET', path: `/v1/generations/${id}`, headers: { ...auth, prefer: 'wait=soon' } });
    expect(ignored.headers['preference-applied']).toBeUndefined();
    expect((await service.handle({ method: 'GET', path: `/v1/generations/${'Q'.repeat(22)}`, headers: { ...auth, prefer: 'wait=5' } })).status).toBe(404);
  });
});
