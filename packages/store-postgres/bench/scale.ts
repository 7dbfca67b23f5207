/**
 * Does the Postgres store stay as fast with a million generations as with a thousand?
 *
 * Creates a throwaway database, fills it to each size with generate_series (mostly finished history plus a fixed
 * backlog of 100 pending generations, 10k accounts, one settled reserve per generation), then times, one call at a
 * time from one client: get (owner-scoped read by id), insert, create (reserve + insert, what POST /v1/generations
 * does in the database) and listUnfinished(100) (the recovery scan). Prints p50/p99 per size and large/small ratios.
 *
 *   cd packages/store-postgres && npx tsx bench/scale.ts [--small 1000] [--large 1000000] [--samples 2000]
 *
 * Connects to DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres) only to create and drop its database.
 */
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { createPostgresStores, type PostgresStores } from '../src/index.js';

const { values: args } = parseArgs({
  options: {
    small: { type: 'string', default: '1000' },
    large: { type: 'string', default: '1000000' },
    samples: { type: 'string', default: '2000' },
  },
});
const SMALL = Number(args.small);
const LARGE = Number(args.large);
const SAMPLES = Number(args.samples);
const BACKLOG = 100;
const USERS = 10_000;
const T0 = 1_700_000_000_000;

const adminUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

interface Stats {
  p50: number;
  p99: number;
}

function stats(samplesMs: number[]): Stats {
  const sorted = [...samplesMs].sort((a, b) => a - b);
  const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
  return { p50: at(0.5), p99: at(0.99) };
}

/** The event a create appends (as core's Lifecycle writes it). */
const CREATED = { type: 'created' as const, data: { modelId: 'model-a' } };

async function time(n: number, fn: (i: number) => Promise<unknown>): Promise<Stats> {
  for (let i = 0; i < Math.min(200, n); i++) await fn(i); // warm the pool, plan cache and buffers
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const start = process.hrtime.bigint();
    await fn(i);
    out.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  return stats(out);
}

/** Tops the tables up to `total` generations with generate_series; rows are numbered from `from`. */
async function fill(pool: pg.Pool, from: number, total: number): Promise<void> {
  const s = '"bench"';
  const chunk = 250_000;
  for (let lo = from; lo <= total; lo += chunk) {
    const hi = Math.min(total, lo + chunk - 1);
    await pool.query(
      `INSERT INTO ${s}.generations (id, owner_id, model_id, settings, status, reserved, price, claims,
         created_at, updated_at, finished_at, result_key)
       SELECT substr(md5(i::text), 1, 22), 'user-' || (i % $4), 'model-a', '{"prompt":"a cat on a mat"}',
         CASE WHEN i % 10 = 0 THEN 'failed' ELSE 'completed' END, 10, 10, 1,
         $1::bigint + i, $1::bigint + i + 5000, $1::bigint + i + 5000, 'blob-' || i
       FROM generate_series($2::int, $3::int) AS i`,
      [T0, lo, hi, USERS],
    );
    await pool.query(
      `INSERT INTO ${s}.reserves (generation_id, user_id, amount, state, charged, created_at, settled_at)
       SELECT substr(md5(i::text), 1, 22), 'user-' || (i % $4), 10, 'settled', 10, $1::bigint + i, $1::bigint + i + 5000
       FROM generate_series($2::int, $3::int) AS i`,
      [T0, lo, hi, USERS],
    );
  }
  // What autovacuum would have done on a table that grew this way.
  await pool.query(`VACUUM ANALYZE ${s}.generations`);
  await pool.query(`VACUUM ANALYZE ${s}.reserves`);
}

async function measure(stores: PostgresStores, size: number): Promise<Record<string, Stats>> {
  const ids = Array.from({ length: SAMPLES }, () => 1 + Math.floor(Math.random() * size));
  const owners = new Map<number, string>();
  const { rows } = await stores.pool.query<{ i: number; id: string }>(
    `SELECT i, substr(md5(i::text), 1, 22) AS id FROM unnest($1::int[]) AS i`,
    [ids],
  );
  const idOf = new Map(rows.map((r) => [r.i, r.id]));
  for (const i of ids) owners.set(i, `user-${i % USERS}`);

  const get = await time(SAMPLES, (k) => stores.store.get(idOf.get(ids[k]!)!, owners.get(ids[k]!)!));
  const insert = await time(SAMPLES, () =>
    stores.store.insert(
      {
        id: randomBytes(16).toString('base64url'),
        ownerId: `user-${Math.floor(Math.random() * USERS)}`,
        modelId: 'model-a',
        settings: { prompt: 'a cat on a mat' },
        status: 'pending',
        reserved: 10,
        createdAt: Date.now(),
      },
      CREATED,
    ),
  );
  const create = await time(SAMPLES, async () => {
    const id = randomBytes(16).toString('base64url');
    const user = `user-${Math.floor(Math.random() * USERS)}`;
    if ((await stores.ledger.reserve(user, id, 1)) !== 'ok') throw new Error('bench account ran dry');
    await stores.store.insert({ id, ownerId: user, modelId: 'model-a', settings: { prompt: 'p' }, status: 'pending', reserved: 1, createdAt: Date.now() }, CREATED);
  });
  const recovery = await time(Math.min(SAMPLES, 500), async () => {
    const list = await stores.store.listUnfinished(BACKLOG);
    if (list.length !== BACKLOG) throw new Error(`expected ${BACKLOG} unfinished, got ${list.length}`);
  });
  return { get, insert, create, 'listUnfinished(100)': recovery };
}

async function main(): Promise<void> {
  const name = `genservice_bench_${randomBytes(5).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE "${name}"`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  let stores: PostgresStores | undefined;
  try {
    stores = await createPostgresStores({ connectionString: url.toString(), schema: 'bench', poolSize: 4 });
    const version = (await stores.pool.query('SHOW server_version')).rows[0].server_version;
    console.log(`PostgreSQL ${version}, Node ${process.version}, ${SAMPLES} sequential calls per measure`);
    await stores.pool.query(
      `INSERT INTO "bench".accounts (user_id, balance) SELECT 'user-' || i, 1e9 FROM generate_series(0, $1::int - 1) AS i`,
      [USERS],
    );
    for (let i = 0; i < BACKLOG; i++) {
      await stores.store.insert({ id: `backlog-${i}`, ownerId: 'user-0', modelId: 'model-a', settings: {}, status: 'pending', reserved: 1, createdAt: T0 - 1000 + i }, CREATED);
    }

    const results: Array<{ size: number; r: Record<string, Stats> }> = [];
    let filled = 0;
    for (const size of [SMALL, LARGE]) {
      const started = Date.now();
      await fill(stores.pool, filled + 1, size);
      filled = size;
      const { rows } = await stores.pool.query(`SELECT count(*)::int AS n FROM "bench".generations`);
      console.log(`filled to ${rows[0].n} generations in ${((Date.now() - started) / 1000).toFixed(1)} s`);
      results.push({ size, r: await measure(stores, size) });
    }

    const [small, large] = results as [(typeof results)[0], (typeof results)[0]];
    const pad = (v: string, n: number): string => v.padStart(n);
    console.log(
      `\n${'operation'.padEnd(22)}${pad(`p50 @${SMALL}`, 14)}${pad(`p99 @${SMALL}`, 14)}` +
        `${pad(`p50 @${LARGE}`, 16)}${pad(`p99 @${LARGE}`, 16)}${pad('p50 ratio', 11)}${pad('p99 ratio', 11)}`,
    );
    for (const op of Object.keys(small.r)) {
      const a = small.r[op]!;
      const b = large.r[op]!;
      console.log(
        `${op.padEnd(22)}${pad(`${a.p50.toFixed(3)} ms`, 14)}${pad(`${a.p99.toFixed(3)} ms`, 14)}` +
          `${pad(`${b.p50.toFixed(3)} ms`, 16)}${pad(`${b.p99.toFixed(3)} ms`, 16)}` +
          `${pad((b.p50 / a.p50).toFixed(2), 11)}${pad((b.p99 / a.p99).toFixed(2), 11)}`,
      );
    }
  } finally {
    await stores?.close();
    await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    await admin.end();
  }
}

await main();
