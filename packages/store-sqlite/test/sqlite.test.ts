import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import { hashApiKey } from '@genservice/core';
import type { GenerationChange } from '@genservice/core/ports';
import { MIGRATIONS, appliedMigrations, createSqliteStores, runMigrations, type SqliteStores } from '../src/index.js';
import { change, newGeneration } from './changes.js';
import { tempDir } from './helpers.js';

let tmp: Awaited<ReturnType<typeof tempDir>>;
const open: SqliteStores[] = [];

function openStores(options: Partial<Parameters<typeof createSqliteStores>[0]> = {}): SqliteStores {
  const stores = createSqliteStores({ filename: tmp.file(), ...options });
  open.push(stores);
  return stores;
}

beforeEach(async () => {
  tmp = await tempDir();
});

afterEach(async () => {
  for (const stores of open.splice(0)) await stores.close();
  await tmp.remove();
});

describe('connection settings', () => {
  it('uses WAL, synchronous=NORMAL, no blocking busy handler and foreign keys by default', () => {
    const { db } = openStores();
    expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(db.pragma('synchronous', { simple: true })).toBe(1); // NORMAL
    // SQLite never waits for a lock itself (that would block the event loop): the stores retry on timers.
    expect(db.pragma('busy_timeout', { simple: true })).toBe(0);
    expect(db.pragma('foreign_keys', { simple: true })).toBe(1);
  });

  it('takes synchronous=FULL and a custom busy timeout', () => {
    const { db } = openStores({ synchronous: 'FULL', busyTimeoutMs: 250 });
    expect(db.pragma('synchronous', { simple: true })).toBe(2); // FULL
    expect(db.pragma('busy_timeout', { simple: true })).toBe(0);
  });

  it('refuses options that would be interpolated into a pragma', () => {
    expect(() => createSqliteStores({ filename: tmp.file(), synchronous: 'OFF; DROP TABLE x' as 'FULL' })).toThrow(RangeError);
    expect(() => createSqliteStores({ filename: tmp.file(), busyTimeoutMs: -1 })).toThrow(RangeError);
  });

  it('close() can be called twice', async () => {
    const stores = createSqliteStores({ filename: tmp.file() });
    await stores.close();
    await stores.close();
    expect(stores.db.open).toBe(false);
  });
});

describe('migrations', () => {
  it('records each version once; opening again applies nothing', async () => {
    const first = openStores();
    expect(appliedMigrations(first.db)).toEqual(MIGRATIONS.map((m) => m.version));
    const row = first.db.prepare('SELECT applied_at FROM schema_migrations WHERE version = 1').get() as { applied_at: number };
    expect(typeof row.applied_at).toBe('number');
    expect(runMigrations(first.db)).toEqual([]);
    await first.close();

    const second = openStores();
    expect(runMigrations(second.db)).toEqual([]);
    expect(appliedMigrations(second.db)).toEqual(MIGRATIONS.map((m) => m.version));
  });

  it('applies a later migration to a database that already holds data, keeping the data', async () => {
    const first = openStores();
    await first.ledger.credit('u1', 50);
    await first.store.insert(...newGeneration({ id: 'g1', ownerId: 'u1', modelId: 'm', settings: { a: 1 }, reserved: 5, createdAt: 1 }));
    await first.close();

    const second = openStores();
    const next = [...MIGRATIONS, { version: 99, name: 'add note', sql: 'ALTER TABLE generations ADD COLUMN note TEXT' }];
    expect(runMigrations(second.db, next)).toEqual([99]);
    expect(runMigrations(second.db, next)).toEqual([]);
    expect(await second.ledger.balance('u1')).toBe(50);
    expect(await second.store.getById('g1')).toMatchObject({ id: 'g1', settings: { a: 1 } });
  });

  it('rolls a failing migration back entirely: no half-applied DDL, version unchanged', () => {
    const { db } = openStores();
    const last = MIGRATIONS[MIGRATIONS.length - 1]!.version;
    const broken = [
      ...MIGRATIONS,
      { version: last + 1, name: 'ok part', sql: 'CREATE TABLE extra (a TEXT)' },
      { version: last + 2, name: 'broken', sql: 'CREATE TABLE more (a TEXT); THIS IS NOT SQL' },
    ];
    expect(() => runMigrations(db, broken)).toThrow();
    expect(appliedMigrations(db)).toEqual(MIGRATIONS.map((m) => m.version));
    const tables = (db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table'`).all() as Array<{ name: string }>).map(
      (t) => t.name,
    );
    expect(tables).not.toContain('extra');
    expect(tables).not.toContain('more');
  });
});

describe('migration 2 on a database written by version 1', () => {
  it('keeps old generations readable, forgets crash-left idempotency keys and marks finished ones done', async () => {
    const legacy = new Database(tmp.file());
    runMigrations(legacy, MIGRATIONS.filter((m) => m.version === 1));
    legacy.exec(`
      INSERT INTO generations (id, owner_id, model_id, settings, status, reserved, attempts, created_at, updated_at)
        VALUES ('old', 'u1', 'm', '{"p":1}', 'pending', 5, 0, 100, 100);
      INSERT INTO idempotency_keys (user_id, key, request_hash, generation_id, created_at) VALUES
        ('u1', 'finished', 'h1', 'old', 100),
        ('u1', 'crashed', 'h2', NULL, 200);
    `);
    legacy.close();

    const { db, store, idempotency } = openStores();
    expect(appliedMigrations(db)).toEqual(MIGRATIONS.map((m) => m.version));
    expect(await store.getById('old')).toEqual({
      id: 'old', ownerId: 'u1', modelId: 'm', settings: { p: 1 }, status: 'pending', reserved: 5, claims: 0, createdAt: 100, updatedAt: 100,
    });
    // Old generations have no events (the log starts with the migration) but list and transition like new ones.
    expect(await store.eventsOf('old')).toEqual([]);
    expect((await store.list('u1', { limit: 10 })).map((g) => g.id)).toEqual(['old']);
    expect(await store.update('old', change.claim('w', 1000, 300))).toMatchObject({ startedAt: 300, claims: 1 });
    expect((await store.eventsOf('old')).map((e) => [e.seq, e.type, e.data])).toEqual([[1, 'processing', { claim: 1 }]]);

    expect(await idempotency.begin('u1', 'finished', 'h1', 400, 'gen-new')).toEqual({ state: 'done', generationId: 'old', requestHash: 'h1' });
    // The crashed request's key held a day of 409s under version 1; now its retry simply starts over.
    expect(await idempotency.begin('u1', 'crashed', 'h2', 400, 'gen-new')).toEqual({ state: 'new' });
    expect(db.prepare(`SELECT key, done, started_at FROM idempotency_keys ORDER BY key`).all()).toEqual([
      { key: 'crashed', done: 0, started_at: 400 },
      { key: 'finished', done: 1, started_at: 100 },
    ]);
  });
});

describe('durability', () => {
  it('keeps generations, balances, reserves, keys and idempotency records across close and reopen', async () => {
    const first = openStores();
    await first.ledger.credit('u1', 100);
    expect(await first.ledger.reserve('u1', 'g1', 30, 10)).toBe('ok');
    await first.store.insert(...newGeneration({ id: 'g1', ownerId: 'u1', modelId: 'm', settings: { prompt: 'hi', n: [1, 2] }, reserved: 30, createdAt: 10 }));
    await first.store.update('g1', change.claim('w1', 1000, 20));
    await first.store.update('g1', change.complete('w1', 25, 30, { resultKey: 'blob/1' }));
    expect(await first.ledger.settle('g1', 25)).toBe(25);
    await first.apiKeys.addKey('secret-key', 'u1');
    expect(await first.idempotency.begin('u1', 'idem', 'hash', 5, 'g1')).toEqual({ state: 'new' });
    expect(await first.idempotency.finish('u1', 'idem', 'g1')).toBe(true);
    await first.close();

    const second = openStores();
    expect(await second.store.get('g1', 'u1')).toMatchObject({
      status: 'completed',
      price: 25,
      resultKey: 'blob/1',
      settings: { prompt: 'hi', n: [1, 2] },
      claims: 1,
      finishedAt: 30,
    });
    expect(await second.ledger.account('u1')).toEqual({ balance: 75, reserved: 0, settled: 25 });
    // Settling again after the restart still charges nothing more.
    expect(await second.ledger.settle('g1', 30)).toBe(25);
    expect(await second.ledger.account('u1')).toEqual({ balance: 75, reserved: 0, settled: 25 });
    expect(await second.apiKeys.resolve('secret-key')).toMatchObject({ userId: 'u1' });
    expect(await second.idempotency.begin('u1', 'idem', 'other', 6, 'g2')).toEqual({ state: 'done', generationId: 'g1', requestHash: 'hash' });
  });

  it('keeps the event log across close and reopen, and never hands out a deleted feed position again', async () => {
    const first = openStores();
    await first.store.insert(...newGeneration({ id: 'g1', ownerId: 'u1', modelId: 'm', settings: {}, reserved: 1, createdAt: 10, metadata: { order: 'A-1' } }));
    await first.store.update('g1', change.claim('w1', 1000, 20));
    await first.store.update('g1', change.progress('w1', 0.25, 25, 'warming up'));
    await first.store.update('g1', change.fail(change.held('w1'), 1, 'boom', { code: 'provider_error', message: 'It failed.' }, 30));
    const feed = await first.store.readFeed('', 100);
    const events = feed.events;
    expect(events.map((e) => [e.seq, e.type])).toEqual([[1, 'created'], [2, 'processing'], [3, 'progress'], [4, 'failed']]);
    await first.close();

    const second = openStores();
    expect(await second.store.readFeed('', 100)).toEqual(feed);
    expect(await second.store.eventsOf('g1')).toEqual(events);
    expect(await second.store.feedHead()).toBe(feed.cursor);
    expect(await second.store.getById('g1')).toMatchObject({
      metadata: { order: 'A-1' },
      progress: { fraction: 0.25, message: 'warming up' },
      error: { code: 'provider_error', message: 'It failed.' },
      failureReason: 'boom',
      startedAt: 20,
    });
    // Retention empties the log; after another restart the next event still gets a new seq.
    expect((await second.store.listFinishedBefore(1000, 10)).map((r) => r.id)).toEqual(['g1']);
    expect(await second.store.remove('g1', { status: ['completed', 'failed'] })).toBe(true);
    expect(await second.store.readFeed('', 100)).toEqual({ events: [], cursor: '' });
    await second.close();

    const third = openStores();
    expect(await third.store.feedHead()).toBe(feed.cursor);
    await third.store.insert(...newGeneration({ id: 'g2', ownerId: 'u1', modelId: 'm', settings: {}, reserved: 1, createdAt: 40 }));
    // A reader that stood at the old head gets the new event: its position was not handed out before.
    const next = await third.store.readFeed(feed.cursor, 100);
    expect(next.events).toEqual([{ seq: 1, generationId: 'g2', ownerId: 'u1', type: 'created', at: 40, data: { modelId: 'm' } }]);
    expect(Number(next.cursor)).toBe(Number(feed.cursor) + 1);
    expect(await third.store.feedHead()).toBe(next.cursor);
  });
});

describe('storage format', () => {
  it('keeps settings as JSON text, numbers as REAL and timestamps as INTEGER', async () => {
    const { db, store } = openStores();
    await store.insert(...newGeneration({ id: 'g1', ownerId: 'u1', modelId: 'm', settings: { s: 'x' }, reserved: 2.5, createdAt: 1_700_000_000_123 }));
    const row = db
      .prepare('SELECT settings, typeof(settings) AS ts, typeof(reserved) AS tr, typeof(created_at) AS tc FROM generations')
      .get() as Record<string, unknown>;
    expect(row).toEqual({ settings: '{"s":"x"}', ts: 'text', tr: 'real', tc: 'integer' });
  });

  it('stores API keys only as SHA-256 hex digests: the plain key is nowhere in the database files', async () => {
    const { db, apiKeys } = openStores();
    const key = 'gs_live_PLAINTEXT_MUST_NOT_BE_STORED_123';
    await apiKeys.addKey(key, 'u1');
    expect(db.prepare('SELECT digest, user_id FROM api_keys').all()).toEqual([{ digest: hashApiKey(key), user_id: 'u1' }]);
    expect(hashApiKey(key)).toMatch(/^[0-9a-f]{64}$/);
    db.pragma('wal_checkpoint(TRUNCATE)');
    for (const name of await readdir(tmp.dir)) {
      expect((await readFile(join(tmp.dir, name))).includes(Buffer.from(key))).toBe(false);
    }
  });

  it('a revoke in one connection is seen by another connection on its next resolve (no cache)', async () => {
    const a = openStores();
    const b = openStores();
    await a.apiKeys.addKey('k1', 'u1');
    expect(await b.apiKeys.resolve('k1')).toMatchObject({ userId: 'u1' });
    await a.apiKeys.revokeKey('k1');
    expect(await b.apiKeys.resolve('k1')).toBeNull();
  });

  it('a revoked key stays revoked when the database is reopened and the key is seeded again (issue 37)', async () => {
    const first = openStores();
    await first.apiKeys.addKey('seeded-key-0123456789', 'u1');
    await first.apiKeys.addKey('other-key-0123456789', 'u2');
    const [key] = await first.apiKeys.listKeys('u1');
    expect(await first.apiKeys.revokeKeyById(key!.keyId)).toBe(true);
    expect(await first.apiKeys.resolve('seeded-key-0123456789')).toBeNull();
    await first.close();

    // A restart: the host seeds the same users again.
    const second = openStores();
    await second.apiKeys.addKey('seeded-key-0123456789', 'u1');
    await second.apiKeys.addKey('other-key-0123456789', 'u2');
    expect(await second.apiKeys.resolve('seeded-key-0123456789')).toBeNull();
    expect(await second.apiKeys.listKeys('u1')).toEqual([]);
    expect(await second.apiKeys.resolve('other-key-0123456789')).toMatchObject({ userId: 'u2' });
    // The row is kept as revoked, holding only the digest, never the key.
    expect(second.db.prepare('SELECT digest, revoked_at IS NOT NULL AS revoked FROM api_keys WHERE user_id = ?').all('u1')).toEqual([
      { digest: hashApiKey('seeded-key-0123456789'), revoked: 1 },
    ]);
  });

  it('a CHECK constraint refuses a negative balance even from a hand-written UPDATE', async () => {
    const { db, ledger } = openStores();
    await ledger.credit('u1', 5);
    expect(() => db.prepare(`UPDATE accounts SET balance = balance - 10 WHERE user_id = 'u1'`).run()).toThrow(/CHECK/);
    expect(await ledger.balance('u1')).toBe(5);
  });
});

describe('two connections on one file (two hosts)', () => {
  it('let exactly one claim win and refuse the stale worker after another re-claimed', async () => {
    const a = openStores();
    const b = openStores();
    await a.store.insert(...newGeneration({ id: 'g1', ownerId: 'u1', modelId: 'm', settings: {}, reserved: 0, createdAt: 1 }));
    const claims = await Promise.all([a.store.update('g1', change.claim('wa', 100, 10)), b.store.update('g1', change.claim('wb', 100, 10))]);
    expect(claims.filter((c) => c !== null)).toHaveLength(1);
    // The first lease lapses; wb re-claims; wa's late completion must be refused.
    expect(await b.store.update('g1', change.reclaim(1, 'wb', 100, 200))).toMatchObject({ claims: 2, leaseOwner: 'wb' });
    expect(await a.store.update('g1', change.reclaim(1, 'wa', 100, 200))).toBeNull();
    expect(await a.store.update('g1', change.complete('wa', 0, 210, { resultText: 'late' }))).toBeNull();
    expect(await b.store.update('g1', change.complete('wb', 0, 220, { resultText: 'on time' }))).toMatchObject({ status: 'completed' });
    expect((await a.store.eventsOf('g1')).map((e) => [e.seq, e.type, e.data])).toEqual([
      [1, 'created', { modelId: 'm' }],
      [2, 'processing', { claim: 1 }],
      [3, 'processing', { claim: 2 }],
      [4, 'completed', { price: 0 }],
    ]);
    expect(await a.store.getById('g1')).toMatchObject({ status: 'completed', resultText: 'on time' });
  });

  it('share one ledger: reserves from both connections never overdraw', async () => {
    const a = openStores();
    const b = openStores();
    await a.ledger.credit('u1', 25);
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) => (i % 2 === 0 ? a : b).ledger.reserve('u1', `g${i}`, 10, i)),
    );
    expect(results.filter((r) => r === 'ok')).toHaveLength(2);
    expect(await b.ledger.account('u1')).toEqual({ balance: 5, reserved: 20, settled: 0 });
  });
});

describe('update: one compare-and-set, built from names it knows', () => {
  it('refuses a patch key that is not a field of the record, before any SQL is built', async () => {
    const { db, store } = openStores();
    await store.insert(...newGeneration({ id: 'g1', ownerId: 'u1', modelId: 'm', settings: {}, reserved: 1, createdAt: 1 }));
    for (const key of ["status = 'completed', owner_id", 'constructor', '__proto__', 'toString', 'owner_id']) {
      // JSON.parse makes `__proto__` an own key, as a parsed request body would.
      const hostile = JSON.parse(`{${JSON.stringify(key)}: "mallory"}`) as GenerationChange['set'];
      expect(Object.keys(hostile)).toEqual([key]);
      await expect(store.update('g1', { expect: { status: ['pending'] }, set: hostile, event: { type: 'progress', data: {} }, now: 2 })).rejects.toThrow(/Unknown generation field/);
    }
    expect(await store.getById('g1')).toMatchObject({ status: 'pending', ownerId: 'u1', updatedAt: 1 });
    expect((await store.eventsOf('g1')).map((e) => e.type)).toEqual(['created']);
    expect(db.prepare('SELECT count(*) AS n FROM generations').get()).toEqual({ n: 1 });
  });

  it('refuses an expectation it does not know instead of applying the change unchecked', async () => {
    const { store } = openStores();
    await store.insert(...newGeneration({ id: 'g1', ownerId: 'u1', modelId: 'm', settings: {}, reserved: 1, createdAt: 1 }));
    const expect_ = { status: ['pending'], budgetLeft: 5 } as unknown as GenerationChange['expect'];
    await expect(store.update('g1', { expect: expect_, set: { status: 'failed' }, now: 2 })).rejects.toThrow(/Unknown expectation/);
    expect(await store.getById('g1')).toMatchObject({ status: 'pending', updatedAt: 1 });
  });

  it('compares expected values as bound parameters: a hostile status or holder is only a value that does not match', async () => {
    const { store } = openStores();
    await store.insert(...newGeneration({ id: 'g1', ownerId: 'u1', modelId: 'm', settings: {}, reserved: 1, createdAt: 1 }));
    const sneaky = "pending') OR 1=1 --" as 'pending';
    expect(await store.update('g1', { expect: { status: [sneaky] }, set: { status: 'failed' }, now: 2 })).toBeNull();
    await store.update('g1', change.claim('w1', 1000, 3));
    expect(await store.update('g1', change.complete("w1' OR 1=1 --", 1, 4))).toBeNull();
    expect(await store.getById('g1')).toMatchObject({ status: 'processing', leaseOwner: 'w1' });
  });

  it('numbers an event after the last one; a change without an event neither appends nor uses up a number', async () => {
    const { store } = openStores();
    await store.insert(...newGeneration({ id: 'g1', ownerId: 'u1', modelId: 'm', settings: {}, reserved: 1, createdAt: 1 }));
    await store.update('g1', change.claim('w1', 1000, 2));
    const head = await store.feedHead();
    expect(await store.update('g1', { expect: change.held('w1'), set: { remoteHandle: { job: 7 } }, now: 3 })).toMatchObject({ remoteHandle: { job: 7 }, updatedAt: 3 });
    expect(await store.feedHead()).toBe(head);
    // null clears a field; the parked remote job keeps its handle.
    expect(await store.update('g1', { expect: change.held('w1'), set: { leaseOwner: null, leaseExpiresAt: null, parkedUntil: 50 }, now: 4 })).toMatchObject({ parkedUntil: 50 });
    expect(await store.getById('g1')).not.toHaveProperty('leaseOwner');
    expect(await store.update('g1', { expect: { status: ['processing'], lease: 'free', parked: true }, set: { parkedUntil: null, leaseOwner: 'w2', leaseExpiresAt: 1000 }, now: 5 })).not.toBeNull();
    expect(await store.update('g1', change.progress('w2', 0.5, 6))).toMatchObject({ progress: { fraction: 0.5 } });
    expect((await store.eventsOf('g1')).map((e) => [e.seq, e.type])).toEqual([[1, 'created'], [2, 'processing'], [3, 'progress']]);
    expect((await store.eventsOf('g1', 2)).map((e) => e.seq)).toEqual([3]);
  });

  it('renews every lease the holder still holds in one statement, and only those', async () => {
    const { store } = openStores();
    for (const id of ['a', 'b', 'c', 'd']) await store.insert(...newGeneration({ id, ownerId: 'u1', modelId: 'm', settings: {}, reserved: 1, createdAt: 1 }));
    await store.update('a', change.claim('w1', 100, 10));
    await store.update('b', change.claim('w1', 5, 10)); // expires at 15
    await store.update('c', change.claim('w2', 100, 10));
    const head = await store.feedHead();
    expect((await store.renewLeases(['a', 'b', 'c', 'd', 'missing', "a' OR 1=1 --"], 'w1', 500, 20)).sort()).toEqual(['a']);
    expect(await store.getById('a')).toMatchObject({ leaseExpiresAt: 500, updatedAt: 20 });
    expect(await store.getById('b')).toMatchObject({ leaseExpiresAt: 15 });
    expect(await store.getById('c')).toMatchObject({ leaseExpiresAt: 110, leaseOwner: 'w2' });
    expect(await store.renewLeases([], 'w1', 600, 21)).toEqual([]);
    expect(await store.feedHead()).toBe(head);
  });

  it("reads a cursor it did not write as an empty page, never as another position", async () => {
    const { store } = openStores();
    await store.insert(...newGeneration({ id: 'g1', ownerId: 'u1', modelId: 'm', settings: {}, reserved: 1, createdAt: 1 }));
    for (const bad of ['x', '-1', '1.5', '1e3', ' 1', "0 OR 1=1"]) expect(await store.readFeed(bad, 10)).toEqual({ events: [], cursor: bad });
    expect((await store.readFeed('0', 10)).events).toHaveLength(1);
    expect(await store.readFeed('1', 0)).toEqual({ events: [], cursor: '1' });
  });
});
