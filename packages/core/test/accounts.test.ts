import { afterEach, describe, expect, it } from 'vitest';
import {
  createGenerationService,
  DomainError,
  MemoryApiKeyStore,
  MemoryAuditLog,
  MemoryLedger,
  MAX_TOKENS,
  type GenerationService,
} from '@genservice/core';
import { createScriptedProvider, FakeClock, fakeModel, until } from '@genservice/testing';

const services: GenerationService[] = [];
afterEach(async () => {
  await Promise.all(services.splice(0).map((s) => s.stop()));
});

function make(extra: Record<string, unknown> = {}): { service: GenerationService; ledger: MemoryLedger; keys: MemoryApiKeyStore; audit: MemoryAuditLog } {
  const ledger = new MemoryLedger();
  const keys = new MemoryApiKeyStore();
  const audit = new MemoryAuditLog();
  const service = createGenerationService({
    providers: [createScriptedProvider({ models: [fakeModel({ modelId: 'a', price: 3 }), fakeModel({ modelId: 'b', price: 3 })] })],
    ledger,
    apiKeys: keys,
    auditLog: audit,
    ...extra,
  });
  services.push(service);
  return { service, ledger, keys, audit };
}

async function expectBadRequest(promise: Promise<unknown>, fields: string[]): Promise<void> {
  const err = await promise.then(
    () => {
      throw new Error('expected a 400');
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(DomainError);
  expect((err as DomainError).code).toBe('invalid_request');
  expect((err as DomainError).details?.map((d) => d.field).sort()).toEqual([...fields].sort());
}

function balanceOf(service: GenerationService, apiKey: string): Promise<number> {
  return service
    .handle({ method: 'GET', path: '/v1/balance', headers: { authorization: `Bearer ${apiKey}` } })
    .then((r) => r.status);
}

describe('service.accounts', () => {
  it('creates a user once with a starting balance; a second create is 409 and changes nothing', async () => {
    const { service, ledger } = make();
    expect(await service.accounts.createUser({ userId: 'alice', balance: 25 })).toEqual({ userId: 'alice', balance: 25 });
    const again = await service.accounts.createUser({ userId: 'alice', balance: 99 }).catch((e: DomainError) => e);
    expect((again as DomainError).code).toBe('conflict');
    expect(await ledger.balance('alice')).toBe(25);
    expect(await service.accounts.createUser({ userId: 'bob' })).toEqual({ userId: 'bob', balance: 0 });
  });

  it('credits with a reason and answers the new balance', async () => {
    const { service } = make();
    await service.accounts.createUser({ userId: 'alice', balance: 5 });
    expect(await service.accounts.credit('alice', { amount: 7.5, reason: 'top-up' })).toEqual({ balance: 12.5 });
  });

  it('refuses bad amounts, ids and fields with a 400 naming each field, writing nothing', async () => {
    const { service, ledger, audit } = make();
    await expectBadRequest(service.accounts.createUser({ userId: 'alice', balance: -1 }), ['balance']);
    await expectBadRequest(service.accounts.createUser({ userId: 'alice', balance: Number.POSITIVE_INFINITY }), ['balance']);
    await expectBadRequest(service.accounts.createUser({ userId: '', balance: 1 }), ['userId']);
    await expectBadRequest(service.accounts.createUser({ userId: 'a\u0000b' }), ['userId']);
    await expectBadRequest(service.accounts.createUser({ userId: 'x', extra: 1 } as never), ['extra']);
    await expectBadRequest(service.accounts.createUser(null as never), ['body']);
    await expectBadRequest(service.accounts.credit('alice', { amount: -5, reason: 'r' }), ['amount']);
    await expectBadRequest(service.accounts.credit('alice', { amount: 0, reason: 'r' }), ['amount']);
    await expectBadRequest(service.accounts.credit('alice', { amount: Number.NaN, reason: 'r' }), ['amount']);
    await expectBadRequest(service.accounts.credit('alice', { amount: '5' as never, reason: 'r' }), ['amount']);
    await expectBadRequest(service.accounts.credit('alice', { amount: 5 } as never), ['reason']);
    expect(await ledger.account('alice')).toEqual({ balance: 0, reserved: 0, settled: 0 });
    expect((await audit.list({ limit: 10 })).entries).toEqual([]);
  });

  describe('keys', () => {
    it('shows the secret once; the list never does; the key works at once with its scopes and limits', async () => {
      const { service, keys } = make();
      await service.accounts.createUser({ userId: 'alice', balance: 10 });
      const created = await service.accounts.createKey(
        'alice',
        { name: 'ci', scopes: ['read'], models: ['a', 'a'], budget: { amount: 5, period: 'month' }, expiresAt: '2999-01-01T00:00:00Z' },
        { now: Date.UTC(2026, 0, 1) },
      );
      expect(created).toEqual({
        keyId: expect.stringMatching(/^key_[A-Za-z0-9_-]{22}$/),
        apiKey: expect.stringMatching(/^gs_[A-Za-z0-9_-]{43}$/),
        userId: 'alice',
        name: 'ci',
        scopes: ['read'],
        models: ['a'],
        budget: { amount: 5, period: 'month' },
        expiresAt: '2999-01-01T00:00:00.000Z',
        createdAt: '2026-01-01T00:00:00.000Z',
      });
      const { apiKey, ...shown } = created;
      expect(await service.accounts.listKeys('alice')).toEqual([shown]);
      expect(JSON.stringify(await service.accounts.listKeys('alice'))).not.toContain(apiKey);
      expect(await keys.resolve(apiKey)).toEqual({ userId: 'alice', keyId: created.keyId, scopes: ['read'], models: ['a'], budget: { amount: 5, period: 'month' }, expiresAt: Date.parse('2999-01-01T00:00:00Z') });
      expect(await balanceOf(service, apiKey)).toBe(200);
    });

    it('refuses unknown scopes, budgets of 0, other periods, past expiry: 400 naming the field, no key stored', async () => {
      const { service, audit } = make();
      const now = Date.UTC(2026, 0, 1);
      await expectBadRequest(service.accounts.createKey('alice', { name: 'k', scopes: ['admin' as never] }, { now }), ['scopes.0']);
      await expectBadRequest(service.accounts.createKey('alice', { name: 'k', scopes: [] }, { now }), ['scopes']);
      await expectBadRequest(service.accounts.createKey('alice', { name: 'k', scopes: ['read', 'read'] }, { now }), ['scopes']);
      await expectBadRequest(service.accounts.createKey('alice', { name: 'k', budget: { amount: 0, period: 'day' } }, { now }), ['budget.amount']);
      await expectBadRequest(service.accounts.createKey('alice', { name: 'k', budget: { amount: -1, period: 'day' } }, { now }), ['budget.amount']);
      await expectBadRequest(service.accounts.createKey('alice', { name: 'k', budget: { amount: 5, period: 'week' as never } }, { now }), ['budget.period']);
      await expectBadRequest(service.accounts.createKey('alice', { name: 'k', expiresAt: '2025-12-31T23:59:59Z' }, { now }), ['expiresAt']);
      await expectBadRequest(service.accounts.createKey('alice', { name: 'k', expiresAt: 'tomorrow' }, { now }), ['expiresAt']);
      await expectBadRequest(service.accounts.createKey('alice', { name: '' }, { now }), ['name']);
      await expectBadRequest(service.accounts.createKey('alice', {} as never, { now }), ['name']);
      await expectBadRequest(service.accounts.createKey('alice', { name: 'k', models: [] }, { now }), ['models']);
      expect(await service.accounts.listKeys('alice')).toEqual([]);
      expect((await audit.list({ limit: 10 })).entries).toEqual([]);
    });

    it('revokes by id: the next request is 401; an unknown id is 404', async () => {
      const { service } = make();
      const { keyId, apiKey } = await service.accounts.createKey('alice', { name: 'k' });
      expect(await balanceOf(service, apiKey)).toBe(200);
      await service.accounts.revokeKey(keyId);
      expect(await balanceOf(service, apiKey)).toBe(401);
      expect(await service.accounts.listKeys('alice')).toEqual([]);
      const again = await service.accounts.revokeKey(keyId).catch((e: DomainError) => e);
      expect((again as DomainError).code).toBe('not_found');
    });

    it('with the key cache on, a revoke through accounts is seen at once on this instance', async () => {
      const { service } = make({ apiKeyCache: { ttlMs: 60_000 } });
      const { keyId, apiKey } = await service.accounts.createKey('alice', { name: 'k' });
      expect(await balanceOf(service, apiKey)).toBe(200);
      await service.accounts.revokeKey(keyId);
      expect(await balanceOf(service, apiKey)).toBe(401);
    });

    it('an expired key is refused', async () => {
      const { service, keys } = make();
      const { apiKey } = await service.accounts.createKey('alice', { name: 'k', expiresAt: '2026-01-02T00:00:00Z' }, { now: Date.UTC(2026, 0, 1) });
      expect(await keys.resolve(apiKey, Date.UTC(2026, 0, 1, 12))).not.toBeNull();
      expect(await keys.resolve(apiKey, Date.UTC(2026, 0, 2))).toBeNull();
    });
  });

  describe('usage', () => {
    it('counts a finished generation on the service clock\'s day, as its finishedAt, not on the ledger\'s own clock', async () => {
      // A ledger the store does not settle in (a host's own, SQLite): the Lifecycle settles it, and must say when.
      class OwnLedger extends MemoryLedger {
        override settle(generationId: string, amount: number, now?: number): Promise<number | null> {
          return super.settle(generationId, amount, now);
        }
      }
      const clock = new FakeClock(Date.UTC(2026, 0, 15, 23, 59));
      const ledger = new OwnLedger({ balances: { alice: 100 }, clock: new FakeClock(Date.UTC(2026, 0, 16, 0, 1)) });
      const service = createGenerationService({
        providers: [{ models: [{ modelId: 'ok', title: 'OK', resultType: 'text', estimatedGenerationTime: 1, settings: [], price: 2 }], generate: async () => ({ text: 'hi' }) }],
        ledger,
        clock,
        recovery: { intervalMs: 0 },
      });
      services.push(service);
      await service.start();
      const { generationId } = await service.create('alice', { modelId: 'ok' });
      await until(async () => (await service.get('alice', generationId)).status === 'completed', { what: 'completed' });
      expect((await service.details('alice', generationId)).finishedAt).toBe('2026-01-15T23:59:00.000Z');
      expect(await service.accounts.usage('alice', { from: '2026-01-15', to: '2026-01-16' })).toEqual({
        data: [{ period: '2026-01-15', count: 1, tokens: 2 }],
        total: { count: 1, tokens: 2 },
      });
    });

    it('does not count a create refused at the in-flight cap as a generation (its reserve was given back, nothing was made)', async () => {
      // A ledger that leaves the in-flight cap to the store (SQLite, a host's own): the reserve is taken, the store's
      // insert refuses past the cap, and the reserve is released.
      class StoreCounts extends MemoryLedger {
        override settle(generationId: string, amount: number, now?: number): Promise<number | null> {
          return super.settle(generationId, amount, now);
        }
      }
      const clock = new FakeClock(Date.UTC(2026, 0, 15, 12));
      const ledger = new StoreCounts({ balances: { alice: 100 }, clock });
      Object.defineProperty(ledger, 'holdsInFlight', { value: false });
      const service = createGenerationService({
        providers: [{ models: [{ modelId: 'ok', title: 'OK', resultType: 'text', estimatedGenerationTime: 1, settings: [], price: 2 }], generate: async () => ({ text: 'hi' }) }],
        ledger,
        clock,
        limits: { inFlightPerUser: 1 },
        recovery: { intervalMs: 0 },
      });
      services.push(service);
      const { generationId } = await service.create('alice', { modelId: 'ok' });
      const refused = await service.create('alice', { modelId: 'ok' }).catch((e: DomainError) => e);
      expect((refused as DomainError).code).toBe('rate_limited');
      await service.cancel('alice', generationId);
      expect(await ledger.account('alice')).toEqual({ balance: 100, reserved: 0, settled: 0 });
      expect((await service.accounts.usage('alice', {})).total).toEqual({ count: 1, tokens: 0 });
    });

    it('groups settled spend by day, model and key, defaulting to the last 30 days', async () => {
      const { service, ledger } = make();
      const day = Date.UTC(2026, 4, 10, 12);
      await ledger.credit('alice', 100);
      for (const [gen, model, key, at] of [
        ['g1', 'a', 'k1', day],
        ['g2', 'b', 'k1', day],
        ['g3', 'a', 'k2', day - 86_400_000],
        ['g4', 'a', 'k2', day - 30 * 86_400_000],
      ] as const) {
        await ledger.reserve('alice', gen, 3, at, { modelId: model, keyId: key });
        await ledger.settle(gen, 2, at);
      }
      expect(await service.accounts.usage('alice', {}, day)).toEqual({
        data: [
          { period: '2026-05-09', count: 1, tokens: 2 },
          { period: '2026-05-10', count: 2, tokens: 4 },
        ],
        total: { count: 3, tokens: 6 },
      });
      expect(await service.accounts.usage('alice', { from: '2026-04-01', to: '2026-05-10', groupBy: 'model' }, day)).toEqual({
        data: [
          { modelId: 'a', count: 3, tokens: 6 },
          { modelId: 'b', count: 1, tokens: 2 },
        ],
        total: { count: 4, tokens: 8 },
      });
      expect((await service.accounts.usage('alice', { from: '2026-05-10', to: '2026-05-10', groupBy: 'key' }, day)).data).toEqual([
        { keyId: 'k1', count: 2, tokens: 4 },
      ]);
    });

    it('refuses from after to, more than 366 days, bad dates and groupings: 400 naming the field', async () => {
      const { service } = make();
      await expectBadRequest(service.accounts.usage('alice', { from: '2026-05-02', to: '2026-05-01' }), ['from']);
      await expectBadRequest(service.accounts.usage('alice', { from: '2025-01-01', to: '2026-01-02' }), ['from']);
      await expectBadRequest(service.accounts.usage('alice', { from: '2026-02-30' }), ['from']);
      await expectBadRequest(service.accounts.usage('alice', { to: '2026-5-1' }), ['to']);
      await expectBadRequest(service.accounts.usage('alice', { groupBy: 'week' as never }), ['groupBy']);
      expect((await service.accounts.usage('alice', { from: '2025-01-01', to: '2026-01-01' })).total).toEqual({ count: 0, tokens: 0 });
    });
  });

  it('audits every action with who, what and when, newest first, paged', async () => {
    const { service } = make();
    await service.accounts.createUser({ userId: 'alice', balance: 1 }, { actor: 'ops' });
    await service.accounts.credit('alice', { amount: 2, reason: 'refund #12' }, { actor: 'ops' });
    const { keyId, apiKey } = await service.accounts.createKey('alice', { name: 'ci', budget: { amount: 1, period: 'day' } });
    await service.accounts.revokeKey(keyId, { actor: 'ops' });
    const first = await service.accounts.auditLog({ limit: 3 });
    expect(first.data.map((e) => [e.actor, e.action, e.userId, e.keyId])).toEqual([
      ['ops', 'key.revoke', 'alice', keyId],
      ['host', 'key.create', 'alice', keyId],
      ['ops', 'credits.add', 'alice', undefined],
    ]);
    expect(first.data[2]?.details).toEqual({ amount: 2, reason: 'refund #12' });
    expect(first.data[0]?.at).toMatch(/^\d{4}-\d\d-\d\dT/);
    expect(JSON.stringify(first)).not.toContain(apiKey);
    const second = await service.accounts.auditLog({ limit: 3, cursor: first.nextCursor! });
    expect(second.data.map((e) => e.action)).toEqual(['user.create']);
    expect(second.nextCursor).toBeNull();
    await expectBadRequest(service.accounts.auditLog({ limit: 0 }), ['limit']);
    await expectBadRequest(service.accounts.auditLog({ cursor: 'x' }), ['cursor']);
  });
});

describe('admin routes with hostile input', () => {
  const ADMIN = `admin-${'x'.repeat(40)}`;
  async function call(service: GenerationService, method: string, path: string, key: string, body?: string, type = 'application/json') {
    const res = await service.handle({ method, path, headers: { authorization: `Bearer ${key}`, 'content-type': type }, ...(body !== undefined ? { body } : {}) });
    return { status: res.status, text: String(res.body) };
  }

  it('answers odd paths, bodies and keys with 4xx JSON, never a 500, and writes nothing', async () => {
    const { service, ledger, audit } = make({ admin: { apiKeys: [ADMIN] } });
    const cases: Array<[string, string, string | undefined, number]> = [
      ['POST', '/v1/admin/users', '{oops', 400],
      ['POST', '/v1/admin/users', '[]', 400],
      ['POST', '/v1/admin/users', 'null', 400],
      ['POST', '/v1/admin/users', '{"userId":"a","balance":1e400}', 400],
      ['POST', '/v1/admin/users', '{"userId":"a","__proto__":{"balance":5}}', 400],
      ['POST', '/v1/admin/users', `{"userId":"${'u'.repeat(201)}"}`, 400],
      ['POST', '/v1/admin/users/%E0%A4%A/credits', '{"amount":1,"reason":"r"}', 404],
      ['POST', '/v1/admin/users/a%00b/credits', '{"amount":1,"reason":"r"}', 400],
      ['POST', '/v1/admin/users/alice/credits', '{"amount":-1e308,"reason":"r"}', 400],
      ['POST', '/v1/admin/users/alice/keys', '{"name":"k","scopes":"generate"}', 400],
      ['POST', '/v1/admin/users/alice/keys', '{"name":"k","budget":{"amount":1,"period":"day","extra":1}}', 400],
      ['POST', '/v1/admin/users/alice/keys', `{"name":"k","models":${JSON.stringify(Array.from({ length: 101 }, (_, i) => `m${i}`))}}`, 400],
      ['DELETE', '/v1/admin/keys/..%2F..%2Fetc', undefined, 404],
      ['DELETE', '/v1/admin/keys/', undefined, 404],
      ['GET', '/v1/admin/audit?limit=-1', undefined, 400],
      ['GET', '/v1/admin/audit?limit=99999', undefined, 400],
      ['GET', '/v1/admin/audit?cursor=1%20OR%201=1', undefined, 400],
      ['PUT', '/v1/admin/users', '{}', 405],
      // A lone UTF-16 half (valid JSON): no store keeps it as given, so it is refused like a control character.
      ['POST', '/v1/admin/users', '{"userId":"a\\ud800"}', 400],
      ['POST', '/v1/admin/users/alice/credits', '{"amount":1,"reason":"r\\udfff"}', 400],
      ['POST', '/v1/admin/users/alice/keys', '{"name":"k\\ud800x"}', 400],
      ['POST', '/v1/admin/organizations', '{"organizationId":"o\\udc00"}', 400],
    ];
    for (const [method, path, body, status] of cases) {
      const res = await call(service, method, path, ADMIN, body);
      expect(res.status, `${method} ${path} ${body}`).toBe(status);
      expect(JSON.parse(res.text).error.code, path).toEqual(expect.any(String));
      expect(res.text).not.toMatch(/at [\w.]+ \(|node_modules/);
    }
    expect(await ledger.account('alice')).toEqual({ balance: 0, reserved: 0, settled: 0 });
    expect(await ledger.account('a')).toEqual({ balance: 0, reserved: 0, settled: 0 });
    expect((await audit.list({ limit: 10 })).entries).toEqual([]);
    expect(await service.accounts.listKeys('alice')).toEqual([]);
    // A whole pair (an emoji) is text like any other.
    expect((await call(service, 'POST', '/v1/admin/users', ADMIN, '{"userId":"\\ud83d\\ude00 fan"}')).status).toBe(201);
  });

  it('refuses near-miss admin keys and a user key carrying the admin key\u2019s text; is off (404) without the option', async () => {
    const { service, keys } = make({ admin: { apiKeys: [{ key: ADMIN, name: 'ops' }] } });
    // Even if a user's store knew the admin key's text, it opens no user route.
    await keys.addKey(ADMIN, 'mallory');
    expect((await call(service, 'GET', '/v1/balance', ADMIN)).status).toBe(401);
    for (const near of [ADMIN.slice(0, -1), `${ADMIN}x`, ADMIN.toUpperCase(), `${ADMIN}\u00e9`]) {
      expect((await call(service, 'GET', '/v1/admin/audit', near)).status).toBe(401);
    }
    expect((await service.handle({ method: 'GET', path: '/v1/admin/audit', headers: {} })).status).toBe(401);
    const off = make();
    expect((await call(off.service, 'GET', '/v1/admin/audit', ADMIN)).status).toBe(404);
    expect(() => make({ admin: { apiKeys: ['short'] } })).toThrow(/at least 32/);
    expect(() => make({ admin: { apiKeys: [] } })).toThrow();
  });

  it('takes only admin keys a request can carry: one longer than a bearer key may be is refused at start, not 401 forever', async () => {
    const longest = `a${'x'.repeat(511)}`;
    const { service } = make({ admin: { apiKeys: [longest] } });
    expect((await call(service, 'GET', '/v1/admin/audit', longest)).status).toBe(200);
    expect(() => make({ admin: { apiKeys: [`${longest}x`] } })).toThrow(/at most 512/);
    expect(() => make({ admin: { apiKeys: [{ key: `${longest}x`, name: 'ops' }] } })).toThrow(/at most 512/);
  });
});

describe('token amounts are bounded at MAX_TOKENS (issue 37)', () => {
  const ADMIN = `admin-${'x'.repeat(40)}`;
  const post = (service: GenerationService, path: string, body: unknown) =>
    service
      .handle({ method: 'POST', path, headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' }, body: JSON.stringify(body) })
      .then((r) => ({ status: r.status, body: JSON.parse(String(r.body)) }));

  it('answers the issue\u2019s 1.7e308 balance and credit with a 400, and a balance never turns null', async () => {
    const { service, keys, audit } = make({ admin: { apiKeys: [ADMIN] } });
    await keys.addKey('key-of-big-0123456789', 'big');
    const balance = () =>
      service.handle({ method: 'GET', path: '/v1/balance', headers: { authorization: 'Bearer key-of-big-0123456789' } }).then((r) => JSON.parse(String(r.body)));

    const huge = await post(service, '/v1/admin/users', { userId: 'big', balance: 1.7e308 });
    expect(huge.status).toBe(400);
    expect(huge.body.error).toMatchObject({ code: 'invalid_request', details: [{ field: 'balance', code: 'invalid_value' }] });
    expect(huge.body.error.message).toContain(String(MAX_TOKENS));
    expect((await post(service, '/v1/admin/users', { userId: 'big', balance: MAX_TOKENS + 2 })).status).toBe(400);

    expect(await post(service, '/v1/admin/users', { userId: 'big', balance: 1e15 })).toMatchObject({ status: 201 });
    const credit = await post(service, '/v1/admin/users/big/credits', { amount: 1.7e308, reason: 'r' });
    expect(credit.status).toBe(400);
    expect(credit.body.error.details).toEqual([expect.objectContaining({ field: 'amount', code: 'invalid_value' })]);
    // Within the bound on its own, past it with the balance: refused by the ledger's own check, still a 400.
    const past = await post(service, '/v1/admin/users/big/credits', { amount: MAX_TOKENS - 1e15 + 1, reason: 'r' });
    expect(past.status).toBe(400);
    expect(past.body.error).toMatchObject({ code: 'invalid_request', details: [{ field: 'amount', code: 'invalid_value' }] });
    expect(past.body.error.message).toContain(String(MAX_TOKENS));
    expect(await balance()).toMatchObject({ balance: 1e15 });

    expect(await post(service, '/v1/admin/users/big/credits', { amount: MAX_TOKENS - 1e15, reason: 'fill' })).toEqual({
      status: 200,
      body: { balance: MAX_TOKENS },
    });
    expect(await balance()).toMatchObject({ balance: MAX_TOKENS });
    expect((await post(service, '/v1/admin/users/big/credits', { amount: 1, reason: 'r' })).status).toBe(400);
    expect(await balance()).toMatchObject({ balance: MAX_TOKENS });
    // Only what was written is audited.
    expect((await audit.list({ limit: 10 })).entries.map((e) => e.action)).toEqual(['credits.add', 'user.create']);
  });

  it('refuses amounts past the bound in service.accounts: balance, credit and key budget, writing nothing', async () => {
    const { service, ledger, audit } = make();
    for (const amount of [MAX_TOKENS + 2, 1e300, Number.MAX_VALUE]) {
      await expectBadRequest(service.accounts.createUser({ userId: 'alice', balance: amount }), ['balance']);
      await expectBadRequest(service.accounts.credit('alice', { amount, reason: 'r' }), ['amount']);
      await expectBadRequest(service.accounts.createKey('alice', { name: 'k', budget: { amount, period: 'day' } }), ['budget.amount']);
    }
    expect(await ledger.account('alice')).toEqual({ balance: 0, reserved: 0, settled: 0 });
    expect((await audit.list({ limit: 10 })).entries).toEqual([]);
    expect(await service.accounts.listKeys('alice')).toEqual([]);
    // Up to the bound is fine.
    expect(await service.accounts.credit('alice', { amount: MAX_TOKENS, reason: 'all' })).toEqual({ balance: MAX_TOKENS });
    await expectBadRequest(service.accounts.credit('alice', { amount: 0.5, reason: 'r' }), ['amount']);
  });
});

describe('a host ledger', () => {
  it('is refused at construction when it lacks what key budgets, accounts and usage call', async () => {
    const { InvalidOptionsError } = await import('@genservice/core');
    const full = new MemoryLedger();
    const { keySpend: _k, usage: _u, ...partial } = {
      reserve: full.reserve.bind(full),
      settle: full.settle.bind(full),
      release: full.release.bind(full),
      balance: full.balance.bind(full),
      credit: full.credit.bind(full),
      openAccount: full.openAccount.bind(full),
      account: full.account.bind(full),
      openReserves: full.openReserves.bind(full),
      keySpend: full.keySpend.bind(full),
      usage: full.usage.bind(full),
    };
    let thrown: unknown;
    try {
      createGenerationService({ providers: [], ledger: partial as never });
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(InvalidOptionsError);
    expect((thrown as InstanceType<typeof InvalidOptionsError>).problems).toEqual([expect.stringMatching(/^ledger: .*keySpend, usage/)]);
  });
});
