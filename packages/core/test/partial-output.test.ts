import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  createGenerationService,
  MemoryApiKeyStore,
  MemoryBlobStore,
  MemoryLedger,
  silentLogger,
  type GenerationContext,
  type GenerationService,
  type HttpResponse,
  type ModelDefinition,
} from '@genservice/core';
import { OUTPUT_INTERVAL_MS, OutputReporter } from '../src/runner/output-stream.js';
import { systemClock } from '../src/clock.js';
import { FakeClock, until } from '@genservice/testing';
import { stopOn } from './support/fake-time.js';

describe('OutputReporter: coalescing window', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  function recorder(delayMs = 0) {
    const writes: Array<{ text?: string; preview?: string }> = [];
    let inFlight = 0;
    let maxInFlight = 0;
    const slow = async (): Promise<void> => {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      if (delayMs > 0) await new Promise((r) => setTimeout(r, delayMs));
      inFlight--;
    };
    const sink = {
      text: async (delta: string) => {
        writes.push({ text: delta });
        await slow();
      },
      preview: async (bytes: Uint8Array, mimeType: string) => {
        writes.push({ preview: `${mimeType}:${bytes.length}` });
        await slow();
      },
    };
    return { sink, writes, maxInFlight: () => maxInFlight };
  }

  it('writes the first delta at once, then at most one write per window, with every delta in order', async () => {
    vi.useFakeTimers();
    const r = recorder();
    const out = new OutputReporter(r.sink, silentLogger, systemClock);
    // 1,000 deltas over 2 s of (fake) time: one every 2 ms.
    for (let i = 0; i < 1000; i++) {
      out.append(`${i} `);
      await vi.advanceTimersByTimeAsync(2);
    }
    await out.flush();
    const texts = r.writes.map((w) => w.text);
    expect(texts[0]).toBe('0 ');
    expect(texts.join('')).toBe(Array.from({ length: 1000 }, (_, i) => `${i} `).join(''));
    // The clock is fake, so the count is exact: the first delta at once, then one write per window over the 2,000 ms
    // (8 at 250 ms); the flush finds nothing left.
    expect(out.writes).toBe(r.writes.length);
    expect(out.writes).toBe(1 + 2000 / OUTPUT_INTERVAL_MS);
  });

  it('keeps one write in flight when the store is slower than the window, and still loses nothing', async () => {
    vi.useFakeTimers();
    const r = recorder(1000);
    const out = new OutputReporter(r.sink, silentLogger, systemClock);
    for (let i = 0; i < 100; i++) {
      out.append('x');
      await vi.advanceTimersByTimeAsync(20);
    }
    const flushed = out.flush();
    await vi.advanceTimersByTimeAsync(5000);
    await flushed;
    expect(r.maxInFlight()).toBe(1);
    expect(r.writes.map((w) => w.text).join('')).toBe('x'.repeat(100));
    // 2 s of writes that each take 1 s: the first, one after it, and the flush.
    expect(r.writes.length).toBeLessThanOrEqual(4);
  });

  it('keeps only the latest preview of a window, and writes nothing after stop', async () => {
    vi.useFakeTimers();
    const r = recorder();
    const out = new OutputReporter(r.sink, silentLogger, systemClock);
    out.preview(new Uint8Array(1), 'image/png');
    out.preview(new Uint8Array(2), 'image/png');
    out.preview(new Uint8Array(3), 'image/jpeg');
    await vi.advanceTimersByTimeAsync(OUTPUT_INTERVAL_MS);
    expect(r.writes).toEqual([{ preview: 'image/png:1' }, { preview: 'image/jpeg:3' }]);
    out.append('late');
    out.stop();
    await vi.advanceTimersByTimeAsync(OUTPUT_INTERVAL_MS * 4);
    await out.flush();
    expect(r.writes).toHaveLength(2);
  });
});

const textModel: ModelDefinition = {
  modelId: 'words',
  title: 'Words',
  resultType: 'text',
  estimatedGenerationTime: 0.01,
  settings: [],
  price: 10,
};
const imageModel: ModelDefinition = { ...textModel, modelId: 'picture', title: 'Picture', resultType: 'image' };

/** A provider whose runs wait for the test between steps. */
function stepped() {
  let finish: ((out: unknown) => void) | undefined;
  let started!: (ctx: GenerationContext) => void;
  const run = new Promise<GenerationContext>((r) => (started = r));
  return {
    provider: {
      models: [textModel, imageModel],
      generate: (_input: unknown, c: GenerationContext) =>
        new Promise<never>((resolve) => {
          finish = resolve as (out: unknown) => void;
          started(c);
        }),
    },
    /** The run's context, once the provider was called. */
    started(): Promise<GenerationContext> {
      return run;
    },
    finish(out: unknown): void {
      finish!(out);
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

function make(provider: ReturnType<typeof stepped>['provider'], blobs = new MemoryBlobStore(), clock?: FakeClock): GenerationService {
  const service = createGenerationService({
    providers: [provider as never],
    apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'ka', userId: 'alice' }] }),
    ledger: new MemoryLedger({ balances: { alice: 100 } }),
    blobs,
    publicUrl: 'https://gen.example.test',
    recovery: { intervalMs: 0 },
    ...(clock ? { clock } : {}),
  });
  services.push(service);
  if (clock) clocks.set(service, clock);
  return service;
}

const auth = { authorization: 'Bearer ka' };
type Message = { id?: string; event?: string; data?: any };

/** Reads SSE messages from a streamed body as they come; `until` resolves once the messages so far satisfy `pred`. */
function reader(res: HttpResponse) {
  const it = (res.body as AsyncIterable<string>)[Symbol.asyncIterator]();
  const messages: Message[] = [];
  let buffer = '';
  let ended = false;
  /** Waiters of `until`, checked after every message and at the end. */
  const waiters = new Set<() => void>();
  const check = (): void => {
    for (const w of [...waiters]) w();
  };
  const done = (async () => {
    for (;;) {
      const r = await it.next();
      if (r.done) break;
      buffer += String(r.value);
      let i: number;
      while ((i = buffer.indexOf('\n\n')) !== -1) {
        const block = buffer.slice(0, i);
        buffer = buffer.slice(i + 2);
        if (block.startsWith(':')) continue;
        const msg: Message = {};
        for (const line of block.split('\n')) {
          if (line.startsWith('id: ')) msg.id = line.slice(4);
          else if (line.startsWith('event: ')) msg.event = line.slice(7);
          else if (line.startsWith('data: ')) msg.data = JSON.parse(line.slice(6));
        }
        messages.push(msg);
        check();
      }
    }
    ended = true;
    check();
  })();
  return {
    messages,
    done,
    get ended() {
      return ended;
    },
    until(pred: (m: Message[]) => boolean): Promise<void> {
      return new Promise((resolve, reject) => {
        const w = (): void => {
          if (pred(messages)) {
            waiters.delete(w);
            resolve();
          } else if (ended) {
            waiters.delete(w);
            reject(new Error(`not seen before the stream ended: ${JSON.stringify(messages)}`));
          }
        };
        waiters.add(w);
        w();
      });
    },
    close: () => it.return?.(),
  };
}

async function create(service: GenerationService, modelId: string): Promise<string> {
  const r = await service.handle({ method: 'POST', path: '/v1/generations', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ modelId, settings: {} }) });
  expect(r.status).toBe(201);
  return JSON.parse(String(r.body)).generationId;
}

const get = (service: GenerationService, path: string, headers: Record<string, string> = {}) => service.handle({ method: 'GET', path, headers: { ...auth, ...headers } });
const json = (r: HttpResponse): any => JSON.parse(String(r.body));

describe('partial output on the stream', () => {
  it('streams text deltas as output events, in order, before completed; the poll shape does not change', async () => {
    const s = stepped();
    const service = make(s.provider);
    await service.start();
    const id = await create(service, 'words');
    const ctx = await s.started();
    const stream = reader(await get(service, `/v1/generations/${id}/events`));
    await stream.until((m) => m.length === 1);
    ctx.output.append('Hello');
    await stream.until((m) => m.some((x) => x.event === 'output'));
    // The contract's poll: exactly its processing shape, with or without a long-poll.
    expect(json(await get(service, `/v1/generations/${id}`))).toEqual({ status: 'processing' });
    ctx.output.append(' brave');
    ctx.output.append(' new');
    ctx.output.append(' world');
    s.finish({ text: 'Hello brave new world' });
    await stream.done;
    const events = stream.messages.map((m) => m.event);
    expect(events[0]).toBe('processing');
    expect(events[events.length - 1]).toBe('completed');
    const outputs = stream.messages.filter((m) => m.event === 'output');
    expect(outputs.map((m) => m.data.delta).join('')).toBe('Hello brave new world');
    for (const m of outputs) expect(Object.keys(m.data)).toEqual(['delta']);
    // Coalesced: the three deltas reported together went out in at most two messages (the window's and the flush's).
    expect(outputs.length).toBeLessThanOrEqual(3);
    const ids = stream.messages.map((m) => Number(m.id));
    expect([...ids].sort((a, b) => a - b)).toEqual(ids);
    expect(json(await get(service, `/v1/generations/${id}`))).toEqual({ status: 'completed', result: 'Hello brave new world', price: 10 });
  });

  it('sends a preview as a signed file URL that serves its bytes; deleting the generation deletes the preview file', async () => {
    const s = stepped();
    const blobs = new MemoryBlobStore();
    const service = make(s.provider, blobs);
    await service.start();
    const id = await create(service, 'picture');
    const ctx = await s.started();
    const stream = reader(await get(service, `/v1/generations/${id}/events`));
    ctx.output.preview(new Uint8Array([1, 2, 3, 4]), 'image/png');
    await stream.until((m) => m.some((x) => x.event === 'preview'));
    const preview = stream.messages.find((m) => m.event === 'preview')!;
    expect(Object.keys(preview.data).sort()).toEqual(['mimeType', 'url']);
    expect(preview.data.mimeType).toBe('image/png');
    expect(preview.data.url).toMatch(/^https:\/\/gen\.example\.test\/v1\/files\/[^?]+\?exp=\d+&sig=/);
    const url = new URL(preview.data.url);
    const file = await service.handle({ method: 'GET', path: url.pathname + url.search, headers: {} });
    expect(file.status).toBe(200);
    expect(Buffer.from(file.body as Uint8Array)).toEqual(Buffer.from([1, 2, 3, 4]));
    // Details show it too; the poll does not.
    const details = json(await get(service, `/v1/generations/${id}/details`));
    expect(details.output).toEqual({ preview: { url: expect.stringContaining('/v1/files/'), mimeType: 'image/png' } });
    expect(json(await get(service, `/v1/generations/${id}`))).toEqual({ status: 'processing' });
    s.finish({ bytes: new Uint8Array([9, 9]), mimeType: 'image/png' });
    await stream.done;
    expect(json(await get(service, `/v1/generations/${id}/details`)).output).toBeUndefined();
    const key = decodeURIComponent(url.pathname.split('/').pop()!);
    expect(await blobs.get(key)).not.toBeNull();
    expect((await service.handle({ method: 'DELETE', path: `/v1/generations/${id}`, headers: auth })).status).toBe(204);
    expect(await blobs.get(key)).toBeNull();
  });

  it('a stream opened mid-run gets the output so far after the state; Last-Event-ID resumes with the missed deltas', async () => {
    const s = stepped();
    const service = make(s.provider);
    await service.start();
    const id = await create(service, 'words');
    const ctx = await s.started();
    const first = reader(await get(service, `/v1/generations/${id}/events`));
    ctx.output.append('one ');
    await first.until((m) => m.some((x) => x.event === 'output'));
    const lastId = first.messages[first.messages.length - 1]!.id!;
    await first.close();
    ctx.output.append('two ');
    ctx.output.append('three');
    // Wait until both are in the log (the second after the window).
    await until(async () => json(await get(service, `/v1/generations/${id}/details`)), { accept: (d) => d.output?.text === 'one two three' });
    const late = reader(await get(service, `/v1/generations/${id}/events`));
    await late.until((m) => m.length >= 2);
    expect(late.messages.slice(0, 2).map((m) => [m.event, m.data.delta ?? m.data.status])).toEqual([
      ['processing', 'processing'],
      ['output', 'one two three'],
    ]);
    await late.close();
    const resumed = reader(await get(service, `/v1/generations/${id}/events`, { 'last-event-id': lastId }));
    await resumed.until((m) => m.map((x) => x.data.delta).join('') === 'two three');
    expect(resumed.messages.every((m) => m.event === 'output')).toBe(true);
    await resumed.close();
    s.finish({ text: 'one two three' });
  });

  it('Prefer: wait on details answers new output; the contract long-poll waits for the status', async () => {
    const s = stepped();
    const clock = new FakeClock();
    const service = make(s.provider, new MemoryBlobStore(), clock);
    await service.start();
    const id = await create(service, 'words');
    const ctx = await s.started();
    const details = get(service, `/v1/generations/${id}/details`, { prefer: 'wait=30' });
    const plain = get(service, `/v1/generations/${id}`, { prefer: 'wait=30' });
    // Both are watching before the output comes.
    await until(async () => service.stats().watchers, { accept: (n) => n === 2 });
    ctx.output.append('partial');
    const d = json(await details);
    expect(d).toMatchObject({ status: 'processing', output: { text: 'partial' } });
    let plainDone = false;
    void plain.then(() => (plainDone = true));
    // The output event reached both watchers (details answered on it); 29 s later the plain one still waits.
    await clock.advance(29_000);
    expect(plainDone).toBe(false);
    s.finish({ text: 'partial and whole' });
    expect(json(await plain)).toEqual({ status: 'completed', result: 'partial and whole', price: 10 });
  });
});

describe('partial output across instances', () => {
  it('a stream on another instance gets the deltas through the shared log', async () => {
    const { MemoryGenerationStore } = await import('@genservice/core');
    const store = new MemoryGenerationStore();
    const ledger = new MemoryLedger({ balances: { alice: 100 } });
    const apiKeys = new MemoryApiKeyStore({ keys: [{ apiKey: 'ka', userId: 'alice' }] });
    const s = stepped();
    const make = (runner: boolean): GenerationService => {
      const service = createGenerationService({
        providers: [s.provider as never],
        apiKeys,
        ledger,
        store,
        runner: { enabled: runner },
        recovery: { intervalMs: 0 },
        // No notifier between them: the other instance's feed finds the events by polling the log.
        push: { pollIntervalMs: 20 },
      });
      services.push(service);
      return service;
    };
    const worker = make(true);
    const api = make(false);
    await worker.start();
    await api.start();
    const id = await create(worker, 'words');
    const ctx = await s.started();
    const stream = reader(await get(api, `/v1/generations/${id}/events`));
    await stream.until((m) => m.length >= 1);
    ctx.output.append('across ');
    ctx.output.append('instances');
    s.finish({ text: 'across instances' });
    await stream.done;
    expect(stream.messages.filter((m) => m.event === 'output').map((m) => m.data.delta).join('')).toBe('across instances');
    expect(stream.messages[stream.messages.length - 1]!.event).toBe('completed');
  });
});
