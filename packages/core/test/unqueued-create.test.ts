/**
 * Issue 37, item 5: once a create's row is committed it answers 201, whatever the queue says. A job the queue refused
 * stays pending and the service enqueues it again itself (on its clock: 1, 2, 3 s later; then recovery), and it runs
 * once the queue takes it.
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  createGenerationService,
  InProcessQueue,
  MemoryApiKeyStore,
  MemoryLedger,
  UnavailableError,
  type GenerationService,
} from '@genservice/core';
import type { EnqueueOptions, Job } from '@genservice/core/ports';
import { FakeClock, until } from '@genservice/testing';
import { stopOn } from './support/fake-time.js';

const T0 = Date.UTC(2026, 0, 15, 12, 0, 0);

/** The in-process queue, refusing every enqueue while `refusing` is set (as a Redis past its enqueue timeout). */
class FlakyQueue extends InProcessQueue {
  refusing = true;
  attempts = 0;
  override async enqueue(job: Job, options?: EnqueueOptions): Promise<void> {
    this.attempts++;
    if (this.refusing) throw new UnavailableError('no answer from the queue within 1000 ms');
    return super.enqueue(job, options);
  }
}

const running: Array<{ service: GenerationService; clock: FakeClock }> = [];
afterEach(async () => {
  for (const { service, clock } of running.splice(0)) await stopOn(clock, service);
});

function make(): { service: GenerationService; clock: FakeClock; queue: FlakyQueue; ledger: MemoryLedger; runs: string[] } {
  const clock = new FakeClock(T0);
  const queue = new FlakyQueue({ clock });
  const ledger = new MemoryLedger({ balances: { alice: 1000 }, clock });
  const runs: string[] = [];
  const service = createGenerationService({
    providers: [
      {
        models: [{ modelId: 'm', title: 'M', resultType: 'text', estimatedGenerationTime: 1, settings: [], price: 10 }],
        generate: async (_input, ctx) => {
          runs.push(ctx.generationId);
          return { text: 'ok' };
        },
      },
    ],
    apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'ka', userId: 'alice' }], clock }),
    ledger,
    queue,
    // Recovery only on its interval, far away: the quick re-enqueue is what these tests watch.
    recovery: { onStart: false, intervalMs: 3_600_000 },
    clock,
  });
  running.push({ service, clock });
  return { service, clock, queue, ledger, runs };
}

const post = async (service: GenerationService, path: string, body: unknown) => {
  const res = await service.handle({ method: 'POST', path, headers: { authorization: 'Bearer ka', 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, json: JSON.parse(String(res.body)) as Record<string, any> };
};

describe('a create whose job the queue refuses', () => {
  it('answers 201, stays pending with its reserve held, and runs once when the service enqueues it again on its clock', async () => {
    const { service, clock, queue, ledger, runs } = make();
    await service.start();
    const created = await post(service, '/v1/generations', { modelId: 'm' });
    expect(created.status).toBe(201);
    const id = created.json.generationId as string;
    expect((await service.get('alice', id)).status).toBe('pending');
    expect(await ledger.account('alice')).toEqual({ balance: 990, reserved: 10, settled: 0 });
    expect(queue.attempts).toBe(1);

    // The first re-enqueue is 1 s after the create: not a millisecond sooner. The queue still refuses it.
    await clock.advance(999);
    expect(queue.attempts).toBe(1);
    await clock.advance(1);
    await until(() => queue.attempts === 2, 'the first re-enqueue');
    expect((await service.get('alice', id)).status).toBe('pending');

    // The queue answers again: the next attempt (2 s after the first) hands it over and it runs, once.
    queue.refusing = false;
    await clock.advance(2000);
    await until(() => service.get('alice', id), { accept: (g) => g.status === 'completed', what: 'the generation to complete' });
    expect(runs).toEqual([id]);
    expect(await ledger.account('alice')).toEqual({ balance: 990, reserved: 0, settled: 10 });
  });

  it('a batch the queue refuses part-way is 201 too; every member runs once the queue answers', async () => {
    const { service, clock, queue, ledger, runs } = make();
    await service.start();
    queue.refusing = false;
    let taken = 0;
    const enqueue = queue.enqueue.bind(queue);
    // The queue takes the first two jobs, then stops answering.
    queue.enqueue = async (job, options) => {
      if (++taken > 2) queue.refusing = true;
      return enqueue(job, options);
    };
    const created = await post(service, '/v1/batches', { requests: Array.from({ length: 5 }, () => ({ modelId: 'm' })) });
    expect(created.status).toBe(201);
    const batchId = created.json.batchId as string;
    expect((await service.batches.get('alice', batchId)).counts.failed).toBe(0);
    queue.refusing = false;
    queue.enqueue = enqueue;
    await clock.advance(1000);
    await until(() => service.batches.get('alice', batchId), { accept: (b) => b.status === 'completed', what: 'the batch to complete' });
    expect((await service.batches.get('alice', batchId)).counts).toEqual({ pending: 0, processing: 0, completed: 5, failed: 0 });
    expect(new Set(runs).size).toBe(5);
    expect(runs).toHaveLength(5);
    expect(await ledger.account('alice')).toEqual({ balance: 950, reserved: 0, settled: 50 });
  });
});
