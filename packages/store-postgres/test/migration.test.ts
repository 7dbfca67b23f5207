import { createHash } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGenerationService } from '@genservice/core';
import { until } from '@genservice/testing';
import { createPostgresStores, PostgresLedger, PostgresWebhookStore, runMigrations } from '../src/index.js';
import { runMigrations as runOldMigrations } from './fixtures/v0/migrations.js';
import { generationSql as oldGenerationSql } from './fixtures/v0/generation-sql.js';
import { createTestDatabase, lifecycleOps, newGeneration, readFeedUntil, type TestDatabase, quietPool } from './helpers.js';

const T0 = 1_700_000_000_000;
const SCHEMA = 'upgraded';
const S = `"${SCHEMA}"`;
const URL_A = 'https://hooks.example/a';

let db: TestDatabase;
let pool: pg.Pool;

beforeAll(async () => {
  db = await createTestDatabase('genservice_mig');
  pool = quietPool({ connectionString: db.url, max: 6 });
  pool.on('error', () => {});
}, 60_000);

afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

/** The id the outbox gives a delivery (`webhookMessageId` in packages/core/src/push/webhook-messages.ts). */
function deliveryId(generationId: string, seq: number, url: string): string {
  return `msg_${createHash('sha256').update(`${generationId}\n${seq}\n${url}`).digest('base64url').slice(0, 24)}`;
}

describe('a database made by the release before issue 22', () => {
  it('opens with the new code and keeps its generations, events, deliveries, outbox cursor and balances', { timeout: 60_000 }, async () => {
    // ---- The old schema, written by the old code.
    expect(await runOldMigrations(pool, SCHEMA)).toEqual([1, 2]);
    const old = oldGenerationSql(S);
    const ledger = new PostgresLedger(pool, { schema: SCHEMA });
    await ledger.credit('alice', 100);
    // Reserves and settles as the old release wrote them (no model, key or window yet).
    for (const g of ['g1', 'g2', 'g3', 'g4']) {
      await pool.query(`INSERT INTO ${S}.reserves (generation_id, user_id, amount, created_at) VALUES ($1, 'alice', 10, $2)`, [g, T0]);
      await pool.query(`UPDATE ${S}.accounts SET balance = balance - 10, reserved = reserved + 10 WHERE user_id = 'alice'`);
    }
    const oldSettle = (g: string, amount: number) =>
      pool.query(
        `WITH r AS (
           UPDATE ${S}.reserves SET state = 'settled', charged = LEAST(amount, $2::numeric), settled_at = $3
           WHERE generation_id = $1 AND state = 'open' RETURNING user_id, amount, charged
         )
         UPDATE ${S}.accounts acc SET reserved = acc.reserved - r.amount, settled = acc.settled + r.charged,
           balance = acc.balance + (r.amount - r.charged)
         FROM r WHERE acc.user_id = r.user_id`,
        [g, amount, T0 + 9],
      );
    const insert = (id: string, at: number, webhook: unknown = null) =>
      pool.query(old.insert, [id, 'alice', 'm', '{"prompt":"p"}', 10, at, null, null, webhook === null ? null : JSON.stringify(webhook)]);
    // The global numbers these statements hand out, in order: the events of several generations interleave.
    await insert('g1', T0, { url: URL_A, events: ['generation.processing', 'generation.progress', 'generation.completed'] }); // 1
    await insert('g2', T0 + 1); // 2
    await pool.query(old.claim, ['g1', 'w-old', T0 + 2, 60_000]); // 3
    await insert('g3', T0 + 3); // 4
    await pool.query(old.claim, ['g2', 'w-old', T0 + 4, 60_000]); // 5
    await pool.query(old.progress, ['g1', 'w-old', T0 + 5, 0.5, 'half']); // 6
    await pool.query(old.complete, ['g1', 'w-old', T0 + 6, 7, 'done', null]); // 7
    await insert('g4', T0 + 7); // 8
    await pool.query(old.failOther, ['g4', T0 + 8, 0, 'cancelled by its owner', false, 0, 'cancelled', 'The generation was cancelled by its owner.']); // 9
    await oldSettle('g1', 7);
    await oldSettle('g4', 0);
    // The old outbox had written the deliveries up to global number 5 (g1's processing: number 3) and tried one.
    const oldId = deliveryId('g1', 3, URL_A);
    const hooks = new PostgresWebhookStore(pool, { schema: SCHEMA });
    await pool.query(
      `INSERT INTO ${S}.webhook_deliveries (id, generation_id, owner_id, seq, type, url, payload, next_attempt_at, created_at)
       VALUES ($1, 'g1', 'alice', 3, 'generation.processing', $2, '{}', $3, $3)`,
      [oldId, URL_A, T0 + 3],
    );
    expect(await hooks.claimDue(T0 + 3, 10, 'sender', 1000)).toHaveLength(1);
    expect(await hooks.recordAttempt(oldId, 'sender', { at: T0 + 3, status: 200, durationMs: 5 }, { state: 'delivered' })).toBe(true);
    await pool.query(`INSERT INTO ${S}.cursors (name, value) VALUES ('webhooks', 5)`);
    const accountBefore = await ledger.account('alice');

    // ---- The new code opens it.
    expect(await runMigrations(pool, SCHEMA)).toEqual([3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18]);
    const stores = await createPostgresStores({ pool, schema: SCHEMA });
    const { store } = stores;
    expect(await store.getById('g1')).toMatchObject({ status: 'completed', claims: 1, price: 7, resultText: 'done', progress: { fraction: 0.5, message: 'half' } });
    expect(await store.getById('g2')).toMatchObject({ status: 'processing', claims: 1, leaseOwner: 'w-old' });
    expect(await store.getById('g3')).toMatchObject({ status: 'pending', claims: 0 });
    expect(await store.getById('g4')).toMatchObject({ status: 'failed', price: 0, error: { code: 'cancelled' } });
    // Each generation's events numbered 1, 2, ... in their old order, with their data.
    const numbered = async (id: string) => (await store.eventsOf(id)).map((e) => [e.seq, e.type, e.at]);
    expect(await numbered('g1')).toEqual([
      [1, 'created', T0],
      [2, 'processing', T0 + 2],
      [3, 'progress', T0 + 5],
      [4, 'completed', T0 + 6],
    ]);
    expect(await numbered('g2')).toEqual([
      [1, 'created', T0 + 1],
      [2, 'processing', T0 + 4],
    ]);
    expect(await numbered('g3')).toEqual([[1, 'created', T0 + 3]]);
    expect(await numbered('g4')).toEqual([
      [1, 'created', T0 + 7],
      [2, 'failed', T0 + 8],
    ]);
    expect((await store.eventsOf('g1', 2))[0]!.data).toEqual({ fraction: 0.5, message: 'half' });
    // The delivery names its event by the generation's number, under the id the outbox now derives from it, with its history.
    const [migrated, ...others] = await hooks.deliveriesOf('g1');
    expect(others).toEqual([]);
    expect(migrated).toMatchObject({ id: deliveryId('g1', 2, URL_A), seq: 2, type: 'generation.processing', state: 'delivered', attempts: 1 });
    expect(migrated!.history).toEqual([{ at: T0 + 3, status: 200, durationMs: 5 }]);
    // The outbox cursor continues exactly after global number 5: the old events 6..9, then new ones.
    const cursor = await hooks.getCursor('webhooks');
    const page = await readFeedUntil(store, cursor, 4);
    expect(page.events.map((e) => [e.generationId, e.seq, e.type])).toEqual([
      ['g1', 3, 'progress'],
      ['g1', 4, 'completed'],
      ['g4', 1, 'created'],
      ['g4', 2, 'failed'],
    ]);
    expect(await ledger.account('alice')).toEqual(accountBefore);
    expect(await ledger.openReserves(10)).toEqual([
      { generationId: 'g2', userId: 'alice', amount: 10, createdAt: T0 },
      { generationId: 'g3', userId: 'alice', amount: 10, createdAt: T0 },
    ]);

    // ---- And generations run through the new code: the service recovers g2 (its old lease long expired) and g3,
    // and its outbox writes g1's deliveries from the mapped cursor: each event once, none of those sent before.
    const service = createGenerationService({
      store,
      ledger: stores.ledger,
      apiKeys: stores.apiKeys,
      idempotency: stores.idempotency,
      webhookStore: stores.webhookStore,
      providers: [{ models: [{ modelId: 'm', title: 'M', resultType: 'text', estimatedGenerationTime: 1, settings: [], price: 10 }], generate: async () => ({ text: 'new' }) }],
      webhooks: { deliver: false, pollIntervalMs: 20 },
    });
    await service.start();
    try {
      const done = await until(async () => [await store.getById('g2'), await store.getById('g3')], { accept: (recs) => recs.every((r) => r?.status === 'completed') });
      expect(done).toMatchObject([
        { status: 'completed', claims: 2, resultText: 'new' },
        { status: 'completed', claims: 1, resultText: 'new' },
      ]);
      expect((await numbered('g2')).map(([seq, type]) => [seq, type])).toEqual([
        [1, 'created'],
        [2, 'processing'],
        [3, 'processing'],
        [4, 'completed'],
      ]);
      const { generationId } = await service.create('alice', { modelId: 'm' });
      await until(() => store.getById(generationId), { accept: (r) => r?.status === 'completed' });
      const deliveries = await until(() => hooks.deliveriesOf('g1'), { accept: (d) => d.length >= 3 });
      // Until the outbox has read the whole feed: the passes after it add nothing more.
      await until(async () => (await store.readFeed(await hooks.getCursor('webhooks'), 1)).events.length, { accept: (left) => left === 0 });
      expect((await hooks.deliveriesOf('g1')).map((d) => [d.id, d.seq, d.type])).toEqual([
        [deliveryId('g1', 2, URL_A), 2, 'generation.processing'],
        [deliveryId('g1', 3, URL_A), 3, 'generation.progress'],
        [deliveryId('g1', 4, URL_A), 4, 'generation.completed'],
      ]);
      expect(deliveries).toHaveLength(3);
      expect(await ledger.account('alice')).toEqual({ balance: 100 - 7 - 30, reserved: 0, settled: 37 });
    } finally {
      await service.stop({ timeoutMs: 1000 });
    }
    // The store's own changes continue each generation's numbering.
    await store.insert(...newGeneration('g5', { ownerId: 'alice' }));
    expect(await lifecycleOps(store).claim('g5', { workerId: 'w', leaseMs: 1000, now: T0 })).toMatchObject({ claims: 1 });
    expect((await numbered('g5')).map(([seq, type]) => [seq, type])).toEqual([
      [1, 'created'],
      [2, 'processing'],
    ]);
  });
});

describe('migration 11: the in-flight count on the account row (issue 36)', () => {
  it('fills accounts.in_flight from the open reserves, and the ledger keeps it from there', async () => {
    const schema = 'mig_in_flight';
    const s = `"${schema}"`;
    await runMigrations(pool, schema);
    // The schema as the release before: no column, migration 11 not applied.
    await pool.query(`ALTER TABLE ${s}.accounts DROP COLUMN in_flight`);
    await pool.query(`DROP TABLE ${s}.usage_spans`);
    // Usage settled before: migration 11 sums it over spans of days.
    await pool.query(`INSERT INTO ${s}.usage_daily (user_id, day, model_id, key_id, count, tokens) VALUES
      ('ann', 20001, 'm', '', 2, 5), ('ann', 20007, 'm', '', 1, 1), ('ann', 20008, 'm', '', 1, 3)`);
    await pool.query(`DELETE FROM ${s}.schema_migrations WHERE version = 11`);
    await pool.query(`INSERT INTO ${s}.accounts (user_id, balance, reserved) VALUES ('ann', 100, 30), ('bob', 100, 0), ('cy', 100, 10)`);
    await pool.query(
      `INSERT INTO ${s}.reserves (generation_id, user_id, amount, created_at, state) VALUES
        ('a1', 'ann', 10, 1, 'open'), ('a2', 'ann', 10, 1, 'open'), ('a3', 'ann', 10, 1, 'open'), ('a4', 'ann', 10, 1, 'settled'),
        ('b1', 'bob', 10, 1, 'settled'), ('c1', 'cy', 10, 1, 'open')`,
    );
    expect(await runMigrations(pool, schema)).toEqual([11]);
    const { rows } = await pool.query(`SELECT user_id, in_flight::int AS n FROM ${s}.accounts ORDER BY user_id`);
    expect(rows).toEqual([
      { user_id: 'ann', n: 3 },
      { user_id: 'bob', n: 0 },
      { user_id: 'cy', n: 1 },
    ]);
    const ledger = new PostgresLedger(pool, { schema });
    const iso = (day: number) => new Date(day * 86_400_000).toISOString().slice(0, 10);
    expect((await ledger.usage('ann', { from: iso(20000), to: iso(20015), groupBy: 'model' })).rows).toEqual([{ group: 'm', count: 4, tokens: 9 }]);
    expect((await ledger.usage('ann', { from: iso(19968), to: iso(20031), groupBy: 'model' })).rows).toEqual([{ group: 'm', count: 4, tokens: 9 }]);
    expect(await ledger.reserve('ann', 'a5', 1, T0, { maxInFlight: 3 })).toBe('in_flight_limit');
    await ledger.settle('a1', 10);
    expect(await ledger.reserve('ann', 'a5', 1, T0, { maxInFlight: 3 })).toBe('ok');
  });
});
