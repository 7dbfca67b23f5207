import { runQueueContract } from '@genservice/testing';
import { BullMQQueue } from '../src/index.js';
import { REDIS_URL, obliterate, randomName } from './helpers.js';

// The contract asks what a queue does, not how fast the backend answers: the first enqueue of a fresh queue also
// sets it up, which a busy machine may take past the 1 s default (the timeout itself is tested in unavailable.test.ts).
const CONTRACT_ENQUEUE_MS = 30_000;

runQueueContract('BullMQQueue', async () => {
  const prefix = randomName('gsq');
  // Short locks so the suite's "stop" cases do not wait on BullMQ's 30 s defaults.
  const queue = new BullMQQueue({ connection: REDIS_URL, prefix, enqueueTimeoutMs: CONTRACT_ENQUEUE_MS, concurrency: 4, lockDurationMs: 2000, stalledIntervalMs: 1000 });
  return {
    queue,
    concurrency: 4,
    async close(): Promise<void> {
      await queue.stop({ timeoutMs: 1000 });
      await obliterate(prefix);
    },
  };
});

runQueueContract('BullMQQueue (concurrency and lock from the service at start)', async () => {
  const prefix = randomName('gsq');
  const queue = new BullMQQueue({ connection: REDIS_URL, prefix, enqueueTimeoutMs: CONTRACT_ENQUEUE_MS, stalledIntervalMs: 1000 });
  return {
    queue,
    concurrency: 3,
    // The lock follows the store lease handed over at start.
    settings: { concurrency: 3, leaseMs: 2000 },
    takesConcurrencyFromStart: true,
    async close(): Promise<void> {
      await queue.stop({ timeoutMs: 1000 });
      await obliterate(prefix);
    },
  };
});
