import { afterEach, describe, expect, it } from 'vitest';
import { createGenerationService, MemoryApiKeyStore, MemoryLedger, type GenerationService, type HttpResponse } from '@genservice/core';
import { until } from '@genservice/testing';

/** A provider whose runs wait until `finish()` lets the oldest go. */
function gated() {
  const waiting: Array<(text: string) => void> = [];
  return {
    provider: {
      models: [{ modelId: 'm', title: 'M', resultType: 'text' as const, estimatedGenerationTime: 1, settings: [], price: 1 }],
      generate: () => new Promise<{ text: string }>((resolve) => waiting.push((text) => resolve({ text }))),
    },
    get running(): number {
      return waiting.length;
    },
    finish(): void {
      waiting.shift()!('done');
    },
  };
}

const services: GenerationService[] = [];
afterEach(async () => {
  await Promise.all(services.splice(0).map((s) => s.stop({ timeoutMs: 100 })));
});

type Message = { event?: string; data?: any };

/** The SSE messages of a streamed body, one at a time (keep-alive comments skipped). */
function messages(res: HttpResponse): () => Promise<Message | undefined> {
  const it = (res.body as AsyncIterable<string>)[Symbol.asyncIterator]();
  const queue: Message[] = [];
  let buffer = '';
  return async () => {
    for (;;) {
      if (queue.length > 0) return queue.shift();
      const r = await it.next();
      if (r.done) return undefined;
      buffer += String(r.value);
      let i: number;
      while ((i = buffer.indexOf('\n\n')) !== -1) {
        const block = buffer.slice(0, i);
        buffer = buffer.slice(i + 2);
        if (block.startsWith(':')) continue;
        const msg: Message = {};
        for (const line of block.split('\n')) {
          if (line.startsWith('event: ')) msg.event = line.slice(7);
          else if (line.startsWith('data: ')) msg.data = JSON.parse(line.slice(6));
        }
        queue.push(msg);
      }
    }
  };
}

describe('queue position of a pending generation (details and event stream)', () => {
  it('details carry queue {position, aheadOfYou, etaSeconds}; the contract view does not; the stream sends it as it moves, only ever down', async () => {
    const g = gated();
    const service = createGenerationService({
      providers: [g.provider],
      apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'ka', userId: 'alice' }] }),
      ledger: new MemoryLedger({ balances: { alice: 100 } }),
      runner: { concurrency: 1 },
      recovery: { intervalMs: 0 },
      push: { queuePositionIntervalMs: 10 },
    });
    services.push(service);
    await service.start();
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) ids.push((await service.create('alice', { modelId: 'm' })).generationId);
    await until(() => g.running === 1, 'the first run');
    const last = ids[3]!;
    const auth = { authorization: 'Bearer ka' };

    expect((await service.details('alice', last)).queue).toEqual({ position: 3, aheadOfYou: 2, etaSeconds: null });
    expect((await service.details('alice', ids[0]!)).queue).toBeUndefined();
    const viaHttp = await service.handle({ method: 'GET', path: `/v1/generations/${last}?include=details`, headers: auth });
    expect(JSON.parse(String(viaHttp.body))).toMatchObject({ status: 'pending', queue: { position: 3, aheadOfYou: 2 } });
    // The contract's exact shape stays as it was.
    const plain = await service.handle({ method: 'GET', path: `/v1/generations/${last}`, headers: auth });
    expect(JSON.parse(String(plain.body))).toEqual({ status: 'pending' });

    const next = messages(await service.handle({ method: 'GET', path: `/v1/generations/${last}/events`, headers: auth }));
    const first = (await next())!;
    expect(first).toMatchObject({ event: 'created', data: { status: 'pending', queue: { position: 3, aheadOfYou: 2, etaSeconds: null } } });
    const ahead: number[] = [first.data.queue.aheadOfYou];
    for (let finished = 0; finished < 3; finished++) {
      g.finish();
      await until(() => g.running === 1, 'the next run');
    }
    // Every message until it runs: `queue` ones, each further down the line than the last, with an estimate once a run was timed.
    for (;;) {
      const m = (await next())!;
      if (m.event !== 'queue') {
        expect(m).toMatchObject({ event: 'processing', data: { status: 'processing' } });
        expect(m.data.queue).toBeUndefined();
        break;
      }
      expect(m.data.aheadOfYou).toBeLessThan(ahead.at(-1)!);
      expect(m.data.position).toBe(m.data.aheadOfYou + 1);
      expect(typeof m.data.etaSeconds).toBe('number');
      ahead.push(m.data.aheadOfYou);
    }
    g.finish();
    expect((await next())?.event).toBe('completed');
  });
});
