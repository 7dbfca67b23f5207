import { Queue, Worker } from 'bullmq';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger, type Job, type JobSignal } from '@genservice/core/ports';
import { until } from '@genservice/testing';
import { BullMQQueue } from '../src/index.js';
import { QUEUE_NAME, REDIS_URL, obliterate, randomName } from './helpers.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!().catch(() => undefined);
});

function subject(): { queue: BullMQQueue; prefix: string } {
  const prefix = randomName('gsq');
  const queue = new BullMQQueue({ connection: REDIS_URL, prefix, lockDurationMs: 2000, stalledIntervalMs: 1000 });
  cleanups.push(async () => {
    await queue.stop({ timeoutMs: 500 });
    await obliterate(prefix);
  });
  return { queue, prefix };
}

const job = (): Job => ({ generationId: randomName('gen'), modelId: 'm' });

describe('BullMQQueue lifecycle', () => {
  it('can be started again after a stop, and enqueue after a stop keeps the job for the next start', async () => {
    const { queue, prefix } = subject();
    const seen: string[] = [];
    await queue.start(async (j) => {
      seen.push(j.generationId);
    });
    const first = job();
    await queue.enqueue(first);
    await until(() => seen.includes(first.generationId), { what: 'the first job', timeoutMs: 5000, intervalMs: 10 });
    await queue.stop({ timeoutMs: 1000 });

    const later = job();
    await queue.enqueue(later); // the producer reopens; the job waits in Redis
    // No worker of the queue is connected to Redis after the stop: nothing can take the job.
    const raw = new Queue(QUEUE_NAME, { connection: { url: REDIS_URL }, prefix });
    try {
      expect(await raw.getWorkersCount()).toBe(0);
    } finally {
      await raw.close();
    }
    expect(seen).not.toContain(later.generationId);
    // Waiting: fair scheduling gives every job a priority, so BullMQ keeps it among the prioritized.
    const counts = await queue.counts();
    expect((counts.waiting ?? 0) + (counts.prioritized ?? 0)).toBe(1);

    await queue.start(async (j) => {
      seen.push(`again:${j.generationId}`);
    });
    await until(() => seen.includes(`again:${later.generationId}`), { what: 'the job enqueued while stopped', timeoutMs: 5000, intervalMs: 10 });
  });

  it('enqueues again a generation whose earlier BullMQ job failed (recovery must not be swallowed by the kept failure)', async () => {
    const { queue, prefix } = subject();
    const j = job();
    // Make a failed job with the generation's id, as an older release or a stalled-too-often job would leave.
    const raw = new Queue(QUEUE_NAME, { connection: { url: REDIS_URL }, prefix });
    const failing = new Worker(
      QUEUE_NAME,
      async () => {
        throw new Error('boom');
      },
      { connection: { url: REDIS_URL }, prefix },
    );
    try {
      await raw.add('generation', j, { jobId: j.generationId, removeOnFail: { age: 86_400 } });
      await until(async () => (await raw.getJobState(j.generationId)) === 'failed', { what: 'the job to fail', timeoutMs: 5000, intervalMs: 20 });
    } finally {
      await failing.close();
      await raw.close();
    }
    const seen: string[] = [];
    await queue.start(async (got) => {
      seen.push(got.generationId);
    });
    await queue.enqueue(j);
    await until(() => seen.includes(j.generationId), { what: 'the re-enqueued job', timeoutMs: 5000, intervalMs: 10 });
  });

  it('a handler that ignores its abort signal does not hold up stop; its job is handed back to Redis', async () => {
    const { queue } = subject();
    let started = false;
    let signal: JobSignal | undefined;
    await queue.start((_j, s) => {
      started = true;
      signal = s;
      return new Promise<void>(() => undefined); // never settles
    });
    await queue.enqueue(job());
    await until(() => started, { what: 'the job to start', timeoutMs: 5000, intervalMs: 10 });
    // A stop that waited for the job instead of its timeout would never return (the job never settles).
    await queue.stop({ timeoutMs: 100 });
    expect(signal?.aborted).toBe(true);
    const counts = await queue.counts();
    expect(counts.delayed).toBe(1);
    expect(counts.active).toBe(0);
  });

  it('stop returns promptly while Redis is unreachable', async () => {
    const errors: string[] = [];
    const logger = { ...silentLogger, warn: (obj: object) => void errors.push(String((obj as { source?: string }).source)) };
    const queue = new BullMQQueue({ connection: 'redis://127.0.0.1:1', prefix: randomName('gsq'), logger });
    await queue.start(async () => undefined);
    // The worker has tried Redis and failed (it now retries): the stop comes while it is reconnecting.
    await until(() => errors.includes('worker'), { what: 'the worker to report Redis unreachable', timeoutMs: 5000, intervalMs: 10 });
    // Returning at all is the check: a stop that waited for Redis would hang until the test's timeout.
    await expect(queue.stop({ timeoutMs: 100 })).resolves.toBeUndefined();
  });

  it('abort(id) fires only the signal of that job', async () => {
    const { queue } = subject();
    const signals = new Map<string, JobSignal>();
    await queue.start(
      (j, s) =>
        new Promise<void>((resolve) => {
          signals.set(j.generationId, s);
          // Ends when aborted: `a` by abort(id), `b` by the stop at the end of the test.
          s.addEventListener('abort', () => resolve());
        }),
    );
    const [a, b] = [job(), job()];
    await queue.enqueue(a);
    await queue.enqueue(b);
    await until(() => signals.size === 2, { what: 'both jobs to run', timeoutMs: 5000, intervalMs: 10 });
    expect(queue.abort(a.generationId)).toBe(true);
    expect(signals.get(a.generationId)!.aborted).toBe(true);
    expect(signals.get(b.generationId)!.aborted).toBe(false);
    // Its handler resolved on the abort: once BullMQ holds only b as active, a's run is over.
    await until(async () => (await queue.counts()).active === 1, { what: 'the aborted job to end', timeoutMs: 5000, intervalMs: 10 });
    expect(queue.abort(a.generationId)).toBe(false); // it has finished
    expect(signals.get(b.generationId)!.aborted).toBe(false);
  });
});
