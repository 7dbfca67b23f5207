import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { UnavailableError, hashApiKey, type GenerationEvent } from '@genservice/core';
import {
  MIGRATIONS,
  PostgresLedger,
  createPostgresStores,
  runMigrations,
  type PostgresStores,
} from '../src/index.js';
import { createTestDatabase, lifecycleOps, newGeneration, randomName, readFeedUntil, type TestDatabase } from './helpers.js';
import { until } from '@genservice/testing';

const T0 = 1_700_000_000_000;
const pkgDir = fileURLToPath(new URL('..', import.meta.url));

let db: TestDatabase;
let pool: pg.Pool;

beforeAll(async () => {
  db = await createTestDatabase();
  pool = new pg.Pool({ connectionString: db.url, max: 10 });
  // The final DROP DATABASE ... WITH (FORCE) may reach a connection that is still closing.
  pool.on('error', () => {});
});

afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

async function fresh(): Promise<PostgresStores & { schema: string }> {
  const schema = randomName('t');
  return { ...(await createPostgresStores({ pool, schema })), schema };
}

const newGen = newGeneration;

/** Runs the reserve race fixture in a separate Node process, as another host instance would. */
function runChild(env: Record<string, string>): Promise<{ ok: number; total: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--conditions=@genservice/source', '--import', 'tsx', 'test/fixtures/reserve-child.ts'], {
      cwd: pkgDir,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code !== 0) reject(new Error(`child exited with ${code}: ${err}`));
      else resolve(JSON.parse(out) as { ok: number; total: number });
    });
  });
}

describe('migrations', () => {
  it('apply once when several instances start at the same moment', async () => {
    const schema = randomName('mig');
    const pools = Array.from({ length: 6 }, () => new pg.Pool({ connectionString: db.url, max: 2 }));
    try {
      const applied = await Promise.all(pools.map((p) => runMigrations(p, schema)));
      // Exactly one instance applied each migration; the others found them done.
      expect(applied.flat().sort()).toEqual(MIGRATIONS.map((m) => m.version).sort());
      const { rows } = await pool.query(`SELECT version FROM "${schema}".schema_migrations ORDER BY version`);
      expect(rows.map((r) => r.version)).toEqual(MIGRATIONS.map((m) => m.version));
      expect(await runMigrations(pool, schema)).toEqual([]);
    } finally {
      await Promise.all(pools.map((p) => p.end()));
    }
  });

  it('run concurrently through createPostgresStores from several pools', async () => {
    const schema = randomName('mig');
    const all = await Promise.all(
      Array.from({ length: 5 }, () => createPostgresStores({ connectionString: db.url, schema, poolSize: 2 })),
    );
    try {
      await all[0]!.ledger.credit('u', 5);
      expect(await all[4]!.ledger.balance('u')).toBe(5);
    } finally {
      await Promise.all(all.map((s) => s.close()));
    }
  });

  it('keep data when run again', async () => {
    const stores = await fresh();
    await stores.ledger.credit('u', 7);
    await stores.migrate();
    expect(await stores.ledger.balance('u')).toBe(7);
  });

  it('refuse a schema name that is not a plain identifier', async () => {
    for (const schema of ['', 'Upper', 'a-b', 'x"; DROP TABLE y; --', '1abc', 'a'.repeat(64)]) {
      await expect(createPostgresStores({ pool, schema })).rejects.toThrow(/schema name/);
    }
  });
});

describe('ledger', () => {
  it('grants exactly balance / amount of 100 concurrent reserves', async () => {
    const { ledger } = await fresh();
    await ledger.credit('u', 300);
    const results = await Promise.all(Array.from({ length: 100 }, (_, i) => ledger.reserve('u', `g${i}`, 10)));
    expect(results.filter((r) => r === 'ok')).toHaveLength(30);
    expect(await ledger.account('u')).toEqual({ balance: 0, reserved: 300, settled: 0 });
  });

  it('holds a reserve once under 50 concurrent identical calls', async () => {
    const { ledger } = await fresh();
    await ledger.credit('u', 100);
    const results = await Promise.all(Array.from({ length: 50 }, () => ledger.reserve('u', 'same', 10)));
    expect(results.every((r) => r === 'ok')).toBe(true);
    expect(await ledger.account('u')).toEqual({ balance: 90, reserved: 10, settled: 0 });
    expect(await ledger.openReserves(10)).toHaveLength(1);
  });

  it('holds a reserve once when identical calls race from separate pools', async () => {
    const schema = randomName('dup');
    const instances = await Promise.all(
      Array.from({ length: 4 }, () => createPostgresStores({ connectionString: db.url, schema, poolSize: 5 })),
    );
    try {
      await instances[0]!.ledger.credit('u', 15);
      const results = await Promise.all(
        instances.flatMap((s) => Array.from({ length: 10 }, () => s.ledger.reserve('u', 'same', 10))),
      );
      expect(results.every((r) => r === 'ok')).toBe(true);
      expect(await instances[0]!.ledger.account('u')).toEqual({ balance: 5, reserved: 10, settled: 0 });
    } finally {
      await Promise.all(instances.map((s) => s.close()));
    }
  });

  it('forgets an insufficient reserve, so a retry after a credit succeeds', async () => {
    const { ledger } = await fresh();
    await ledger.credit('u', 5);
    expect(await ledger.reserve('u', 'g', 10)).toBe('insufficient');
    expect(await ledger.openReserves(10)).toEqual([]);
    await ledger.credit('u', 5);
    expect(await ledger.reserve('u', 'g', 10)).toBe('ok');
    expect(await ledger.account('u')).toEqual({ balance: 0, reserved: 10, settled: 0 });
  });

  it('settles once under concurrent settles and releases, returning the first charge to all', async () => {
    const { ledger } = await fresh();
    await ledger.credit('u', 100);
    await ledger.reserve('u', 'g', 40, T0);
    const results = await Promise.all([
      ...Array.from({ length: 20 }, () => ledger.settle('g', 25)),
      ...Array.from({ length: 5 }, () => ledger.release('g')),
    ]);
    const charged = results[0];
    expect(charged === 25 || charged === 0).toBe(true);
    // Whichever won, every call reports it, and the account moved once.
    expect(new Set(results).size).toBe(1);
    const account = await ledger.account('u');
    expect(account).toEqual({ balance: 100 - charged!, reserved: 0, settled: charged });
    expect(await ledger.settle('g', 40)).toBe(charged);
    expect(await ledger.settle('unknown', 1)).toBeNull();
  });

  it('keeps balance + reserved + settled constant with fractional amounts', async () => {
    const { ledger } = await fresh();
    await ledger.credit('u', 1);
    expect(await ledger.reserve('u', 'a', 0.3)).toBe('ok');
    expect(await ledger.reserve('u', 'b', 0.3)).toBe('ok');
    expect(await ledger.settle('a', 0.1)).toBe(0.1);
    expect(await ledger.release('b')).toBe(0);
    expect(await ledger.account('u')).toEqual({ balance: 0.9, reserved: 0, settled: 0.1 });
  });

  it(
    'grants exactly 30 of 80 reserves racing from 4 processes',
    async () => {
      const schema = randomName('procs');
      const setup = await createPostgresStores({ pool, schema });
      await setup.ledger.credit('racer', 300);
      const startAt = String(Date.now() + 4000);
      const results = await Promise.all(
        Array.from({ length: 4 }, (_, p) =>
          runChild({
            DATABASE_URL: db.url,
            SCHEMA: schema,
            USER_ID: 'racer',
            PREFIX: `p${p}`,
            COUNT: '20',
            AMOUNT: '10',
            START_AT: startAt,
          }),
        ),
      );
      expect(results.reduce((n, r) => n + r.total, 0)).toBe(80);
      expect(results.reduce((n, r) => n + r.ok, 0)).toBe(30);
      expect(await setup.ledger.account('racer')).toEqual({ balance: 0, reserved: 300, settled: 0 });
      expect(await setup.ledger.openReserves(100)).toHaveLength(30);

      // And one generation id reserved from every process at once is held once.
      await setup.ledger.credit('dup', 100);
      const dupStart = String(Date.now() + 4000);
      const dups = await Promise.all(
        Array.from({ length: 4 }, (_, p) =>
          runChild({
            DATABASE_URL: db.url,
            SCHEMA: schema,
            USER_ID: 'dup',
            PREFIX: `d${p}`,
            SAME_ID: 'one-generation',
            COUNT: '20',
            AMOUNT: '10',
            START_AT: dupStart,
          }),
        ),
      );
      expect(dups.reduce((n, r) => n + r.ok, 0)).toBe(80);
      expect(await setup.ledger.account('dup')).toEqual({ balance: 90, reserved: 10, settled: 0 });
    },
    60_000,
  );
});

describe('generation store', () => {
  it('refuses a stale worker once another claimed the expired lease', async () => {
    const { store } = await fresh();
    const ops = lifecycleOps(store);
    await store.insert(...newGen('g'));
    expect(await ops.claim('g', { workerId: 'w1', leaseMs: 1000, now: T0 })).toMatchObject({ claims: 1 });
    expect(await ops.claim('g', { workerId: 'w2', leaseMs: 1000, now: T0 + 999 })).toBeNull();
    expect(await ops.claim('g', { workerId: 'w2', leaseMs: 1000, now: T0 + 1000 })).toMatchObject({
      claims: 2,
      leaseOwner: 'w2',
    });
    expect(await ops.complete('g', { workerId: 'w1', price: 1, resultText: 'late', now: T0 + 1001 })).toBe(false);
    expect(await ops.renew('g', 'w1', 1000, T0 + 1001)).toBe(false);
    expect(await ops.complete('g', { workerId: 'w2', price: 2, resultText: 'ok', now: T0 + 1001 })).toBe(true);
    expect(await store.getById('g')).toMatchObject({ status: 'completed', price: 2, resultText: 'ok', claims: 2 });
    expect((await store.eventsOf('g')).map((e) => [e.seq, e.type, e.data])).toEqual([
      [1, 'created', { modelId: 'm' }],
      [2, 'processing', { claim: 1 }],
      [3, 'processing', { claim: 2 }],
      [4, 'completed', { price: 2 }],
    ]);
  });

  it('refuses a late completion even when nobody re-claimed', async () => {
    const { store } = await fresh();
    const ops = lifecycleOps(store);
    await store.insert(...newGen('g'));
    await ops.claim('g', { workerId: 'w1', leaseMs: 1000, now: T0 });
    expect(await ops.complete('g', { workerId: 'w1', price: 1, now: T0 + 1000 })).toBe(false);
    expect((await store.getById('g'))?.status).toBe('processing');
  });

  it('lets one of 40 concurrent claims from separate pools win', async () => {
    const schema = randomName('claim');
    const instances = await Promise.all(
      Array.from({ length: 4 }, () => createPostgresStores({ connectionString: db.url, schema, poolSize: 4 })),
    );
    try {
      await instances[0]!.store.insert(...newGen('g'));
      const results = await Promise.all(
        instances.flatMap((s, i) =>
          Array.from({ length: 10 }, (_, j) => lifecycleOps(s.store).claim('g', { workerId: `w${i}-${j}`, leaseMs: 1000, now: T0 })),
        ),
      );
      expect(results.filter((r) => r !== null)).toHaveLength(1);
      expect(await instances[1]!.store.getById('g')).toMatchObject({ claims: 1, status: 'processing' });
      expect(await instances[2]!.store.eventsOf('g')).toHaveLength(2);
    } finally {
      await Promise.all(instances.map((s) => s.close()));
    }
  });

  it('keeps settings exactly, including characters jsonb would refuse', async () => {
    const { store } = await fresh();
    const settings = { prompt: 'nul \u0000 and \ud83d\ude00', list: [1, 'two', { three: null }], b: true, a: 0.1 };
    await store.insert(...newGen('g', { settings }));
    expect((await store.getById('g'))?.settings).toEqual(settings);
    expect(await store.getById('g\u0000')).toBeNull();
  });

  it('stores a NUL in free text and event data as U+FFFD instead of failing the change', async () => {
    const { store } = await fresh();
    const ops = lifecycleOps(store);
    await store.insert(...newGen('g'));
    await ops.claim('g', { workerId: 'w', leaseMs: 1000, now: T0 });
    expect(await ops.progress('g', { workerId: 'w', fraction: 0.5, message: 'a\u0000b', now: T0 + 1 })).toBe(true);
    expect((await store.getById('g'))?.progress).toEqual({ fraction: 0.5, message: 'a\ufffdb' });
    expect((await store.eventsOf('g', 2))[0]!.data).toEqual({ fraction: 0.5, message: 'a\ufffdb' });
  });

  it('renews, in one call, only the leases the holder still holds', async () => {
    const { store } = await fresh();
    const ops = lifecycleOps(store);
    for (const id of ['a', 'b', 'c']) await store.insert(...newGen(id));
    await ops.claim('a', { workerId: 'w', leaseMs: 1000, now: T0 });
    await ops.claim('b', { workerId: 'w', leaseMs: 10, now: T0 });
    await ops.claim('c', { workerId: 'other', leaseMs: 1000, now: T0 });
    expect(await store.renewLeases(['a', 'b', 'c', 'missing'], 'w', T0 + 5000, T0 + 100)).toEqual(['a']);
    expect(await store.getById('a')).toMatchObject({ leaseExpiresAt: T0 + 5000, updatedAt: T0 + 100 });
    expect(await store.getById('b')).toMatchObject({ leaseExpiresAt: T0 + 10 });
    expect(await store.eventsOf('a')).toHaveLength(2);
  });
});

describe('api keys', () => {
  it('keeps only the digest and forgets a revoked key on its next use', async () => {
    const stores = await fresh();
    await stores.apiKeys.addKey('sk-live-secret', 'u1');
    await stores.apiKeys.addKey('sk-live-secret', 'u1');
    await expect(stores.apiKeys.addKey('sk-live-secret', 'u2')).rejects.toThrow();
    const { rows } = await pool.query(`SELECT * FROM "${stores.schema}".api_keys`);
    expect(rows).toHaveLength(1);
    expect(rows[0].key_hash).toBe(hashApiKey('sk-live-secret'));
    expect(JSON.stringify(rows)).not.toContain('sk-live-secret');

    expect(await stores.apiKeys.resolve('sk-live-secret')).toMatchObject({ userId: 'u1' });
    await stores.apiKeys.revokeKey('sk-live-secret');
    expect(await stores.apiKeys.resolve('sk-live-secret')).toBeNull();
  });
});

describe('revoked keys (issue 37)', () => {
  it('a revoked key stays revoked when the stores are reopened and the key is seeded again', async () => {
    const schema = randomName('revoked');
    const first = await createPostgresStores({ connectionString: db.url, schema, poolSize: 2 });
    try {
      await first.apiKeys.addKey('seeded-key-0123456789', 'u1');
      await first.apiKeys.addKey('other-key-0123456789', 'u2');
      const [key] = await first.apiKeys.listKeys('u1');
      expect(await first.apiKeys.revokeKeyById(key!.keyId)).toBe(true);
      expect(await first.apiKeys.resolve('seeded-key-0123456789')).toBeNull();
    } finally {
      await first.close();
    }
    // A restart: the host seeds the same users again.
    const second = await createPostgresStores({ connectionString: db.url, schema, poolSize: 2 });
    try {
      await second.apiKeys.addKey('seeded-key-0123456789', 'u1');
      await second.apiKeys.addKey('other-key-0123456789', 'u2');
      expect(await second.apiKeys.resolve('seeded-key-0123456789')).toBeNull();
      expect(await second.apiKeys.listKeys('u1')).toEqual([]);
      expect(await second.apiKeys.resolve('other-key-0123456789')).toMatchObject({ userId: 'u2' });
      const { rows } = await pool.query(`SELECT key_hash, revoked_at IS NOT NULL AS revoked FROM "${schema}".api_keys WHERE user_id = 'u1'`);
      expect(rows).toEqual([{ key_hash: hashApiKey('seeded-key-0123456789'), revoked: true }]);
    } finally {
      await second.close();
    }
  });
});

describe('durability and failures', () => {
  it('keeps every kind of data across a pool close and reopen', async () => {
    const schema = randomName('reopen');
    const first = await createPostgresStores({ connectionString: db.url, schema });
    await first.store.insert(...newGen('g1'));
    await first.ledger.credit('u1', 50);
    await first.ledger.reserve('u1', 'g1', 10, T0);
    await first.apiKeys.addKey('key-1', 'u1');
    await first.idempotency.begin('u1', 'idem', 'hash', T0, 'g1');
    await first.idempotency.finish('u1', 'idem', 'g1');
    await lifecycleOps(first.store).claim('g1', { workerId: 'w', leaseMs: 1000, now: T0 + 1 });
    await lifecycleOps(first.store).progress('g1', { workerId: 'w', fraction: 0.5, now: T0 + 2 });
    await first.close();
    await expect(first.ledger.balance('u1')).rejects.toBeInstanceOf(UnavailableError);

    const second = await createPostgresStores({ connectionString: db.url, schema });
    try {
      expect(await second.store.get('g1', 'u1')).toMatchObject({ id: 'g1', status: 'processing', reserved: 10, progress: { fraction: 0.5 } });
      // The event log survives too, and a new event continues its sequence.
      const events = await second.store.eventsOf('g1');
      expect(events.map((e) => [e.seq, e.type])).toEqual([[1, 'created'], [2, 'processing'], [3, 'progress']]);
      // A reader from the head gets the next event, numbered after the three (and maybe events committed shortly
      // before the head, while an older transaction of this database was still running).
      const head = await second.store.feedHead();
      expect(await lifecycleOps(second.store).progress('g1', { workerId: 'w', fraction: 0.75, now: T0 + 3 })).toBe(true);
      const page = { events: [] as GenerationEvent[], cursor: head };
      for (let i = 0; i < 2000 && !page.events.some((e) => e.seq === 4); i++) {
        const more = await readFeedUntil(second.store, page.cursor, 1);
        page.events.push(...more.events);
        page.cursor = more.cursor;
      }
      expect(page.events.at(-1)).toMatchObject({ generationId: 'g1', seq: 4, type: 'progress', data: { fraction: 0.75 } });
      expect(page.events.map((e) => e.seq)).toEqual([...page.events.map((e) => e.seq)].sort((a, b) => a - b));
      expect(await second.ledger.account('u1')).toEqual({ balance: 40, reserved: 10, settled: 0 });
      expect(await second.ledger.openReserves(5)).toEqual([
        { generationId: 'g1', userId: 'u1', amount: 10, createdAt: T0 },
      ]);
      expect(await second.apiKeys.resolve('key-1')).toMatchObject({ userId: 'u1' });
      expect(await second.idempotency.begin('u1', 'idem', 'hash', T0 + 1, 'g2')).toEqual({
        state: 'done',
        generationId: 'g1',
        requestHash: 'hash',
      });
    } finally {
      await second.close();
    }
  });

  it('reports an unreachable server as UnavailableError', async () => {
    await expect(
      createPostgresStores({ connectionString: 'postgres://postgres@127.0.0.1:1/test', connectionTimeoutMs: 2000 }),
    ).rejects.toBeInstanceOf(UnavailableError);
    const dead = new pg.Pool({ connectionString: 'postgres://postgres@127.0.0.1:1/test' });
    try {
      const ledger = new PostgresLedger(dead);
      await expect(ledger.reserve('u', 'g', 1)).rejects.toBeInstanceOf(UnavailableError);
      await expect(ledger.balance('u')).rejects.toBeInstanceOf(UnavailableError);
    } finally {
      await dead.end();
    }
  });

  it('reports a connection killed mid-session as UnavailableError, then recovers', async () => {
    const schema = randomName('kill');
    const stores = await createPostgresStores({ connectionString: db.url, schema, poolSize: 1 });
    const blocker = await pool.connect();
    try {
      await stores.ledger.credit('u', 1);
      // Hold the ledger's query on a lock, so its connection is killed while the query runs (an idle one may be
      // dropped by the pool before the next query, which would then simply use a new connection).
      await blocker.query('BEGIN');
      await blocker.query(`LOCK TABLE "${schema}".accounts IN ACCESS EXCLUSIVE MODE`);
      const waiting = stores.ledger.balance('u');
      // Its rejection may arrive before the terminate's own answer: handled from now on, asserted below.
      waiting.catch(() => undefined);
      // The backend of the read, once it waits on the lock.
      const pid = await until(async () => {
          const { rows } = await pool.query<{ pid: number }>(
            `SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid() AND query LIKE '%' || $1 || '%'`,
            [schema],
          );
          return rows[0]?.pid;
        }, { accept: (p) => p !== undefined, timeoutMs: 10_000, intervalMs: 10 });
      expect(pid).toBeDefined();
      await pool.query('SELECT pg_terminate_backend($1)', [pid]);
      await expect(waiting).rejects.toBeInstanceOf(UnavailableError);
      await blocker.query('ROLLBACK');
      expect(await stores.ledger.balance('u')).toBe(1);
    } finally {
      await blocker.query('ROLLBACK').catch(() => undefined);
      blocker.release();
      await stores.close();
    }
  });

});
