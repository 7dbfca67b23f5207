import { afterEach, describe, expect, it } from 'vitest';
import { createGenerationService, MemoryApiKeyStore, MemoryLedger, type GenerationService, type HttpRequest } from '@genservice/core';

const services: GenerationService[] = [];
afterEach(async () => {
  await Promise.all(services.splice(0).map((s) => s.stop({ timeoutMs: 100 })));
});

function make(rateLimits: Record<string, unknown>): { service: GenerationService; ledger: MemoryLedger } {
  const ledger = new MemoryLedger({ balances: { alice: 100, bob: 100 } });
  const service = createGenerationService({
    providers: [
      {
        models: [{ modelId: 'm', title: 'M', resultType: 'text', estimatedGenerationTime: 1, settings: [], price: 1 }],
        generate: async () => ({ text: 'ok' }),
      },
    ],
    apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'ka', userId: 'alice' }, { apiKey: 'kb', userId: 'bob' }] }),
    ledger,
    recovery: { intervalMs: 0 },
    rateLimits,
  });
  services.push(service);
  return { service, ledger };
}

const req = (over: Partial<HttpRequest> & { key?: string }): HttpRequest => {
  const { key, ...rest } = over;
  return {
    method: 'GET',
    path: '/v1/balance',
    headers: key ? { authorization: `Bearer ${key}` } : {},
    remoteAddress: '203.0.113.7',
    ...rest,
  };
};
const create = (key: string, address = '203.0.113.7'): HttpRequest =>
  req({ key, method: 'POST', path: '/v1/generations', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: '{"modelId":"m"}', remoteAddress: address });

describe('rate limits', () => {
  it('answers 429 rate_limited with Retry-After and the RateLimit fields once a user spends the create budget', async () => {
    const { service, ledger } = make({ create: { points: 3, durationSeconds: 60 } });
    await service.start();
    for (let i = 0; i < 3; i++) {
      const ok = await service.handle(create('ka'));
      expect(ok.status).toBe(201);
      expect(ok.headers['ratelimit-policy']).toBe('"create";q=3;w=60');
      expect(ok.headers.ratelimit).toMatch(new RegExp(`^"create";r=${2 - i};t=\\d+$`));
    }
    const limited = await service.handle(create('ka'));
    expect(limited.status).toBe(429);
    expect(JSON.parse(String(limited.body))).toMatchObject({ error: { code: 'rate_limited' } });
    expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(Number(limited.headers['retry-after'])).toBeLessThanOrEqual(60);
    expect(limited.headers['ratelimit-policy']).toBe('"create";q=3;w=60');
    expect(limited.headers.ratelimit).toMatch(/^"create";r=0;t=\d+$/);
    // Nothing was reserved for the refused one; reads are another class; another user has their own budget.
    expect(await ledger.account('alice')).toMatchObject({ balance: 97 });
    expect((await service.handle(req({ key: 'ka' }))).status).toBe(200);
    expect((await service.handle(create('kb'))).status).toBe(201);
  });

  it('counts requests without a valid key per client address and refuses them, never a valid key from it (issue 24, item 2)', async () => {
    const { service } = make({ unauthenticated: { points: 5, durationSeconds: 60 } });
    await service.start();
    const attacker = '198.51.100.23';
    for (let i = 0; i < 5; i++) {
      const r = await service.handle(req({ key: `guess-${i}`, remoteAddress: attacker }));
      expect(r.status).toBe(401);
    }
    const blocked = await service.handle(req({ key: 'guess-next', remoteAddress: attacker }));
    expect(blocked.status).toBe(429);
    expect(blocked.headers['retry-after']).toMatch(/^\d+$/);
    expect((await service.handle(req({ remoteAddress: attacker, headers: {} }))).status).toBe(429);
    // A whole office behind the attacker's address: every valid key keeps working, interleaved with more bad keys,
    // which stay refused.
    for (let i = 0; i < 60; i++) {
      expect((await service.handle(req({ key: i % 2 === 0 ? 'ka' : 'kb', remoteAddress: attacker }))).status).toBe(200);
      expect((await service.handle(req({ key: `guess-more-${i}`, remoteAddress: attacker }))).status).toBe(429);
    }
    // Another address, and good keys that never failed, are not affected.
    expect((await service.handle(req({ key: 'ka', remoteAddress: '203.0.113.8' }))).status).toBe(200);
    for (let i = 0; i < 20; i++) expect((await service.handle(req({ key: 'kb', remoteAddress: '203.0.113.9' }))).status).toBe(200);
  });

  it('limits reads and streams apart from creates', async () => {
    const { service } = make({ read: { points: 2, durationSeconds: 60 }, stream: { points: 1, durationSeconds: 60 } });
    await service.start();
    expect((await service.handle(req({ key: 'ka' }))).status).toBe(200);
    expect((await service.handle(req({ key: 'ka' }))).status).toBe(200);
    expect((await service.handle(req({ key: 'ka' }))).status).toBe(429);
    const id = JSON.parse(String((await service.handle(create('kb'))).body)).generationId as string;
    const wait = await service.handle(req({ key: 'kb', path: `/v1/generations/${id}`, headers: { authorization: 'Bearer kb', prefer: 'wait=0' } }));
    expect(wait.status).toBe(200);
    const again = await service.handle(req({ key: 'kb', path: `/v1/generations/${id}/events`, headers: { authorization: 'Bearer kb' } }));
    expect(again.status).toBe(429);
    expect(again.headers['ratelimit-policy']).toBe('"stream";q=1;w=60');
  });

  it('rejects bad rate limit options at construction', () => {
    expect(() => make({ create: { points: 0, durationSeconds: 60 } })).toThrow(/rateLimits\.create\.points/);
    expect(() => make({ backend: { type: 'redis', client: {} } })).toThrow(/rateLimits\.backend/);
    expect(() => make({ backend: { type: 'sqlite', client: { prepare() {}, exec() {} }, tableName: 'x; DROP TABLE y' } })).toThrow(/tableName/);
  });
});
