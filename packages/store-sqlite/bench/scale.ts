// How get-by-id, create and the recovery scan behave as the table grows from 1k to 1M generations.
// Run: npx tsx packages/store-sqlite/bench/scale.ts [--cache-mib N] [--quick (20k rows instead of 1M)]
//   from the repo root; about half a minute and ~250 MB of temp disk. --cache-mib sets SQLite's page cache
//   (default 2 MiB) to show how much of the 1M-row cost is pages missing from it rather than tree depth.
//
// Imports the modules directly, not the package entry (core resolves from source through the repo's tsconfig paths).
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openSqliteDatabase } from '../src/database.js';
import { SqliteGenerationStore } from '../src/generation-store.js';

const SIZES = process.argv.includes("--quick") ? [1_000, 20_000] : [1_000, 1_000_000];
const BATCH = 10_000;
const GET_SAMPLES = 5_000;
const CREATE_SAMPLES = 2_000;
const SCAN_SAMPLES = 500;
/** Unfinished rows are a fixed handful, as in production: nearly everything stored has finished. */
const UNFINISHED = 200;

interface Stats {
  p50: number;
  p99: number;
}

const newId = (): string => randomBytes(16).toString('base64url');
const CREATED = { type: 'created', data: { modelId: 'demo-image' } } as const;

function percentiles(samplesNs: bigint[]): Stats {
  const us = samplesNs.map((n) => Number(n) / 1000).sort((a, b) => a - b);
  const at = (q: number): number => us[Math.min(us.length - 1, Math.floor(q * us.length))]!;
  return { p50: at(0.5), p99: at(0.99) };
}

async function time(samples: number, op: (i: number) => Promise<unknown>): Promise<Stats> {
  for (let i = 0; i < Math.min(200, samples); i++) await op(i); // warm the statement and page caches
  const out: bigint[] = [];
  for (let i = 0; i < samples; i++) {
    const start = process.hrtime.bigint();
    await op(i);
    out.push(process.hrtime.bigint() - start);
  }
  return percentiles(out);
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'genservice-scale-'));
  const filename = join(dir, 'scale.db');
  const db = openSqliteDatabase({ filename });
  const cacheArg = process.argv.indexOf('--cache-mib');
  const cacheMib = cacheArg > 0 ? Number(process.argv[cacheArg + 1]) : 2;
  // Negative cache_size is in KiB.
  if (cacheArg > 0) db.pragma(`cache_size = ${-Math.round(cacheMib * 1024)}`);
  const store = new SqliteGenerationStore(db);
  // Bulk rows go in finished: a real table is mostly history. A fixed set stays pending for the recovery scan.
  const bulk = db.prepare(
    `INSERT INTO generations (id, owner_id, model_id, settings, status, reserved, price, result_key, claims,
                              created_at, updated_at, finished_at)
     VALUES (?, ?, 'demo-image', ?, 'completed', 10, 10, ?, 1, ?, ?, ?)`,
  );
  const fill = db.transaction((from: number, to: number, ids: string[]) => {
    for (let i = from; i < to; i++) {
      const id = newId();
      const t = 1_700_000_000_000 + i * 1000;
      bulk.run(id, `user-${i % 1000}`, JSON.stringify({ prompt: `a watercolour fox number ${i}`, size: '1024x1024' }), `blobs/${id}`, t, t, t + 5000);
      if (ids.length < 100_000) ids.push(id);
      else ids[Math.floor(Math.random() * ids.length)] = id; // reservoir-ish sample of ids to read back
    }
  });

  const ids: string[] = [];
  let stored = 0;
  for (let i = 0; i < UNFINISHED; i++) {
    await store.insert({ id: newId(), ownerId: 'u', modelId: 'm', settings: {}, status: 'pending', reserved: 1, createdAt: i }, CREATED);
  }
  const rows: Array<Record<string, string | number>> = [];
  for (const size of SIZES) {
    const started = Date.now();
    while (stored < size) {
      const to = Math.min(size, stored + BATCH);
      fill(stored, to, ids);
      stored = to;
    }
    const fillSeconds = (Date.now() - started) / 1000;
    const measuredAt = stored + UNFINISHED;
    const get = await time(GET_SAMPLES, (i) => store.getById(ids[(i * 7919) % ids.length]!));
    const create = await time(CREATE_SAMPLES, (i) =>
      store.insert({ id: newId(), ownerId: `user-${i % 1000}`, modelId: 'demo-image', settings: { prompt: 'bench' }, status: 'pending', reserved: 10, createdAt: Date.now() }, CREATED),
    );
    // The created rows are pending; finish them so the recovery scan keeps seeing the same UNFINISHED rows.
    db.prepare(`UPDATE generations SET status = 'completed', finished_at = updated_at WHERE status = 'pending' AND model_id = 'demo-image'`).run();
    stored += CREATE_SAMPLES;
    const scan = await time(SCAN_SAMPLES, () => store.listUnfinished(100));
    rows.push({
      generations: measuredAt,
      'fill s': fillSeconds.toFixed(1),
      'get p50 µs': get.p50.toFixed(1),
      'get p99 µs': get.p99.toFixed(1),
      'create p50 µs': create.p50.toFixed(1),
      'create p99 µs': create.p99.toFixed(1),
      'listUnfinished(100) p50 µs': scan.p50.toFixed(1),
      'listUnfinished(100) p99 µs': scan.p99.toFixed(1),
    });
  }
  db.pragma('wal_checkpoint(TRUNCATE)');
  const fileMb = statSync(filename).size / 1e6;
  db.close();
  rmSync(dir, { recursive: true, force: true });

  console.log(`SQLite WAL, synchronous=NORMAL, page cache ${cacheMib} MiB; file at the end: ${fileMb.toFixed(0)} MB`);
  console.table(rows);
  const [small, large] = rows as [Record<string, number | string>, Record<string, number | string>];
  const ratio = (key: string): string => (Number(large[key]) / Number(small[key])).toFixed(2);
  console.log(
    `ratio ${SIZES[1]! / 1000}k/${SIZES[0]! / 1000}k: get p50 ${ratio('get p50 µs')}, get p99 ${ratio('get p99 µs')}, ` +
      `create p50 ${ratio('create p50 µs')}, create p99 ${ratio('create p99 µs')}, ` +
      `listUnfinished p50 ${ratio('listUnfinished(100) p50 µs')}, p99 ${ratio('listUnfinished(100) p99 µs')}`,
  );
}

await main();
