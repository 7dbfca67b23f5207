/**
 * Usage reads (`GET /v1/usage`, i.e. `ledger.usage`) with 1k and with 1M settled generations of one user, on the
 * in-memory, SQLite and Postgres ledgers. The generations are spread over the last 365 days, 10 models and 4 keys;
 * the reads are the last 30 days by day (the playground's chart) and the whole year by model.
 *
 * The in-memory ledger is filled through reserve + settle. The SQL ledgers are filled in bulk: the reserves table
 * with every settled generation, and the daily rollup computed from it by the same grouping settle keeps it in
 * (what migration 6 / 4 does for older rows), and the spans of 8 and 64 days from that (migration 11 / 13), so the read
 * sees exactly what a million settles would leave.
 */
import path from 'node:path';
import pg from 'pg';
import { MemoryLedger } from '@genservice/core';
import type { Ledger, UsageQuery } from '@genservice/core/ports';
import { createPostgresStores } from '@genservice/store-postgres';
import { createSqliteStores } from '@genservice/store-sqlite';
import type { Latency } from './scale.js';
import { throwawayDatabase } from './stores.js';

const DAY_MS = 86_400_000;
const USER = 'usage-user';
const MODELS = 10;
const KEYS = 4;
/** Today, fixed: the figures do not depend on the day the bench runs. */
const TODAY = Date.UTC(2026, 10, 25);

function day(offset: number): string {
  return new Date(TODAY - offset * DAY_MS).toISOString().slice(0, 10);
}

const QUERIES: UsageQuery[] = [
  { from: day(29), to: day(0), groupBy: 'day' },
  { from: day(364), to: day(0), groupBy: 'model' },
];

function summarize(samples: number[]): Latency {
  const sorted = Float64Array.from(samples).sort();
  return {
    meanUs: sorted.reduce((a, b) => a + b, 0) / sorted.length,
    p50Us: sorted[Math.floor(sorted.length * 0.5)]!,
    p99Us: sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))]!,
  };
}

/** The i-th generation: its settle time, model and key. */
function nth(i: number, count: number): { at: number; model: string; key: string } {
  return { at: TODAY + 12 * 3_600_000 - Math.floor((i * 365) / count) * DAY_MS, model: `model-${i % MODELS}`, key: `key-${i % KEYS}` };
}

/** Per query: the last 30 days by day, and the year by model. */
export interface UsageLatency {
  month: Latency;
  year: Latency;
}

async function timeReads(ledger: Ledger, samples: number, expectTotal: number): Promise<UsageLatency> {
  const all = await ledger.usage(USER, { from: day(364), to: day(0), groupBy: 'key' });
  if (all.total.count !== expectTotal) throw new Error(`usage bench: ${all.total.count} counted, ${expectTotal} stored`);
  const out: UsageLatency = {} as UsageLatency;
  for (const [name, query] of [['month', QUERIES[0]!], ['year', QUERIES[1]!]] as const) {
    for (let i = 0; i < 100; i++) await ledger.usage(USER, query);
    const times: number[] = [];
    for (let i = 0; i < samples; i++) {
      const t0 = process.hrtime.bigint();
      await ledger.usage(USER, query);
      times.push(Number(process.hrtime.bigint() - t0) / 1000);
    }
    out[name] = summarize(times);
  }
  return out;
}

export interface UsageScale {
  small: number;
  large: number;
  memory: { small: UsageLatency; large: UsageLatency };
  sqlite: { small: UsageLatency; large: UsageLatency };
  postgres: { small: UsageLatency; large: UsageLatency };
}

async function memoryLedger(count: number): Promise<Ledger> {
  const ledger = new MemoryLedger({ balances: { [USER]: count * 3 } });
  for (let i = 0; i < count; i++) {
    const { at, model, key } = nth(i, count);
    await ledger.reserve(USER, `g${i}`, 3, at, { modelId: model, keyId: key });
    await ledger.settle(`g${i}`, 2, at);
  }
  return ledger;
}

const ROLLUP_SQL = `INSERT INTO usage_daily (user_id, day, model_id, key_id, count, tokens)
  SELECT user_id, CAST(settled_at / 86400000 AS INTEGER), model_id, key_id, count(*), total(charged)
    FROM reserves WHERE state = 'settled' GROUP BY 1, 2, 3, 4`;
/** The spans of 8 and 64 days from the daily rollup, as settle keeps them (and migration 13 / 11 fills them). */
const SPANS_SQL = (s: string, sum: string) => `INSERT INTO ${s}usage_spans (user_id, span, start, model_id, key_id, count, tokens)
  SELECT d.user_id, sp.span, d.day - d.day % sp.span, d.model_id, d.key_id, sum(d.count), ${sum}(d.tokens)
    FROM ${s}usage_daily d, (SELECT 8 AS span UNION ALL SELECT 64) sp GROUP BY 1, 2, 3, 4, 5`;

async function sqliteScale(dir: string, count: number, samples: number): Promise<UsageLatency> {
  const stores = createSqliteStores({ filename: path.join(dir, `usage-${count}.db`) });
  try {
    const insert = stores.db.prepare(
      `INSERT INTO reserves (generation_id, user_id, amount, state, charged, created_at, settled_at, model_id, key_id)
       VALUES (?, ?, 3, 'settled', 2, ?, ?, ?, ?)`,
    );
    stores.db.exec(`INSERT INTO accounts (user_id, balance, settled) VALUES ('${USER}', ${count}, ${count * 2})`);
    stores.db.transaction(() => {
      for (let i = 0; i < count; i++) {
        const { at, model, key } = nth(i, count);
        insert.run(`g${i}`, USER, at - 1, at, model, key);
      }
      stores.db.exec(ROLLUP_SQL);
      stores.db.exec(SPANS_SQL('', 'total'));
      stores.db.exec('INSERT INTO usage_days (user_id, day, count, tokens) SELECT user_id, day, sum(count), total(tokens) FROM usage_daily GROUP BY 1, 2');
    })();
    stores.db.exec('ANALYZE');
    return await timeReads(stores.ledger, samples, count);
  } finally {
    await stores.close();
  }
}

async function postgresScale(url: string, count: number, samples: number): Promise<UsageLatency> {
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  const schema = `usage_${count}`;
  try {
    const stores = await createPostgresStores({ pool, schema });
    const s = `"${schema}"`;
    // Same spread as nth(): day by position, model and key by remainder.
    await pool.query(
      `INSERT INTO ${s}.reserves (generation_id, user_id, amount, state, charged, created_at, settled_at, model_id, key_id)
       SELECT 'g' || i, $1, 3, 'settled', 2, t - 1, t, 'model-' || (i % ${MODELS}), 'key-' || (i % ${KEYS})
         FROM generate_series(0, $2::bigint - 1) AS i,
              LATERAL (SELECT $3::bigint + 43200000 - floor(i * 365.0 / $2::bigint)::bigint * 86400000 AS t) AS x`,
      [USER, count, TODAY],
    );
    await pool.query(
      `INSERT INTO ${s}.usage_daily (user_id, day, model_id, key_id, count, tokens)
       SELECT user_id, (settled_at / 86400000)::integer, model_id, key_id, count(*), sum(charged)
         FROM ${s}.reserves WHERE state = 'settled' GROUP BY 1, 2, 3, 4`,
    );
    await pool.query(SPANS_SQL(`${s}.`, 'sum'));
    await pool.query(`ANALYZE ${s}.usage_daily`);
    await pool.query(`ANALYZE ${s}.usage_spans`);
    return await timeReads(stores.ledger, samples, count);
  } finally {
    await pool.end();
  }
}

export async function usageScale(dir: string, small: number, large: number, samples: number): Promise<UsageScale> {
  const out = { small, large } as UsageScale;
  out.memory = {
    small: await timeReads(await memoryLedger(small), samples, small),
    large: await timeReads(await memoryLedger(large), samples, large),
  };
  out.sqlite = { small: await sqliteScale(dir, small, samples), large: await sqliteScale(dir, large, samples) };
  const db = await throwawayDatabase();
  try {
    out.postgres = { small: await postgresScale(db.url, small, samples), large: await postgresScale(db.url, large, samples) };
  } finally {
    await db.drop();
  }
  return out;
}
