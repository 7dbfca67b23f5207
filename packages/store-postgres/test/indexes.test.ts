import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { createPostgresStores } from '../src/index.js';
import { generationSql, listSql, updateSql } from '../src/generation-store.js';
import { ledgerSql } from '../src/ledger.js';
import { createTestDatabase, type TestDatabase, quietPool } from './helpers.js';

const T0 = 1_700_000_000_000;
const ROWS = 20_000;
const UNFINISHED = 100;
const OPEN_RESERVES = 50;

let db: TestDatabase;
let pool: pg.Pool;
const s = '"idx"';

interface PlanNode {
  'Node Type': string;
  'Index Name'?: string;
  'Relation Name'?: string;
  Plans?: PlanNode[];
}

function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)];
}

/** The plan PostgreSQL picks for the statement the store runs, with these parameter values. */
async function planOf(sql: string, values: unknown[]): Promise<PlanNode[]> {
  const { rows } = await pool.query(`EXPLAIN (FORMAT JSON) ${sql}`, values);
  return nodes((rows[0]['QUERY PLAN'] as Array<{ Plan: PlanNode }>)[0]!.Plan);
}

function expectIndexUse(plan: PlanNode[], index: string): void {
  const scans = plan.filter((n) => /Index Scan|Index Only Scan|Bitmap Index Scan/.test(n['Node Type']));
  expect(scans.map((n) => n['Index Name'])).toContain(index);
  expect(plan.filter((n) => n['Node Type'] === 'Seq Scan')).toEqual([]);
}

beforeAll(async () => {
  db = await createTestDatabase();
  pool = quietPool({ connectionString: db.url, max: 4 });
  pool.on('error', () => {});
  await createPostgresStores({ pool, schema: 'idx' });
  // Mostly finished history with a small backlog, the shape a long-running service has: realistic statistics,
  // not `enable_seqscan = off`, decide the plans below.
  await pool.query(
    `INSERT INTO ${s}.generations (id, owner_id, model_id, settings, status, reserved, price, claims,
       created_at, updated_at, finished_at, result_key, last_seq)
     SELECT 'gen-' || i, 'user-' || (i % 500), 'model', '{"prompt":"p"}',
       CASE WHEN i <= $2 THEN 'pending' WHEN i % 7 = 0 THEN 'failed' ELSE 'completed' END,
       10, CASE WHEN i <= $2 THEN NULL ELSE 10 END, 1, $1::bigint + i, $1::bigint + i,
       CASE WHEN i <= $2 THEN NULL ELSE $1::bigint + i + 100 END, 'key-' || i, 3
     FROM generate_series(1, $3) AS i`,
    [T0, UNFINISHED, ROWS],
  );
  await pool.query(
    `INSERT INTO ${s}.reserves (generation_id, user_id, amount, state, charged, created_at)
     SELECT 'gen-' || i, 'user-' || (i % 500), 10,
       CASE WHEN i <= $2 THEN 'open' ELSE 'settled' END, CASE WHEN i <= $2 THEN NULL ELSE 10 END, $1::bigint + i
     FROM generate_series(1, $3) AS i`,
    [T0, OPEN_RESERVES, ROWS],
  );
  // An event log three times the size of the table: the readers' queries must not scan it.
  await pool.query(
    // One transaction per event, as the service writes them (old transaction ids: all committed).
    `INSERT INTO ${s}.events (generation_id, seq, owner_id, type, at, data, tx)
     SELECT 'gen-' || (i % $2 + 1), i / $2 + 1, 'user-' || ((i % $2 + 1) % 500), 'progress', $1::bigint + i, '{"fraction":0.5}',
       (i + 3)::text::xid8
     FROM generate_series(0, $2 * 3 - 1) AS i`,
    [T0, ROWS],
  );
  // Batches: mostly completed, a few open (what recovery walks).
  await pool.query(
    `INSERT INTO ${s}.batches (id, owner_id, generation_ids, created_at, completed_at)
     SELECT 'batch-' || i, 'user-' || (i % 500), '[]', $1::bigint + i, CASE WHEN i <= $2 THEN NULL ELSE $1::bigint + i + 100 END
     FROM generate_series(1, $3) AS i`,
    [T0, OPEN_RESERVES, ROWS],
  );
  await pool.query(`ANALYZE ${s}.batches`);
  await pool.query(`ANALYZE ${s}.events`);
  await pool.query(`ANALYZE ${s}.generations`);
  await pool.query(`ANALYZE ${s}.reserves`);
}, 120_000);

afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

describe(`query plans over ${ROWS} generations`, () => {
  const g = generationSql(s);
  const l = ledgerSql(s);

  it('reads one generation through the primary key', async () => {
    expectIndexUse(await planOf(g.get, ['gen-12345', 'user-345']), 'generations_pkey');
    expectIndexUse(await planOf(g.getById, ['gen-12345']), 'generations_pkey');
  });

  it('changes one generation, and appends its event, through the primary key', async () => {
    const now = T0 + 50;
    const changes = [
      // The Lifecycle's claim from pending, a claim after a lost lease, a completion, a failure from pending.
      { expect: { status: ['pending'] }, set: { status: 'processing', claims: 1, startedAt: now, leaseOwner: 'w', leaseExpiresAt: now + 1 }, event: { type: 'processing', data: { claim: 1 } }, now },
      { expect: { status: ['processing'], lease: 'free', parked: false, claims: 1 }, set: { claims: 2, leaseOwner: 'w', leaseExpiresAt: now + 1 }, event: { type: 'processing', data: { claim: 2 } }, now },
      { expect: { status: ['processing'], lease: { heldBy: 'w' } }, set: { status: 'completed', price: 1, finishedAt: now, resultText: 'x' }, event: { type: 'completed', data: { price: 1 } }, now },
      { expect: { status: ['pending'] }, set: { status: 'failed', price: 0, failureReason: 'r', error: { code: 'cancelled', message: 'm' }, parkedUntil: null, finishedAt: now }, event: { type: 'failed', data: {} }, now },
      { expect: { status: ['processing'], lease: { heldBy: 'w' }, noRemoteHandle: true }, set: { remoteHandle: { job: 1 } }, now },
    ] as const;
    for (const change of changes) {
      const stmt = updateSql(s, change as never);
      expectIndexUse(await planOf(stmt.text, stmt.values('gen-5', change as never)), 'generations_pkey');
    }
    // Renewal looks up unfinished rows by id: the primary key, or the partial index of unfinished rows while that
    // backlog is small (as here: 100 rows), never a scan of the table.
    const renew = await planOf(g.renewLeases, [['gen-5', 'gen-6'], 'w', now + 1000, now]);
    expect(renew.filter((n) => n['Node Type'] === 'Seq Scan')).toEqual([]);
    expect(renew.map((n) => n['Index Name']).some((i) => i === 'generations_pkey' || i === 'generations_unfinished_idx')).toBe(true);
  });

  it('counts an owner\u2019s unfinished generations for the in-flight cap through the partial owner index', async () => {
    const values = ['gen-new', 'user-3', 'model', '{}', 1, T0, null, 10, null, 'pending', 'created', '{}', null, null, null, null];
    expectIndexUse(await planOf(g.insert, values), 'generations_owner_unfinished_idx');
  });

  it('finds unfinished work through the partial index', async () => {
    expectIndexUse(await planOf(g.listUnfinished, [100]), 'generations_unfinished_idx');
  });

  it('pages through unfinished work after a cursor through the partial index', async () => {
    expectIndexUse(await planOf(g.listUnfinishedAfter, [100, 'gen-12345']), 'generations_unfinished_idx');
  });

  it('finds finished work to delete through the retention index', async () => {
    expectIndexUse(await planOf(g.listFinished, [T0 + 1000, 100]), 'generations_finished_idx');
  });

  it('finds generations whose own life ended through the partial life_ends_at index', async () => {
    expectIndexUse(await planOf(g.listLifeEnded, [T0 + 1000, 100]), 'generations_life_ends_idx');
  });

  it('finds open batches, and pages through them after a cursor, through the partial index', async () => {
    expectIndexUse(await planOf(g.listOpenBatches, [T0 + 1_000_000, 100]), 'batches_open_idx');
    const after = await planOf(g.listOpenBatchesAfter, [T0 + 1_000_000, 100, 'batch-10']);
    expectIndexUse(after, 'batches_open_idx');
  });

  it('finds open reserves, and pages through them after the last one read, through the partial index', async () => {
    expectIndexUse(await planOf(l.openReserves, [100]), 'reserves_open_idx');
    expectIndexUse(await planOf(l.openReservesAfter, [100, T0 + 5, 'gen-5']), 'reserves_open_idx');
  });

  it('settles one reserve through the primary keys', async () => {
    const plan = await planOf(l.settle, ['gen-7', 5, T0, Math.floor(T0 / 86_400_000)]);
    expectIndexUse(plan, 'reserves_pkey');
    expect(plan.map((n) => n['Index Name'])).toContain('accounts_pkey');
    expect(plan.map((n) => n['Index Name'])).toContain('key_spend_pkey');
  });

  it("reads a user's usage from the daily rollup's primary key, never the reserves", async () => {
    const plan = await planOf(l.usageByDay, ['user-345', 20_000, 20_366]);
    expectIndexUse(plan, 'usage_daily_pkey');
    expect(plan.map((n) => n['Relation Name'])).not.toContain('reserves');
    // By model or key: the days at the ends, and the spans of 8 and 64 days between (usageCover's parts).
    for (const sql of [l.usageByModel, l.usageByKey]) {
      const spans = await planOf(sql, ['user-345', 20_000, 20_007, 20_360, 20_366, 20_008, 20_032, 20_352, 20_352, 20_096, 20_288]);
      expectIndexUse(spans, 'usage_daily_pkey');
      expectIndexUse(spans, 'usage_spans_pkey');
      expect(spans.map((n) => n['Relation Name'])).not.toContain('reserves');
    }
  });

  it("pages a user's list through an owner index, with each filter and cursor, without sorting", async () => {
    for (const status of [false, true]) {
      for (const modelId of [false, true]) {
        for (const before of [false, true]) {
          const values: unknown[] = ['user-345'];
          if (status) values.push('completed');
          if (modelId) values.push('model');
          if (before) values.push(T0 + 15_000, 'gen-15000');
          values.push(21);
          const plan = await planOf(listSql(s, { status, modelId, before }), values);
          const want = status ? 'generations_owner_status_idx' : modelId ? 'generations_owner_model_idx' : 'generations_owner_idx';
          const label = JSON.stringify({ status, modelId, before });
          const used = plan.filter((n) => /Index/.test(n['Node Type'])).map((n) => n['Index Name']);
          expect(used.some((i) => i === want || (status && modelId && i === 'generations_owner_model_idx')), `${label}: ${used.join(',')}`).toBe(true);
          expect(plan.filter((n) => n['Node Type'] === 'Seq Scan'), label).toEqual([]);
          expect(plan.filter((n) => n['Node Type'] === 'Sort'), label).toEqual([]);
        }
      }
    }
  });

  it('reads the event log forward and one generation\u2019s events through indexes', async () => {
    // A reader is near the head of the log: a cursor 2,000 events from its end.
    const { rows } = await pool.query(`SELECT tx::text AS tx, pos FROM ${s}.events ORDER BY tx, pos OFFSET ${ROWS * 3 - 2000} LIMIT 1`);
    // (Both also read pg_stat_activity, which scans the small pg_database catalog.)
    const feed = await planOf(g.readFeed, [rows[0].tx, rows[0].pos, 500]);
    expect(feed.filter((n) => n['Relation Name'] === 'events').map((n) => n['Index Name'])).toEqual(['events_feed_idx']);
    expect(feed.filter((n) => n['Node Type'] === 'Seq Scan' && n['Relation Name'] !== 'pg_database')).toEqual([]);
    // The head reads no table of the store.
    expect((await planOf(g.feedHead, [])).filter((n) => n['Relation Name'] !== undefined && n['Relation Name'] !== 'pg_database')).toEqual([]);
    expectIndexUse(await planOf(g.eventsOf, ['gen-12345', 0]), 'events_pkey');
  });

  it('returns what the plans promise', async () => {
    const stores = await createPostgresStores({ pool, schema: 'idx' });
    expect(await stores.store.listUnfinished(1000)).toHaveLength(UNFINISHED);
    expect(await stores.ledger.openReserves(1000)).toHaveLength(OPEN_RESERVES);
    expect(await stores.store.getById('gen-12345')).toMatchObject({ status: 'completed', ownerId: 'user-345' });
  });
});
