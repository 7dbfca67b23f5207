import { describe, expect, it } from 'vitest';
import { createGenerationService, type GenerationService, type GenerationServiceOptions, type HttpResponse } from '@genservice/core';
import type { ApiKeyStore, GenerationStore, IdempotencyStore, Ledger } from '@genservice/core/ports';
import { until } from '../until.js';
import { uid, useFresh } from './harness.js';

interface KeyScenarioPorts {
  store: GenerationStore;
  ledger: Ledger;
  apiKeys: ApiKeyStore;
  idempotency: IdempotencyStore;
  close(): Promise<void>;
}

const ADMIN_KEY = `admin_${'A'.repeat(40)}`;

function service(p: KeyScenarioPorts, extra: Partial<GenerationServiceOptions> = {}): GenerationService {
  return createGenerationService({
    providers: [
      {
        models: [
          { modelId: 'img', title: 'Image', resultType: 'text', estimatedGenerationTime: 0.01, settings: [], price: 3 },
          { modelId: 'vid', title: 'Video', resultType: 'text', estimatedGenerationTime: 0.01, settings: [], price: 3 },
        ],
        generate: async () => ({ text: 'done' }),
      },
    ],
    store: p.store,
    ledger: p.ledger,
    apiKeys: p.apiKeys,
    idempotency: p.idempotency,
    runner: { enabled: false },
    recovery: { onStart: false, intervalMs: 0, orphanReserveMs: 0 },
    admin: { apiKeys: [{ key: ADMIN_KEY, name: 'ops' }] },
    ...extra,
  });
}

async function call(s: GenerationService, method: string, path: string, key: string, body?: unknown): Promise<{ status: number; json: any }> {
  const res: HttpResponse = await s.handle({
    method,
    path,
    headers: { authorization: `Bearer ${key}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = typeof res.body === 'string' ? res.body : Buffer.from(res.body as Uint8Array).toString('utf8');
  return { status: res.status, json: text === '' ? undefined : JSON.parse(text) };
}

/**
 * Keys, budgets, scopes, usage and the admin routes over HTTP, on the ports under test (part of `runPortContracts`).
 */
export function describeKeyScenarios(make: () => Promise<KeyScenarioPorts>): void {
  describe('service scenarios: keys, budgets and usage', () => {
    const ports = useFresh(make);

    async function userWithKey(s: GenerationService, key: Record<string, unknown>, balance = 1_000): Promise<{ user: string; apiKey: string; keyId: string }> {
      const user = uid('user');
      expect((await call(s, 'POST', '/v1/admin/users', ADMIN_KEY, { userId: user, balance })).status).toBe(201);
      const created = await call(s, 'POST', `/v1/admin/users/${encodeURIComponent(user)}/keys`, ADMIN_KEY, { name: 'k', ...key });
      expect(created.status).toBe(201);
      return { user, apiKey: created.json.apiKey, keyId: created.json.keyId };
    }

    it('40 racing creates at price 3 on a key limited to 10 a day: exactly 3 accepted, the rest 402 budget_exceeded', async () => {
      const s = service(ports());
      const { user, apiKey, keyId } = await userWithKey(s, { budget: { amount: 10, period: 'day' } });
      const results = await Promise.all(Array.from({ length: 40 }, () => call(s, 'POST', '/v1/generations', apiKey, { modelId: 'img' })));
      expect(results.filter((r) => r.status === 201)).toHaveLength(3);
      const refused = results.filter((r) => r.status !== 201);
      expect(refused).toHaveLength(37);
      for (const r of refused) {
        expect(r.status).toBe(402);
        expect(r.json.error.code).toBe('budget_exceeded');
        expect(r.json.error.message).toMatch(/daily budget of 10 tokens .* resets at \d{4}-\d\d-\d\dT00:00:00\.000Z/);
      }
      expect(await ports().ledger.account(user)).toEqual({ balance: 991, reserved: 9, settled: 0 });
      // A cancelled generation gives its unspent part back to the key's budget too.
      const first = results.find((r) => r.status === 201)!.json.generationId as string;
      expect((await call(s, 'POST', `/v1/generations/${first}/cancel`, apiKey)).status).toBe(200);
      expect((await call(s, 'POST', '/v1/generations', apiKey, { modelId: 'img' })).status).toBe(201);
      expect((await call(s, 'POST', '/v1/generations', apiKey, { modelId: 'img' })).json.error.code).toBe('budget_exceeded');
      void keyId;
    });

    it('20 racing creates on a key with maxInFlight 3: exactly 3 accepted, the rest 429; a cancel frees a slot', async () => {
      const s = service(ports());
      const { user, apiKey, keyId } = await userWithKey(s, { maxInFlight: 3 });
      const listed = await call(s, 'GET', `/v1/admin/users/${encodeURIComponent(user)}/keys`, ADMIN_KEY);
      expect(listed.json.data[0]).toMatchObject({ keyId, maxInFlight: 3 });
      const results = await Promise.all(Array.from({ length: 20 }, () => call(s, 'POST', '/v1/generations', apiKey, { modelId: 'img' })));
      expect(results.filter((r) => r.status === 201)).toHaveLength(3);
      for (const r of results.filter((x) => x.status !== 201)) {
        expect(r.status).toBe(429);
        expect(r.json.error).toMatchObject({ code: 'rate_limited', message: 'This key has 3 generations pending or processing; wait for one to finish.' });
      }
      expect(await ports().ledger.account(user)).toEqual({ balance: 991, reserved: 9, settled: 0 });
      const first = results.find((r) => r.status === 201)!.json.generationId as string;
      expect((await call(s, 'POST', `/v1/generations/${first}/cancel`, apiKey)).status).toBe(200);
      expect((await call(s, 'POST', '/v1/generations', apiKey, { modelId: 'img' })).status).toBe(201);
      expect((await call(s, 'POST', '/v1/generations', apiKey, { modelId: 'img' })).status).toBe(429);
    });

    it('a read key cannot create (403 forbidden); a generate key cannot read; an allow-list hides other models (404)', async () => {
      const s = service(ports());
      const reader = await userWithKey(s, { scopes: ['read'] });
      const created = await call(s, 'POST', '/v1/generations', reader.apiKey, { modelId: 'img' });
      expect(created.status).toBe(403);
      expect(created.json.error.code).toBe('forbidden');
      expect((await call(s, 'GET', '/v1/balance', reader.apiKey)).status).toBe(200);
      expect((await call(s, 'DELETE', '/v1/generations/AAAAAAAAAAAAAAAAAAAAAA', reader.apiKey)).json.error.code).toBe('forbidden');
      const writer = await userWithKey(s, { scopes: ['generate'] });
      expect((await call(s, 'GET', '/v1/balance', writer.apiKey)).json.error.code).toBe('forbidden');
      expect((await call(s, 'POST', '/v1/generations', writer.apiKey, { modelId: 'img' })).status).toBe(201);

      const limited = await userWithKey(s, { models: ['vid'] });
      const models = await call(s, 'GET', '/v1/models', limited.apiKey);
      expect(models.json.models.map((m: { modelId: string }) => m.modelId)).toEqual(['vid']);
      const other = await call(s, 'POST', '/v1/generations', limited.apiKey, { modelId: 'img' });
      expect(other.status).toBe(404);
      expect(other.json.error.code).toBe('model_not_found');
      expect((await call(s, 'POST', '/v1/quotes', limited.apiKey, { modelId: 'img' })).status).toBe(404);
      expect((await call(s, 'POST', '/v1/generations', limited.apiKey, { modelId: 'vid' })).status).toBe(201);
      expect(await ports().ledger.account(limited.user)).toMatchObject({ reserved: 3 });
    });

    it('revoking a key makes its next request 401, on another instance too', async () => {
      const a = service(ports());
      const b = service(ports());
      const { apiKey, keyId } = await userWithKey(a, {});
      expect((await call(b, 'GET', '/v1/balance', apiKey)).status).toBe(200);
      expect((await call(a, 'DELETE', `/v1/admin/keys/${keyId}`, ADMIN_KEY)).status).toBe(204);
      expect((await call(a, 'GET', '/v1/balance', apiKey)).status).toBe(401);
      expect((await call(b, 'GET', '/v1/balance', apiKey)).status).toBe(401);
      expect((await call(a, 'DELETE', `/v1/admin/keys/${keyId}`, ADMIN_KEY)).status).toBe(404);
    });

    it('usage: the caller\u2019s settled spend by day, model and key; bad ranges are 400 naming the field', async () => {
      const p = ports();
      const s = service(p, { runner: { enabled: true } });
      await s.start();
      try {
        const { user, apiKey, keyId } = await userWithKey(s, {});
        for (const modelId of ['img', 'img', 'vid']) {
          const { json } = await call(s, 'POST', '/v1/generations', apiKey, { modelId });
          await until(async () => (await call(s, 'GET', `/v1/generations/${json.generationId}`, apiKey)).json.status === 'completed', `${modelId} to complete`);
        }
        // The Lifecycle settles right after the completed change: a poll may see `completed` a moment before the ledger does.
        await until(async () => (await call(s, 'GET', '/v1/usage', apiKey)).json.total?.count === 3, 'the three settles in the usage');
        const today = new Date().toISOString().slice(0, 10);
        expect((await call(s, 'GET', '/v1/usage', apiKey)).json).toEqual({ data: [{ period: today, count: 3, tokens: 9 }], total: { count: 3, tokens: 9 } });
        expect((await call(s, 'GET', '/v1/usage?groupBy=model', apiKey)).json.data).toEqual([
          { modelId: 'img', count: 2, tokens: 6 },
          { modelId: 'vid', count: 1, tokens: 3 },
        ]);
        expect((await call(s, 'GET', `/v1/usage?groupBy=key&from=${today}&to=${today}`, apiKey)).json.data).toEqual([{ keyId, count: 3, tokens: 9 }]);
        const other = await userWithKey(s, {});
        expect((await call(s, 'GET', '/v1/usage', other.apiKey)).json.total).toEqual({ count: 0, tokens: 0 });
        for (const [query, field] of [
          ['from=2026-05-02&to=2026-05-01', 'from'],
          ['from=2024-01-01&to=2026-01-01', 'from'],
          ['from=yesterday', 'from'],
          ['groupBy=week', 'groupBy'],
          ['to=2026-01-01&to=2026-01-02', 'to'],
          ['nope=1', 'nope'],
        ] as const) {
          const bad = await call(s, 'GET', `/v1/usage?${query}`, apiKey);
          expect(bad.status, query).toBe(400);
          expect(bad.json.error.details.map((d: { field: string }) => d.field), query).toEqual([field]);
        }
        void user;
      } finally {
        await s.stop({ timeoutMs: 500 });
      }
    });

    it('admin routes: admin keys only (a user key is 401 there, an admin key 401 on user routes), bad input 400, audited', async () => {
      const s = service(ports());
      const { user, apiKey } = await userWithKey(s, {});
      expect((await call(s, 'GET', '/v1/admin/audit', apiKey)).status).toBe(401);
      expect((await call(s, 'POST', '/v1/admin/users', apiKey, { userId: 'x' })).status).toBe(401);
      expect((await call(s, 'GET', '/v1/balance', ADMIN_KEY)).status).toBe(401);
      expect((await call(s, 'GET', '/v1/admin/audit', `${ADMIN_KEY}x`)).status).toBe(401);

      const credit = await call(s, 'POST', `/v1/admin/users/${encodeURIComponent(user)}/credits`, ADMIN_KEY, { amount: 5, reason: 'promo' });
      expect(credit).toEqual({ status: 200, json: { balance: 1_005 } });
      for (const [body, field] of [
        [{ amount: -1, reason: 'r' }, 'amount'],
        [{ amount: '1e999', reason: 'r' }, 'amount'],
        [{ amount: 0, reason: 'r' }, 'amount'],
        [{ amount: 1 }, 'reason'],
      ] as const) {
        const bad = await call(s, 'POST', `/v1/admin/users/${encodeURIComponent(user)}/credits`, ADMIN_KEY, body);
        expect(bad.status).toBe(400);
        expect(bad.json.error.details.map((d: { field: string }) => d.field)).toEqual([field]);
      }
      for (const [body, field] of [
        [{ name: 'k', scopes: ['admin'] }, 'scopes.0'],
        [{ name: 'k', budget: { amount: 0, period: 'day' } }, 'budget.amount'],
        [{ name: 'k', budget: { amount: 1, period: 'year' } }, 'budget.period'],
        [{ name: 'k', expiresAt: '2000-01-01T00:00:00Z' }, 'expiresAt'],
      ] as const) {
        const bad = await call(s, 'POST', `/v1/admin/users/${encodeURIComponent(user)}/keys`, ADMIN_KEY, body);
        expect(bad.status).toBe(400);
        expect(bad.json.error.details.map((d: { field: string }) => d.field)).toEqual([field]);
      }
      expect((await call(s, 'POST', '/v1/admin/users', ADMIN_KEY, { userId: user })).status).toBe(409);
      expect((await call(s, 'GET', `/v1/balance`, apiKey)).json).toEqual({ balance: 1_005 });

      const listed = await call(s, 'GET', `/v1/admin/users/${encodeURIComponent(user)}/keys`, ADMIN_KEY);
      expect(listed.status).toBe(200);
      expect(listed.json.data).toHaveLength(1);
      expect(JSON.stringify(listed.json)).not.toContain(apiKey);

      const audit = await call(s, 'GET', '/v1/admin/audit?limit=2', ADMIN_KEY);
      expect(audit.json.data.map((e: { action: string; actor: string }) => [e.actor, e.action])).toEqual([
        ['ops', 'credits.add'],
        ['ops', 'key.create'],
      ]);
      expect(audit.json.nextCursor).toEqual(expect.any(String));
      const rest = await call(s, 'GET', `/v1/admin/audit?limit=2&cursor=${audit.json.nextCursor}`, ADMIN_KEY);
      expect(rest.json.data.map((e: { action: string }) => e.action)).toEqual(['user.create']);
      expect(JSON.stringify([audit.json, rest.json])).not.toContain(apiKey);
    });
  });
}
