import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createGenerationService, type GenerationService } from '@genservice/core';
import { createSqliteStores, type SqliteStores } from '../src/index.js';
import { exited, killFixtures, nextJsonLine, spawnFixture, tempDir } from './helpers.js';

// issue 13: a write lock held by another process froze the whole API (better-sqlite3 waits in SQLite's busy handler
// on the event loop) and then answered 500.
describe('a write lock held by another process', () => {
  let tmp: Awaited<ReturnType<typeof tempDir>>;
  let stores: SqliteStores;
  let service: GenerationService;

  beforeEach(async () => {
    tmp = await tempDir();
    stores = createSqliteStores({ filename: tmp.file(), busyTimeoutMs: 1500 });
    await stores.apiKeys.addKey('key-busy-0123456789', 'u');
    await stores.ledger.credit('u', 100);
    service = createGenerationService({
      providers: [
        {
          models: [{ modelId: 'm', title: 'M', resultType: 'text', estimatedGenerationTime: 1, settings: [], price: 1 }],
          generate: async () => ({ text: 'ok' }),
        },
      ],
      store: stores.store,
      ledger: stores.ledger,
      apiKeys: stores.apiKeys,
      idempotency: stores.idempotency,
      recovery: { onStart: false, intervalMs: 0 },
    });
    await service.start();
  });

  afterEach(async () => {
    killFixtures();
    await service.stop({ timeoutMs: 2000 });
    await stores.close();
    await tmp.remove();
  });

  const auth = { authorization: 'Bearer key-busy-0123456789' };
  const create = () =>
    service.handle({ method: 'POST', path: '/v1/generations', headers: { ...auth, 'content-type': 'application/json' }, body: '{"modelId":"m"}' });

  it('answers 503 with Retry-After past busyTimeoutMs, serves reads meanwhile, and works again once the lock is gone', async () => {
    const first = await create();
    expect(first.status).toBe(201);
    const id = JSON.parse(String(first.body)).generationId as string;
    const locker = spawnFixture('lock-child.ts', [tmp.file()]);
    await nextJsonLine(locker);

    // The create waits for the lock on timers; the event loop stays free, so reads are answered while it waits.
    const order: string[] = [];
    const waiting = create().then((r) => {
      order.push('create');
      return r;
    });
    for (let i = 0; i < 5; i++) {
      const read = await service.handle({ method: 'GET', path: `/v1/generations/${id}`, headers: auth });
      expect(read.status).toBe(200);
      const balance = await service.handle({ method: 'GET', path: '/v1/balance', headers: auth });
      expect(balance.status).toBe(200);
      order.push('read');
    }
    const blocked = await waiting;
    expect(order.slice(0, 5)).toEqual(['read', 'read', 'read', 'read', 'read']);
    expect(blocked.status).toBe(503);
    expect(blocked.headers['retry-after']).toMatch(/^\d+$/);
    expect(JSON.parse(String(blocked.body)).error.code).toBe('unavailable');
    // Nothing half-written: the refused create reserved and stored nothing.
    expect((await stores.ledger.account('u')).reserved + (await stores.ledger.account('u')).settled).toBeLessThanOrEqual(1);

    locker.stdin!.write('release\n');
    await exited(locker);
    const after = await create();
    expect(after.status).toBe(201);
  });

  it('waits for a lock released within busyTimeoutMs instead of failing', async () => {
    const locker = spawnFixture('lock-child.ts', [tmp.file()]);
    await nextJsonLine(locker);
    const pending = create();
    setTimeout(() => locker.stdin!.write('release\n'), 300);
    const r = await pending;
    expect(r.status, String(r.body)).toBe(201);
    await exited(locker);
  });
});
