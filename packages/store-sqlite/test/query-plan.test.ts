import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSqliteStores, type SqliteStores } from '../src/index.js';
import { GENERATION_SQL, listSql, updateSql } from '../src/generation-store.js';
import { change } from './changes.js';
import { OPEN_RESERVES_AFTER_SQL, OPEN_RESERVES_SQL, usageSql } from '../src/ledger.js';
import { tempDir } from './helpers.js';

// "Independent of how many generations are stored" is checked here structurally: every hot query must reach its
// rows through an index, never by scanning a table. Timings at 1k and 1M rows live in bench/scale.ts.

let tmp: Awaited<ReturnType<typeof tempDir>>;
let stores: SqliteStores;
/** A new file with no rows and no statistics, as a host starts: the planner must choose the same indexes there. */
let fresh: SqliteStores;

beforeAll(async () => {
  tmp = await tempDir();
  stores = createSqliteStores({ filename: tmp.file() });
  fresh = createSqliteStores({ filename: tmp.file('fresh.db') });
  const { db } = stores;
  // Enough mixed rows, with statistics gathered, that the planner decides on real numbers, not on defaults.
  const insert = db.prepare(
    `INSERT INTO generations (id, owner_id, model_id, settings, status, reserved, claims, created_at, updated_at, finished_at)
     VALUES (?, ?, ?, '{}', ?, 1, 1, ?, ?, ?)`,
  );
  const event = db.prepare(`INSERT INTO events (generation_id, seq, owner_id, type, at, data) VALUES (?, ?, ?, ?, ?, '{}')`);
  const reserve = db.prepare(`INSERT INTO reserves (generation_id, user_id, amount, state, created_at) VALUES (?, 'u', 1, ?, ?)`);
  db.prepare(`INSERT INTO accounts (user_id, balance) VALUES ('u', 0)`).run();
  db.transaction(() => {
    for (let i = 0; i < 5000; i++) {
      const finished = i % 10 !== 0;
      insert.run(`g${i}`, `u${i % 50}`, `m${i % 3}`, finished ? 'completed' : 'pending', i, i, finished ? i + 5 : null);
      reserve.run(`g${i}`, finished ? 'settled' : 'open', i);
      event.run(`g${i}`, 1, `u${i % 50}`, 'created', i);
      if (finished) event.run(`g${i}`, 2, `u${i % 50}`, 'completed', i + 5);
    }
  })();
  db.exec('ANALYZE');
});

afterAll(async () => {
  await stores.close();
  await fresh.close();
  await tmp.remove();
});

function plan(sql: string, ...params: unknown[]): string[] {
  return planOn(stores, sql, ...params);
}

function planOn(on: SqliteStores, sql: string, ...params: unknown[]): string[] {
  return (on.db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params) as Array<{ detail: string }>).map((r) => r.detail);
}

/** A step that reads a table row by row without an index (`SCAN generations`, with no `USING ... INDEX`). */
function fullScans(steps: string[]): string[] {
  return steps.filter((s) => /^SCAN \w+/.test(s) && !/USING (COVERING )?INDEX|USING (INTEGER )?PRIMARY KEY/.test(s));
}

/** The SQL of a change with placeholders bound to dummies (EXPLAIN only needs them bound). */
function planChange(c: Parameters<typeof updateSql>[0]): string[] {
  const sql = updateSql(c);
  const params = Object.fromEntries([...sql.matchAll(/@(\w+)/g)].map((m) => [m[1], 1]));
  return plan(sql, params);
}

const FAILURE = { code: 'provider_error', message: 'm' } as const;

describe('query plans', () => {
  it.each([
    ['get', () => plan(GENERATION_SQL.get, 'g1', 'u1')],
    ['getById', () => plan(GENERATION_SQL.getById, 'g1')],
    ['update: claim', () => planChange(change.claim('w', 1000, 1))],
    ['update: re-claim', () => planChange(change.reclaim(1, 'w', 1000, 1))],
    ['update: complete', () => planChange(change.complete('w', 1, 1))],
    ['update: fail (nobody holds it)', () => planChange(change.fail({ status: ['pending', 'processing'], lease: 'free' }, 1, 'r', FAILURE, 1))],
    ['update: fail by a worker', () => planChange(change.fail(change.held('w'), 1, 'r', FAILURE, 1))],
    ['update: progress', () => planChange(change.progress('w', 0.5, 1))],
    ['update: remote handle', () => planChange({ expect: { ...change.held('w'), noRemoteHandle: true }, set: { remoteHandle: 1 }, now: 1 })],
    ['update: resume a parked job', () => planChange({ expect: { status: ['processing'], lease: 'free', parked: true }, set: { parkedUntil: null, leaseOwner: 'w' }, now: 1 })],
  ])('%s finds the row through the primary-key index', (_name, explain) => {
    const steps = explain();
    expect(fullScans(steps)).toEqual([]);
    expect(steps.join('\n')).toMatch(/SEARCH generations USING (COVERING )?INDEX sqlite_autoindex_generations_1 \(id=\?\)/);
  });

  it('renewLeases seeks each id of its JSON array in the primary-key index', () => {
    const steps = plan(GENERATION_SQL.renew, { ids: '["g1","g2"]', holder: 'w', until: 2, now: 1 });
    // The only scan is of the JSON array of ids (the instance's leases), never of a table.
    expect(fullScans(steps)).toEqual(['SCAN json_each VIRTUAL TABLE INDEX 1:']);
    expect(steps.join('\n')).toMatch(/SEARCH generations USING INDEX sqlite_autoindex_generations_1 \(id=\?\)/);
  });

  it("a batch's counts and its list page seek the batch's rows in its partial index", () => {
    for (const on of [stores, fresh]) {
      const counts = planOn(on, GENERATION_SQL.batchCounts, 'batch_x');
      expect(fullScans(counts)).toEqual([]);
      expect(counts.join('\n')).toMatch(/SEARCH generations USING INDEX generations_batch \(batch_id=\?\)/);
      const page = planOn(on, listSql({ status: false, modelId: false, before: true, batchId: true }), { ownerId: 'u1', batchId: 'batch_x', beforeCreatedAt: 5, beforeId: 'g5', limit: 10 });
      expect(fullScans(page)).toEqual([]);
      expect(page.join('\n')).toMatch(/generations_batch/);
    }
  });

  it('the open batches recovery walks come from their partial index, already in order, with and without a cursor', () => {
    for (const on of [stores, fresh]) {
      for (const steps of [
        planOn(on, GENERATION_SQL.listOpenBatches, { before: 1000, limit: 100 }),
        planOn(on, GENERATION_SQL.listOpenBatchesAfter, { before: 1000, limit: 100, after: 'b1' }),
      ]) {
        expect(fullScans(steps)).toEqual([]);
        expect(steps.join('\n')).toContain('USING INDEX batches_open');
        expect(steps.join('\n')).not.toContain('TEMP B-TREE');
      }
    }
  });

  it("the in-flight count seeks one owner's unfinished rows in a partial index", () => {
    for (const on of [stores, fresh]) {
      const steps = planOn(on, GENERATION_SQL.countUnfinished, 'u1', 10);
      expect(fullScans(steps)).toEqual([]);
      // At most `cap` rows of it are read (the subquery's LIMIT), each a lookup by rowid.
      expect(steps.join('\n')).toMatch(/SEARCH generations USING (COVERING )?INDEX generations_owner_unfinished \(owner_id=\?\)/);
    }
  });

  it('listUnfinished walks only the partial index of unfinished rows, already in order', () => {
    const steps = plan(GENERATION_SQL.listUnfinished, 100);
    expect(fullScans(steps)).toEqual([]);
    expect(steps.join('\n')).toContain('USING INDEX generations_unfinished');
    // A temp b-tree would mean sorting every unfinished row before the LIMIT applies.
    expect(steps.join('\n')).not.toContain('TEMP B-TREE');
  });

  it('listUnfinished after a cursor seeks the same partial index and the cursor row by primary key', () => {
    const steps = plan(GENERATION_SQL.listUnfinishedAfter, { after: 'g1', limit: 100 });
    expect(fullScans(steps)).toEqual([]);
    expect(steps.join('\n')).toContain('USING INDEX generations_unfinished');
    expect(steps.join('\n')).not.toContain('TEMP B-TREE');
  });

  it('listFinishedBefore seeks the finished_at index in its order', () => {
    const steps = plan(GENERATION_SQL.listFinished, 1000, 100);
    expect(fullScans(steps)).toEqual([]);
    expect(steps.join('\n')).toContain('USING INDEX generations_finished (finished_at>? AND finished_at<?)');
    expect(steps.join('\n')).not.toContain('TEMP B-TREE');
  });

  it('listLifeEndedBefore seeks the partial life_ends_at index in its order, on a fresh file too', () => {
    for (const on of [stores, fresh]) {
      const steps = planOn(on, GENERATION_SQL.listLifeEnded, 1000, 100);
      expect(fullScans(steps)).toEqual([]);
      expect(steps.join('\n')).toContain('USING INDEX generations_life_ends (life_ends_at>? AND life_ends_at<?)');
      expect(steps.join('\n')).not.toContain('TEMP B-TREE');
    }
  });

  // Every shape of an owner's page: with and without each filter, with and without a cursor. Each must seek one
  // owner's slice of an index (the cursor inside the seek, not as a filter after it) and read it in the order
  // asked, so the page stops after `limit` rows instead of sorting everything the owner has.
  const listShapes = [false, true].flatMap((status) =>
    [false, true].flatMap((modelId) => [false, true].map((before) => ({ status, modelId, before }))),
  );
  it.each(listShapes)('list (status $status, modelId $modelId, cursor $before) seeks an owner index in order', (shape) => {
    const params: Record<string, unknown> = { ownerId: 'u1', limit: 20 };
    if (shape.status) params.status = 'pending';
    if (shape.modelId) params.modelId = 'm1';
    if (shape.before) Object.assign(params, { beforeCreatedAt: 2500, beforeId: 'g2500' });
    const index = shape.modelId ? 'generations_owner_model' : shape.status ? 'generations_owner_status' : 'generations_owner_list';
    const seek = ['owner_id=?', ...(shape.modelId ? ['model_id=?'] : shape.status ? ['status=?'] : []), ...(shape.before ? ['(created_at,id)<(?,?)'] : [])];
    // One step, no TEMP B-TREE (no sort), and the seek names every constraint the index serves.
    for (const on of [stores, fresh]) {
      expect(planOn(on, listSql(shape), params)).toEqual([`SEARCH generations USING INDEX ${index} (${seek.join(' AND ')})`]);
    }
  });

  it('readFeed seeks the log by position (the primary key), already in order', () => {
    const steps = plan(GENERATION_SQL.readFeed, 100, 50);
    expect(steps).toEqual(['SEARCH events USING INTEGER PRIMARY KEY (rowid>?)']);
  });

  it("eventsOf seeks one generation's events in the (generation_id, seq) index, already in order", () => {
    const steps = plan(GENERATION_SQL.eventsOf, 'g1', 0);
    expect(steps).toEqual(['SEARCH events USING INDEX events_of_generation (generation_id=? AND seq>?)']);
  });

  it("retention deletes the deleted generations' events through the same index", () => {
    const steps = plan(GENERATION_SQL.deleteEvents, '["g1","g2"]');
    // The only scan is of the JSON array of deleted ids (the batch), never of a table.
    expect(fullScans(steps)).toEqual(['SCAN json_each VIRTUAL TABLE INDEX 1:']);
    expect(steps.join('\n')).toContain('SEARCH events USING COVERING INDEX events_of_generation (generation_id=?)');
  });

  it('openReserves walks only the partial index of open reserves, already in order, and a later page seeks to its start', () => {
    for (const steps of [plan(OPEN_RESERVES_SQL, 100), plan(OPEN_RESERVES_AFTER_SQL, 5, 'g5', 100)]) {
      expect(fullScans(steps)).toEqual([]);
      expect(steps.join('\n')).toContain('USING INDEX reserves_open');
      expect(steps.join('\n')).not.toContain('TEMP B-TREE');
    }
    expect(plan(OPEN_RESERVES_AFTER_SQL, 5, 'g5', 100).join('\n')).toMatch(/SEARCH reserves USING INDEX reserves_open \(\(created_at,generation_id\)>\(\?,\?\)\)/);
  });

  it("reads a user's usage from the daily rollup's primary key, never the reserves", () => {
    const steps = plan(usageSql('day'), 'u1', 20_000, 20_366);
    expect(fullScans(steps)).toEqual([]);
    expect(steps.join('\n')).toMatch(/usage_days USING PRIMARY KEY/);
    // By model or key: the days at the ends, and the spans of 8 and 64 days between (usageCover's parts).
    for (const groupBy of ['model', 'key'] as const) {
      const spans = plan(usageSql(groupBy), 'u1', 20_000, 20_007, 20_360, 20_366, 'u1', 20_008, 20_032, 20_352, 20_352, 'u1', 20_096, 20_288);
      expect(fullScans(spans)).toEqual([]);
      expect(spans.join('\n')).toMatch(/usage_daily USING PRIMARY KEY/);
      expect(spans.join('\n')).toMatch(/usage_spans USING PRIMARY KEY/);
    }
  });

  it('answers the ported calls correctly on the same data', async () => {
    expect((await stores.store.listUnfinished(3)).map((g) => g.id)).toEqual(['g0', 'g10', 'g20']);
    expect((await stores.ledger.openReserves(2)).map((r) => r.generationId)).toEqual(['g0', 'g10']);
    expect(await stores.store.getById('g1')).toMatchObject({ id: 'g1', status: 'completed', finishedAt: 6 });
    const page = await stores.store.list('u1', { limit: 3, modelId: 'm1', before: { createdAt: 2501, id: 'g2501' } });
    // u1 owns g1, g51, g101...; of those, model m1 are i % 3 == 1: g2401, g2251, g2101.
    expect(page.map((g) => g.id)).toEqual(['g2401', 'g2251', 'g2101']);
    expect((await stores.store.eventsOf('g1')).map((e) => e.type)).toEqual(['created', 'completed']);
    const swept = await stores.store.listFinishedBefore(10, 100);
    expect(swept.map((r) => r.id)).toEqual(['g1', 'g2', 'g3', 'g4']); // finished at 6..9; g0 is unfinished
    for (const r of swept) expect(await stores.store.remove(r.id, { status: ['completed', 'failed'] })).toBe(true);
    expect(await stores.store.eventsOf('g1')).toEqual([]);
    expect(await stores.store.getById('g1')).toBeNull();
    expect(await stores.store.getById('g0')).not.toBeNull();
  });
});
