// Issue 36: the queries a create and a run make on the Postgres stores, counted on a recording pool (counters, not
// time). A create is one statement (the reserve with its in-flight count on the account row, the insert, its event)
// and the enqueue (in process: none); a run is two (the claim, the finish with its settle); nothing reads the event
// log or the webhook outbox while nobody listens.
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createGenerationService, type GenerationService } from '@genservice/core';
import { until } from '@genservice/testing';
import { createPostgresStores, type PostgresStores } from '../src/index.js';
import { createTestDatabase, type TestDatabase } from './helpers.js';

let db: TestDatabase;
let pool: pg.Pool;
let stores: PostgresStores;
let service: GenerationService;
/** Every statement's text, in order, as the pool's clients sent it. */
const sent: string[] = [];

beforeAll(async () => {
  db = await createTestDatabase('genservice_trips');
  pool = new pg.Pool({ connectionString: db.url, max: 3 });
  pool.on('error', () => {});
  const record = (target: { query: (...a: unknown[]) => unknown }) => {
    const query = target.query.bind(target);
    target.query = (...args: unknown[]) => {
      sent.push(typeof args[0] === 'string' ? args[0] : String((args[0] as { text?: string }).text));
      return query(...args);
    };
  };
  // Every statement goes through a client's query (pool.query too), so the clients are what is recorded.
  pool.on('connect', (client) => record(client as unknown as { query: (...a: unknown[]) => unknown }));
  stores = await createPostgresStores({ pool, schema: 'trips' });
  await stores.ledger.credit('alice', 1_000);
  service = createGenerationService({
    providers: [
      {
        models: [{ modelId: 'm', title: 'M', resultType: 'text', estimatedGenerationTime: 0.01, settings: [], price: 3 }],
        generate: async () => ({ text: 'done' }),
      },
    ],
    store: stores.store,
    ledger: stores.ledger,
    webhookStore: stores.webhookStore,
    // The polls are far apart: what is counted is the work of the generation, not of a timer.
    push: { pollIntervalMs: 60_000 },
    webhooks: { pollIntervalMs: 60_000 },
    recovery: { onStart: false, intervalMs: 0 },
  });
  await service.start();
}, 60_000);

afterAll(async () => {
  await service?.stop({ timeoutMs: 2_000 });
  await pool?.end();
  await db?.drop();
});

it('a create is 1 statement and its run 2 more (claim; finish with its settle); no log or outbox read', async () => {
  // One generation first, so no statement of a first use (a schema check, a cache) is counted.
  const first = (await service.create('alice', { modelId: 'm' })).generationId;
  await until(async () => (await stores.store.getById(first))?.status === 'completed', { what: 'the first generation completed' });
  const tick = () => new Promise((r) => setImmediate(r));
  for (let i = 0; i < 5; i++) await tick();
  sent.length = 0;
  const { generationId } = await service.create('alice', { modelId: 'm' });
  const atCreate = sent.length;
  await until(async () => (await stores.ledger.account('alice')).reserved === 0, { what: 'the generation settled' });
  for (let i = 0; i < 5; i++) await tick();
  const statements = [...sent];
  sent.length = 0; // the reads of the checks below are not the generation's
  expect(atCreate).toBe(1);
  expect(statements.filter((t) => !/^SELECT .* FROM "trips"\.accounts WHERE user_id = \$1$/s.test(t.trim()))).toHaveLength(3);
  expect(statements.some((t) => /FROM "trips"\.events\s+WHERE \(tx, pos\)/.test(t))).toBe(false);
  expect(statements.some((t) => /cursors/.test(t))).toBe(false);
  const rec = await stores.store.getById(generationId);
  expect(rec).toMatchObject({ status: 'completed', price: 3 });
  expect(await stores.ledger.account('alice')).toEqual({ balance: 994, reserved: 0, settled: 6 });
  const usage = await stores.ledger.usage('alice', { from: '2000-01-01', to: '2100-01-01', groupBy: 'model' });
  expect(usage.total).toEqual({ count: 2, tokens: 6 });
});

it('refuses in that one statement as the ledger would: 402 with too little balance, 429 at the in-flight cap, nothing written', async () => {
  const poor = createGenerationService({
    providers: [{ models: [{ modelId: 'm', title: 'M', resultType: 'text', estimatedGenerationTime: 0.01, settings: [], price: 3 }], generate: () => new Promise(() => {}) }],
    store: stores.store,
    ledger: stores.ledger,
    webhookStore: stores.webhookStore,
    limits: { inFlightPerUser: 2 },
    recovery: { onStart: false, intervalMs: 0 },
    runner: { enabled: false },
  });
  await stores.ledger.credit('bob', 100);
  await expect(poor.create('nobody', { modelId: 'm' })).rejects.toMatchObject({ code: 'insufficient_funds' });
  await poor.create('bob', { modelId: 'm' });
  await poor.create('bob', { modelId: 'm' });
  await expect(poor.create('bob', { modelId: 'm' })).rejects.toMatchObject({ code: 'rate_limited' });
  expect(await stores.ledger.account('bob')).toEqual({ balance: 94, reserved: 6, settled: 0 });
  expect((await stores.store.list('bob', { limit: 10 })).length).toBe(2);
  // A free generation makes its account row on the way.
  const free = createGenerationService({
    providers: [{ models: [{ modelId: 'f', title: 'F', resultType: 'text', estimatedGenerationTime: 0.01, settings: [], price: 0 }], generate: async () => ({ text: 'x' }) }],
    store: stores.store,
    ledger: stores.ledger,
    recovery: { onStart: false, intervalMs: 0 },
    runner: { enabled: false },
  });
  await free.create('carol', { modelId: 'f' });
  expect(await stores.ledger.account('carol')).toEqual({ balance: 0, reserved: 0, settled: 0 });
  await poor.stop({ timeoutMs: 500 });
  await free.stop({ timeoutMs: 500 });
});

it('a failure and a cancel settle in their own change, as a completion does: no settle statement of its own', async () => {
  const isSettle = (t: string) => /^WITH r AS \(\s*UPDATE "trips"\.reserves/.test(t.trim());
  const failing = createGenerationService({
    providers: [
      {
        models: [{ modelId: 'bad', title: 'Bad', resultType: 'text', estimatedGenerationTime: 0.01, settings: [], price: 5, failureFee: 2 }],
        generate: async () => {
          throw new Error('the provider broke');
        },
      },
    ],
    store: stores.store,
    ledger: stores.ledger,
    recovery: { onStart: false, intervalMs: 0 },
  });
  await stores.ledger.credit('dave', 100);
  await failing.start();
  try {
    sent.length = 0;
    const { generationId } = await failing.create('dave', { modelId: 'bad' });
    await until(async () => (await stores.ledger.account('dave')).reserved === 0, { what: 'the failed generation settled' });
    const statements = [...sent];
    sent.length = 0;
    expect(statements.filter(isSettle)).toEqual([]);
    const rec = await stores.store.getById(generationId);
    expect(rec).toMatchObject({ status: 'failed', price: 2 });
    expect(await stores.ledger.account('dave')).toEqual({ balance: 98, reserved: 0, settled: 2 });
  } finally {
    await failing.stop({ timeoutMs: 500 });
  }
  // A pending generation (no worker takes it) cancelled by its owner: free, and settled in the same statement.
  const parked = createGenerationService({
    providers: [{ models: [{ modelId: 'idle', title: 'Idle', resultType: 'text', estimatedGenerationTime: 0.01, settings: [], price: 4 }], generate: () => new Promise(() => {}) }],
    store: stores.store,
    ledger: stores.ledger,
    recovery: { onStart: false, intervalMs: 0 },
    runner: { enabled: false },
  });
  const { generationId } = await parked.create('dave', { modelId: 'idle' });
  expect(await stores.ledger.account('dave')).toEqual({ balance: 94, reserved: 4, settled: 2 });
  sent.length = 0;
  const { outcome } = await parked.cancel('dave', generationId);
  const statements = [...sent];
  sent.length = 0;
  expect(outcome).toBeTruthy();
  expect(statements.filter(isSettle)).toEqual([]);
  expect(await stores.ledger.account('dave')).toEqual({ balance: 98, reserved: 0, settled: 2 });
  expect(await stores.store.getById(generationId)).toMatchObject({ status: 'failed', price: 0 });
  await parked.stop({ timeoutMs: 500 });
});
