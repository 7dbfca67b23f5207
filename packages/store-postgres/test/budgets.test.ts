import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGenerationService, type GenerationService } from '@genservice/core';
import { createPostgresStores, type PostgresStores } from '../src/index.js';
import { createTestDatabase, randomName, type TestDatabase, quietPool } from './helpers.js';
import { FakeClock } from '@genservice/testing';

// Two service instances, each with its own pool on one database, the way two hosts behind a load balancer share it.
let db: TestDatabase;
const pools: pg.Pool[] = [];
const instances: Array<{ service: GenerationService; stores: PostgresStores }> = [];
const ADMIN_KEY = `admin_${'B'.repeat(40)}`;

beforeAll(async () => {
  db = await createTestDatabase();
  const schema = randomName('budgets');
  for (let i = 0; i < 2; i++) {
    const pool = quietPool({ connectionString: db.url, max: 4 });
    pool.on('error', () => {});
    pools.push(pool);
    const stores = await createPostgresStores({ pool, schema });
    const service = createGenerationService({
      providers: [
        {
          models: [{ modelId: 'img', title: 'Image', resultType: 'text', estimatedGenerationTime: 0.01, settings: [], price: 3 }],
          generate: async () => ({ text: 'done' }),
        },
      ],
      store: stores.store,
      ledger: stores.ledger,
      apiKeys: stores.apiKeys,
      idempotency: stores.idempotency,
      auditLog: stores.auditLog,
      runner: { enabled: false },
      recovery: { onStart: false, intervalMs: 0, orphanReserveMs: 0 },
      admin: { apiKeys: [ADMIN_KEY] },
      instanceId: `instance-${i}`,
    });
    instances.push({ service, stores });
  }
});

afterAll(async () => {
  await Promise.all(instances.map((i) => i.service.stop()));
  await Promise.all(pools.map((p) => p.end()));
  await db?.drop();
});

async function post(service: GenerationService, path: string, key: string, body: unknown): Promise<{ status: number; json: any }> {
  const res = await service.handle({
    method: 'POST',
    path,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: JSON.parse(String(res.body)) };
}

describe('a key budget on Postgres, two service instances', () => {
  it('40 creates at price 3 racing over both instances on a key limited to 10 a day: exactly 3 accepted', async () => {
    const [a, b] = [instances[0]!.service, instances[1]!.service];
    expect((await post(a, '/v1/admin/users', ADMIN_KEY, { userId: 'racer', balance: 1_000 })).status).toBe(201);
    const key = await post(b, '/v1/admin/users/racer/keys', ADMIN_KEY, { name: 'ci', budget: { amount: 10, period: 'day' } });
    expect(key.status).toBe(201);

    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) => post(i % 2 === 0 ? a : b, '/v1/generations', key.json.apiKey, { modelId: 'img' })),
    );
    expect(results.filter((r) => r.status === 201)).toHaveLength(3);
    const refused = results.filter((r) => r.status !== 201);
    expect(refused.map((r) => r.status)).toEqual(Array(37).fill(402));
    expect(new Set(refused.map((r) => r.json.error.code))).toEqual(new Set(['budget_exceeded']));
    expect(await instances[0]!.stores.ledger.account('racer')).toEqual({ balance: 991, reserved: 9, settled: 0 });

    // Revoked on one instance, refused on the other at its next request (no key cache).
    await instances[0]!.service.accounts.revokeKey(key.json.keyId);
    expect((await post(b, '/v1/generations', key.json.apiKey, { modelId: 'img' })).status).toBe(401);
  });
});

describe('revoking a key with the key cache on, two more instances on the same database', () => {
  function cached(ttlMs: number, i: number, clock?: FakeClock): GenerationService {
    const { stores } = instances[i % 2]!;
    const service = createGenerationService({
      ...(clock ? { clock } : {}),
      providers: [],
      store: stores.store,
      ledger: stores.ledger,
      apiKeys: stores.apiKeys,
      apiKeyCache: { ttlMs },
      runner: { enabled: false },
      recovery: { onStart: false, intervalMs: 0, orphanReserveMs: 0 },
      instanceId: `cached-${i}`,
    });
    instances.push({ service, stores });
    return service;
  }
  const models = (service: GenerationService, key: string) =>
    service.handle({ method: 'GET', path: '/v1/models', headers: { authorization: `Bearer ${key}` } }).then((r) => r.status);

  it('another instance trusts its cached key until the TTL ends, then refuses it', async () => {
    const admin = instances[0]!.service;
    expect((await post(admin, '/v1/admin/users', ADMIN_KEY, { userId: 'cached-user', balance: 10 })).status).toBe(201);
    const key = await post(admin, '/v1/admin/users/cached-user/keys', ADMIN_KEY, { name: 'cached' });
    expect(key.status).toBe(201);
    const longTtl = cached(3_600_000, 0);
    // Its cache's TTL runs on a clock the test moves.
    const clock = new FakeClock(Date.now());
    const shortTtl = cached(150, 1, clock);
    expect(await models(longTtl, key.json.apiKey)).toBe(200);
    expect(await models(shortTtl, key.json.apiKey)).toBe(200);

    // Revoked through the admin API on a third instance: that instance refuses it at once (no cache there) ...
    const revoke = await admin.handle({ method: 'DELETE', path: `/v1/admin/keys/${key.json.keyId}`, headers: { authorization: `Bearer ${ADMIN_KEY}` } });
    expect(revoke.status).toBe(204);
    expect(await models(admin, key.json.apiKey)).toBe(401);
    // ... an instance whose cache still holds it trusts it for the rest of its TTL (the documented trade-off) ...
    expect(await models(longTtl, key.json.apiKey)).toBe(200);
    // ... and once the TTL has passed, the next request asks the store again and is refused.
    await clock.advance(150);
    expect(await models(shortTtl, key.json.apiKey)).toBe(200);
    await clock.advance(1);
    expect(await models(shortTtl, key.json.apiKey)).toBe(401);
    // A refusal is never cached: the key stays refused on every later request.
    expect(await models(shortTtl, key.json.apiKey)).toBe(401);
  });
});
