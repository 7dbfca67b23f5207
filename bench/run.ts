/**
 * `pnpm bench`: genservice against the bare frameworks, raw p-queue, the raw drivers and raw BullMQ, measured side
 * by side in one run on this machine. Prints the table, and writes docs/benchmarks.md, docs/benchmarks.svg and
 * bench/results.json (the figures behind them).
 *
 *   pnpm bench                          everything (about 10-15 minutes)
 *   pnpm bench -- --only http,runner    some sections; the others keep their figures from bench/results.json
 *   pnpm bench -- --quick               short durations, smaller sizes; prints only (add --write to write the docs)
 *   pnpm bench -- --no-profile          skip profiling the missed targets
 *   pnpm bench -- --no-wait             start at once, however busy the machine is (default: wait up to 5 min for quiet)
 *   pnpm bench -- --report              measure nothing: rewrite the docs from bench/results.json and bench/notes.md
 *   pnpm bench -- --only stores --part postgres-e2e
 *                                       only one part of a section (stores: sqlite, postgres, postgres-e2e, bullmq,
 *                                       pgboss; scale: stores, usage, batch, memory); its other rows keep their
 *                                       figures
 *
 * Started by scripts/bench.mjs as `node --expose-gc --conditions=@genservice/source --import tsx bench/run.ts`.
 */
import { execSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { BENCH_DIR, canPin, nextMessage, spawnTs, stopChild } from './lib/proc.js';
import { formatProfile, profileHere, summarizeFile } from './lib/profile.js';
import { consoleTable, evaluate, markdownTable, svgChart } from './lib/report.js';
import type { HttpCaseResult, ProfileSummary, Row } from './lib/types.js';
import type { CaseName, Framework, HttpResults } from './http/load.js';
import { oursRunner, rawRunner, CONCURRENCY } from './sections/runner.js';
import { oursSqliteE2E, rawSqliteE2E } from './sections/sqlite-e2e.js';
import { oursPgE2E, rawPgE2E, PG_E2E_POOL, PG_E2E_RUNNER, PG_E2E_USERS, type E2EResult } from './sections/pg-e2e.js';
import {
  cleanRedisPrefix,
  oursBullmq,
  oursSqlite,
  pgBench,
  rawBullmq,
  rawSqliteRun,
  tempDir,
  throwawayDatabase,
  PG_CONCURRENCY,
  PG_POOL_SIZE,
  lastCpuUsPerOp,
  BULL_CONCURRENCY,
  REDIS_URL,
} from './sections/stores.js';
import { memoryPerGeneration, scaleMemory, scaleSqlite, type ScaleResult } from './sections/scale.js';
import { pushBench } from './sections/push.js';
import { oursPgBoss, rawPgBoss, rawPgBossE2E, servicePgBossE2E, PGBOSS_CONCURRENCY, PGBOSS_POOL } from './sections/pgboss.js';
import { usageScale } from './sections/usage.js';
import { batchBench, BATCH_SIZE } from './sections/batch.js';
import { telemetryBench } from './sections/telemetry.js';
import type { TelemetryHttpResult } from './http/telemetry-load.js';

type Section = 'http' | 'runner' | 'stores' | 'scale' | 'push' | 'telemetry';
const ALL: Section[] = ['http', 'runner', 'stores', 'scale', 'push', 'telemetry'];
const ROOT = path.resolve(BENCH_DIR, '..');
const DOCS = path.join(ROOT, 'docs');
const RESULTS = path.join(BENCH_DIR, 'results.json');
const PROFILE_DIR = path.join(os.tmpdir(), 'genservice-bench-profiles');

// ------------------------------------------------------------------ options

function parseOptions(argv: string[]): { only: Section[]; part: string | undefined; quick: boolean; write: boolean; profile: boolean; report: boolean; waitQuiet: boolean } {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv.filter((a) => a !== '--'),
      options: {
        only: { type: 'string' },
        part: { type: 'string' },
        quick: { type: 'boolean', default: false },
        write: { type: 'boolean' },
        'no-write': { type: 'boolean' },
        'no-profile': { type: 'boolean', default: false },
        report: { type: 'boolean', default: false },
        'no-wait': { type: 'boolean', default: false },
      },
      strict: true,
    }));
  } catch (error) {
    throw new Error(`${(error as Error).message} (use --only http|runner|stores|scale|push|telemetry, --quick, --write, --no-profile, --no-wait, --report)`);
  }
  let only: Section[] = ALL;
  if (values.only !== undefined) {
    const parts = values.only.split(/[,|]/).filter(Boolean);
    for (const p of parts) if (!ALL.includes(p as Section)) throw new Error(`--only takes ${ALL.join('|')}, got "${p}"`);
    if (parts.length === 0) throw new Error('--only needs a value');
    only = parts as Section[];
  }
  const write = values['no-write'] ? false : values.write;
  return {
    only,
    part: values.part,
    quick: values.quick,
    write: write ?? (values.report || !values.quick),
    profile: !values['no-profile'],
    report: values.report,
    waitQuiet: !values['no-wait'] && !values.quick,
  };
}

const opts = parseOptions(process.argv.slice(2));
const Q = opts.quick;
const S = {
  http: { duration: Q ? 1 : 3, warmup: Q ? 0.5 : 1.5, rounds: Q ? 1 : 3, pipelinings: [1, 10], connections: 10 },
  runner: { n: Q ? 10_000 : 100_000, warm: Q ? 2_000 : 10_000, rounds: Q ? 1 : 3 },
  sqliteE2E: { n: Q ? 5_000 : 20_000, warm: Q ? 1_000 : 3_000, rounds: Q ? 1 : 3 },
  sqlite: { n: Q ? 5_000 : 20_000, warm: Q ? 1_000 : 3_000, rounds: Q ? 1 : 3 },
  pg: { n: Q ? 1_000 : 5_000, warm: Q ? 200 : 1_000, rounds: Q ? 1 : 3 },
  pgE2E: { n: Q ? 1_000 : 4_000, warm: Q ? 200 : 500, rounds: Q ? 1 : 3, clients: [1, 32] as const },
  bull: { n: Q ? 1_000 : 3_000, warm: Q ? 200 : 500, rounds: Q ? 1 : 3 },
  pgboss: { n: Q ? 1_000 : 3_000, warm: Q ? 200 : 500, rounds: Q ? 1 : 3 },
  pgbossE2E: { n: Q ? 1_000 : 4_000, warm: Q ? 200 : 500, rounds: Q ? 1 : 3, clients: 32 },
  scale: { small: 1_000, large: Q ? 100_000 : 1_000_000, gets: Q ? 5_000 : 20_000, creates: Q ? 2_000 : 5_000, mem: Q ? 20_000 : 100_000 },
  profileSeconds: Q ? 2 : 4,
};

const log = (...a: unknown[]): void => console.log(...a);
/** Whether a part of a section runs (`--part`: only those named; without it, all). */
const runs = (part: string): boolean => opts.part === undefined || opts.part === part;
/** Best of the alternated rounds: the machine may be shared, and other work only ever slows a round down. */
const best = (xs: number[]): number => Math.max(...xs);

/** 1-minute load average, rounded. */
const load1 = (): number => Math.round(os.loadavg()[0]! * 100) / 100;

/**
 * Waits (at most 5 minutes, checking every 10 s) for the 1-minute load average to fall below 1, so that the run
 * does not share the two cores with a test suite. Goes on anyway after that; the load is recorded in the document.
 */
async function waitForQuiet(): Promise<void> {
  for (let i = 0; i < 30 && load1() >= 1; i++) {
    if (i === 0) log(`[bench] load average ${load1()}: waiting up to 5 min for the machine to be quiet (--no-wait to skip)`);
    await new Promise((r) => setTimeout(r, 10_000));
  }
  log(`[bench] starting at load average ${load1()}`);
}

// ------------------------------------------------------------------ HTTP

const FRAMEWORKS: Framework[] = ['express', 'fastify', 'koa'];
const FW_TITLE: Record<Framework, string> = { express: 'Express', fastify: 'Fastify', koa: 'Koa' };

function httpMeasure(r: HttpCaseResult) {
  return { value: r.rps, unit: 'req/s' as const, p50Ms: r.p50, p99Ms: r.p99 };
}

function httpRows(results: HttpResults): Row[] {
  const rows: Row[] = [];
  for (const fw of FRAMEWORKS) {
    const per = results[fw];
    if (!per) continue;
    for (const p of S.http.pipelinings) {
      const c = per[String(p)];
      if (!c) continue;
      const F = FW_TITLE[fw];
      const add = (key: string, name: string, ours: string, base: string, baseLabel: string, bound: number | undefined): void => {
        const o = c[ours]!;
        const b = c[base]!;
        rows.push(
          evaluate({
            id: `http.${fw}.${key}.p${p}`,
            section: 'http',
            name: `${F} ${name} (pipelining ${p})`,
            ours: httpMeasure(o),
            oursLabel: 'ours',
            base: httpMeasure(b),
            baseLabel,
            ratio: o.rps / b.rps,
            ...(bound !== undefined ? { target: { kind: 'min' as const, bound } } : {}),
          }),
        );
      };
      add('get', 'GET /v1/generations/:id', 'get.ours', 'get.bare', 'bare', 0.9);
      // Issue 15: the runner on and every generation measured until completed, against a bare route that validates,
      // stores and completes on the next ticks.
      // Issue 23: the POST (0.70) and models (0.95) targets are retired on Fastify and Koa (measured 0.48-0.60 and
      // 0.91-0.93); the rows are still printed, without a target. The durable paths are where speed matters now.
      // Issue 36: the POST on Fastify has a target again, 0.55 (the bound the issue asks of an in-memory create).
      const retired = fw !== 'express';
      const postBound = fw === 'express' ? 0.7 : fw === 'fastify' ? 0.55 : undefined;
      add('post', 'POST /v1/generations, runner on, until completed', 'post.ours', 'post.bare', 'bare', postBound);
      add('models', 'GET /v1/models', 'models.ours', 'models.bare', 'bare', retired ? undefined : 0.95);
      add('unauth', '401 bad key vs our POST', 'unauth.ours', 'post.ours', 'our POST', 1.0);
      add('invalid', '400 invalid settings vs our POST', 'invalid.ours', 'post.ours', 'our POST', 0.6);
    }
  }
  return rows;
}

async function runHttp(): Promise<Row[]> {
  // `--part express|fastify|koa`: that framework's rows only (the others keep their last figures).
  const frameworks = FRAMEWORKS.filter((fw) => runs(fw));
  if (frameworks.length === 0) throw new Error(`--part for http takes ${FRAMEWORKS.join('|')}, got "${opts.part}"`);
  const plan = { mode: 'measure', frameworks, ...S.http };
  log(`[http] load generator on core 1, servers on core 0${canPin() ? '' : ' (taskset unavailable: not pinned)'}`);
  const child = spawnTs('http/load.ts', { core: 1, args: [JSON.stringify(plan)] });
  try {
    const msg = await nextMessage<{ data: HttpResults }>(child, (m) => m?.type === 'result', 40 * 60_000);
    return httpRows(msg.data);
  } finally {
    await stopChild(child);
  }
}

async function profileHttp(fw: Framework, c: CaseName, pipelining: number): Promise<ProfileSummary> {
  const file = path.join(PROFILE_DIR, `http-${fw}-${c}-p${pipelining}-${Date.now()}.cpuprofile`);
  const plan = {
    mode: 'profile',
    framework: fw,
    case: c,
    pipelining,
    duration: S.profileSeconds,
    warmup: Q ? 0.5 : 1.5,
    connections: S.http.connections,
    file,
  };
  const child = spawnTs('http/load.ts', { core: 1, args: [JSON.stringify(plan)] });
  try {
    await nextMessage(child, (m) => m?.type === 'result', 5 * 60_000);
  } finally {
    await stopChild(child);
  }
  return summarizeFile(file, `${FW_TITLE[fw]} server, ours, ${c} at pipelining ${pipelining}, ${S.profileSeconds} s of load`);
}

// ------------------------------------------------------------------ runner

async function runRunner(): Promise<Row[]> {
  log(`[runner] warm-up (${S.runner.warm} each)`);
  await oursRunner(S.runner.warm);
  await rawRunner(S.runner.warm);
  const ours: number[] = [];
  const raw: number[] = [];
  for (let round = 0; round < S.runner.rounds; round++) {
    const order = round % 2 === 0 ? (['ours', 'raw'] as const) : (['raw', 'ours'] as const);
    for (const side of order) {
      const v = side === 'ours' ? await oursRunner(S.runner.n) : await rawRunner(S.runner.n);
      (side === 'ours' ? ours : raw).push(v);
      log(`[runner] round ${round + 1} ${side}: ${Math.round(v)} generations/s (${S.runner.n})`);
    }
  }
  const o = best(ours);
  const b = best(raw);
  return [
    evaluate({
      id: 'runner.inprocess',
      section: 'runner',
      name: `Runner: ${S.runner.n / 1000}k no-op generations, concurrency ${CONCURRENCY}`,
      ours: { value: o, unit: 'gen/s' },
      oursLabel: 'service.create + in-process runner',
      base: { value: b, unit: 'gen/s' },
      baseLabel: 'raw p-queue',
      ratio: o / b,
      // No target since issue 15: the end-to-end POST rows (http.*.post) and runner.sqlite replaced it.
    }),
    await runSqliteE2E(),
  ];
}

/** Issue 15: generations created and run to completion on the SQLite stores, against raw better-sqlite3 + p-queue. */
async function runSqliteE2E(): Promise<Row> {
  const { dir, cleanup } = tempDir();
  try {
    log(`[runner] SQLite end to end warm-up (${S.sqliteE2E.warm} each)`);
    await oursSqliteE2E(dir, S.sqliteE2E.warm, 'warm');
    await rawSqliteE2E(dir, S.sqliteE2E.warm, 'warm');
    const ours: number[] = [];
    const raw: number[] = [];
    for (let round = 0; round < S.sqliteE2E.rounds; round++) {
      const order = round % 2 === 0 ? (['ours', 'raw'] as const) : (['raw', 'ours'] as const);
      for (const side of order) {
        const v = side === 'ours' ? await oursSqliteE2E(dir, S.sqliteE2E.n, `r${round}`) : await rawSqliteE2E(dir, S.sqliteE2E.n, `r${round}`);
        (side === 'ours' ? ours : raw).push(v);
        log(`[runner] SQLite e2e round ${round + 1} ${side}: ${Math.round(v)} generations/s (${S.sqliteE2E.n})`);
      }
    }
    const o = best(ours);
    const b = best(raw);
    storeProfiles['runner.sqlite'] = async () => {
      const p = tempDir();
      try {
        return await oursSqliteE2E(p.dir, S.sqliteE2E.n, `prof${Date.now()}`);
      } finally {
        p.cleanup();
      }
    };
    return evaluate({
      id: 'runner.sqlite',
      section: 'runner',
      name: `SQLite end to end: ${S.sqliteE2E.n / 1000}k generations created and completed, concurrency ${CONCURRENCY}`,
      ours: { value: o, unit: 'gen/s' },
      oursLabel: 'service.create + in-process runner on createSqliteStores',
      base: { value: b, unit: 'gen/s' },
      baseLabel: 'raw better-sqlite3 (same statements, same transactions) + p-queue',
      ratio: o / b,
      target: { kind: 'min', bound: 0.8 },
    });
  } finally {
    cleanup();
  }
}

// ------------------------------------------------------------------ stores

async function alternate(
  label: string,
  rounds: number,
  ours: (tag: string) => Promise<number>,
  raw: (tag: string) => Promise<number>,
  cpu?: () => number,
): Promise<{ ours: number; raw: number; oursCpu: number; rawCpu: number }> {
  const o: number[] = [];
  const r: number[] = [];
  const oc: number[] = [];
  const rc: number[] = [];
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? (['ours', 'raw'] as const) : (['raw', 'ours'] as const);
    for (const side of order) {
      const v = side === 'ours' ? await ours(`r${round}`) : await raw(`r${round}`);
      (side === 'ours' ? o : r).push(v);
      const c = cpu?.() ?? NaN;
      (side === 'ours' ? oc : rc).push(c);
      log(`[stores] ${label} round ${round + 1} ${side}: ${Math.round(v)} ops/s${cpu ? `, ${c.toFixed(1)} µs CPU/op in node` : ''}`);
    }
  }
  return { ours: best(o), raw: best(r), oursCpu: Math.min(...oc), rawCpu: Math.min(...rc) };
}

const storeProfiles: Record<string, () => Promise<unknown>> = {};

/**
 * Issue 22: Postgres end to end through the public API (`service.create` to completed) at 1 and 32 clients, against
 * hand-written pg doing the same transactions. Targets: at 32 clients ours / hand-written >= 0.60, and from 1 to 32
 * clients ours gains at least 0.8 of what the hand-written side gains. Every round gets fresh schemas.
 */
async function pgEndToEnd(url: string): Promise<Row[]> {
  let schemas = 0;
  const fresh = (side: string): string => `e2e_${side}_${schemas++}`;
  const at: Record<number, { ours: E2EResult; raw: E2EResult }> = {};
  for (const clients of S.pgE2E.clients) {
    log(`[stores] Postgres end to end warm-up, ${clients} client(s)`);
    await oursPgE2E(url, fresh('ours'), S.pgE2E.warm, clients);
    await rawPgE2E(url, fresh('raw'), S.pgE2E.warm, clients);
    const o: E2EResult[] = [];
    const r: E2EResult[] = [];
    for (let round = 0; round < S.pgE2E.rounds; round++) {
      for (const side of round % 2 === 0 ? (['ours', 'raw'] as const) : (['raw', 'ours'] as const)) {
        const v = side === 'ours' ? await oursPgE2E(url, fresh('ours'), S.pgE2E.n, clients) : await rawPgE2E(url, fresh('raw'), S.pgE2E.n, clients);
        (side === 'ours' ? o : r).push(v);
        log(`[stores] Postgres e2e ${clients} client(s) round ${round + 1} ${side}: ${Math.round(v.rate)} gen/s, ${v.cpuUs.toFixed(0)} µs node CPU/generation, ${v.trips.toFixed(2)} round trips/generation`);
      }
    }
    const bestOf = (xs: E2EResult[]): E2EResult => xs.reduce((a, b) => (b.rate > a.rate ? b : a));
    at[clients] = { ours: bestOf(o), raw: bestOf(r) };
  }
  const one = at[1]!;
  const many = at[32]!;
  const what = `${S.pgE2E.n / 1000}k generations, ${PG_E2E_USERS} users, runner ${PG_E2E_RUNNER}, pool ${PG_E2E_POOL}`;
  const measure = (x: E2EResult) => ({ value: x.rate, unit: 'gen/s' as const, extra: `(node CPU ${x.cpuUs.toFixed(0)} µs/gen, ${x.trips.toFixed(2)} round trips/gen)` });
  const oursGain = many.ours.rate - one.ours.rate;
  const rawGain = many.raw.rate - one.raw.rate;
  const base = 'minimal hand-written pg';
  return [
    evaluate({
      id: 'stores.postgres-e2e.c1',
      section: 'stores',
      name: `Postgres end to end, public API, 1 client (${what})`,
      ours: measure(one.ours),
      oursLabel: 'service.create',
      base: measure(one.raw),
      baseLabel: base,
      ratio: one.ours.rate / one.raw.rate,
      target: { kind: 'min', bound: 0.7 },
    }),
    evaluate({
      id: 'stores.postgres-e2e.c32',
      section: 'stores',
      name: `Postgres end to end, public API, 32 clients (${what})`,
      ours: measure(many.ours),
      oursLabel: 'service.create',
      base: measure(many.raw),
      baseLabel: base,
      ratio: many.ours.rate / many.raw.rate,
      target: { kind: 'min', bound: 0.75 },
    }),
    evaluate({
      id: 'stores.postgres-e2e.trips',
      section: 'stores',
      // The ratio column is ours' count itself: issue 36 bounds it at 12.
      name: 'Postgres end to end, round trips per generation at 1 client (ratio column: ours, bound 12)',
      ours: { value: one.ours.rate, unit: 'gen/s', extra: `(${one.ours.trips.toFixed(2)} round trips/gen)` },
      oursLabel: 'service.create',
      base: { value: one.raw.rate, unit: 'gen/s', extra: `(${one.raw.trips.toFixed(2)} round trips/gen)` },
      baseLabel: base,
      ratio: one.ours.trips,
      target: { kind: 'max', bound: 12 },
    }),
    evaluate({
      id: 'stores.postgres-e2e.scaling',
      section: 'stores',
      name: 'Postgres end to end, public API: gain from 1 to 32 clients',
      ours: { value: oursGain, unit: 'gen/s', extra: `(${Math.round(one.ours.rate)} -> ${Math.round(many.ours.rate)})` },
      oursLabel: 'service.create',
      base: { value: rawGain, unit: 'gen/s', extra: `(${Math.round(one.raw.rate)} -> ${Math.round(many.raw.rate)})` },
      baseLabel: base,
      // A side that gains nothing has ratio 0; if the hand-written side gains nothing, ours meets it by not losing.
      ratio: rawGain > 0 ? oursGain / rawGain : oursGain >= 0 ? 1 : 0,
    }),
  ];
}

async function runStores(): Promise<Row[]> {
  const rows: Row[] = [];
  if (runs('sqlite')) await storesSqlite(rows);
  if (runs('postgres') || runs('postgres-e2e')) await storesPostgres(rows);
  if (runs('bullmq')) await storesBullmq(rows);
  if (runs('pgboss')) rows.push(...(await pgBossRows()));
  return rows;
}

async function storesSqlite(rows: Row[]): Promise<void> {
  const { dir, cleanup } = tempDir();
  try {
    // SQLite
    log('[stores] SQLite warm-up');
    await oursSqlite(dir, S.sqlite.warm, 'warm');
    rawSqliteRun(dir, S.sqlite.warm, 'warm');
    const sq = await alternate(
      'SQLite insert+get',
      S.sqlite.rounds,
      (t) => oursSqlite(dir, S.sqlite.n, t),
      async (t) => rawSqliteRun(dir, S.sqlite.n, t),
    );
    rows.push(
      evaluate({
        id: 'stores.sqlite',
        section: 'stores',
        name: `SQLite: insert + get (${S.sqlite.n / 1000}k, sequential)`,
        ours: { value: sq.ours, unit: 'ops/s' },
        oursLabel: 'SqliteGenerationStore',
        base: { value: sq.raw, unit: 'ops/s' },
        baseLabel: 'raw better-sqlite3',
        ratio: sq.ours / sq.raw,
        target: { kind: 'min', bound: 0.85 },
      }),
    );
    // Its own directory: the one above is removed when this section ends, before missed targets are profiled.
    storeProfiles['stores.sqlite'] = async () => {
      const p = tempDir();
      try {
        return await oursSqlite(p.dir, S.sqlite.n, `prof${Date.now()}`);
      } finally {
        p.cleanup();
      }
    };
  } finally {
    cleanup();
  }
}

async function storesPostgres(rows: Row[]): Promise<void> {
  // Postgres: a throwaway database, dropped at the end.
  const db = await throwawayDatabase();
  try {
    if (runs('postgres')) await storesPostgresInsertGet(rows, db.url);
    if (runs('postgres-e2e')) rows.push(...(await pgEndToEnd(db.url)));
  } finally {
    await db.drop();
  }
}

async function storesPostgresInsertGet(rows: Row[], url: string): Promise<void> {
  {
    const b = await pgBench(url);
    try {
      log('[stores] Postgres warm-up');
      await b.ours(S.pg.warm);
      await b.raw(S.pg.warm);
      const pgr = await alternate('Postgres insert+get', S.pg.rounds, () => b.ours(S.pg.n), () => b.raw(S.pg.n), () => lastCpuUsPerOp);
      rows.push(
        evaluate({
          id: 'stores.postgres',
          section: 'stores',
          name: `Postgres: insert + get (${S.pg.n / 1000}k, ${PG_CONCURRENCY} at once, pool ${PG_POOL_SIZE})`,
          ours: { value: pgr.ours, unit: 'ops/s', extra: `(node CPU ${pgr.oursCpu.toFixed(0)} µs/op)` },
          oursLabel: 'PostgresGenerationStore',
          base: { value: pgr.raw, unit: 'ops/s', extra: `(node CPU ${pgr.rawCpu.toFixed(0)} µs/op)` },
          baseLabel: 'raw pg',
          ratio: pgr.ours / pgr.raw,
          target: { kind: 'min', bound: 0.85 },
        }),
      );
      if (opts.profile) {
        // Profiled now (needs the open database); used only if the target is missed.
        const r = rows[rows.length - 1]!;
        if (!r.met) {
          mkdirSync(PROFILE_DIR, { recursive: true });
          profiles['stores.postgres'] = await profileHere(
            path.join(PROFILE_DIR, `stores-postgres-${Date.now()}.cpuprofile`),
            `PostgresGenerationStore insert+get, ${S.pg.n} ops`,
            () => b.ours(S.pg.n),
          );
        }
      }
    } finally {
      await b.close();
    }
  }
}

async function storesBullmq(rows: Row[]): Promise<void> {
  // BullMQ: a random key prefix, deleted at the end.
  const prefix = `gsbench-${randomBytes(4).toString('hex')}`;
  try {
    log(`[stores] BullMQ warm-up (prefix ${prefix})`);
    await oursBullmq(prefix, 'warm-ours', S.bull.warm);
    await rawBullmq(prefix, 'warm-raw', S.bull.warm);
    const bq = await alternate(
      'BullMQ enqueue+process',
      S.bull.rounds,
      (t) => oursBullmq(prefix, `ours-${t}`, S.bull.n),
      (t) => rawBullmq(prefix, `raw-${t}`, S.bull.n),
    );
    rows.push(
      evaluate({
        id: 'stores.bullmq',
        section: 'stores',
        name: `BullMQ: enqueue + no-op job (${S.bull.n / 1000}k, concurrency ${BULL_CONCURRENCY})`,
        ours: { value: bq.ours, unit: 'ops/s' },
        oursLabel: 'BullMQQueue',
        base: { value: bq.raw, unit: 'ops/s' },
        baseLabel: 'raw Queue.add + Worker',
        ratio: bq.ours / bq.raw,
        target: { kind: 'min', bound: 0.85 },
      }),
    );
  } finally {
    const n = await cleanRedisPrefix(prefix);
    log(`[stores] deleted ${n} Redis keys under ${prefix}:`);
  }
}

/**
 * Issue 43: the PgBossQueue beside BullMQ, against raw pg-boss (enqueue + no-op job), and Postgres end to end with it
 * against hand-written pg + raw pg-boss. A throwaway database, dropped at the end; a queue name per run.
 */
async function pgBossRows(): Promise<Row[]> {
  const rows: Row[] = [];
  const db = await throwawayDatabase();
  let runs = 0;
  const fresh = (side: string): string => `${side}_${runs++}`;
  try {
    log('[stores] pg-boss warm-up');
    await oursPgBoss(db.url, fresh('warm_ours'), S.pgboss.warm);
    await rawPgBoss(db.url, fresh('warm_raw'), S.pgboss.warm);
    const pb = await alternate(
      'pg-boss enqueue+process',
      S.pgboss.rounds,
      () => oursPgBoss(db.url, fresh('ours'), S.pgboss.n),
      () => rawPgBoss(db.url, fresh('raw'), S.pgboss.n),
    );
    rows.push(
      evaluate({
        id: 'stores.pgboss',
        section: 'stores',
        name: `pg-boss: enqueue + no-op job (${S.pgboss.n / 1000}k, concurrency ${PGBOSS_CONCURRENCY}, pool ${PGBOSS_POOL})`,
        ours: { value: pb.ours, unit: 'ops/s' },
        oursLabel: 'PgBossQueue',
        base: { value: pb.raw, unit: 'ops/s' },
        baseLabel: 'raw send + fetch/complete',
        ratio: pb.ours / pb.raw,
        target: { kind: 'min', bound: 0.85 },
      }),
    );
    const clients = S.pgbossE2E.clients;
    type Side = 'ours' | 'raw' | 'hand';
    const e2e = (side: Side, n: number): Promise<E2EResult> =>
      side === 'hand' ? rawPgBossE2E(db.url, fresh('e2e_hand'), fresh('q'), n, clients) : servicePgBossE2E(side, db.url, fresh(`e2e_${side}`), fresh('q'), n, clients);
    log(`[stores] pg-boss end to end warm-up, ${clients} clients`);
    for (const side of ['ours', 'raw', 'hand'] as const) await e2e(side, S.pgbossE2E.warm);
    const got: Record<Side, E2EResult[]> = { ours: [], raw: [], hand: [] };
    const order: Side[] = ['ours', 'raw', 'hand'];
    for (let round = 0; round < S.pgbossE2E.rounds; round++) {
      // Each round starts with another side.
      for (const side of [...order.slice(round % 3), ...order.slice(0, round % 3)]) {
        const v = await e2e(side, S.pgbossE2E.n);
        got[side].push(v);
        log(`[stores] pg-boss e2e round ${round + 1} ${side}: ${Math.round(v.rate)} gen/s, ${v.cpuUs.toFixed(0)} µs node CPU/generation, ${v.trips.toFixed(2)} round trips/generation`);
      }
    }
    const bestOf = (xs: E2EResult[]): E2EResult => xs.reduce((a, b) => (b.rate > a.rate ? b : a));
    const [ours, raw, hand] = [bestOf(got.ours), bestOf(got.raw), bestOf(got.hand)];
    const measure = (x: E2EResult) => ({ value: x.rate, unit: 'gen/s' as const, extra: `(node CPU ${x.cpuUs.toFixed(0)} µs/gen)` });
    const what = `${clients} clients, ${S.pgbossE2E.n / 1000}k generations, ${PG_E2E_USERS} users, runner ${PG_E2E_RUNNER}, pool ${PG_E2E_POOL} + queue ${PGBOSS_POOL}`;
    rows.push(
      evaluate({
        id: 'stores.pgboss-e2e',
        section: 'stores',
        name: `Postgres end to end, public API, the service's queue on pg-boss (${what})`,
        ours: measure(ours),
        oursLabel: 'service.create + PgBossQueue',
        base: measure(raw),
        baseLabel: 'service.create + raw pg-boss queue',
        ratio: ours.rate / raw.rate,
        target: { kind: 'min', bound: 0.85 },
      }),
      evaluate({
        id: 'stores.pgboss-e2e.handwritten',
        section: 'stores',
        name: `Postgres end to end on pg-boss, public API against hand-written (${what})`,
        ours: measure(ours),
        oursLabel: 'service.create + PgBossQueue',
        base: measure(hand),
        baseLabel: 'hand-written pg + raw pg-boss',
        ratio: ours.rate / hand.rate,
      }),
    );
  } finally {
    await db.drop();
  }
  return rows;
}

// ------------------------------------------------------------------ scale

function scaleRows(kind: string, title: string, r: ScaleResult): Row[] {
  const L = `${r.large >= 1e6 ? r.large / 1e6 + 'M' : r.large / 1e3 + 'k'}`;
  const S1 = `${r.small / 1e3}k`;
  const lat = (l: { meanUs: number; p50Us: number; p99Us: number }) => ({
    value: l.p50Us,
    unit: 'us' as const,
    extra: `p50 (mean ${l.meanUs.toFixed(1)} / p99 ${l.p99Us.toFixed(1)} µs)`,
  });
  const rows = (['get', 'create'] as const).map((op) =>
    evaluate({
      id: `scale.${kind}.${op}`,
      section: 'scale',
      name: `${title}: ${op === 'get' ? 'service.get by id' : 'service.create'}, ${L} vs ${S1} stored`,
      ours: lat(r[op].large),
      oursLabel: L,
      base: lat(r[op].small),
      baseLabel: S1,
      ratio: r[op].large.p50Us / r[op].small.p50Us,
      target: { kind: 'max', bound: 1.2 },
    }),
  );
  if (r.list) {
    rows.push(
      evaluate({
        id: `scale.${kind}.list`,
        section: 'scale',
        name: `${title}: a list page (GET /v1/generations, 20 newest of one user), ${L} vs ${S1} stored`,
        ours: lat(r.list.large),
        oursLabel: L,
        base: lat(r.list.small),
        baseLabel: S1,
        ratio: r.list.large.p50Us / r.list.small.p50Us,
        target: { kind: 'max', bound: 1.2 },
      }),
    );
  }
  return rows;
}

async function runScale(): Promise<Row[]> {
  const rows: Row[] = [];
  if (runs('stores')) {
    log(`[scale] in-memory: ${S.scale.small} vs ${S.scale.large}`);
    rows.push(...scaleRows('memory', 'In-memory store', await scaleMemory(S.scale.small, S.scale.large, S.scale)));
    const { dir, cleanup } = tempDir();
    try {
      log(`[scale] SQLite: ${S.scale.small} vs ${S.scale.large}`);
      rows.push(...scaleRows('sqlite', 'SQLite store', await scaleSqlite(dir, S.scale.small, S.scale.large, S.scale)));
    } finally {
      cleanup();
    }
  }
  if (runs('usage')) {
    const { dir: usageDir, cleanup: usageCleanup } = tempDir();
    try {
      log(`[scale] usage reads: ${S.scale.small} vs ${S.scale.large} settled generations (memory, SQLite, Postgres)`);
      const u = await usageScale(usageDir, S.scale.small, S.scale.large, Q ? 500 : 2_000);
      const L = `${u.large >= 1e6 ? u.large / 1e6 + 'M' : u.large / 1e3 + 'k'}`;
      const S1 = `${u.small / 1e3}k`;
      for (const [kind, title] of [['memory', 'In-memory ledger'], ['sqlite', 'SQLite ledger'], ['postgres', 'Postgres ledger']] as const) {
        for (const [q, what] of [['month', 'last 30 days by day'], ['year', '365 days by model']] as const) {
          const large = u[kind].large[q];
          const small = u[kind].small[q];
          rows.push({
            id: `scale.${kind}.usage.${q}`,
            section: 'scale',
            name: `${title}: GET /v1/usage (${what}), ${L} vs ${S1} settled generations of one user`,
            ours: { value: large.p50Us, unit: 'us', extra: `p50 (mean ${large.meanUs.toFixed(1)} / p99 ${large.p99Us.toFixed(1)} µs)` },
            oursLabel: L,
            base: { value: small.p50Us, unit: 'us', extra: `p50 (mean ${small.meanUs.toFixed(1)} / p99 ${small.p99Us.toFixed(1)} µs)` },
            baseLabel: S1,
            ratio: large.p50Us / small.p50Us,
            // Issue 36: the usage reads follow the range and the models and keys, not the generations.
            target: { kind: 'max', bound: 2 },
            met: large.p50Us / small.p50Us <= 2,
          });
        }
      }
    } finally {
      usageCleanup();
    }
  }
  if (runs('batch')) {
    const { dir: batchDir, cleanup: batchCleanup } = tempDir();
    try {
      log(`[scale] batch of ${BATCH_SIZE}: time to all created (memory, SQLite, Postgres)`);
      const b = await batchBench(batchDir, Q ? 2 : 5);
      for (const [kind, title] of [['memory', 'In-memory store'], ['sqlite', 'SQLite store'], ['postgres', 'Postgres store']] as const) {
        const r = b[kind];
        log(`[scale] ${title}: batch of ${BATCH_SIZE} created in ${r.batchMs.toFixed(1)} ms; ${BATCH_SIZE} single creates ${r.singlesMs.toFixed(1)} ms`);
        rows.push({
          id: `scale.${kind}.batch`,
          section: 'scale',
          name: `${title}: batch of 1,000: time to all created (POST /v1/batches vs 1,000 single creates)`,
          ours: { value: r.batchMs, unit: 'ms', extra: 'one batch, best of the rounds' },
          oursLabel: 'one batch',
          base: { value: r.singlesMs, unit: 'ms', extra: '1,000 creates one after another' },
          baseLabel: '1,000 creates',
          ratio: r.batchMs / r.singlesMs,
        });
      }
    } finally {
      batchCleanup();
    }
  }
  for (const completed of runs('memory') ? [false, true] : []) {
    log(`[scale] memory per ${completed ? 'completed' : 'pending'} generation (${S.scale.mem})`);
    const bytes = await memoryPerGeneration(S.scale.mem, completed);
    rows.push({
      id: `scale.memory.bytes.${completed ? 'completed' : 'pending'}`,
      section: 'scale',
      name: `In-memory store: heap per retained ${completed ? 'completed' : 'pending'} generation (${S.scale.mem / 1000}k)`,
      ours: { value: bytes, unit: 'B', extra: '(store + ledger reserve)' },
      oursLabel: 'heapUsed + arrayBuffers delta / count',
    });
  }
  return rows;
}

async function runPush(): Promise<Row[]> {
  const streams = Q ? 1_000 : 5_000;
  const samples = Q ? 50 : 300;
  log(`[push] ${streams} idle event streams; ${samples} commit-to-client samples in-process and across instances`);
  // PostgresNotifier's figure on a throwaway database (LISTEN/NOTIFY needs no table; the database only scopes it).
  const db = await throwawayDatabase();
  let r: Awaited<ReturnType<typeof pushBench>>;
  try {
    r = await pushBench({ streams, samples, redisUrl: REDIS_URL, postgresUrl: db.url });
  } finally {
    await db.drop();
  }
  log(`[push] per idle stream: heap ${r.memory.heapPerStreamB.toFixed(0)} B, RSS ${r.memory.rssPerStreamB.toFixed(0)} B`);
  const pgLatency = r.latency.acrossInstancesPostgres!;
  log(`[push] commit to client: in-process p50 ${r.latency.inProcess.p50Ms.toFixed(1)} ms / p99 ${r.latency.inProcess.p99Ms.toFixed(1)} ms; across instances (Redis) p50 ${r.latency.acrossInstances.p50Ms.toFixed(1)} ms / p99 ${r.latency.acrossInstances.p99Ms.toFixed(1)} ms; across instances (Postgres) p50 ${pgLatency.p50Ms.toFixed(1)} ms / p99 ${pgLatency.p99Ms.toFixed(1)} ms`);
  const ms = (l: { p50Ms: number; p99Ms: number; n: number }) => ({ value: l.p50Ms, unit: 'ms' as const, extra: `p50 (p99 ${l.p99Ms.toFixed(1)} ms, ${l.n} events)` });
  const o = r.outputDeltas;
  log(`[push] output deltas: ${o.eventsPerSecond.toFixed(0)} events/s to ${o.streams} streams (${o.deltasPerSecond.toFixed(0)} deltas/s appended, ${o.logEventsPerGenerationPerSecond.toFixed(2)} log events/s per generation)`);
  return [
    {
      id: 'push.output.deltas',
      section: 'push',
      name: `SSE output deltas: events/s delivered to ${o.streams} streams`,
      ours: {
        value: o.eventsPerSecond,
        unit: 'events/s',
        extra: `(${o.deltasPerSecond.toFixed(0)} deltas/s appended, coalesced to ${o.logEventsPerGenerationPerSecond.toFixed(2)} log events/s per generation; ${(o.charsPerSecond / 1000).toFixed(0)} k chars/s, every stream's text complete)`,
      },
      oursLabel: 'output messages read / s',
    },
    {
      id: 'push.memory.heap',
      section: 'push',
      name: `Idle event stream: server heap per open stream (${streams} open on loopback)`,
      ours: { value: r.memory.heapPerStreamB, unit: 'B', extra: `(RSS ${r.memory.rssPerStreamB.toFixed(0)} B per stream, socket buffers included)` },
      oursLabel: 'heapUsed delta / streams',
    },
    { id: 'push.latency.local', section: 'push', name: 'Commit to client, same instance (event stream)', ours: ms(r.latency.inProcess), oursLabel: 'transition committed -> event read' },
    {
      id: 'push.latency.remote',
      section: 'push',
      name: 'Commit to client, across instances (worker on one, stream on another, Redis notifier)',
      ours: ms(r.latency.acrossInstances),
      oursLabel: 'transition committed -> event read',
    },
    {
      id: 'push.latency.remote-postgres',
      section: 'push',
      name: 'Commit to client, across instances (worker on one, stream on another, Postgres notifier: LISTEN/NOTIFY)',
      ours: ms(pgLatency),
      oursLabel: 'transition committed -> event read',
    },
  ];
}

async function runTelemetry(): Promise<Row[]> {
  const plan = Q
    ? { pairs: 2, chunks: 5, gets: 5_000, posts: 1_000, warmGets: 20_000, warmPosts: 4_000 }
    : { pairs: 6, chunks: 12, gets: 10_000, posts: 2_000, warmGets: 50_000, warmPosts: 10_000 };
  log(
    `[telemetry] service.handle() in process, metrics + tracing on (Prometheus MeterProvider, no-op tracer) vs off (no SDK): ${plan.pairs} pairs of processes, ${plan.chunks} chunks of each kind a side, the sides' chunks in turn`,
  );
  const r = await telemetryBench(plan);
  const spread = (x: { ratios: number[] }, what = 'chunk'): string => {
    const s = [...x.ratios].sort((a, b) => a - b);
    return `${what} ratios min ${s[0]!.toFixed(3)} / median ${s[s.length >> 1]!.toFixed(3)} / max ${s[s.length - 1]!.toFixed(3)}`;
  };
  log(`[telemetry] GET ${r.get.on.toFixed(2)} µs (on) vs ${r.get.off.toFixed(2)} µs (off); ${spread(r.get)}`);
  log(`[telemetry] POST ${r.post.on.toFixed(1)} µs (on) vs ${r.post.off.toFixed(1)} µs (off); ${spread(r.post)}`);
  // Issue 28's bound (5 %) is on the GET and POST rows of the HTTP section, measured here on and off through HTTP. The
  // in-process rows are printed without one: a no-op generation in process (about 26 µs) is smaller than any request,
  // and there the SDK's own work for two labelled histogram records (about 1.3 µs) is 5-7 % (bench/notes.md).
  const row = (id: string, name: string, side: { on: number; off: number }, bounded: boolean): Row => ({
    id,
    section: 'telemetry',
    name,
    ours: { value: side.on, unit: 'us', extra: 'CPU per request, metrics + tracing on' },
    oursLabel: 'Prometheus MeterProvider, no-op tracer',
    base: { value: side.off, unit: 'us', extra: 'CPU per request, off' },
    baseLabel: 'no OpenTelemetry SDK',
    ratio: side.on / side.off,
    ...(bounded ? { target: { kind: 'max' as const, bound: 1.05 }, met: side.on / side.off <= 1.05 } : {}),
  });
  const httpPlan = Q
    ? { pairs: 1, runs: 2, seconds: 1, warmup: 1, pipelining: 10, connections: S.http.connections }
    : { pairs: 3, runs: 4, seconds: 2, warmup: 2, pipelining: 10, connections: S.http.connections };
  log(`[telemetry] the same through HTTP: Fastify, ours on vs off, ${httpPlan.pairs} pairs of servers, ${httpPlan.runs} runs of ${httpPlan.seconds} s a case and side, server CPU per request`);
  const child = spawnTs('http/telemetry-load.ts', { core: 1, args: [JSON.stringify(httpPlan)] });
  let h: TelemetryHttpResult;
  try {
    h = (await nextMessage<{ data: TelemetryHttpResult }>(child, (m) => m?.type === 'result', 40 * 60_000)).data;
  } finally {
    await stopChild(child);
  }
  log(`[telemetry] HTTP GET ${h.get.on.toFixed(1)} µs (on) vs ${h.get.off.toFixed(1)} µs (off); ${spread(h.get, 'run')}`);
  log(`[telemetry] HTTP POST ${h.post.on.toFixed(1)} µs (on) vs ${h.post.off.toFixed(1)} µs (off); ${spread(h.post, 'run')}`);
  const httpRow = (id: string, name: string, side: { on: number; off: number }): Row => ({
    ...row(id, name, side, true),
    ours: { value: side.on, unit: 'us', extra: 'server CPU per request, metrics + tracing on' },
    base: { value: side.off, unit: 'us', extra: 'server CPU per request, off' },
  });
  return [
    httpRow('telemetry.http.get', 'Fastify GET /v1/generations/:id (pipelining 10): metrics + tracing on vs off', h.get),
    httpRow('telemetry.http.post', 'Fastify POST /v1/generations, runner on, until completed (pipelining 10): metrics + tracing on vs off', h.post),
    row('telemetry.get', 'GET /v1/generations/:id in process: metrics + tracing on vs off', r.get, false),
    row('telemetry.post', 'POST /v1/generations in process, run to completion: metrics + tracing on vs off', r.post, false),
  ];
}

// ------------------------------------------------------------------ profiles of missed targets

const profiles: Record<string, ProfileSummary> = {};

async function profileMissed(rows: Row[]): Promise<void> {
  mkdirSync(PROFILE_DIR, { recursive: true });
  // HTTP: one profile per framework and case, at the pipelining where the ratio is lowest.
  const worst = new Map<string, Row>();
  for (const r of rows) {
    if (r.section !== 'http' || r.met !== false) continue;
    const key = r.id.replace(/\.p\d+$/, '');
    const prev = worst.get(key);
    if (!prev || r.ratio! < prev.ratio!) worst.set(key, r);
  }
  // A profile that fails is logged and skipped: the measured figures are what the run is for.
  const attempt = async (key: string, take: () => Promise<ProfileSummary>): Promise<void> => {
    try {
      profiles[key] = await take();
    } catch (err) {
      log(`[profile] ${key} failed: ${err instanceof Error ? err.message : String(err)}`);
    }
  };
  for (const [key, r] of worst) {
    const [, fw, c] = key.split('.') as [string, Framework, CaseName];
    const p = Number(/\.p(\d+)$/.exec(r.id)![1]);
    log(`[profile] ${key} at pipelining ${p}`);
    await attempt(key, () => profileHttp(fw, c, p));
  }
  for (const r of rows) {
    if (r.met !== false) continue;
    if (r.id === 'runner.inprocess') {
      log('[profile] runner');
      await attempt(r.id, () =>
        profileHere(path.join(PROFILE_DIR, `runner-${Date.now()}.cpuprofile`), `service.create + in-process runner, ${S.runner.n} generations`, () =>
          oursRunner(S.runner.n),
        ),
      );
    } else if (storeProfiles[r.id]) {
      log(`[profile] ${r.id}`);
      await attempt(r.id, () => profileHere(path.join(PROFILE_DIR, `${r.id}-${Date.now()}.cpuprofile`), `${r.name}, ours`, storeProfiles[r.id]!));
    }
  }
}

// ------------------------------------------------------------------ the document

interface Saved {
  sections: Partial<Record<Section, { at: string; quick: boolean; rows: Row[]; load?: [number, number] }>>;
  profiles: Record<string, ProfileSummary>;
  machine?: Record<string, string>;
}

function machine(): Record<string, string> {
  const sh = (cmd: string): string => {
    try {
      return execSync(cmd, { cwd: ROOT, stdio: ['ignore', 'pipe', 'ignore'] }).toString().trim();
    } catch {
      return '';
    }
  };
  return {
    nproc: sh('nproc') || String(os.availableParallelism()),
    cpu: os.cpus()[0]?.model ?? 'unknown',
    memory: `${Math.round(os.totalmem() / 2 ** 30)} GiB`,
    node: process.version,
    os: `${os.type()} ${os.release()}`,
    pinned: canPin() ? 'yes (taskset: servers on core 0, load generator on core 1)' : 'no (taskset unavailable)',
    commit: sh('git rev-parse --short HEAD'),
  };
}

/** Notes written by hand in bench/notes.md, `## <id prefix>` per section (see `matches`); shown for rows that missed. */
function notes(): Map<string, string> {
  const file = path.join(BENCH_DIR, 'notes.md');
  const out = new Map<string, string>();
  if (!existsSync(file)) return out;
  const text = readFileSync(file, 'utf8');
  const parts = text.split(/^## /m).slice(1);
  for (const p of parts) {
    const nl = p.indexOf('\n');
    out.set(p.slice(0, nl).trim(), p.slice(nl + 1).trim());
  }
  return out;
}

/** `key` names a row id or a prefix of one, by dotted segments; `*` stands for any one segment (`http.*.get`). */
function matches(key: string, id: string): boolean {
  const k = key.split('.');
  const i = id.split('.');
  return k.length <= i.length && k.every((seg, n) => seg === '*' || seg === i[n]);
}

function documentFor(saved: Saved, rows: Row[]): string {
  const m = saved.machine ?? machine();
  const missed = rows.filter((r) => r.met === false);
  const met = rows.filter((r) => r.met === true);
  const ns = notes();
  const runs = new Map<string, string[]>();
  for (const [s, v] of Object.entries(saved.sections)) {
    const key = `${v!.at}${v!.quick ? ' (quick)' : ''}`;
    runs.set(key, [...(runs.get(key) ?? []), `${s}${v!.load ? ` ${v!.load[0]} -> ${v!.load[1]}` : ''}`]);
  }
  const when =
    [...runs].map(([at, ss]) => `run started ${at}: ${ss.join(', ')}`).join('; ') +
    ' (1-minute load average before -> after each section)';
  const lines: string[] = [
    '# Benchmarks',
    '',
    '<!-- Generated by `pnpm bench` (bench/run.ts); edit bench/notes.md, not this file. -->',
    '',
    'How much genservice costs against what a user would otherwise write: a bare route of the same framework, raw',
    'p-queue, the raw database driver, raw BullMQ, raw pg-boss. Every ratio is ours / baseline, both measured alternately in the',
    'same run on the same machine, same settings, after a warm-up.',
    '',
    '```',
    'pnpm bench                          # everything',
    'pnpm bench -- --only http           # one section (http|runner|stores|scale|push|telemetry); the others keep their figures',
    'pnpm bench -- --quick               # short smoke run, prints only',
    '```',
    '',
    `Machine: ${m.nproc} cores (${m.cpu}), ${m.memory}, Node ${m.node}, ${m.os}; pinned: ${m.pinned}. Commit ${m.commit}.`,
    '',
    `Measured: ${when}.`,
    '',
    `Targets: ${met.length} met, ${missed.length} missed${missed.length ? ` (${missed.map((r) => r.id).join(', ')})` : ''}.`,
    '',
    '![ratios](benchmarks.svg)',
    '',
    '## Results',
    '',
    markdownTable(rows),
    '',
    '## How each part is measured',
    '',
    `- **HTTP**: per framework, our server and a bare server of the same framework run side by side as two child`,
    `  processes pinned to core 0; autocannon (programmatic, ${S.http.connections} connections) runs in a process pinned`,
    `  to core 1. Both are warmed up, then each case runs ${S.http.duration} s per side, ${S.http.rounds} round(s),`,
    '  ours and bare alternately (bare first on odd rounds); each side\'s figure is its best round (see Noise below).',
    '  p50/p99 are per-request latencies from autocannon\'s response events. Any status other than the expected one, any socket error or',
    '  timeout aborts the bench. Ours: the adapter mounted at the root (`genserviceRouter(service)`,',
    '  `app.register(genservicePlugin, { service })`, `genserviceMiddleware(service)`), all ports in memory, the no-op',
    `  provider, a balance that never runs out, **the runner on** (in process, concurrency ${CONCURRENCY}) and periodic`,
    '  recovery off. The GET case reads a completed text generation. Bare (bench/servers/common.ts `bareData`, the same',
    '  work by hand, answered with the framework\'s own JSON reply: `res.json`, `return obj`, `ctx.body = obj`): the',
    '  Bearer key looked up by its SHA-256 digest in a Map on every case; an owner-scoped read of a Map of records for',
    '  GET; the same models JSON, serialised once; for POST the JSON body parsed (`express.json()`, Fastify\'s parser,',
    '  a hand-read body in Koa), the settings validated (model, required, select options, undeclared names), the price',
    '  reserved, a record stored, 201, and the same no-op provider run on the next ticks (`setImmediate`: processing,',
    '  completed). **POST runs until completed**: after each run the server is asked to drain and reports how long',
    '  it took until every generation it accepted had completed; requests/s = requests / (load time + drain time),',
    '  on both sides. The smoke check before measuring asserts that ours and bare answer the same JSON for GET',
    '  status and GET models.',
    '  The 401 case is a POST with an unknown key; the 400 case a POST whose settings miss a required field, use a',
    '  value outside a select and name an undeclared setting. Both are compared with our own valid POST.',
    `- **Runner**: ${S.runner.n / 1000}k \`service.create\` calls in a loop (each awaited) with the in-process runner`,
    `  (concurrency ${CONCURRENCY}) and a no-op provider, until every generation is completed and settled; against raw`,
    '  p-queue at the same concurrency doing the same work per generation (random id, a record in a Map, a task that',
    '  marks it processing, calls the same no-op provider and stores the result). No target since issue 15 (the',
    '  end-to-end POST rows replace it). **SQLite end to end**: the same loop on `createSqliteStores` (store, ledger,',
    '  idempotency, webhooks on one file), until every generation is settled, against raw better-sqlite3 running the',
    '  same statements in the same IMMEDIATE transactions (reserve; insert + event; claim + event; complete + event;',
    '  settle; copied from packages/store-sqlite/src) with the same pragmas and schema, on p-queue at the same concurrency.',
    `- **Stores**: \`insert\` then \`get\` of one generation, through our store and through the raw driver running the same`,
    '  SQL (copied from the store) with the same pragmas / pool. SQLite: sequential, its own file per run (WAL,',
    `  synchronous NORMAL). Postgres: ${PG_CONCURRENCY} loops at once, pool of ${PG_POOL_SIZE}, a throwaway database`,
    '  dropped at the end; the node process\'s CPU time per operation is shown too, as the machine\'s 2 cores are',
    '  shared with the database server. BullMQ: `enqueue` of a just-created generation (`{ fresh: true }` and its',
    '  owner, as `Lifecycle.create` does) in a loop and a no-op handler, until all ran, against `Queue.add` with a',
    `  jobId and a raw \`Worker\` (concurrency ${BULL_CONCURRENCY}); a random Redis prefix, deleted at the end.`,
    '  **pg-boss** (issue 43), on a throwaway database: the `PgBossQueue` the same way (fresh enqueues with their owner,',
    `  a no-op handler, concurrency ${PGBOSS_CONCURRENCY}, pool ${PGBOSS_POOL}) against raw pg-boss 10: \`send\` with the generation id as`,
    '  singleton key on a `short` queue (the deduplication ours does) and a consumer keeping as many jobs in flight with',
    '  `fetch`, completing each fetched batch with one `complete` (pg-boss\'s `work` does the same but sleeps its polling',
    '  interval, at least 0.5 s, after every batch); both woken by their own process\'s sends. Ours also keeps the',
    '  owners\' counts (fairness) in the statements that insert and fetch. **End to end on pg-boss**: the Postgres end to',
    `  end of issue 22 (${S.pgbossE2E.clients} clients) with the \`PgBossQueue\` as the service\'s queue, against the same service with raw`,
    '  pg-boss as its queue (a JobQueue of a few lines: `send`, and the consumer above): what our queue costs a whole',
    '  create-to-settled path; and, without a target, against the hand-written `pg` of that section with raw pg-boss',
    '  carrying the work (there the stores\' own cost is in the ratio too).',
    `- **Scale**: single \`service.get\` / \`service.create\` calls timed one by one (${S.scale.gets / 1000}k gets on random`,
    `  stored ids, ${S.scale.creates / 1000}k creates) with ${S.scale.small / 1000}k and then ${S.scale.large >= 1e6 ? S.scale.large / 1e6 + 'M' : S.scale.large / 1e3 + 'k'}`,
    '  generations stored, two stores side by side measured in alternating batches (the small store\'s own creates',
    '  add a few thousand). The ratio is of the median (p50) latency: a single GC pause moves a mean of',
    '  microsecond calls more than the store does; mean and p99 are shown too.',
    '  In memory the store is filled through `service.create`; SQLite through the store\'s INSERT in 10k-row',
    '  transactions (generations and their reserves). Heap per generation: `heapUsed` + `arrayBuffers` after `gc()`',
    `  before and after ${S.scale.mem / 1000}k generations, over the count (node runs with --expose-gc; the memory store`,
    '  keeps timestamps in a Float64Array, outside the heap).',
    '- **Noise**: the machine has 2 cores and may be shared (other sessions run test suites on it). Every comparison',
    '  alternates the two sides in rounds and keeps each side\'s best round (runner and stores too), because other',
    '  work only ever slows a round down. The 1-minute load average before and after each section is recorded above;',
    '  at a high load the absolute figures suffer more than the ratios, and pipelining 1 (latency-bound: the server',
    '  idles between requests) more than pipelining 10.',
    '  The telemetry rows bound a small difference (5 %), less than the VM\'s speed changes (2-3x, for seconds to',
    '  minutes) move one side run after the other: there the two sides are processes alive at once, handed short',
    '  chunks of the work in turn, in several such pairs; each side\'s figure is its CPU time over all its chunks.',
    '',
  ];
  const general = ns.get('general');
  if (general) lines.push('## Notes', '', general, '');
  if (missed.length > 0) {
    lines.push('## Missed targets', '');
    const shown = new Set<string>();
    for (const [key, text] of ns) {
      if (key === 'general') continue;
      const hit = missed.filter((r) => matches(key, r.id));
      if (hit.length === 0) continue;
      shown.add(key);
      lines.push(`### ${key}`, '', `Missed here: ${hit.map((r) => `${r.id} (${r.ratio!.toFixed(2)})`).join(', ')}.`, '', text, '');
    }
    const unexplained = missed.filter((r) => ![...shown].some((k) => matches(k, r.id)));
    if (unexplained.length > 0) {
      lines.push('### Not yet explained', '', unexplained.map((r) => `- ${r.id}: ${r.ratio!.toFixed(3)} (target ${r.target!.kind === 'min' ? '>=' : '<='} ${r.target!.bound})`).join('\n'), '');
    }
    const profKeys = Object.keys(saved.profiles).filter((k) => missed.some((r) => matches(k, r.id)));
    if (profKeys.length > 0) {
      lines.push('## Profiles of the missed targets', '', 'V8 CPU profiles (the profiler `--cpu-prof` uses, sampling every 100 µs) of our side only, over the load window.', '');
      for (const k of profKeys) {
        lines.push(`<details><summary>${k}</summary>`, '', formatProfile(saved.profiles[k]!), '', '</details>', '');
      }
    }
  }
  // Notes that apply to rows that met their target, or to rows with no target, are still worth reading.
  const others = [...ns].filter(([k]) => k !== 'general' && !missed.some((r) => matches(k, r.id)) && rows.some((r) => matches(k, r.id)));
  if (others.length > 0) {
    lines.push('## Other notes', '');
    for (const [k, text] of others) lines.push(`### ${k}`, '', text, '');
  }
  return lines.join('\n');
}

// ------------------------------------------------------------------ main

async function main(): Promise<void> {
  const started = Date.now();
  const saved: Saved = existsSync(RESULTS) ? (JSON.parse(readFileSync(RESULTS, 'utf8')) as Saved) : { sections: {}, profiles: {} };
  if (opts.quick && !opts.write) log('[bench] --quick: printing only (add --write to write docs/benchmarks.md)');
  const fresh: Row[] = [];
  const at = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  if (opts.waitQuiet && !opts.report) await waitForQuiet();
  for (const section of ALL) {
    if (opts.report || !opts.only.includes(section)) continue;
    const t0 = Date.now();
    const loadBefore = load1();
    const rows =
      section === 'http'
        ? await runHttp()
        : section === 'runner'
          ? await runRunner()
          : section === 'stores'
            ? await runStores()
            : section === 'scale'
              ? await runScale()
              : section === 'push'
                ? await runPush()
                : await runTelemetry();
    log(`[bench] ${section} done in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
    fresh.push(...rows);
    // A part of a section (`--part`): its rows replace theirs; the section's other rows stay as they were.
    const before = opts.part === undefined ? [] : (saved.sections[section]?.rows ?? []);
    const merged = [...before.map((r) => rows.find((x) => x.id === r.id) ?? r), ...rows.filter((x) => !before.some((r) => r.id === x.id))];
    saved.sections[section] = { at, quick: opts.quick, rows: merged, load: [loadBefore, load1()] };
  }
  if (opts.profile && fresh.some((r) => r.met === false)) {
    // The figures first: a profile that fails must not lose a finished run.
    log('');
    log(consoleTable(ALL.flatMap((s) => (opts.only.includes(s) ? (saved.sections[s]?.rows ?? []) : []))));
    await profileMissed(fresh);
  }
  // Profiles of sections re-measured now replace the old ones; the others keep theirs.
  for (const k of Object.keys(saved.profiles)) if (fresh.some((r) => matches(k, r.id))) delete saved.profiles[k];
  Object.assign(saved.profiles, profiles);
  const rows = ALL.flatMap((s) => saved.sections[s]?.rows ?? []);
  log('');
  log(consoleTable(rows));
  for (const [k, p] of Object.entries(profiles)) log('\n' + formatProfile(p).replace(/^Profile: /, `Profile [${k}]: `));
  if (opts.write) {
    if (!opts.report || !saved.machine) saved.machine = machine();
    mkdirSync(DOCS, { recursive: true });
    writeFileSync(RESULTS, JSON.stringify(saved, null, 1) + '\n');
    writeFileSync(path.join(DOCS, 'benchmarks.svg'), svgChart(rows, 'genservice: ours / baseline, same run'));
    writeFileSync(path.join(DOCS, 'benchmarks.md'), documentFor(saved, rows));
    log(`\n[bench] wrote docs/benchmarks.md, docs/benchmarks.svg, bench/results.json`);
  }
  log(`[bench] finished in ${((Date.now() - started) / 1000).toFixed(0)} s`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error('\n[bench] FAILED:', err instanceof Error ? (err.stack ?? err.message) : err);
    process.exit(1);
  },
);
