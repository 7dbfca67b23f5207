import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createGenerationService, MemoryApiKeyStore, MemoryLedger, type GenerationService } from '@genservice/core';

const dir = mkdtempSync(join(tmpdir(), 'gs-rl-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function service(db: Database.Database): GenerationService {
  return createGenerationService({
    providers: [{ models: [{ modelId: 'm', title: 'M', resultType: 'text', estimatedGenerationTime: 1, settings: [], price: 1 }], generate: async () => ({ text: 'ok' }) }],
    apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'ka', userId: 'alice' }] }),
    ledger: new MemoryLedger({ balances: { alice: 100 } }),
    runner: { enabled: false },
    recovery: { onStart: false, intervalMs: 0 },
    rateLimits: { backend: { type: 'sqlite', client: db }, create: { points: 2, durationSeconds: 60 } },
  });
}

describe('rate limits on SQLite', () => {
  it('share one budget across processes on one file (two connections here)', async () => {
    const file = join(dir, 'rl.db');
    const one = new Database(file);
    const two = new Database(file);
    try {
      const a = service(one);
      const b = service(two);
      const create = { method: 'POST', path: '/v1/generations', headers: { authorization: 'Bearer ka', 'content-type': 'application/json' }, body: '{"modelId":"m"}' };
      const statuses: number[] = [];
      for (const s of [a, b, a]) statuses.push((await s.handle(create)).status);
      expect(statuses).toEqual([201, 201, 429]);
    } finally {
      one.close();
      two.close();
    }
  });
});
