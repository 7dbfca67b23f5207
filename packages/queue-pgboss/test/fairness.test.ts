import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '@genservice/core';
import type { Job } from '@genservice/core/ports';
import { PgBossQueue } from '../src/index.js';
import { createTestDatabase, randomName, waitingByOwner, type TestDatabase } from './helpers.js';
import { until } from '@genservice/testing';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('gs_pgboss_fair');
}, 60_000);
afterAll(async () => {
  await db?.drop();
});

describe('PgBossQueue fairness', () => {
  it("with 2,000 queued for one user, another user's job starts before the flooder's next 2 x concurrency", { timeout: 90_000 }, async () => {
    const name = randomName('q');
    const queue = new PgBossQueue({ connectionString: db.url, queueName: name, poolSize: 3 });
    const concurrency = 4;
    const started: string[] = [];
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    try {
      for (let i = 0; i < 2000; i++) await queue.enqueue({ generationId: `flood-${i}`, modelId: 'm', ownerId: 'flooder' }, { fresh: true });
      expect(await waitingByOwner(db.url, name)).toEqual({ flooder: 2000 });
      await queue.start(
        async (job: Job) => {
          started.push(job.generationId);
          await gate;
        },
        { concurrency, leaseMs: 5000, modelConcurrency: () => undefined, logger: silentLogger },
      );
      await until(() => started.length >= concurrency, { what: 'the first jobs to start', timeoutMs: 5000, intervalMs: 10 });
      expect(started).toHaveLength(concurrency);
      await queue.enqueue({ generationId: 'polite', modelId: 'm', ownerId: 'someone-else' }, { fresh: true });
      open();
      await until(() => started.includes('polite'), { what: "the other user's job to start", timeoutMs: 20_000, intervalMs: 5 });
      const at = started.indexOf('polite');
      expect(at).toBeGreaterThanOrEqual(concurrency);
      expect(at).toBeLessThan(concurrency + 2 * concurrency);
    } finally {
      await queue.stop({ timeoutMs: 1000 });
    }
  });
});
