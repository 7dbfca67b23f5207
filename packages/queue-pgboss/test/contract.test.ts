import { afterAll, beforeAll } from 'vitest';
import { runQueueContract } from '@genservice/testing';
import { PgBossQueue } from '../src/index.js';
import { createTestDatabase, randomName, type TestDatabase } from './helpers.js';

// One database for the file; every subject is a queue of its own name in it (empty, as the contract asks).
let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('gs_pgboss_contract');
}, 60_000);
afterAll(async () => {
  await db?.drop();
});

runQueueContract('PgBossQueue', async () => {
  const queue = new PgBossQueue({ connectionString: db.url, queueName: randomName('q'), concurrency: 4, poolSize: 3 });
  return {
    queue,
    concurrency: 4,
    async close(): Promise<void> {
      await queue.stop({ timeoutMs: 1000 });
    },
  };
});

runQueueContract('PgBossQueue (concurrency and retry delay from the service at start)', async () => {
  const queue = new PgBossQueue({ connectionString: db.url, queueName: randomName('q'), poolSize: 3 });
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
  const queue = new PgBossQueue({ connectionString: db.url, queueName: randomName('q'), concurrency: 4, poolSize: 3, preparedStatements: false });
  return {
    queue,
    concurrency: 4,
    async close(): Promise<void> {
      await queue.stop({ timeoutMs: 1000 });
    },
  };
});
