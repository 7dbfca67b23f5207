import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSqliteStores, type SqliteStores } from '../src/index.js';
import { GENERATION_SQL } from '../src/generation-store.js';
import { OPEN_RESERVES_SQL } from '../src/ledger.js';
import { tempDir } from './helpers.js';

// "Independent of how many generations are stored" is checked here structurally: every hot query must reach its
// rows through an index, never by scanning a table. Timings at 1k and 1M rows live in bench/scale.ts.

let tmp: Awaited<ReturnType<typeof tempDir>>;
let stores: SqliteStores;

beforeAll(async () => {
  tmp = await tempDir();
  stores = createSqliteStores({ filename: tmp.file() });
  const { db } = stores;
  // Enough mixed rows, with statistics gathered, that the planner decides on real numbers, not on defaults.
  const insert = db.prepare(
    `INSERT INTO generations (id, owner_id, model_id, settings, status, reserved, attempts, created_at, updated_at, finished_at)
     VALUES (?, ?, 'm', '{}', ?, 1, 1, ?, ?, ?)`,
  );
  const reserve = db.prepare(`INSERT INTO reserves (generation_id, user_id, amount, state, created_at) VALUES (?, 'u', 1, ?, ?)`);
  db.prepare(`INSERT INTO accounts (user_id, balance) VALUES ('u', 0)`).run();
  db.transaction(() => {
    for (let i = 0; i < 5000; i++) {
      const finished = i % 10 !== 0;
      insert.run(`g${i}`, `u${i % 50}`, finished ? 'completed' : 'pending', i, i, finished ? i + 5 : null);
      reserve.run(`g${i}`, finished ? 'settled' : 'open', i);
    }
  })();
  db.exec('ANALYZE');
});

afterAll(async () => {
  await stores.close();
  await tmp.remove();
});

function plan(sql: string, ...params: unknown[]): string[] {
  return (stores.db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params) as Array<{ detail: string }>).map((r) => r.detail);
}

/** A step that reads a table row by row without an index (`SCAN generations`, with no `USING ... INDEX`). */
function fullScans(steps: string[]): string[] {
  return steps.filter((s) => /^SCAN \w+/.test(s) && !/USING (COVERING )?INDEX|USING (INTEGER )?PRIMARY KEY/.test(s));
}

const named = {
  id: 'g1',
  workerId: 'w',
  now: 1,
  expiresAt: 2,
  price: 1,
  reason: 'r',
  force: 0,
  resultText: null,
  resultKey: null,
};

describe('query plans', () => {
  it.each([
    ['get', () => plan(GENERATION_SQL.get, 'g1', 'u1')],
    ['getById', () => plan(GENERATION_SQL.getById, 'g1')],
    ['claim', () => plan(GENERATION_SQL.claim, named)],
    ['complete', () => plan(GENERATION_SQL.complete, named)],
    ['fail', () => plan(GENERATION_SQL.fail, named)],
  ])('%s finds the row through the primary-key index', (_name, explain) => {
    const steps = explain();
    expect(fullScans(steps)).toEqual([]);
    expect(steps.join('\n')).toMatch(/SEARCH generations USING (COVERING )?INDEX sqlite_autoindex_generations_1 \(id=\?\)/);
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

  it('deleteFinishedBefore seeks the finished_at index and deletes by primary key', () => {
    const steps = plan(GENERATION_SQL.deleteFinished, 1000, 100);
    expect(fullScans(steps)).toEqual([]);
    expect(steps.join('\n')).toContain('USING INDEX generations_finished (finished_at>? AND finished_at<?)');
    expect(steps.join('\n')).not.toContain('TEMP B-TREE');
  });

  it('openReserves walks only the partial index of open reserves, already in order', () => {
    const steps = plan(OPEN_RESERVES_SQL, 100);
    expect(fullScans(steps)).toEqual([]);
    expect(steps.join('\n')).toContain('USING INDEX reserves_open');
    expect(steps.join('\n')).not.toContain('TEMP B-TREE');
  });

  it('answers the ported calls correctly on the same data', async () => {
    expect((await stores.store.listUnfinished(3)).map((g) => g.id)).toEqual(['g0', 'g10', 'g20']);
    expect((await stores.ledger.openReserves(2)).map((r) => r.generationId)).toEqual(['g0', 'g10']);
    expect(await stores.store.getById('g1')).toMatchObject({ id: 'g1', status: 'completed', finishedAt: 6 });
    const swept = await stores.store.deleteFinishedBefore(10, 100);
    expect(swept.deleted).toBe(4); // g1..g4 finished at 6..9; g0 is unfinished
    expect(await stores.store.getById('g1')).toBeNull();
    expect(await stores.store.getById('g0')).not.toBeNull();
  });
});
