import { afterEach, describe, expect, it } from 'vitest';
import {
  createGenerationService,
  MemoryApiKeyStore,
  MemoryGenerationStore,
  MemoryLedger,
  type GenerationEvent,
  type GenerationRecord,
  type GenerationService,
  type HttpResponse,
  type ModelDefinition,
} from '@genservice/core';
import { FakeClock, until } from '@genservice/testing';
import { stopOn } from './support/fake-time.js';

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
  /** Who waits for the n-th run to start. */
  const starts: Array<{ n: number; resolve: () => void }> = [];
  return {
    provider: {
      models: [model],
      generate: (_input: unknown, ctx: { progress: (f: number) => void; signal: AbortSignal }) =>
        new Promise<{ text: string }>((resolve, reject) => {
          waiting.push({ progress: ctx.progress, done: (text) => resolve({ text }) });
          for (const s of starts.filter((s) => waiting.length >= s.n)) s.resolve();
          ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason));
        }),
    },
    /** Resolves once `n` runs are waiting in the provider. */
    started(n = 1): Promise<void> {
      if (waiting.length >= n) return Promise.resolve();
      return new Promise((resolve) => starts.push({ n, resolve }));
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

function make(provider: ReturnType<typeof gated>['provider'], extra: Record<string, unknown> = {}) {
  const service = createGenerationService({
    providers: [provider as never],
    apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'ka', userId: 'alice' }, { apiKey: 'kb', userId: 'bob' }] }),
    ledger: new MemoryLedger({ balances: { alice: 100, bob: 100 } }),
    recovery: { intervalMs: 0 },
    ...extra,
  });
  services.push(service);
  if (extra.clock instanceof FakeClock) clocks.set(service, extra.clock);
  return service;
}

const auth = { authorization: 'Bearer ka' };

type Message = { id?: string; event?: string; data?: any; comment?: string };

/**
 * A streamed SSE body read one message at a time: `next()` resolves with the next message as it arrives (undefined
 * once the stream has ended), so a test acts right after the event it waits for.
 */
function sse(res: HttpResponse) {
  const it = (res.body as AsyncIterable<string>)[Symbol.asyncIterator]();
  const queue: Message[] = [];
  let buffer = '';
  let ended = false;
  return {
    get ended(): boolean {
      return ended && queue.length === 0;
    },
    async next(): Promise<Message | undefined> {
      for (;;) {
        if (queue.length > 0) return queue.shift();
        if (ended) return undefined;
        const r = await it.next();
        if (r.done) {
          ended = true;
          continue;
        }
        buffer += String(r.value);
        let i: number;
        while ((i = buffer.indexOf('\n\n')) !== -1) {
          const block = buffer.slice(0, i);
          buffer = buffer.slice(i + 2);
          const msg: Message = {};
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) msg.comment = line.slice(1).trim();
            else if (line.startsWith('id: ')) msg.id = line.slice(4);
            else if (line.startsWith('event: ')) msg.event = line.slice(7);
            else if (line.startsWith('data: ')) msg.data = JSON.parse(line.slice(6));
          }
          queue.push(msg);
        }
      }
    },
    close: async (): Promise<void> => {
      await it.return?.();
    },
  };
}

/** Reads SSE messages from a streamed body: `count` of them, or until the stream ends. */
async function readEvents(res: HttpResponse, count = Infinity): Promise<{ messages: Message[]; ended: boolean }> {
  return readRest(sse(res), count);
}

async function readRest(stream: ReturnType<typeof sse>, count = Infinity, messages: Message[] = []): Promise<{ messages: Message[]; ended: boolean }> {
  while (messages.length < count) {
    const m = await stream.next();
    if (!m) return { messages, ended: true };
    messages.push(m);
  }
  await stream.close();
  return { messages, ended: false };
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

/** A service on a fake clock whose one generation is running (held by `g`), and a stream of it past its first message. */
async function streamingOne(g: ReturnType<typeof gated>, extra: Record<string, unknown> = {}) {
  const clock = new FakeClock();
  const service = make(g.provider, { clock, ...extra });
  await service.start();
  const id = await create(service);
  await g.started();
  const stream = sse(await service.handle({ method: 'GET', path: `/v1/generations/${id}/events`, headers: auth }));
  expect((await stream.next())!.event).toBe('processing');
  return { clock, service, id, stream };
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
    const stream = sse(res);
    // Each step once the stream has sent what came before it.
    const seen = [(await stream.next())!];
    g.progress(0.5);
    seen.push((await stream.next())!);
    g.finish('hello');
    const { messages, ended } = await readRest(stream, Infinity, seen);
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

  it('reports progress 1 once completed, whatever the provider last reported (details, list, completed event)', async () => {
    const g = gated();
    const service = make(g.provider);
    await service.start();
    const id = await create(service);
    await g.started();
    const stream = sse(await service.handle({ method: 'GET', path: `/v1/generations/${id}/events`, headers: auth }));
    const seen = [(await stream.next())!];
    g.progress(0.5);
    seen.push((await stream.next())!);
    expect((await service.details('alice', id)).progress).toEqual({ fraction: 0.5 });
    g.finish('hello');
    const { messages } = await readRest(stream, Infinity, seen);
    expect(messages.map((m) => m.event)).toEqual(['processing', 'progress', 'completed']);
    expect(messages[2]!.data).toMatchObject({ status: 'completed', progress: { fraction: 1 } });
    expect((await service.details('alice', id)).progress).toEqual({ fraction: 1 });
    const page = await service.list('alice');
    expect(page.data.find((i) => i.generationId === id)).toMatchObject({ status: 'completed', progress: { fraction: 1 } });
    const listed = await service.handle({ method: 'GET', path: '/v1/generations', headers: auth });
    expect(JSON.parse(String(listed.body)).data[0]).toMatchObject({ generationId: id, progress: { fraction: 1 } });
  });

  it('answers a finished generation with its final state and ends at once', async () => {
    const g = gated();
    const service = make(g.provider);
    await service.start();
    const id = await create(service);
    await g.started();
    g.finish('x');
    await until(() => service.get('alice', id), { accept: (v) => v.status === 'completed' });
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
    // Recorded before the run ends (a progress write still in flight at the end would be refused).
    await until(() => service.details('alice', id), { accept: (v) => v.progress?.fraction === 0.3 });
    g.finish('y');
    await until(() => service.get('alice', id), { accept: (v) => v.status === 'completed' });
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

  it('sends a keep-alive comment every keepAliveMs while nothing happens', async () => {
    const g = gated();
    const { clock, service, id, stream } = await streamingOne(g, { push: { keepAliveMs: 10_000 } });
    for (let i = 0; i < 2; i++) {
      let got: Message | undefined;
      const next = stream.next().then((m) => (got = m));
      await clock.advance(9_999);
      expect(got).toBeUndefined();
      await clock.advance(1);
      await next;
      expect(got).toEqual({ comment: 'keepalive' });
    }
    await stream.close();
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
    const stream = sse(await api.handle({ method: 'GET', path: `/v1/generations/${id}/events`, headers: auth }));
    // Finished once the stream on the other instance has sent the state it started from.
    const seen = [(await stream.next())!];
    g.finish('remote');
    const { messages, ended } = await readRest(stream, Infinity, seen);
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
    // A stream beside the wait: once it has sent the progress event, the feed has handed it to every watcher.
    const probe = sse(await service.handle({ method: 'GET', path: `/v1/generations/${id}/events`, headers: auth }));
    expect((await probe.next())!.event).toBe('processing');
    let answered = false;
    const waiting = service.handle({ method: 'GET', path: `/v1/generations/${id}`, headers: { ...auth, prefer: 'respond-async, wait=60' } }).finally(() => (answered = true));
    await until(async () => service.stats().watchers, { accept: (n) => n === 2 });
    g.progress(0.4); // not a status change: still waiting
    expect((await probe.next())!.event).toBe('progress');
    expect(answered).toBe(false);
    g.finish('z');
    const res = await waiting;
    expect(res.status).toBe(200);
    expect(res.headers['preference-applied']).toBe('wait=60');
    expect(JSON.parse(String(res.body))).toEqual({ status: 'completed', result: 'z', price: 10 });
    expect((await readRest(probe)).messages.map((m) => m.event)).toEqual(['completed']);
    expect(service.stats().watchers).toBe(0);
  });

  it('answers after N seconds with the unchanged state, caps N, and gives details when asked', async () => {
    const g = gated();
    const clock = new FakeClock();
    const service = make(g.provider, { clock, push: { maxWaitSeconds: 1 } });
    await service.start();
    const id = await create(service);
    await g.started();
    let answered = false;
    const waiting = service.handle({ method: 'GET', path: `/v1/generations/${id}?include=details`, headers: { ...auth, prefer: 'wait=600' } }).finally(() => (answered = true));
    await until(async () => service.stats().watchers, { accept: (n) => n === 1 });
    // Capped at maxWaitSeconds: still waiting 1 ms before it, answered at it.
    await clock.advance(999);
    expect(answered).toBe(false);
    await clock.advance(1);
    const res = await waiting;
    expect(res.headers['preference-applied']).toBe('wait=1');
    expect(JSON.parse(String(res.body))).toMatchObject({ generationId: id, status: 'processing' });
    // Finished ones answer at once; a malformed preference is ignored.
    g.finish('done');
    await until(() => service.get('alice', id), { accept: (v) => v.status === 'completed' });
    const now = await service.handle({ method: 'GET', path: `/v1/generations/${id}`, headers: { ...auth, prefer: 'wait=1' } });
    expect(JSON.parse(String(now.body)).status).toBe('completed');
    const ignored = await service.handle({ method: 'GET', path: `/v1/generations/${id}`, headers: { ...auth, prefer: 'wait=soon' } });
    expect(ignored.headers['preference-applied']).toBeUndefined();
    expect((await service.handle({ method: 'GET', path: `/v1/generations/${'Q'.repeat(22)}`, headers: { ...auth, prefer: 'wait=5' } })).status).toBe(404);
  });
});

describe('a stream whose generation goes away', () => {
  it('ends when the service stops, once its runs are over, so a server waiting on its connections can close', async () => {
    const g = gated();
    const { clock, service, id, stream } = await streamingOne(g);
    expect(service.stats().openStreams).toBe(1);
    const rest = readRest(stream);
    await stopOn(clock, service);
    expect((await rest).ended).toBe(true);
    expect(service.stats()).toEqual({ openStreams: 0, watchers: 0 });
  });

  it('ends when its generation is deleted while it streams, and frees its slot', async () => {
    const g = gated();
    const { clock, service, id, stream } = await streamingOne(g, { push: { keepAliveMs: 10_000 } });
    const del = await service.handle({ method: 'DELETE', path: `/v1/generations/${id}`, headers: auth });
    expect(del.status).toBe(204);
    // Its cancel and deletion may have left the log before the feed read it: the stream still ends, at the latest
    // by its next keep-alive, and sends no state of a generation that is gone.
    const rest: Message[] = [];
    let ended = false;
    const done = readRest(stream, Infinity, rest).then((r) => (ended = r.ended));
    for (let i = 0; i < 3 && !ended; i++) await clock.advance(10_000);
    const endedByItself = ended;
    if (!endedByItself) await stream.close();
    await done;
    expect(endedByItself).toBe(true);
    expect(rest.filter((m) => m.event !== undefined && m.event !== 'failed')).toEqual([]);
    expect(service.stats()).toEqual({ openStreams: 0, watchers: 0 });
  });
});

/** A memory store that runs `between` once, right after the next read of `id`'s record or log (`arm`). */
class RacingStore extends MemoryGenerationStore {
  private armed: { id: string; between: () => Promise<void> } | undefined;
  arm(id: string, between: () => Promise<void>): void {
    this.armed = { id, between };
  }
  private async after<T>(id: string, value: T): Promise<T> {
    const armed = this.armed;
    if (armed?.id === id) {
      this.armed = undefined;
      await armed.between();
    }
    return value;
  }
  override async getById(id: string): Promise<GenerationRecord | null> {
    return this.after(id, await super.getById(id));
  }
  override async eventsOf(id: string, after?: number): Promise<GenerationEvent[]> {
    return this.after(id, await super.eventsOf(id, after));
  }
}

describe('a long-poll whose generation is deleted while it waits', () => {
  it('answers 404, as a read after the delete does, not the state from before', async () => {
    const g = gated();
    const clock = new FakeClock();
    const service = make(g.provider, { clock });
    await service.start();
    const id = await create(service);
    await g.started();
    const waiting = service.handle({ method: 'GET', path: `/v1/generations/${id}`, headers: { ...auth, prefer: 'wait=30' } });
    await until(async () => service.stats().watchers, { accept: (n) => n === 1 });
    expect((await service.handle({ method: 'DELETE', path: `/v1/generations/${id}`, headers: auth })).status).toBe(204);
    await clock.advance(30_000);
    const res = await waiting;
    expect(res.status).toBe(404);
    expect(service.stats().watchers).toBe(0);
  });
});

describe('a transition committed while a stream starts', () => {
  it('between its reads of the record and of the log: sent, and the stream ends after it', async () => {
    const g = gated();
    const clock = new FakeClock();
    const store = new RacingStore();
    const service = make(g.provider, { clock, store, push: { keepAliveMs: 10_000 } });
    await service.start();
    const id = await create(service);
    await g.started();
    // Completed right after the stream's first read, before its second.
    store.arm(id, async () => {
      g.finish('raced');
      await until(() => store.getById(id), { accept: (r) => r?.status === 'completed' });
    });
    const stream = sse(await service.handle({ method: 'GET', path: `/v1/generations/${id}/events`, headers: auth }));
    const rest: Message[] = [];
    let ended = false;
    const done = readRest(stream, Infinity, rest).then((r) => (ended = r.ended));
    // Once a message has said it completed, the stream ends with no more waiting: a keep-alive later it must be over.
    await until(() => ended || rest.some((m) => m.event === 'completed'));
    await clock.advance(10_000);
    const endedByItself = ended;
    if (!endedByItself) await stream.close();
    await done;
    expect(endedByItself).toBe(true);
    const events = rest.filter((m) => m.event !== undefined);
    expect(events.at(-1)).toMatchObject({ event: 'completed', data: { status: 'completed', result: 'raced' } });
    // No message says one thing in its type and another in its data about the end.
    for (const m of events) if (m.event === 'completed' || m.event === 'failed') expect(m.data.status).toBe(m.event);
  });
});

describe('keep-alives of many streams', () => {
  it('look for their generations one read at a time, each keep-alive sent', async () => {
    class CountingStore extends MemoryGenerationStore {
      inFlight = 0;
      most = 0;
      reads = 0;
      override async getById(id: string): Promise<GenerationRecord | null> {
        this.reads++;
        this.most = Math.max(this.most, ++this.inFlight);
        // Answered on a later turn, so reads made together would overlap.
        await new Promise<void>((r) => setImmediate(r));
        this.inFlight--;
        return super.getById(id);
      }
    }
    const g = gated();
    const clock = new FakeClock();
    const store = new CountingStore();
    const service = make(g.provider, { clock, store, push: { keepAliveMs: 10_000 } });
    await service.start();
    const id = await create(service);
    await g.started();
    const streams = [];
    for (let i = 0; i < 4; i++) {
      const s = sse(await service.handle({ method: 'GET', path: `/v1/generations/${id}/events`, headers: auth }));
      expect((await s.next())!.event).toBe('processing');
      streams.push(s);
    }
    const before = store.reads;
    store.most = 0;
    const kept = streams.map((s) => s.next());
    await clock.advance(10_000);
    expect(await Promise.all(kept)).toEqual(streams.map(() => ({ comment: 'keepalive' })));
    await until(() => store.reads - before, { accept: (n) => n >= 4 });
    expect(store.most).toBe(1);
    for (const s of streams) await s.close();
  });
});
