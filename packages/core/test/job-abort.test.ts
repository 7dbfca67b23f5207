import { afterEach, describe, expect, it } from 'vitest';
import { createGenerationService, InProcessQueue, MemoryGenerationStore, MemoryLedger, type GenerationContext, type GenerationService, type ModelDefinition } from '@genservice/core';
import { until } from '@genservice/testing';
import { JobAbort } from '../src/runner/job-signal.js';
import { FakeClock } from '@genservice/testing';
import { stopOn } from './support/fake-time.js';

const model: ModelDefinition = {
  modelId: 'echo',
  title: 'Echo',
  resultType: 'text',
  estimatedGenerationTime: 0.01,
  settings: [{ name: 'prompt', title: 'Prompt', fieldType: 'text', required: true }],
  price: 10,
  failureFee: 2,
};

const services: GenerationService[] = [];
/** The fake clock of a service that has one (its stop waits on it). */
const clocks = new Map<GenerationService, FakeClock>();
afterEach(async () => {
  for (const s of services.splice(0)) {
    const clock = clocks.get(s);
    clocks.delete(s);
    await (clock ? stopOn(clock, s, 1000) : s.stop({ timeoutMs: 1000 }));
  }
});

function settled(service: GenerationService, id: string): Promise<unknown> {
  return until(() => service.get('alice', id), { accept: (g) => g.status === 'completed' || g.status === 'failed', what: `${id} to finish` });
}

describe('JobAbort (a run aborts without an AbortSignal until one is read)', () => {
  it('makes its AbortSignal on first read, and one read after the abort is already aborted with the reason', () => {
    const a = new JobAbort();
    const reason = new Error('timeout');
    a.abort(reason);
    a.abort(new Error('second'));
    expect(a.aborted).toBe(true);
    expect(a.reason).toBe(reason);
    expect(a.signal.aborted).toBe(true);
    expect(a.signal.reason).toBe(reason);
    expect(a.signal).toBe(a.signal);
  });

  it('aborts a signal read earlier, calls its listeners once, and defaults the reason to an AbortError', () => {
    const a = new JobAbort();
    const signal = a.signal;
    let heard = 0;
    let removedHeard = 0;
    a.onAbort(() => heard++);
    const remove = a.onAbort(() => removedHeard++);
    remove();
    a.abort();
    a.abort();
    expect(signal.aborted).toBe(true);
    expect((signal.reason as DOMException).name).toBe('AbortError');
    expect(heard).toBe(1);
    expect(removedHeard).toBe(0);
    let late = 0;
    a.onAbort(() => late++);
    expect(late).toBe(1);
  });

  it('follows another queue’s AbortSignal, also one aborted before the run began', () => {
    const c = new AbortController();
    const { abort, unfollow } = JobAbort.following(c.signal);
    expect(abort.aborted).toBe(false);
    c.abort('stop');
    expect(abort.aborted).toBe(true);
    expect(abort.reason).toBe('stop');
    unfollow();
    const before = new AbortController();
    before.abort('early');
    expect(JobAbort.following(before.signal).abort.reason).toBe('early');
    const d = new AbortController();
    const f = JobAbort.following(d.signal);
    f.unfollow();
    d.abort('after unfollow');
    expect(f.abort.aborted).toBe(false);
  });

  it('is the in-process queue’s job signal: listened to as an AbortSignal is, and taken by the run as its own', () => {
    const a = new JobAbort();
    let heard = 0;
    let removedHeard = 0;
    const removed = (): void => void removedHeard++;
    a.addEventListener('abort', () => heard++, { once: true });
    a.addEventListener('abort', removed);
    a.removeEventListener('abort', removed);
    a.abort('cancelled');
    expect([heard, removedHeard]).toEqual([1, 0]);
    // As an AbortSignal's: a listener added after the abort is never called.
    let late = 0;
    a.addEventListener('abort', () => late++);
    expect(late).toBe(0);
    const b = new JobAbort();
    const followed = JobAbort.following(b);
    expect(followed.abort).toBe(b);
    followed.unfollow();
    b.abort('stop');
    expect(followed.abort.reason).toBe('stop');
  });

  it('a run of the in-process queue makes no AbortController until ctx.signal is read; a provider that reads it late still sees the timeout', async () => {
    let made = 0;
    const Real = globalThis.AbortController;
    class Counting extends Real {
      constructor() {
        super();
        made++;
      }
    }
    globalThis.AbortController = Counting;
    try {
      let ctxSeen: GenerationContext | undefined;
      let reached!: () => void;
      const running = new Promise<void>((r) => (reached = r));
      let proceed!: () => void;
      const pastDeadline = new Promise<void>((r) => (proceed = r));
      const clock = new FakeClock();
      const service = createGenerationService({
        providers: [
          {
            models: [model, { ...model, modelId: 'slow', timeoutMs: 30_000 }],
            generate: async (input, ctx) => {
              if (input.model.modelId === 'echo') return { text: 'hi' };
              ctxSeen = ctx;
              reached();
              // Reads the signal only after its deadline has passed: it must be aborted already, with the timeout.
              await pastDeadline;
              if (!ctx.signal.aborted) throw new Error('the signal read after the deadline was not aborted');
              throw ctx.signal.reason;
            },
          },
        ],
        ledger: new MemoryLedger({ balances: { alice: 100 } }),
        clock,
      });
      services.push(service);
      clocks.set(service, clock);
      await service.start();
      const before = made;
      const { generationId } = await service.create('alice', { modelId: 'echo', settings: { prompt: 'x' } });
      expect(await settled(service, generationId)).toEqual({ status: 'completed', result: 'hi', price: 10 });
      // The in-process queue hands the runner a JobAbort (no AbortController), which the run takes as its own.
      expect(made - before).toBe(0);
      const slow = await service.create('alice', { modelId: 'slow', settings: { prompt: 'x' } });
      await running;
      await clock.advance(30_000);
      proceed();
      expect(await settled(service, slow.generationId)).toEqual({ status: 'failed', price: 2 });
      expect(ctxSeen?.signal.reason).toMatchObject({ name: 'TimeoutAbort' });
    } finally {
      globalThis.AbortController = Real;
    }
  });

  it('a queue that hands out AbortSignals still aborts the run through them', async () => {
    // A queue of our own that passes an AbortSignal (as BullMQ's does) and aborts it on stop.
    const inner = new InProcessQueue();
    const controllers: AbortController[] = [];
    const queue = {
      enqueue: inner.enqueue.bind(inner),
      stop: inner.stop.bind(inner),
      start: (handler: (job: never, signal: AbortSignal) => Promise<void>, settings: never) =>
        inner.start((job, _signal) => {
          const c = new AbortController();
          controllers.push(c);
          return handler(job as never, c.signal);
        }, settings),
    };
    let reason: unknown;
    let listening!: () => void;
    const provided = new Promise<void>((r) => (listening = r));
    const service = createGenerationService({
      providers: [
        {
          models: [model],
          generate: (_i, ctx) =>
            new Promise((_r, reject) => {
              ctx.signal.addEventListener('abort', () => reject((reason = ctx.signal.reason)));
              listening();
            }),
        },
      ],
      ledger: new MemoryLedger({ balances: { alice: 100 } }),
      queue,
      runner: { leaseMs: 1000 },
    });
    services.push(service);
    await service.start();
    const { generationId } = await service.create('alice', { modelId: 'echo', settings: { prompt: 'x' } });
    // The queue aborts its signal while the provider runs (as BullMQ's does on stop).
    await provided;
    controllers[0]!.abort(new Error('queue says stop'));
    await until(async () => reason, { accept: (r) => r !== undefined });
    expect(reason).toMatchObject({ message: 'queue says stop' });
    expect(controllers).toHaveLength(1);
    // Aborted by its queue (shutting down): not failed, left for recovery once its lease expires.
    expect(await service.get('alice', generationId)).toEqual({ status: 'processing' });
  });

  it('ctx members work detached from ctx: progress, output.append, files.put and a destructured signal', async () => {
    let seen: { aborted: boolean; hasProgress: boolean; same: boolean } | undefined;
    const store = new MemoryGenerationStore();
    const service = createGenerationService({
      store,
      providers: [
        {
          models: [{ ...model, resultType: 'image' }],
          generate: async (_input, ctx) => {
            const { progress, signal, files, output } = ctx;
            const { put } = files;
            const { append } = output;
            progress(0.5, 'half');
            append('partial');
            // Bound on first read (issue 36), and the same on every later read.
            seen = { aborted: signal.aborted, hasProgress: typeof progress === 'function', same: ctx.progress === progress && ctx.output === output };
            return { file: await put(new Uint8Array([1, 2, 3]), 'image/png') };
          },
        },
      ],
      ledger: new MemoryLedger({ balances: { alice: 100 } }),
      publicUrl: 'http://files.test',
    });
    services.push(service);
    await service.start();
    const { generationId } = await service.create('alice', { modelId: 'echo', settings: { prompt: 'x' } });
    expect(await settled(service, generationId)).toMatchObject({ status: 'completed', price: 10 });
    expect(seen).toEqual({ aborted: false, hasProgress: true, same: true });
    const events = await store.eventsOf(generationId);
    expect(events.filter((e) => e.type === 'progress').map((e) => e.data)).toEqual([{ fraction: 0.5, message: 'half' }]);
    expect(events.filter((e) => e.type === 'output').map((e) => e.data)).toEqual([{ delta: 'partial' }]);
  });
});
