// The stores send statements with parameters as named (prepared) statements: parsed and planned once per connection,
// then only their values travel (issue 36: the planning of the create's and the finish's statements was most of the
// server's work per generation). Off for a pooler in transaction mode. A table changed under a prepared statement
// (a newer instance migrated) is prepared again under new names instead of failing on every connection.
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPostgresStores } from '../src/index.js';
import { PgDatabase } from '../src/db.js';
import { createTestDatabase, quietPool, type TestDatabase } from './helpers.js';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase('genservice_prepared');
}, 60_000);

afterAll(async () => {
  await db?.drop();
});

/** A pool of one connection whose statements (text and name, if any) are recorded as its client sends them. */
function recordingPool(): { pool: pg.Pool; sent: Array<{ text: string; name?: string }> } {
  const pool = quietPool({ connectionString: db.url, max: 1 });
  const sent: Array<{ text: string; name?: string }> = [];
  pool.on('connect', (client) => {
    const c = client as unknown as { query: (...a: unknown[]) => unknown };
    const query = c.query.bind(c);
    c.query = (...args: unknown[]) => {
      const q = args[0];
      if (typeof q === 'string') sent.push({ text: q });
      else {
        const { text, name } = q as { text: string; name?: string };
        sent.push(name === undefined ? { text } : { text, name });
      }
      return query(...args);
    };
  });
  return { pool, sent };
}

describe('prepared statements', () => {
  it('by default a statement with parameters is named after its text, the same name each time', async () => {
    const { pool, sent } = recordingPool();
    try {
      const stores = await createPostgresStores({ pool, schema: 'prep_on' });
      await stores.ledger.credit('alice', 5);
      sent.length = 0;
      expect(await stores.store.get('nope', 'alice')).toBeNull();
      expect(await stores.store.get('nope-2', 'alice')).toBeNull();
      expect(sent).toHaveLength(2);
      expect(sent[0]!.name).toMatch(/^genservice_[A-Za-z0-9_-]+_\d+$/);
      expect(sent[1]!.name).toBe(sent[0]!.name);
      // Another statement, another name; the same text in another schema, another name too.
      sent.length = 0;
      await stores.ledger.balance('alice');
      expect(sent[0]!.name).toMatch(/^genservice_/);
      expect(sent[0]!.name).not.toBe(sent[1]?.name ?? '');
      const other = await createPostgresStores({ pool, schema: 'prep_on_2' });
      const names = new Set<string | undefined>();
      sent.length = 0;
      await stores.store.get('x', 'alice');
      await other.store.get('x', 'alice');
      for (const s of sent) names.add(s.name);
      expect(names.size).toBe(2);
    } finally {
      await pool.end();
    }
  });

  it('with preparedStatements false no statement is named (for a pooler in transaction mode)', async () => {
    const { pool, sent } = recordingPool();
    try {
      const stores = await createPostgresStores({ pool, schema: 'prep_off', preparedStatements: false });
      await stores.ledger.credit('bob', 5);
      expect(await stores.ledger.reserve('bob', 'g1', 1, 1_000)).toBe('ok');
      await stores.store.get('g1', 'bob');
      expect(sent.length).toBeGreaterThan(0);
      expect(sent.filter((s) => s.name !== undefined)).toEqual([]);
    } finally {
      await pool.end();
    }
  });

  it('a table changed under a prepared statement: the statement is prepared again, alone or in a transaction', async () => {
    const { pool, sent } = recordingPool();
    try {
      const d = new PgDatabase(pool, 'prep_alter');
      await d.query(`CREATE SCHEMA ${d.s}`);
      await d.query(`CREATE TABLE ${d.s}.t (id int PRIMARY KEY, a text)`);
      await d.query(`INSERT INTO ${d.s}.t VALUES (1, 'one')`);
      const select = `SELECT * FROM ${d.s}.t WHERE id = $1`;
      expect((await d.query(select, [1])).rows).toEqual([{ id: 1, a: 'one' }]);
      const first = sent.at(-1)!.name;
      // The result type of `SELECT *` changes: Postgres refuses the cached plan on this connection.
      await d.query(`ALTER TABLE ${d.s}.t ADD COLUMN b int`);
      expect((await d.query(select, [1])).rows).toEqual([{ id: 1, a: 'one', b: null }]);
      const second = sent.at(-1)!.name;
      expect(second).not.toBe(first);

      await d.query(`ALTER TABLE ${d.s}.t ADD COLUMN c int`);
      const rows = await d.transaction(async (tx) => (await tx.query(select, [1])).rows);
      expect(rows).toEqual([{ id: 1, a: 'one', b: null, c: null }]);
      expect(sent.at(-2)!.name).not.toBe(second);
    } finally {
      await pool.end();
    }
  });
});
