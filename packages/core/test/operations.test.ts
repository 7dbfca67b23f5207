// The operator console's reads (issue 41): queue health per model and provider, the oldest waiting on a fake clock,
// failures in the last hour, and one generation of any user with its event log.
import { describe, expect, it } from 'vitest';
import { createGenerationService, MemoryApiKeyStore, MemoryAuditLog, MemoryLedger, MemoryWebhookStore, type GenerationService } from '@genservice/core';
import { FakeClock, until } from '@genservice/testing';
import { RecentFailures } from '../src/lifecycle/recent-failures.js';

const ADMIN = 'operations-admin-key-0123456789abcdef';
const model = (modelId: string) => ({ modelId, title: modelId, resultType: 'text' as const, estimatedGenerationTime: 1, settings: [], price: 1 });

async function call(service: GenerationService, key: string, method: string, path: string, body?: unknown) {
  const r = await service.handle({
    method,
    path,
    headers: { authorization: `Bearer ${key}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = String(r.body ?? '');
  return { status: r.status, body: text ? JSON.parse(text) : undefined };
}

describe('GET /v1/admin/queue', () => {
  it('counts pending generations per model with its provider, and the oldest waiting by the service clock', async () => {
    const clock = new FakeClock(Date.UTC(2030, 0, 1));
    const named = Object.assign({ models: [model('a')], generate: async () => ({ text: 'x' }) }, { name: 'acme' });
    const service = createGenerationService({
      providers: [named, { models: [model('b')], generate: async () => ({ text: 'y' }) }],
      apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'k', userId: 'u' }] }),
      ledger: new MemoryLedger({ balances: { u: 100 } }),
      runner: { enabled: false },
      clock,
      admin: { apiKeys: [ADMIN] },
    });
    for (const m of ['a', 'a']) expect((await call(service, 'k', 'POST', '/v1/generations', { modelId: m })).status).toBe(201);
    await clock.advance(90_000);
    expect((await call(service, 'k', 'POST', '/v1/generations', { modelId: 'b' })).status).toBe(201);
    const q = await call(service, ADMIN, 'GET', '/v1/admin/queue');
    expect(q.status).toBe(200);
    expect(q.body).toEqual({
      models: [
        { modelId: 'a', provider: 'acme', resultType: 'text', pending: 2, running: 0, oldestPendingAt: '2030-01-01T00:00:00.000Z' },
        { modelId: 'b', provider: 'provider 2', resultType: 'text', pending: 1, running: 0, oldestPendingAt: '2030-01-01T00:01:30.000Z' },
      ],
      total: { pending: 3, running: 0 },
      oldestPendingAt: '2030-01-01T00:00:00.000Z',
      oldestPendingSeconds: 90,
      failuresLastHour: 0,
      scanned: 3,
      truncated: false,
    });
  });

  it('counts the failures this instance saw, and shows a failed generation of any user with its events', async () => {
    const service = createGenerationService({
      providers: [{ models: [model('boom')], generate: async () => { throw new Error('no'); } }],
      apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'k', userId: 'u' }] }),
      ledger: new MemoryLedger({ balances: { u: 100 } }),
      runner: { retryBaseDelayMs: 1 },
      admin: { apiKeys: [ADMIN] },
    });
    await service.start();
    try {
      const id = (await call(service, 'k', 'POST', '/v1/generations', { modelId: 'boom' })).body.generationId as string;
      await until(async () => (await call(service, 'k', 'GET', `/v1/generations/${id}`)).body.status === 'failed', { what: 'the failure', timeoutMs: 10_000 });
      expect((await call(service, ADMIN, 'GET', '/v1/admin/queue')).body).toMatchObject({ failuresLastHour: 1, total: { pending: 0, running: 0 } });
      const one = await call(service, ADMIN, 'GET', `/v1/admin/users/u/generations/${id}`);
      expect(one.body.generation).toMatchObject({ generationId: id, status: 'failed' });
      expect(one.body.events.at(-1)).toMatchObject({ type: 'failed' });
    } finally {
      await service.stop({ timeoutMs: 500 });
    }
  });
});

describe('keys of a host that resolves keys itself', () => {
  it('answers an empty key list (never a 500) when apiKeys is a plain resolver', async () => {
    const service = createGenerationService({
      providers: [{ models: [model('a')], generate: async () => ({ text: 'x' }) }],
      apiKeys: { resolve: (key: string) => (key === 'k' ? { userId: 'u' } : null) },
      ledger: new MemoryLedger({ balances: { u: 5 } }),
      runner: { enabled: false },
      admin: { apiKeys: [ADMIN] },
    });
    expect(await call(service, 'k', 'GET', '/v1/keys')).toEqual({ status: 200, body: { data: [] } });
    expect((await call(service, ADMIN, 'GET', '/v1/admin/users/u')).body).toEqual({ userId: 'u', balance: 5, reserved: 0, settled: 0, keys: [] });
  });

  it('answers the admin key routes without a 500: no keys to list, a 404 saying why for a key it cannot issue or revoke', async () => {
    const auditLog = new MemoryAuditLog();
    const service = createGenerationService({
      providers: [{ models: [model('a')], generate: async () => ({ text: 'x' }) }],
      apiKeys: { resolve: (key: string) => (key === 'k' ? { userId: 'u' } : null) },
      ledger: new MemoryLedger({ balances: { u: 5 } }),
      runner: { enabled: false },
      auditLog,
      admin: { apiKeys: [ADMIN] },
    });
    expect(await call(service, ADMIN, 'GET', '/v1/admin/users/u/keys')).toEqual({ status: 200, body: { data: [] } });
    const issued = await call(service, ADMIN, 'POST', '/v1/admin/users/u/keys', { name: 'ci' });
    expect(issued.status).toBe(404);
    expect(issued.body.error).toMatchObject({ code: 'not_found', message: expect.stringMatching(/ApiKeyStore/) });
    expect((await call(service, ADMIN, 'DELETE', '/v1/admin/keys/key_AAAAAAAAAAAAAAAAAAAAAA')).body.error.code).toBe('not_found');
    expect((await auditLog.list({ limit: 10 })).entries).toEqual([]);
  });

  it('answers the organisation and user-limit routes with a 404 saying what is missing (never a 500) for a ledger without them', async () => {
    const memory = new MemoryLedger({ balances: { u: 5 } });
    const legacy = new Proxy(memory, {
      get: (t, p) => (typeof p === 'string' && (/rganization|embership/.test(p) || p === 'setUserLimits' || p === 'userLimits') ? undefined : Reflect.get(t, p, t)),
    });
    const service = createGenerationService({ providers: [{ models: [model('a')], generate: async () => ({ text: 'x' }) }], ledger: legacy, runner: { enabled: false }, admin: { apiKeys: [ADMIN] } });
    for (const [method, path, body] of [
      ['POST', '/v1/admin/organizations', { organizationId: 'acme' }],
      ['GET', '/v1/admin/organizations/acme', undefined],
      ['PATCH', '/v1/admin/users/u/limits', { maxInFlight: 2 }],
      ['GET', '/v1/admin/users/u/limits', undefined],
    ] as const) {
      const r = await call(service, ADMIN, method, path, body);
      expect({ path, status: r.status, code: r.body.error.code }).toEqual({ path, status: 404, code: 'not_found' });
      expect(r.body.error.message).toMatch(/need a ledger that keeps them/);
    }
  });
});

describe('GET /v1/admin/users', () => {
  it('pages through the ledger\u2019s accounts, and answers 404 (never a 500) for a ledger that cannot list them', async () => {
    const ledger = new MemoryLedger({ balances: { a: 1, b: 2, c: 3 } });
    const make = (l: MemoryLedger | Omit<MemoryLedger, 'listAccounts'>) =>
      createGenerationService({ providers: [{ models: [model('m')], generate: async () => ({ text: 'x' }) }], ledger: l as MemoryLedger, runner: { enabled: false }, admin: { apiKeys: [ADMIN] } });
    const service = make(ledger);
    const first = await call(service, ADMIN, 'GET', '/v1/admin/users?limit=2');
    expect(first.body.data).toEqual([{ userId: 'a', balance: 1, reserved: 0, settled: 0 }, { userId: 'b', balance: 2, reserved: 0, settled: 0 }]);
    const second = await call(service, ADMIN, 'GET', `/v1/admin/users?limit=2&cursor=${first.body.nextCursor}`);
    expect(second.body).toEqual({ data: [{ userId: 'c', balance: 3, reserved: 0, settled: 0 }], nextCursor: null });
    // A host's own ledger without listAccounts (every other method kept).
    const own = new Proxy(ledger, { get: (t, p) => (p === 'listAccounts' ? undefined : Reflect.get(t, p, t)) });
    const plain = await call(make(own), ADMIN, 'GET', '/v1/admin/users');
    expect(plain.status).toBe(404);
    expect(plain.body.error.message).toMatch(/does not list its accounts/);
  });
});

describe('POST /v1/admin/users/{userId}/webhook-endpoints/{id}/deliveries/{deliveryId}/replay', () => {
  it('is audited under the admin key\u2019s name, as every admin action is; a refused one and the user\u2019s own are not', async () => {
    const auditLog = new MemoryAuditLog();
    const webhookStore = new MemoryWebhookStore();
    const service = createGenerationService({
      providers: [{ models: [model('a')], generate: async () => ({ text: 'x' }) }],
      apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'k', userId: 'u' }] }),
      ledger: new MemoryLedger({ balances: { u: 5 } }),
      runner: { enabled: false },
      auditLog,
      webhookStore,
      webhooks: { allowHttp: true, allowPrivateUrls: true },
      admin: { apiKeys: [{ key: ADMIN, name: 'ops' }] },
    });
    const ep = (await call(service, 'k', 'POST', '/v1/webhook-endpoints', { url: 'http://127.0.0.1:9/hook' })).body;
    const at = Date.UTC(2030, 0, 1);
    await webhookStore.addDeliveries([
      { id: 'msg_one', endpointId: ep.id, url: ep.url, generationId: 'g'.repeat(22), ownerId: 'u', seq: 2, type: 'generation.completed', payload: '{}', nextAttemptAt: at, createdAt: at },
    ]);
    const base = `/v1/admin/users/u/webhook-endpoints/${ep.id}/deliveries`;
    expect((await call(service, ADMIN, 'POST', `${base}/msg_nope/replay`)).status).toBe(404);
    expect((await auditLog.list({ limit: 10 })).entries).toEqual([]);
    expect((await call(service, 'k', 'POST', `/v1/webhook-endpoints/${ep.id}/deliveries/msg_one/replay`)).status).toBe(202);
    expect((await auditLog.list({ limit: 10 })).entries).toEqual([]);
    expect((await call(service, ADMIN, 'POST', `${base}/msg_one/replay`)).status).toBe(202);
    const { entries } = await auditLog.list({ limit: 10 });
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({ actor: 'ops', action: 'webhook_delivery.replay', userId: 'u', details: { endpointId: ep.id, deliveryId: 'msg_one' } });
    expect((await call(service, ADMIN, 'GET', '/v1/admin/audit')).body.data[0]).toMatchObject({ action: 'webhook_delivery.replay' });
  });
});

describe('RecentFailures', () => {
  it('keeps an hour of minute buckets: a failure counts for 60 minutes, then not', () => {
    const f = new RecentFailures();
    const t = Date.UTC(2030, 0, 1, 12, 0, 30);
    f.record(t);
    f.record(t + 30 * 60_000);
    expect(f.lastHour(t)).toBe(1);
    expect(f.lastHour(t + 59 * 60_000)).toBe(2);
    expect(f.lastHour(t + 60 * 60_000)).toBe(1);
    expect(f.lastHour(t + 91 * 60_000)).toBe(0);
  });
});

describe('the console path', () => {
  it('is the service\u2019s only when it serves the console: a host\u2019s own /console stays the host\u2019s otherwise', async () => {
    const { isApiPath } = await import('@genservice/core/adapter');
    expect(isApiPath('/console/', { servesConsole: false })).toBe(false);
    expect(isApiPath('/console', {})).toBe(false);
    expect(isApiPath('/console/', { servesConsole: true })).toBe(true);
    expect(isApiPath('/console/me', { servesConsole: true })).toBe(true);
    expect(isApiPath('/consoles', { servesConsole: true })).toBe(false);
    const on = createGenerationService({ providers: [], console: true });
    const off = createGenerationService({ providers: [] });
    expect([on.servesConsole, off.servesConsole]).toEqual([true, false]);
  });
});
