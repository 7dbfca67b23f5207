/**
 * Where the time of "Postgres end to end" goes on the server: each side at C clients, with the database server's CPU
 * per generation (the backends of the run's database, from /proc) and what its sessions wait on (pg_stat_activity
 * sampled every few ms). Not part of `pnpm bench`:
 *
 *   cd bench && node --conditions=@genservice/source --import tsx pg-e2e-waits.ts [n] [clients]
 */
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { throwawayDatabase } from './sections/stores.js';
import { oursPgE2E, rawPgE2E } from './sections/pg-e2e.js';

const n = Number(process.argv[2] ?? 3000);
const clients = Number(process.argv[3] ?? 32);
const TICK = 100; // clock ticks per second (/proc)

function cpuOf(pid: number): number {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(f[11]) + Number(f[12])) / TICK;
  } catch {
    return 0;
  }
}

// Queries in flight on this process's connections, sampled with the server's view.
let inFlight = 0;
const clientQuery = pg.Client.prototype.query;
pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
  const r = (clientQuery as (...a: unknown[]) => unknown).apply(this, args);
  if (r && typeof (r as Promise<unknown>).then === 'function') {
    inFlight++;
    (r as Promise<unknown>).then(() => inFlight--, () => inFlight--);
  }
  return r;
} as typeof clientQuery;

const db = await throwawayDatabase();
const name = new URL(db.url).pathname.slice(1);
const watch = new pg.Client({ connectionString: 'postgres://postgres@127.0.0.1:5432/postgres' });
await watch.connect();
try {
  const preparedRaw = (url: string, schema: string, count: number, c: number) => rawPgE2E(url, schema, count, c, true);
  const sides = [['ours', oursPgE2E], ['hand-written', rawPgE2E], ['hand-written, prepared', preparedRaw]] as const;
  for (const [side, run] of [...sides, ...sides]) {
    await run(db.url, `w${side.slice(0, 4).replace(/\W/g, '')}${Math.random().toString(36).slice(2, 6)}`, 300, clients);
    const waits = new Map<string, number>();
    const seen = new Map<number, [number, number]>();
    let samples = 0;
    let flying = 0;
    const elu0 = performance.eventLoopUtilization();
    let stop = false;
    const sampler = (async () => {
      while (!stop) {
        const { rows } = await watch.query<{ pid: number; w: string }>(
          `SELECT pid, coalesce(wait_event_type || ':' || wait_event, 'CPU') || ' ' || state AS w FROM pg_stat_activity WHERE datname = $1`,
          [name],
        );
        samples++;
        flying += inFlight;
        for (const r of rows) {
          const s = seen.get(r.pid);
          if (!s) seen.set(r.pid, [cpuOf(r.pid), 0]);
          else if (samples % 10 === 0) s[1] = cpuOf(r.pid);
          waits.set(r.w, (waits.get(r.w) ?? 0) + 1);
        }
        await new Promise((r) => setTimeout(r, 3));
      }
    })();
    const r = await run(db.url, `m${side.slice(0, 4).replace(/\W/g, '')}${Math.random().toString(36).slice(2, 6)}`, n, clients);
    stop = true;
    const elu = performance.eventLoopUtilization(elu0).utilization;
    await sampler;
    // CPU of each backend between its first and last reading (the pool closes them at the end of the run).
    let cpu = 0;
    for (const [c0, c1] of seen.values()) cpu += Math.max(0, c1 - c0);
    console.log(`${side}, ${clients} client(s): ${r.rate.toFixed(0)} gen/s, node CPU ${r.cpuUs.toFixed(0)} µs/gen, ${r.trips.toFixed(2)} trips/gen, server CPU ~${((cpu * 1e6) / n).toFixed(0)} µs/gen (${seen.size} backends), event loop ${(elu * 100).toFixed(0)} % busy, ${(flying / samples).toFixed(1)} queries in flight`);
    const top = [...waits].sort((a, b) => b[1] - a[1]).slice(0, 8);
    console.log('  sessions per sample: ' + top.map(([w, c]) => `${w} ${(c / samples).toFixed(1)}`).join(', '));
  }
} finally {
  await watch.end();
  await db.drop();
}
