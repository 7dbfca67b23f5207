import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createGenerationService, type GenerationRecord } from '@genservice/core';
import { MIGRATIONS, appliedMigrations, createSqliteStores, runMigrations, type SqliteStores } from '../src/index.js';
import { LEGACY_MIGRATIONS, legacyStore } from './fixtures/legacy-v4.js';
import { tempDir } from './helpers.js';
import { until } from '@genservice/testing';

// A file written by the release before the compare-and-set port (schema versions 1-4, its own statements) opens
// with the new code and keeps everything: generations, events (renumbered per generation, in their old order,
// their feed positions kept), webhook deliveries, the outbox cursor and balances. Then generations run on it.

let tmp: Awaited<ReturnType<typeof tempDir>>;
const open: SqliteStores[] = [];

beforeEach(async () => {
  tmp = await tempDir();
});

afterEach(async () => {
  for (const stores of open.splice(0)) await stores.close();
  await tmp.remove();
});

interface OldEvent {
  seq: number;
  generation_id: string;
  owner_id: string;
  type: string;
  at: number;
  data: string;
}

const CURSOR = 'webhooks';

/** The old release's ledger statements: credit, reserve and settle on the version 4 schema. */
function legacyLedger(db: Database.Database) {
  return {
    async credit(userId: string, amount: number): Promise<void> {
      db.prepare('INSERT INTO accounts (user_id, balance) VALUES (?, ?) ON CONFLICT (user_id) DO UPDATE SET balance = balance + excluded.balance').run(userId, amount);
    },
    async reserve(userId: string, generationId: string, amount: number, now: number): Promise<void> {
      db.transaction(() => {
        db.prepare('UPDATE accounts SET balance = balance - ?, reserved = reserved + ? WHERE user_id = ? AND balance >= ?').run(amount, amount, userId, amount);
        db.prepare(`INSERT INTO reserves (generation_id, user_id, amount, state, created_at) VALUES (?, ?, ?, 'open', ?)`).run(generationId, userId, amount, now);
      })();
    },
    async settle(generationId: string, charged: number): Promise<void> {
      db.transaction(() => {
        const r = db.prepare('SELECT user_id, amount FROM reserves WHERE generation_id = ?').get(generationId) as { user_id: string; amount: number };
        db.prepare(`UPDATE reserves SET state = 'settled', charged = ?, settled_at = ? WHERE generation_id = ?`).run(charged, Date.now(), generationId);
        db.prepare('UPDATE accounts SET reserved = reserved - ?, settled = settled + ?, balance = balance + (? - ?) WHERE user_id = ?').run(r.amount, charged, r.amount, charged, r.user_id);
      })();
    },
  };
}

/** Writes the old database the way the old release did, and answers what it wrote. */
async function writeOldDatabase(file: string) {
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  expect(runMigrations(db, LEGACY_MIGRATIONS)).toEqual([1, 2, 3, 4]);
  const old = legacyStore(db);
  // The ledger as the old release wrote it (its reserves had no model, key or window yet).
  const ledger = legacyLedger(db);
  await ledger.credit('u1', 100);
  await ledger.credit('u2', 50);
  for (const [id, owner] of [['done', 'u1'], ['waiting', 'u1'], ['lost', 'u2'], ['parked', 'u1'], ['cancelled', 'u2'], ['swept', 'u1']]) {
    await ledger.reserve(owner!, id!, 10, 1);
  }
  // A generation of version 1, before the event log: no events at all.
  db.prepare(
    `INSERT INTO generations (id, owner_id, model_id, settings, status, reserved, attempts, created_at, updated_at)
     VALUES ('ancient', 'u2', 'm', '{"p":0}', 'pending', 0, 0, 5, 5)`,
  ).run();
  // Interleaved, so a generation's events are not consecutive in the old global order.
  old.insert({ id: 'done', ownerId: 'u1', modelId: 'm', settings: { prompt: 'a' }, reserved: 10, createdAt: 10, metadata: { order: 'A-1' } });
  old.insert({ id: 'waiting', ownerId: 'u1', modelId: 'm', settings: { prompt: 'b' }, reserved: 10, createdAt: 11 });
  expect(old.claim('done', 'w1', 1_000, 20)).toBe(true);
  old.insert({ id: 'lost', ownerId: 'u2', modelId: 'm', settings: {}, reserved: 10, createdAt: 12, webhook: { url: 'https://hooks.example/x', events: ['generation.processing', 'generation.completed'] } });
  old.progress('done', 'w1', 0.5, 'half', 21);
  expect(old.claim('lost', 'w1', 1_000, 22)).toBe(true);
  old.insert({ id: 'parked', ownerId: 'u1', modelId: 'remote-gone', settings: {}, reserved: 10, createdAt: 13 });
  expect(old.claim('parked', 'w2', 1_000, 23)).toBe(true);
  expect(old.setRemoteHandle('parked', 'w2', { job: 'up-1' }, 24)).toBe(true);
  expect(old.park('parked', 'w2', 5_000, 25)).toBe(true);
  old.complete('done', 'w1', 7, 'result a', 40);
  await ledger.settle('done', 7);
  old.insert({ id: 'cancelled', ownerId: 'u2', modelId: 'm', settings: {}, reserved: 10, createdAt: 14 });
  old.fail('cancelled', 3, 0, 'cancelled', 'The generation was cancelled by its owner.', 41);
  await ledger.settle('cancelled', 0);
  old.insert({ id: 'swept', ownerId: 'u1', modelId: 'm', settings: {}, reserved: 10, createdAt: 15 });
  expect(old.claim('swept', 'w1', 1_000, 28)).toBe(true);
  old.complete('swept', 'w1', 2, 'gone soon', 29);
  await ledger.settle('swept', 2);
  // Retention (finished before 30: only 'swept') takes the newest events away: the next position must still be past them.
  expect(old.deleteFinished(30)).toEqual(['swept']);

  const events = db.prepare('SELECT * FROM events ORDER BY seq').all() as OldEvent[];
  // The outbox read up to (and delivered from) the event of 'done' completing; the rest is still unread.
  const completedDone = events.find((e) => e.generation_id === 'done' && e.type === 'completed')!;
  const lostClaimed = events.find((e) => e.generation_id === 'lost' && e.type === 'processing')!;
  expect(lostClaimed.seq).toBeLessThan(completedDone.seq);
  old.addDelivery({ id: `msg_${lostClaimed.seq}_abcdefabcdef`, generationId: 'lost', ownerId: 'u2', seq: lostClaimed.seq, type: 'generation.processing', url: 'https://hooks.example/x', payload: '{}', nextAttemptAt: 40, createdAt: 40 });
  old.addDelivery({ id: `msg_${completedDone.seq}_123456123456`, generationId: 'done', ownerId: 'u1', seq: completedDone.seq, type: 'generation.completed', url: 'https://hooks.example/y', payload: '{"a":1}', nextAttemptAt: 41, createdAt: 41 });
  expect(old.advanceCursor(CURSOR, 0, completedDone.seq)).toBe(true);
  const lastSeq = (db.prepare(`SELECT seq FROM sqlite_sequence WHERE name = 'events'`).get() as { seq: number }).seq;
  const generations = db.prepare('SELECT * FROM generations ORDER BY id').all() as Array<Record<string, unknown>>;
  const accounts = db.prepare('SELECT * FROM accounts ORDER BY user_id').all();
  const reserves = db.prepare('SELECT * FROM reserves ORDER BY generation_id').all();
  db.close();
  return { events, lastSeq, cursor: completedDone.seq, lostClaimed: lostClaimed.seq, generations, accounts, reserves };
}

/** An old event as the new store answers it: numbered within its generation, in the old order. */
function renumbered(events: OldEvent[]) {
  const counts = new Map<string, number>();
  return events.map((e) => {
    const seq = (counts.get(e.generation_id) ?? 0) + 1;
    counts.set(e.generation_id, seq);
    return { position: e.seq, event: { seq, generationId: e.generation_id, ownerId: e.owner_id, type: e.type, at: e.at, data: JSON.parse(e.data) } };
  });
}

describe('migration 5 on a database written by the release before it', () => {
  it('keeps generations, events, deliveries, the outbox cursor and balances, then runs generations on it', async () => {
    const before = await writeOldDatabase(tmp.file());
    expect(before.events.map((e) => e.generation_id)).toEqual(
      ['done', 'waiting', 'done', 'lost', 'done', 'lost', 'parked', 'parked', 'done', 'cancelled', 'cancelled'],
    );
    expect(before.lastSeq).toBeGreaterThan(before.events[before.events.length - 1]!.seq);

    const stores = createSqliteStores({ filename: tmp.file() });
    open.push(stores);
    const { db, store, ledger, webhookStore } = stores;
    expect(appliedMigrations(db)).toEqual(MIGRATIONS.map((m) => m.version));
    expect(MIGRATIONS.map((m) => m.version)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20]);

    // Generations: every row, every field, attempts now called claims, rowid order kept.
    const byId = Object.fromEntries(before.generations.map((g) => [g.id, g]));
    expect((await store.listUnfinished(10)).map((g) => g.id)).toEqual(['ancient', 'waiting', 'lost', 'parked']);
    expect(await store.getById('done')).toEqual({
      id: 'done', ownerId: 'u1', modelId: 'm', settings: { prompt: 'a' }, status: 'completed', reserved: 10, price: 7,
      resultText: 'result a', metadata: { order: 'A-1' }, progress: { fraction: 0.5, message: 'half' }, claims: 1,
      leaseOwner: 'w1', leaseExpiresAt: 1_020, createdAt: 10, updatedAt: 40, startedAt: 20, finishedAt: 40,
    } satisfies GenerationRecord);
    expect(await store.getById('waiting')).toEqual({
      id: 'waiting', ownerId: 'u1', modelId: 'm', settings: { prompt: 'b' }, status: 'pending', reserved: 10, claims: 0,
      createdAt: 11, updatedAt: 11,
    } satisfies GenerationRecord);
    expect(await store.getById('lost')).toMatchObject({
      status: 'processing', claims: 1, leaseOwner: 'w1', leaseExpiresAt: 1_022, startedAt: 22,
      webhook: { url: 'https://hooks.example/x', events: ['generation.processing', 'generation.completed'] },
    });
    expect(await store.getById('parked')).toMatchObject({ status: 'processing', claims: 1, remoteHandle: { job: 'up-1' }, parkedUntil: 5_000 });
    expect(await store.getById('parked')).not.toHaveProperty('leaseOwner');
    expect(await store.getById('cancelled')).toMatchObject({
      status: 'failed', price: 0, failureReason: 'cancelled', error: { code: 'cancelled', message: 'The generation was cancelled by its owner.' }, finishedAt: 41,
    });
    expect(await store.getById('ancient')).toEqual({
      id: 'ancient', ownerId: 'u2', modelId: 'm', settings: { p: 0 }, status: 'pending', reserved: 0, claims: 0, createdAt: 5, updatedAt: 5,
    });
    expect(await store.getById('swept')).toBeNull();
    for (const id of Object.keys(byId)) expect((await store.getById(id))?.status).toBe(byId[id]!.status);

    // Events: each generation's numbered 1, 2, ... in the old order; the feed in the old global order.
    const expected = renumbered(before.events);
    for (const id of ['done', 'waiting', 'lost', 'parked', 'cancelled']) {
      const mine = expected.filter((x) => x.event.generationId === id).map((x) => x.event);
      expect(await store.eventsOf(id)).toEqual(mine);
      expect(mine.map((e) => e.seq)).toEqual(mine.map((_, i) => i + 1));
    }
    expect((await store.eventsOf('done')).map((e) => [e.seq, e.type, e.data])).toEqual([
      [1, 'created', { modelId: 'm' }],
      [2, 'processing', { attempt: 1 }],
      [3, 'progress', { fraction: 0.5, message: 'half' }],
      [4, 'completed', { price: 7 }],
    ]);
    expect(await store.eventsOf('ancient')).toEqual([]);
    expect(await store.eventsOf('swept')).toEqual([]);
    expect((await store.readFeed('', 100)).events).toEqual(expected.map((x) => x.event));

    // The outbox cursor points where it did: it reads on with exactly the events it had not read yet.
    const cursor = await webhookStore.getCursor(CURSOR);
    expect(cursor).toBe(String(before.cursor));
    expect((await store.readFeed(cursor, 100)).events).toEqual(expected.filter((x) => x.position > before.cursor).map((x) => x.event));
    // The head stays past the events retention deleted: no position is handed out twice.
    expect(await store.feedHead()).toBe(String(before.lastSeq));

    // Deliveries: kept, now naming their event by its number within the generation.
    expect((await webhookStore.deliveriesOf('lost')).map((d) => [d.id, d.seq, d.state])).toEqual([[`msg_${before.lostClaimed}_abcdefabcdef`, 2, 'pending']]);
    expect(await webhookStore.deliveriesOf('done')).toEqual([
      expect.objectContaining({ generationId: 'done', seq: 4, type: 'generation.completed', url: 'https://hooks.example/y', payload: '{"a":1}', state: 'pending', attempts: 0, history: [] }),
    ]);
    expect((await webhookStore.claimDue(100, 10, 'hooker', 1_000)).map((d) => d.generationId).sort()).toEqual(['done', 'lost']);

    // Balances and reserves, unchanged.
    expect(db.prepare('SELECT * FROM accounts ORDER BY user_id').all()).toEqual(before.accounts);
    // Version 6 adds model, key and window to reserves, version 14 the organisation and its window: empty for the old ones.
    expect(db.prepare('SELECT * FROM reserves ORDER BY generation_id').all()).toEqual(
      (before.reserves as object[]).map((r) => ({ ...r, model_id: null, key_id: null, window_start: null, organization_id: null, organization_window: null, key_in_flight: 0, user_limited: 0, user_window: null })),
    );
    expect(await ledger.account('u1')).toEqual({ balance: 100 - 40 + 3 + 8, reserved: 20, settled: 9 });
    expect(await ledger.account('u2')).toEqual({ balance: 50 - 20 + 10, reserved: 10, settled: 0 });

    // The schema is the new one: no status or event type is named by a check or an index any more.
    const schema = (db.prepare(`SELECT sql FROM sqlite_master WHERE tbl_name IN ('generations', 'events') AND sql IS NOT NULL`).all() as Array<{ sql: string }>)
      .map((r) => r.sql)
      .join('\n');
    expect(schema).not.toMatch(/'pending'|'processing'|'completed'|'failed'|'created'|'progress'/);

    // Generations run on the migrated file: the old pending ones, the lost one (a second claim), a new one; the
    // parked one of a model that is gone fails free.
    await stores.apiKeys.addKey('key-migrated-0123456789', 'u1');
    const service = createGenerationService({
      providers: [
        {
          models: [{ modelId: 'm', title: 'M', resultType: 'text', estimatedGenerationTime: 1, settings: [], price: 4, failureFee: 1 }],
          generate: async () => ({ text: 'after the migration' }),
        },
      ],
      store,
      ledger,
      apiKeys: stores.apiKeys,
      idempotency: stores.idempotency,
      webhookStore,
      // The outbox is written from the migrated cursor; nothing is sent anywhere.
      webhooks: { deliver: false },
      recovery: { onStart: true, intervalMs: 0 },
    });
    await service.start();
    try {
      const created = await service.handle({
        method: 'POST',
        path: '/v1/generations',
        headers: { authorization: 'Bearer key-migrated-0123456789', 'content-type': 'application/json' },
        body: '{"modelId":"m"}',
      });
      expect(created.status).toBe(201);
      const fresh = JSON.parse(String(created.body)).generationId as string;
      const ids = ['ancient', 'waiting', 'lost', 'parked', fresh];
      const settled = async () =>
        (await Promise.all(ids.map((id) => store.getById(id)))).every((g) => g?.finishedAt !== undefined) &&
        (await webhookStore.deliveriesOf('lost')).length === 3 &&
        // and the outbox has read the log to its end (it commits its cursor after the events that finished them).
        (await webhookStore.getCursor(CURSOR)) === (await store.readFeed(String(before.lastSeq), 100)).cursor;
      await until(settled, { what: 'the migrated generations to settle', timeoutMs: 5000, intervalMs: 10 }).catch(() => undefined);
      expect(await store.getById('waiting')).toMatchObject({ status: 'completed', resultText: 'after the migration', claims: 1, price: 10 });
      expect(await store.getById('ancient')).toMatchObject({ status: 'completed', claims: 1 });
      expect(await store.getById('lost')).toMatchObject({ status: 'completed', claims: 2 });
      expect(await store.getById('parked')).toMatchObject({ status: 'failed', price: 0, error: { code: 'model_unavailable' } });
      expect(await store.getById(fresh)).toMatchObject({ status: 'completed', claims: 1, price: 4 });
      // New events continue each generation's numbering and the feed past the old head.
      expect((await store.eventsOf('lost')).map((e) => [e.seq, e.type, e.data])).toEqual([
        [1, 'created', { modelId: 'm' }],
        [2, 'processing', { attempt: 1 }],
        [3, 'processing', { claim: 2 }],
        [4, 'completed', { price: 10 }],
      ]);
      expect((await store.eventsOf('ancient')).map((e) => [e.seq, e.type])).toEqual([[1, 'processing'], [2, 'completed']]);
      expect((await store.eventsOf(fresh)).map((e) => [e.seq, e.type])).toEqual([[1, 'created'], [2, 'processing'], [3, 'completed']]);
      const later = await store.readFeed(String(before.lastSeq), 100);
      expect(later.events).toHaveLength(2 + 2 + 2 + 1 + 3);
      expect(Number(later.cursor)).toBeGreaterThan(before.lastSeq);
      // A generation costs what was reserved at its create (10 for the old ones), the new one the model's 4.
      expect(await ledger.account('u1')).toEqual({ balance: 100 - 40 + 3 + 8 + 10 - 4, reserved: 0, settled: 9 + 10 + 4 });
      // The outbox went on from the migrated cursor: the second claim and the completion of 'lost' got their
      // deliveries (numbered within the generation); its first claim, read before the upgrade, kept its one.
      expect((await webhookStore.deliveriesOf('lost')).map((d) => [d.seq, d.type])).toEqual([
        [2, 'generation.processing'],
        [3, 'generation.processing'],
        [4, 'generation.completed'],
      ]);
      expect(await webhookStore.getCursor(CURSOR)).toBe(later.cursor);
    } finally {
      await service.stop({ timeoutMs: 2000 });
    }
  });

  it('migrates a file with no events ever written: positions start at 1, cursors are text', async () => {
    const db = new Database(tmp.file());
    runMigrations(db, LEGACY_MIGRATIONS);
    db.close();
    const stores = createSqliteStores({ filename: tmp.file() });
    open.push(stores);
    expect(await stores.store.feedHead()).toBe('0');
    await stores.store.insert({ id: 'g', ownerId: 'u', modelId: 'm', settings: {}, status: 'pending', reserved: 0, createdAt: 1 }, { type: 'created', data: {} });
    expect(await stores.store.readFeed('', 10)).toEqual({ events: [expect.objectContaining({ generationId: 'g', seq: 1 })], cursor: '1' });
    expect(stores.db.prepare(`SELECT type FROM pragma_table_info('cursors') WHERE name = 'value'`).get()).toEqual({ type: 'TEXT' });
  });
});
