import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGenerationService, MemoryApiKeyStore, MemoryLedger, type GenerationService } from '@genservice/core';
import { createTestDatabase, type TestDatabase, quietPool } from './helpers.js';

let db: TestDatabase;
let pool: pg.Pool;
beforeAll(async () => {
  db = await createTestDatabase('genservice_rl');
  pool = quietPool({ connectionString: db.url, max: 4 });
});
afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

function service(): GenerationService {
  return createGenerationService({
    providers: [{ models: [{ modelId: 'm', title: 'M', resultType: 'text', estimatedGenerationTime: 1, settings: [], price: 1 }], generate: async () => ({ text: 'ok' }) }],
    apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'ka', userId: 'alice' }, { apiKey: 'kc', userId: 'carol' }] }),
    ledger: new MemoryLedger({ balances: { alice: 100 } }),
    runner: { enabled: false },
    recovery: { onStart: false, intervalMs: 0 },
    rateLimits: { backend: { type: 'postgres', client: pool }, read: { points: 3, durationSeconds: 60 }, unauthenticated: { points: 2, durationSeconds: 60 } },
  });
}

describe('rate limits on Postgres', () => {
  it('share one budget across instances through a table of the host database', async () => {
    const a = service();
    const b = service();
    const balance = { method: 'GET', path: '/v1/balance', headers: { authorization: 'Bearer ka' } };
    // The limiter creates its table on first use: give it a moment on the first call.
    const statuses: number[] = [];
    for (const s of [a, b, a, b, a]) statuses.push((await s.handle(balance)).status);
    expect(statuses).toEqual([200, 200, 200, 429, 429]);
    const bad = { method: 'GET', path: '/v1/balance', headers: { authorization: 'Bearer nope' }, remoteAddress: '198.51.100.1' };
    expect((await a.handle(bad)).status).toBe(401);
    expect((await b.handle(bad)).status).toBe(401);
    expect((await a.handle(bad)).status).toBe(429);
    // The address is over its bad-key budget on both instances; a valid key from it still works (issue 24, item 2).
    const good = { ...bad, headers: { authorization: 'Bearer kc' } };
    expect((await b.handle(good)).status).toBe(200);
    expect((await a.handle(good)).status).toBe(200);
    expect((await b.handle(bad)).status).toBe(429);
    const { rows } = await pool.query(`SELECT count(*)::int AS n FROM genservice_rate_limits`);
    expect(rows[0].n).toBeGreaterThanOrEqual(2);
  });
});
