import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '@genservice/core';
import type { Job } from '@genservice/core/ports';
import { PgBossQueue } from '../src/index.js';
import { createTestDatabase, randomName, waitingByOwner, type TestDatabase } from './helpers.js';

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
      for (let i = 0; i < 500 && started.length < concurrency; i++) await new Promise((r) => setTimeout(r, 10));
      expect(started).toHaveLength(concurrency);
      await queue.enqueue({ generationId: 'polite', modelId: 'm', ownerId: 'someone-else' }, { fresh: true });
      open();
      for (let i = 0; i < 4000 && !started.includes('polite'); i++) await new Promise((r) => setTimeout(r, 5));
      const at = started.indexOf('polite');
      expect(at).toBeGreaterThanOrEqual(concurrency);
      expect(at).toBeLessThan(concurrency + 2 * concurrency);
    } finally {
      await queue.stop({ timeoutMs: 1000 });
    }
  });
});
