import { afterEach, describe, expect, it } from 'vitest';
import {
  createGenerationService,
  MemoryApiKeyStore,
  MemoryGenerationStore,
  MemoryLedger,
  type GenerationService,
  type ModelProvider,
} from '@genservice/core';
import { until } from '@genservice/testing';
import { RedisNotifier } from '../src/index.js';
import { REDIS_URL, randomName } from './helpers.js';

const open: Array<{ stop(): Promise<void> }> = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((o) => o.stop()));
});

function notifier(channel: string): RedisNotifier {
  const n = new RedisNotifier({ connection: REDIS_URL, channel });
  open.push(n);
  return n;
}

describe('RedisNotifier', () => {
  it('wakes every subscriber of the channel, and no other channel', async () => {
    const channel = randomName('gs-notify');
    const a = notifier(channel);
    const b = notifier(channel);
    const other = notifier(randomName('gs-notify'));
    let wokeA = 0;
    let wokeB = 0;
    let wokeOther = 0;
    await a.start(() => wokeA++);
    await b.start(() => wokeB++);
    await other.start(() => wokeOther++);
    a.publish();
    a.publish(); // same tick: one message
    await until(() => wokeA >= 1 && wokeB >= 1, 'both subscribers');
    // Markers published after it: pub/sub keeps each connection's order, so a second message from that tick (or one
    // that leaked to the other channel) would have arrived before them.
    a.publish();
    other.publish();
    await until(() => wokeB >= 2 && wokeOther >= 1, 'the markers');
    expect(wokeB).toBe(2);
    expect(wokeOther).toBe(1);
  });

  it('never throws on publish while Redis is unreachable', async () => {
    const n = new RedisNotifier({ connection: 'redis://127.0.0.1:1', channel: 'x' });
    open.push(n);
    await n.start(() => undefined);
    expect(() => n.publish()).not.toThrow();
    // Without an offline queue the publish (sent in a microtask) fails at once; a turn of the loop lets its rejection
    // be handled within the test (an unhandled one would fail the run).
    await new Promise((r) => setImmediate(r));
  });

  it("lets a stream on one instance see another instance's transition at once, without waiting for the log poll", async () => {
    const channel = randomName('gs-notify');
    const store = new MemoryGenerationStore();
    const ledger = new MemoryLedger({ balances: { alice: 100 } });
    const apiKeys = new MemoryApiKeyStore({ keys: [{ apiKey: 'ka', userId: 'alice' }] });
    let finish: (() => void) | undefined;
    const provider: ModelProvider = {
      models: [{ modelId: 'm', title: 'M', resultType: 'text', estimatedGenerationTime: 1, settings: [], price: 1 }],
      generate: () => new Promise((resolve) => (finish = () => resolve({ text: 'from the worker' }))),
    };
    const services: GenerationService[] = [];
    // A poll interval far longer than the test: only the notifier can wake the API instance in time.
    for (const runner of [true, false]) {
      const s = createGenerationService({
        providers: [provider],
        store,
        ledger,
        apiKeys,
        runner: { enabled: runner },
        recovery: { intervalMs: 0 },
        push: { notifier: new RedisNotifier({ connection: REDIS_URL, channel }), pollIntervalMs: 600_000 },
      });
      services.push(s);
      open.push({ stop: () => s.stop({ timeoutMs: 100 }) });
      await s.start();
    }
    const [worker, api] = services as [GenerationService, GenerationService];
    // Created on the worker (each in-process queue is its own); streamed from the API instance.
    const { generationId } = await worker.create('alice', { modelId: 'm' });
    await until(() => finish !== undefined, 'the worker to start it');
    const res = await api.handle({ method: 'GET', path: `/v1/generations/${generationId}/events`, headers: { authorization: 'Bearer ka' } });
    const it = (res.body as AsyncIterable<string>)[Symbol.asyncIterator]();
    const first = await it.next();
    expect(String(first.value)).toContain('event: ');
    finish!();
    let text = '';
    for (;;) {
      const r = await it.next();
      if (r.done) break;
      text += String(r.value);
    }
    expect(text).toContain('event: completed');
    expect(text).toContain('from the worker');
  });
});
