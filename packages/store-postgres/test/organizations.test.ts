import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGenerationService, type GenerationService } from '@genservice/core';
import { until } from '@genservice/testing';
import { createPostgresStores, PostgresLedger, type PostgresStores } from '../src/index.js';
import { createTestDatabase, randomName, type TestDatabase, quietPool } from './helpers.js';

// Issue 40: nested budgets (organisation, user, key) exact under 100 racing creates over two service instances,
// each with its own pool on one database, the way two hosts behind a load balancer share it.
let db: TestDatabase;
const pools: pg.Pool[] = [];
const instances: Array<{ service: GenerationService; stores: PostgresStores }> = [];
const ADMIN_KEY = `admin_${'O'.repeat(40)}`;
/** Where each model's runs wait until the test opens it (resolve). */
function gate(): { opened: Promise<void>; open: () => void } {
  let open: () => void = () => {};
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}
const gates = { img: gate(), slot: gate(), free: gate(), own: gate() };
gates.free.open();

let schema = '';

beforeAll(async () => {
  db = await createTestDatabase();
  schema = randomName('orgs');
  for (let i = 0; i < 2; i++) {
    const pool = quietPool({ connectionString: db.url, max: 4 });
    pool.on('error', () => {});
    pools.push(pool);
    const stores = await createPostgresStores({ pool, schema });
    const service = createGenerationService({
      providers: [
        {
          // Reserves 3, charges 2 once the test opens the gate: what is given back must reach every level.
          models: [
            { modelId: 'img', title: 'Image', resultType: 'text', estimatedGenerationTime: 0.01, settings: [], price: 3 },
            { modelId: 'slot', title: 'Slot', resultType: 'text', estimatedGenerationTime: 0.01, settings: [], price: 3 },
            { modelId: 'free', title: 'Runs at once', resultType: 'text', estimatedGenerationTime: 0.01, settings: [], price: 3 },
            { modelId: 'own', title: 'Held for user limits', resultType: 'text', estimatedGenerationTime: 0.01, settings: [], price: 3 },
          ],
          generate: async (input) => {
            await gates[input.model.modelId as keyof typeof gates].opened;
            return { text: 'done', price: 2 };
          },
        },
      ],
      store: stores.store,
      ledger: stores.ledger,
      apiKeys: stores.apiKeys,
      idempotency: stores.idempotency,
      auditLog: stores.auditLog,
      runner: { concurrency: 50 },
      limits: { inFlightPerUser: 1_000 },
      recovery: { onStart: false, intervalMs: 0, orphanReserveMs: 0 },
      admin: { apiKeys: [ADMIN_KEY] },
      instanceId: `instance-${i}`,
    });
    await service.start();
    instances.push({ service, stores });
  }
});

afterAll(async () => {
  for (const g of Object.values(gates)) g.open();
  await Promise.all(instances.map((i) => i.service.stop()));
  await Promise.all(pools.map((p) => p.end()));
  await db?.drop();
});

async function call(service: GenerationService, method: string, path: string, key: string, body?: unknown): Promise<{ status: number; json: any }> {
  const res = await service.handle({
    method,
    path,
    headers: { authorization: `Bearer ${key}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, json: res.body ? JSON.parse(String(res.body)) : null };
}

/** Users of one organisation, each with a balance and a key (some keys with budgets of their own). */
async function organisation(name: string, limits: Record<string, unknown>, users: number, keyBudget?: number): Promise<Array<{ userId: string; apiKey: string }>> {
  const [a, b] = [instances[0]!.service, instances[1]!.service];
  expect((await call(a, 'POST', '/v1/admin/organizations', ADMIN_KEY, { organizationId: name, ...limits })).status).toBe(201);
  const out: Array<{ userId: string; apiKey: string }> = [];
  for (let i = 0; i < users; i++) {
    const userId = `${name}-user-${i}`;
    expect((await call(a, 'POST', '/v1/admin/users', ADMIN_KEY, { userId, balance: 1_000 })).status).toBe(201);
    expect((await call(b, 'POST', `/v1/admin/organizations/${name}/members`, ADMIN_KEY, { userId, role: i === 0 ? 'admin' : 'member' })).status).toBe(200);
    const key = await call(i % 2 === 0 ? a : b, 'POST', `/v1/admin/users/${userId}/keys`, ADMIN_KEY, {
      name: 'race',
      ...(keyBudget !== undefined && i === 0 ? { budget: { amount: keyBudget, period: 'day' } } : {}),
    });
    expect(key.status).toBe(201);
    out.push({ userId, apiKey: key.json.apiKey });
  }
  return out;
}

describe('organisations on Postgres, two service instances', () => {
  it('100 creates racing over both instances against an organisation budget of 60 (price 3): exactly 20, and nothing left held once they end', async () => {
    const users = await organisation('acme', { budget: { amount: 60, period: 'day' }, maxInFlight: 50, weight: 5 }, 5, 9);
    const results = await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        call(instances[i % 2]!.service, 'POST', '/v1/generations', users[i % 5]!.apiKey, { modelId: 'img' }),
      ),
    );
    const accepted = results.filter((r) => r.status === 201);
    expect(accepted).toHaveLength(20);
    const refused = results.filter((r) => r.status !== 201);
    expect(new Set(refused.map((r) => `${r.status} ${r.json.error.code}`))).toEqual(new Set(['402 budget_exceeded']));
    // The first user's key is limited to 9 a day: at most 3 of its creates, whatever the organisation had left.
    const byUser = users.map((_, u) => results.filter((r, i) => i % 5 === u && r.status === 201).length);
    expect(byUser[0]).toBeLessThanOrEqual(3);
    expect(byUser.reduce((a, b) => a + b, 0)).toBe(20);

    const ledger = instances[0]!.stores.ledger;
    const accounts = await Promise.all(users.map((u) => ledger.account(u.userId)));
    expect(accounts.reduce((sum, a) => sum + a.reserved, 0)).toBe(60);
    for (const [u, a] of accounts.entries()) expect(a).toEqual({ balance: 1_000 - 3 * byUser[u]!, reserved: 3 * byUser[u]!, settled: 0 });
    const held = await call(instances[1]!.service, 'GET', '/v1/admin/organizations/acme', ADMIN_KEY);
    expect(held.json).toMatchObject({ inFlight: 20, spent: 60, remaining: 0, weight: 5 });

    // Every generation ends, charged 2 of its 3: the organisation, the users and the key get the rest back.
    gates.img.open();
    await until(async () => (await Promise.all(users.map((u) => ledger.account(u.userId)))).every((a) => a.reserved === 0), {
      what: 'every reserve settled',
      timeoutMs: 20_000,
    });
    const after = await Promise.all(users.map((u) => ledger.account(u.userId)));
    for (const [u, a] of after.entries()) expect(a).toEqual({ balance: 1_000 - 2 * byUser[u]!, reserved: 0, settled: 2 * byUser[u]! });
    const settled = await call(instances[0]!.service, 'GET', '/v1/admin/organizations/acme', ADMIN_KEY);
    expect(settled.json).toMatchObject({ inFlight: 0, spent: 40, remaining: 20 });
    expect(await ledger.openReserves(100)).toEqual([]);
    expect(await ledger.keySpend((await instances[0]!.service.accounts.listKeys(users[0]!.userId))[0]!.keyId, Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), new Date().getUTCDate()))).toBe(2 * byUser[0]!);
    // The organisation admin reads its usage by member; both instances answer the same.
    const usage = await call(instances[1]!.service, 'GET', '/v1/usage?groupBy=member', users[0]!.apiKey);
    expect(usage.status).toBe(200);
    expect(usage.json.total).toEqual({ count: 20, tokens: 40 });
    expect((await call(instances[0]!.service, 'GET', '/v1/admin/organizations/acme/usage?groupBy=member', ADMIN_KEY)).json).toEqual(usage.json);
  });

  it('100 creates racing over both instances against an organisation in-flight cap of 7: exactly 7, the rest 429', async () => {
    const users = await organisation('capped', { maxInFlight: 7 }, 4);
    const results = await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        call(instances[i % 2]!.service, 'POST', '/v1/generations', users[i % 4]!.apiKey, { modelId: 'slot' }),
      ),
    );
    const accepted = results.filter((r) => r.status === 201);
    expect(accepted).toHaveLength(7);
    expect(new Set(results.filter((r) => r.status !== 201).map((r) => `${r.status} ${r.json.error.code}`))).toEqual(new Set(['429 rate_limited']));
    const ledger = instances[0]!.stores.ledger;
    expect((await Promise.all(users.map((u) => ledger.account(u.userId)))).reduce((sum, a) => sum + a.reserved, 0)).toBe(21);
    expect((await call(instances[1]!.service, 'GET', '/v1/admin/organizations/capped', ADMIN_KEY)).json.inFlight).toBe(7);
    gates.slot.open();
    await until(async () => (await Promise.all(users.map((u) => ledger.account(u.userId)))).every((a) => a.reserved === 0), { what: 'every reserve settled', timeoutMs: 20_000 });
    expect((await call(instances[0]!.service, 'GET', '/v1/admin/organizations/capped', ADMIN_KEY)).json.inFlight).toBe(0);
    const settled = (await Promise.all(users.map((u) => ledger.account(u.userId)))).reduce((sum, a) => sum + a.settled, 0);
    expect(settled).toBe(14);
    // A slot is free again.
    expect((await call(instances[1]!.service, 'POST', '/v1/generations', users[0]!.apiKey, { modelId: 'slot' })).status).toBe(201);
  });

  it('100 creates racing their own settles over both instances: never past the budget or the cap, never a deadlock', async () => {
    const users = await organisation('busy', { budget: { amount: 150, period: 'day' }, maxInFlight: 10 }, 5, 30);
    const results = await Promise.all(
      Array.from({ length: 100 }, (_, i) => call(instances[i % 2]!.service, 'POST', '/v1/generations', users[i % 5]!.apiKey, { modelId: 'free' })),
    );
    // Every answer is an acceptance or one of the limits' refusals: a deadlock or a lock timeout would be a 500 or 503.
    expect(new Set(results.map((r) => (r.status === 201 ? '201' : `${r.status} ${r.json.error.code}`)))).toEqual(
      new Set(results.map((r) => r.status).includes(402) ? ['201', '429 rate_limited', '402 budget_exceeded'] : ['201', '429 rate_limited']),
    );
    const accepted = results.filter((r) => r.status === 201).length;
    expect(accepted).toBeGreaterThanOrEqual(10);
    const ledger = instances[0]!.stores.ledger;
    await until(async () => (await Promise.all(users.map((u) => ledger.account(u.userId)))).every((a) => a.reserved === 0), { what: 'every reserve settled', timeoutMs: 20_000 });
    const settled = (await Promise.all(users.map((u) => ledger.account(u.userId)))).reduce((sum, a) => sum + a.settled, 0);
    expect(settled).toBe(2 * accepted);
    const org = (await call(instances[1]!.service, 'GET', '/v1/admin/organizations/busy', ADMIN_KEY)).json;
    expect(org).toMatchObject({ inFlight: 0, spent: settled });
    expect(org.spent).toBeLessThanOrEqual(150);
  });

  it('100 creates racing over both instances against users\u2019 own limits inside an organisation: each level exact, all given back', async () => {
    const users = await organisation('tiers', { budget: { amount: 200, period: 'day' }, maxInFlight: 60 }, 3);
    const [a, b] = [instances[0]!.service, instances[1]!.service];
    expect((await call(b, 'PATCH', `/v1/admin/users/${users[0]!.userId}/limits`, ADMIN_KEY, { budget: { amount: 15, period: 'day' } })).status).toBe(200);
    expect((await call(a, 'PATCH', `/v1/admin/users/${users[1]!.userId}/limits`, ADMIN_KEY, { maxInFlight: 4 })).status).toBe(200);
    const results = await Promise.all(
      Array.from({ length: 100 }, (_, i) => call(instances[i % 2]!.service, 'POST', '/v1/generations', users[i % 3]!.apiKey, { modelId: 'own' })),
    );
    const byUser = users.map((_, u) => results.filter((r, i) => i % 3 === u && r.status === 201).length);
    // The first user's budget of 15 takes 5 of price 3; the second's cap 4; the third, without limits, all 33 of its own.
    expect(byUser).toEqual([5, 4, 33]);
    const refusals = (u: number) => new Set(results.filter((r, i) => i % 3 === u && r.status !== 201).map((r) => `${r.status} ${r.json.error.code}`));
    expect(refusals(0)).toEqual(new Set(['402 budget_exceeded']));
    expect(refusals(1)).toEqual(new Set(['429 rate_limited']));
    const ledger = instances[0]!.stores.ledger;
    for (const [u, n] of byUser.entries()) expect(await ledger.account(users[u]!.userId)).toEqual({ balance: 1_000 - 3 * n, reserved: 3 * n, settled: 0 });
    expect((await call(a, 'GET', `/v1/admin/users/${users[0]!.userId}/limits`, ADMIN_KEY)).json).toMatchObject({ inFlight: 5, spent: 15, remaining: 0 });
    expect((await call(b, 'GET', `/v1/admin/users/${users[1]!.userId}/limits`, ADMIN_KEY)).json).toMatchObject({ inFlight: 4 });
    expect((await call(a, 'GET', '/v1/admin/organizations/tiers', ADMIN_KEY)).json).toMatchObject({ inFlight: 42, spent: 126 });
    gates.own.open();
    await until(async () => (await Promise.all(users.map((u) => ledger.account(u.userId)))).every((x) => x.reserved === 0), { what: 'every reserve settled', timeoutMs: 20_000 });
    expect((await call(b, 'GET', `/v1/admin/users/${users[0]!.userId}/limits`, ADMIN_KEY)).json).toMatchObject({ inFlight: 0, spent: 10, remaining: 5 });
    expect((await call(a, 'GET', `/v1/admin/users/${users[1]!.userId}/limits`, ADMIN_KEY)).json).toMatchObject({ inFlight: 0 });
    expect((await call(b, 'GET', '/v1/admin/organizations/tiers', ADMIN_KEY)).json).toMatchObject({ inFlight: 0, spent: 84 });
  });

  it('costs a user of no organisation no statement more: the one-statement reserve (issue 36), which sees no membership', async () => {
    const statements: string[] = [];
    const pool = pools[0]!;
    // Counts what a transaction's client sends; everything else goes to the pool as it is.
    const counting = new Proxy(pool, {
      get(target, prop) {
        if (prop === 'connect') {
          return async () => {
            const client = await target.connect();
            const query = client.query.bind(client) as (...args: unknown[]) => unknown;
            return new Proxy(client, {
              get(c, p) {
                if (p === 'query') {
                  return (text: unknown, ...rest: unknown[]) => {
                    statements.push(firstWord(text));
                    return query(text, ...rest);
                  };
                }
                const v = Reflect.get(c, p);
                return typeof v === 'function' ? v.bind(c) : v;
              },
            });
          };
        }
        if (prop === 'query') {
          return (text: unknown, ...rest: unknown[]) => {
            statements.push(firstWord(text));
            return (target.query as (...args: unknown[]) => unknown)(text, ...rest);
          };
        }
        const v = Reflect.get(target, prop);
        return typeof v === 'function' ? v.bind(target) : v;
      },
    });
    const ledger = new PostgresLedger(counting as pg.Pool, { schema });
    await ledger.credit('solo-counted', 10);
    statements.length = 0;
    expect(await ledger.reserve('solo-counted', 'gen-counted', 1, Date.now(), { windows: { day: 0, month: 0 } })).toBe('ok');
    // The debit (refused for a member of an organisation, who takes the full reserve) and the reserve row: one WITH.
    expect(statements).toEqual(['WITH']);
  });

  it('a user of no organisation with limits of its own takes the full reserve too, and its settle gives them back', async () => {
    const ledger = new PostgresLedger(pools[0]!, { schema });
    await ledger.setUserLimits('own-limited', { maxInFlight: 1, budget: { amount: 5, period: 'total' } });
    await ledger.credit('own-limited', 10);
    const windows = { day: 0, month: 0 };
    expect(await ledger.reserve('own-limited', 'gen-u1', 2, Date.now(), { windows })).toMatchObject({ result: 'ok', userLimits: { maxInFlight: 1 } });
    expect(await ledger.reserve('own-limited', 'gen-u2', 2, Date.now(), { windows })).toMatchObject({ result: 'limit_reached', refusedBy: 'user' });
    expect(await ledger.settle('gen-u1', 1)).toBe(1);
    expect(await ledger.userLimits('own-limited', windows)).toMatchObject({ inFlight: 0, spent: 1 });
    expect(await ledger.reserve('own-limited', 'gen-u2', 5, Date.now(), { windows })).toMatchObject({ result: 'budget_exceeded', refusedBy: 'user' });
  });

  it('a member of an organisation takes the full reserve: the one statement holds nothing, its refusal read says so', async () => {
    const ledger = new PostgresLedger(pools[0]!, { schema });
    expect(await ledger.createOrganization({ organizationId: 'capped-one', maxInFlight: 1, weight: 1, createdAt: 0 })).toBe(true);
    expect(await ledger.addMember('capped-one', { userId: 'member-one', role: 'member', joinedAt: 0 })).toBe('added');
    await ledger.credit('member-one', 10);
    const windows = { day: 0, month: 0 };
    expect(await ledger.reserve('member-one', 'gen-m1', 1, Date.now(), { windows })).toMatchObject({ result: 'ok', organization: { organizationId: 'capped-one' } });
    expect(await ledger.reserve('member-one', 'gen-m2', 1, Date.now(), { windows })).toMatchObject({ result: 'limit_reached', refusedBy: 'organization' });
    expect(await ledger.settle('gen-m1', 1)).toBe(1);
    expect((await ledger.organization('capped-one', windows))?.inFlight).toBe(0);
    expect(await ledger.reserve('member-one', 'gen-m2', 1, Date.now(), { windows })).toMatchObject({ result: 'ok' });
  });
});

/** A statement's first word, sent as text or as a (named) query config. */
function firstWord(text: unknown): string {
  const t = typeof text === 'string' ? text : (text as { text?: unknown } | null)?.text;
  return typeof t === 'string' ? t.trim().split(/\s+/)[0]! : 'query';
}
