import { afterAll, beforeAll } from 'vitest';
import { runQueueContract } from '@genservice/testing';
import { PgBossQueue } from '../src/index.js';
import { createTestDatabase, randomName, type TestDatabase } from './helpers.js';

// The contract asks what a queue does, not how fast the backend answers: the first enqueue of a fresh queue also
// sets it up, which a busy machine may take past the 1 s default (the timeout itself is tested in unavailable.test.ts).
const CONTRACT_ENQUEUE_MS = 30_000;

// One database for the file; every subject is a queue of its own name in it (empty, as the contract asks).
let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('gs_pgboss_contract');
}, 60_000);
afterAll(async () => {
  await db?.drop();
});

runQueueContract('PgBossQueue', async () => {
  const queue = new PgBossQueue({ connectionString: db.url, queueName: randomName('q'), enqueueTimeoutMs: CONTRACT_ENQUEUE_MS, concurrency: 4, poolSize: 3 });
  return {
    queue,
    concurrency: 4,
    async close(): Promise<void> {
      await queue.stop({ timeoutMs: 1000 });
    },
  };
});

runQueueContract('PgBossQueue (concurrency and retry delay from the service at start)', async () => {
  const queue = new PgBossQueue({ connectionString: db.url, queueName: randomName('q'), enqueueTimeoutMs: CONTRACT_ENQUEUE_MS, poolSize: 3 });
  return {
    queue,
    concurrency: 3,
    // The hand-back delay follows the store lease handed over at start.
    settings: { concurrency: 3, leaseMs: 2000 },
    takesConcurrencyFromStart: true,
    async close(): Promise<void> {
      await queue.stop({ timeoutMs: 1000 });
    },
  };
});

runQueueContract('PgBossQueue (statements not prepared, as behind a transaction-mode pooler)', async () => {
  const queue = new PgBossQueue({ connectionString: db.url, queueName: randomName('q'), enqueueTimeoutMs: CONTRACT_ENQUEUE_MS, concurrency: 4, poolSize: 3, preparedStatements: false });
  return {
    queue,
    concurrency: 4,
    async close(): Promise<void> {
      await queue.stop({ timeoutMs: 1000 });
    },
  };
});
