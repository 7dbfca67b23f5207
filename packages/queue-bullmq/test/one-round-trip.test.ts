import { afterEach, describe, expect, it } from 'vitest';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { silentLogger } from '@genservice/core';
import type { Job } from '@genservice/core/ports';
import { BullMQQueue } from '../src/index.js';
import { fairOrder, fairTagUnits } from '@genservice/core/ports';
import { fairAddScript, installFairAdd, LOW_BAND, REBASE_AT } from '../src/fair-add.js';
import { QUEUE_NAME, REDIS_URL, obliterate, randomName } from './helpers.js';
import { until } from '@genservice/testing';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** The commands clients (not scripts) sent that name `prefix`, seen through MONITOR while `work` runs. */
async function clientCommands(prefix: string, work: () => Promise<void>): Promise<string[]> {
  const monitor = await new Redis(REDIS_URL).monitor();
  const seen: string[] = [];
  monitor.on('monitor', (_time: string, args: string[], source: string) => {
    if (!source.startsWith('lua') && args.some((a) => String(a).includes(prefix))) seen.push(String(args[0]).toLowerCase());
  });
  try {
    await work();
    // MONITOR lines arrive after the replies: a PING through the monitored server orders them.
    const probe = new Redis(REDIS_URL);
    await probe.ping(prefix);
    await probe.quit();
    await until(() => seen.includes('ping'), { what: 'the PING in the MONITOR stream', timeoutMs: 5000, intervalMs: 10 });
  } finally {
    monitor.disconnect();
  }
  return seen.filter((c) => c !== 'ping');
}

/** Waiting jobs by owner (of owners without an organisation) from the fair order's hash: its per-line counts. */
function waitingByLine(hash: Record<string, string>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [field, n] of Object.entries(hash)) {
    const parts = field.split('\u001f');
    if (parts.length === 3) out[parts[1]!] = (out[parts[1]!] ?? 0) + Number(n);
  }
  return out;
}

describe('BullMQQueue: a fresh enqueue is one round trip', () => {
  it('the installed BullMQ has the script and command the one-round-trip path builds on', async () => {
    const prefix = randomName('gsrt');
    const queue = new Queue(QUEUE_NAME, { connection: { url: REDIS_URL }, prefix });
    cleanups.push(async () => {
      await queue.close();
      await obliterate(prefix);
    });
    // If this fails after a BullMQ upgrade, fair-add.ts must follow BullMQ's new script before the upgrade ships.
    expect(await installFairAdd(queue)).toBe(true);
    expect(fairAddScript('return 1')).toBeNull();
  });

  it('sends one command per fresh enqueue, and stores the job as Queue.add does with the owner’s place as priority', async () => {
    const prefix = randomName('gsrt');
    const queue = new BullMQQueue({ connection: REDIS_URL, prefix });
    cleanups.push(async () => {
      await queue.stop({ timeoutMs: 1000 });
      await obliterate(prefix);
    });
    // The first add loads the script into Redis (EVALSHA, then EVAL on NOSCRIPT): not the steady state measured.
    await queue.enqueue({ generationId: 'warm-1', modelId: 'm', ownerId: 'alice' }, { fresh: true });
    const sent = await clientCommands(prefix, () => queue.enqueue({ generationId: 'gen-a2', modelId: 'm', ownerId: 'alice' }, { fresh: true }));
    expect(sent).toEqual(['evalsha']);
    await queue.enqueue({ generationId: 'gen-b1', modelId: 'm', ownerId: 'bob' }, { fresh: true });
    await queue.enqueue({ generationId: 'gen-x1', modelId: 'm' }, { fresh: true });

    const redis = new Redis(REDIS_URL);
    cleanups.push(async () => void (await redis.quit()));
    const key = (id: string) => `${prefix}:${QUEUE_NAME}:${id}`;
    expect(waitingByLine(await redis.hgetall(`${prefix}:${QUEUE_NAME}:gs-fair`))).toEqual({ alice: 2, bob: 1, '': 1 });
    const a2 = await redis.hgetall(key('gen-a2'));
    // Alice's second job: one round (FAIR_SCALE units) behind the first waiting job, as `fairTagUnits` says.
    const a2Priority = fairOrder(fairTagUnits(0, 2, 1, 1), 1) + 1;
    expect(a2.priority).toBe(String(a2Priority));
    expect(JSON.parse(a2.opts!)).toMatchObject({ priority: a2Priority });
    expect((await redis.hgetall(key('gen-b1'))).priority).toBe(String(fairOrder(0, 1) + 1));

    // The same job added by BullMQ itself (another queue name, priority given): the same fields and values.
    const plain = new Queue('plain', { connection: { url: REDIS_URL }, prefix });
    cleanups.push(async () => {
      await plain.obliterate({ force: true });
      await plain.close();
    });
    await plain.add('generation', { generationId: 'gen-a2', modelId: 'm', ownerId: 'alice' }, { jobId: 'gen-a2', priority: a2Priority, removeOnComplete: true, removeOnFail: { age: 86_400 } });
    const ref = await redis.hgetall(`${prefix}:plain:gen-a2`);
    expect(Object.keys(a2).sort()).toEqual(Object.keys(ref).sort());
    expect({ ...a2, timestamp: '' }).toEqual({ ...ref, timestamp: '' });
    expect(await redis.zscore(`${prefix}:${QUEUE_NAME}:prioritized`, 'gen-a2')).not.toBeNull();

    // A duplicate id is BullMQ's no-op, and counts nothing.
    await queue.enqueue({ generationId: 'gen-a2', modelId: 'm', ownerId: 'alice' }, { fresh: true });
    expect(waitingByLine(await redis.hgetall(`${prefix}:${QUEUE_NAME}:gs-fair`)).alice).toBe(2);
  });

  it("computes the fair order's tags as `fairTagUnits` does: weights, users of an organisation, priorities", async () => {
    const prefix = randomName('gsrt');
    const queue = new BullMQQueue({ connection: REDIS_URL, prefix });
    cleanups.push(async () => {
      await queue.stop({ timeoutMs: 1000 });
      await obliterate(prefix);
    });
    const redis = new Redis(REDIS_URL);
    cleanups.push(async () => void (await redis.quit()));
    const jobs: Array<Job & { expected: number }> = [
      { generationId: 'g1', modelId: 'm', ownerId: 'ann', organizationId: 'gold', weight: 5, expected: fairOrder(fairTagUnits(0, 1, 1, 5), 1) },
      { generationId: 'g2', modelId: 'm', ownerId: 'ann', organizationId: 'gold', weight: 5, expected: fairOrder(fairTagUnits(0, 2, 1, 5), 1) },
      { generationId: 'g3', modelId: 'm', ownerId: 'ann', organizationId: 'gold', weight: 5, expected: fairOrder(fairTagUnits(0, 3, 1, 5), 1) },
      // A second user of the organisation: two users share its turns.
      { generationId: 'g4', modelId: 'm', ownerId: 'bea', organizationId: 'gold', weight: 5, expected: fairOrder(fairTagUnits(0, 1, 2, 5), 1) },
      { generationId: 'g5', modelId: 'm', ownerId: 'bea', organizationId: 'gold', weight: 5, expected: fairOrder(fairTagUnits(0, 2, 2, 5), 1) },
      { generationId: 's1', modelId: 'm', ownerId: 'sam', organizationId: 'silver', weight: 2, expected: fairOrder(fairTagUnits(0, 1, 1, 2), 1) },
      { generationId: 's2', modelId: 'm', ownerId: 'sam', organizationId: 'silver', weight: 2, expected: fairOrder(fairTagUnits(0, 2, 1, 2), 1) },
      { generationId: 'h1', modelId: 'm', ownerId: 'sam', organizationId: 'silver', weight: 2, priority: 'high', expected: fairOrder(fairTagUnits(0, 1, 1, 2), 0) },
      { generationId: 'l1', modelId: 'm', ownerId: 'sam', organizationId: 'silver', weight: 2, priority: 'low', expected: LOW_BAND + fairOrder(fairTagUnits(0, 1, 1, 2), 1) },
      { generationId: 'l2', modelId: 'm', ownerId: 'sam', organizationId: 'silver', weight: 2, priority: 'low', expected: LOW_BAND + fairOrder(fairTagUnits(0, 2, 1, 2), 1) },
      // A weight of 3 does not divide FAIR_SCALE: both round down alike.
      { generationId: 't1', modelId: 'm', ownerId: 'tom', organizationId: 'odd', weight: 3, expected: fairOrder(fairTagUnits(0, 1, 1, 3), 1) },
      { generationId: 't2', modelId: 'm', ownerId: 'tom', organizationId: 'odd', weight: 3, expected: fairOrder(fairTagUnits(0, 2, 1, 3), 1) },
    ];
    for (const { expected: _, ...j } of jobs) await queue.enqueue(j, { fresh: true });
    for (const j of jobs) expect((await redis.hgetall(`${prefix}:${QUEUE_NAME}:${j.generationId}`)).priority, j.generationId).toBe(String(j.expected + 1));
  });

  it('moves a band that came far from 0 back, in order, before it tags a new job', async () => {
    const prefix = randomName('gsrt');
    const queue = new BullMQQueue({ connection: REDIS_URL, prefix });
    cleanups.push(async () => {
      await queue.stop({ timeoutMs: 1000 });
      await obliterate(prefix);
    });
    // A job waiting far along (as after a backlog that never emptied): added by BullMQ itself to the same queue.
    const plain = new Queue(QUEUE_NAME, { connection: { url: REDIS_URL }, prefix });
    cleanups.push(() => plain.close());
    const far = REBASE_AT + 1000;
    await plain.add('generation', { generationId: 'old', modelId: 'm', ownerId: 'zed' }, { jobId: 'old', priority: far + 1 });
    await plain.add('generation', { generationId: 'older', modelId: 'm', ownerId: 'zed' }, { jobId: 'older', priority: far + 41 });
    await queue.enqueue({ generationId: 'new', modelId: 'm', ownerId: 'amy' }, { fresh: true });
    const redis = new Redis(REDIS_URL);
    cleanups.push(async () => void (await redis.quit()));
    const priorityOf = async (id: string): Promise<number> => Number(await redis.hget(`${prefix}:${QUEUE_NAME}:${id}`, 'priority'));
    // The first waiting job's tag became 0 (its sort key keeps its rank), the others kept their distance, and the new
    // job was tagged from there: level with the first.
    const v = Math.floor(far / 2) * 2;
    expect(await priorityOf('old')).toBe(far + 1 - v);
    expect(await priorityOf('older')).toBe(far + 41 - v);
    expect(await priorityOf('new')).toBe(fairOrder(0, 1) + 1);
    const order = await redis.zrange(`${prefix}:${QUEUE_NAME}:prioritized`, 0, -1);
    expect(order).toEqual(['old', 'new', 'older']);
  });

  it('a worker runs the jobs so added, owners taking turns, and the counts go back to nothing', async () => {
    const prefix = randomName('gsrt');
    const queue = new BullMQQueue({ connection: REDIS_URL, prefix });
    cleanups.push(async () => {
      await queue.stop({ timeoutMs: 1000 });
      await obliterate(prefix);
    });
    for (let i = 1; i <= 3; i++) await queue.enqueue({ generationId: `a${i}`, modelId: 'm', ownerId: 'alice' }, { fresh: true });
    for (let i = 1; i <= 3; i++) await queue.enqueue({ generationId: `b${i}`, modelId: 'm', ownerId: 'bob' }, { fresh: true });
    const ran: string[] = [];
    await queue.start(
      async (job: Job) => {
        ran.push(job.generationId);
      },
      { concurrency: 1, leaseMs: 5000, modelConcurrency: () => undefined, logger: silentLogger },
    );
    await until(() => ran.length >= 6, { what: 'the six jobs to run', timeoutMs: 5000, intervalMs: 10 });
    expect(ran).toEqual(['a1', 'b1', 'a2', 'b2', 'a3', 'b3']);
    const redis = new Redis(REDIS_URL);
    cleanups.push(async () => void (await redis.quit()));
    await until(async () => (await redis.hlen(`${prefix}:${QUEUE_NAME}:gs-fair`)) === 0, { what: 'the counts to empty', timeoutMs: 5000, intervalMs: 10 });
    expect(await redis.hgetall(`${prefix}:${QUEUE_NAME}:gs-fair`)).toEqual({});
  });
});
