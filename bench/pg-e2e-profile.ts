/**
 * What is left in "Postgres end to end, public API" (bench/notes.md): a CPU profile of ours at 32 clients, the round
 * trips each side makes per generation, and EXPLAIN (ANALYZE, BUFFERS) of every statement of a generation's life on
 * the tables a run left behind. Not part of `pnpm bench`; run it on its own:
 *
 *   cd bench && node --conditions=@genservice/source --import tsx pg-e2e-profile.ts [n] [explain]
 *
 * With `explain`, only the statements (after one run of ours to fill the tables).
 */
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { throwawayDatabase } from './sections/stores.js';
import { oursPgE2E, rawPgE2E, PG_E2E_SQL } from './sections/pg-e2e.js';
import { formatProfile, profileHere } from './lib/profile.js';
import { generationSql, updateSql } from '../packages/store-postgres/src/generation-store.js';
import { ledgerSql } from '../packages/store-postgres/src/ledger.js';

const n = Number(process.argv[2] ?? 3000);
const explainOnly = process.argv[3] === 'explain';
const db = await throwawayDatabase();
try {
  for (const clients of explainOnly ? [] : [1, 32]) {
    for (const [side, run] of [['ours', oursPgE2E], ['hand-written', rawPgE2E]] as const) {
      await run(db.url, `warm_${side.slice(0, 4)}_${clients}`, 300, clients);
      const r = await run(db.url, `count_${side.slice(0, 4)}_${clients}`, n, clients);
      console.log(`${side}, ${clients} client(s): ${r.rate.toFixed(0)} gen/s, node CPU ${r.cpuUs.toFixed(0)} µs/gen, ${r.trips.toFixed(2)} round trips/gen`);
    }
  }
  const file = path.join(os.tmpdir(), `pg-e2e-ours-${Date.now()}.cpuprofile`);
  if (explainOnly) await oursPgE2E(db.url, 'prof', n, 32);
  else console.log(formatProfile(await profileHere(file, `ours, 32 clients, ${n} generations`, () => oursPgE2E(db.url, 'prof', n, 32))));

  // The statements of one generation's life, on the tables the profiled run left (n generations, 64 users).
  const pool = new pg.Pool({ connectionString: db.url, max: 2 });
  pool.on('error', () => {});
  const s = '"prof"';
  const g = generationSql(s);
  const l = ledgerSql(s);
  const now = Date.now();
  const explain = async (label: string, sql: string, values: unknown[], before: string[] = []) => {
    const c = await pool.connect();
    try {
      await c.query('BEGIN');
      for (const b of before) await c.query(b);
      const { rows } = await c.query(`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ${sql}`, values);
      console.log(`\n#### ${label}\n\n\`\`\`\n${rows.map((r) => r['QUERY PLAN']).join('\n')}\n\`\`\``);
    } finally {
      await c.query('ROLLBACK');
      c.release();
    }
  };
  const setup = [
    `INSERT INTO ${s}.reserves (generation_id, user_id, amount, created_at) VALUES ('x-new', 'user-1', 1, ${now})`,
    `UPDATE ${s}.accounts SET balance = balance - 1, reserved = reserved + 1 WHERE user_id = 'user-1'`,
    `INSERT INTO ${s}.generations (id, owner_id, model_id, settings, status, reserved, claims, created_at, updated_at, last_seq)
       VALUES ('x-new', 'user-1', 'bench-text', '{}', 'pending', 1, 0, ${now}, ${now}, 1)`,
  ];
  await explain('reserve (one statement: debit, in-flight count, reserve row)', l.reserveOne, ['x-res', 'user-1', 1, now, 'bench-text', 10_000_000, null]);
  await explain('insert with the in-flight cap (after the owner lock)', g.insert, ['x-ins', 'user-1', 'bench-text', '{}', 1, now, null, 10_000_000, null, 'pending', 'created', '{"modelId":"bench-text"}']);
  const claim = { expect: { status: ['pending'] }, set: { status: 'processing', claims: 1, startedAt: now, leaseOwner: 'i', leaseExpiresAt: now + 30_000 }, event: { type: 'processing', data: { claim: 1 } }, now } as const;
  const cs = updateSql(s, claim as never);
  const cv = cs.values('x-new', claim as never);
  await explain('claim from pending (update)', cs.text, cv, setup);
  const complete = { expect: { status: ['processing'], lease: { heldBy: 'i' } }, set: { status: 'completed', price: 1, finishedAt: now, resultText: 'r' }, event: { type: 'completed', data: { price: 1 } }, now } as const;
  const ps = updateSql(s, complete as never);
  const pv = ps.values('x-new', complete as never);
  await explain('complete (update)', ps.text, pv, [...setup, `UPDATE ${s}.generations SET status = 'processing', lease_owner = 'i', lease_expires_at = ${now + 30_000} WHERE id = 'x-new'`]);
  await explain('settle', l.settle, ['x-new', 1, now], setup);
  await explain('readFeed (a page of 1000 from the start)', g.readFeed, ['0', '0', 1000]);
  await explain('feedHead', g.feedHead, []);
  const raw = PG_E2E_SQL(s);
  await explain('hand-written claim', raw.claim, ['x-new', now, 'raw', now + 30_000], setup);
  await explain('hand-written reserve', raw.reserve, ['user-1', 1, 10_000_000]);
  await pool.end();
} finally {
  await db.drop();
}
