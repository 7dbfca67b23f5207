/**
 * Scale: latency of `service.get` (by id, owner-scoped) and `service.create` with 1k and with 1M generations stored,
 * on the in-memory store and on SQLite; and the heap each retained generation takes in the in-memory store.
 *
 * Each measurement times single calls one after the other (hrtime around each call), on ids picked at random
 * among all stored ones. The runner is disabled (an API-only instance): this is the request path, not the run.
 */
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import {
  createGenerationService,
  MemoryApiKeyStore,
  MemoryGenerationStore,
  MemoryLedger,
  type GenerationService,
} from '@genservice/core';
import type { GenerationStore } from '@genservice/core/ports';
import { createSqliteStores, type SqliteStores } from '@genservice/store-sqlite';
import { BALANCE, MODEL_ID, SETTINGS, USER_ID, noopProvider } from '../lib/fixture.js';
import { settledCount } from '../lib/settled.js';
import { SQLITE_INSERT } from './stores.js';

export interface Latency {
  meanUs: number;
  p50Us: number;
  p99Us: number;
}

function summarize(samples: number[]): Latency {
  const sorted = Float64Array.from(samples).sort();
  const sum = sorted.reduce((a, b) => a + b, 0);
  return {
    meanUs: sum / sorted.length,
    p50Us: sorted[Math.floor(sorted.length * 0.5)]!,
    p99Us: sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))]!,
  };
}

/** Appends `count` timed `service.get` calls (random stored ids) to `out`. */
async function timeGets(service: GenerationService, ids: string[], count: number, out: number[]): Promise<void> {
  for (let i = 0; i < count; i++) {
    const id = ids[(Math.random() * ids.length) | 0]!;
    const t0 = process.hrtime.bigint();
    const view = await service.get(USER_ID, id);
    out.push(Number(process.hrtime.bigint() - t0) / 1000);
    // The in-memory side stores unfinished generations, the SQLite side finished history (see scaleSqlite).
    if (view.status !== 'pending' && view.status !== 'completed') throw new Error(`scale: unexpected ${view.status}`);
  }
}

/** Appends `count` timed first pages of the owner's list (20 newest) to `out`. */
async function timeListPages(store: GenerationStore, count: number, out: number[]): Promise<void> {
  for (let i = 0; i < count; i++) {
    const t0 = process.hrtime.bigint();
    const page = await store.list(USER_ID, { limit: LIST_PAGE });
    out.push(Number(process.hrtime.bigint() - t0) / 1000);
    if (page.length !== LIST_PAGE) throw new Error(`scale: list page of ${page.length}`);
  }
}

/**
 * Alternating batches of list pages on the two stores (the order swapped every batch), after a warm-up, like the
 * gets: a page reads 20 rows through the owner's index, so 1M stored should cost what 1k does.
 */
async function alternateListPages(small: GenerationStore, large: GenerationStore, samples: number): Promise<{ small: Latency; large: Latency }> {
  const warm: number[] = [];
  for (const store of [small, large]) await timeListPages(store, 2000, warm);
  gc();
  const out = { small: [] as number[], large: [] as number[] };
  for (let b = 0; b * BATCH_GETS < samples; b++) {
    for (const k of b % 2 === 0 ? (['small', 'large'] as const) : (['large', 'small'] as const)) {
      await timeListPages(k === 'small' ? small : large, BATCH_GETS, out[k]);
    }
  }
  return { small: summarize(out.small), large: summarize(out.large) };
}

/** Appends `count` timed `service.create` calls to `out`. */
async function timeCreates(service: GenerationService, count: number, out: number[]): Promise<void> {
  for (let i = 0; i < count; i++) {
    const t0 = process.hrtime.bigint();
    await service.create(USER_ID, { modelId: MODEL_ID, settings: SETTINGS });
    out.push(Number(process.hrtime.bigint() - t0) / 1000);
  }
}

function apiOnly(extra: Partial<Parameters<typeof createGenerationService>[0]> = {}): GenerationService {
  return createGenerationService({
    // The in-memory side holds a million unfinished generations of one user: far past the default in-flight cap.
    limits: { inFlightPerUser: 100_000_000 },
    providers: [noopProvider],
    apiKeys: new MemoryApiKeyStore(),
    ledger: new MemoryLedger({ balances: { [USER_ID]: BALANCE } }),
    runner: { enabled: false },
    recovery: { onStart: false, intervalMs: 0 },
    ...extra,
  });
}

export function gc(): void {
  const g = (globalThis as { gc?: () => void }).gc;
  if (!g) throw new Error('run node with --expose-gc');
  for (let i = 0; i < 3; i++) g();
}

export interface ScaleResult {
  get: { small: Latency; large: Latency };
  create: { small: Latency; large: Latency };
  /** `store.list(owner, { limit: 20 })`: the first page of GET /v1/generations. SQLite only. */
  list?: { small: Latency; large: Latency };
  small: number;
  large: number;
}

interface Side {
  service: GenerationService;
  ids: string[];
}

const BATCH_GETS = 1000;
const LIST_PAGE = 20;
const BATCH_CREATES = 250;

/**
 * Two stores side by side, one holding `small` generations and one `large`, measured in alternating batches (the
 * order swapped every batch) so JIT warm-up, GC and drift fall on both alike.
 */
async function alternateSizes(small: Side, large: Side, samples: { gets: number; creates: number }, r: { small: number; large: number }): Promise<ScaleResult> {
  const warm: number[] = [];
  for (const side of [small, large]) {
    await timeGets(side.service, side.ids, 5000, warm);
    await timeCreates(side.service, 1000, warm);
  }
  gc();
  const g = { small: [] as number[], large: [] as number[] };
  const c = { small: [] as number[], large: [] as number[] };
  for (let b = 0; b * BATCH_GETS < samples.gets; b++) {
    for (const k of b % 2 === 0 ? (['small', 'large'] as const) : (['large', 'small'] as const)) {
      const side = k === 'small' ? small : large;
      await timeGets(side.service, side.ids, BATCH_GETS, g[k]);
    }
  }
  for (let b = 0; b * BATCH_CREATES < samples.creates; b++) {
    for (const k of b % 2 === 0 ? (['small', 'large'] as const) : (['large', 'small'] as const)) {
      await timeCreates((k === 'small' ? small : large).service, BATCH_CREATES, c[k]);
    }
  }
  return {
    get: { small: summarize(g.small), large: summarize(g.large) },
    create: { small: summarize(c.small), large: summarize(c.large) },
    small: r.small,
    large: r.large,
  };
}

/** In-memory store; the fill goes through `service.create` (so the ledger's reserves grow too, as in real use). */
export async function scaleMemory(small: number, large: number, samples: { gets: number; creates: number }): Promise<ScaleResult> {
  const sides: Side[] = [];
  try {
    for (const size of [small, large]) {
      const service = apiOnly();
      await service.start();
      const ids: string[] = [];
      sides.push({ service, ids });
      while (ids.length < size) ids.push((await service.create(USER_ID, { modelId: MODEL_ID, settings: SETTINGS })).generationId);
    }
    return await alternateSizes(sides[0]!, sides[1]!, samples, { small, large });
  } finally {
    for (const s of sides) await s.service.stop({ timeoutMs: 1000 });
  }
}

/**
 * SQLite, one file per size; the fill writes the generations (and their ledger reserves) with the store's own
 * INSERT statements in 10k-row transactions: a million single-row commits would take minutes and measure nothing
 * new.
 */
export async function scaleSqlite(dir: string, small: number, large: number, samples: { gets: number; creates: number }): Promise<ScaleResult> {
  const open: Array<{ stores: SqliteStores; side: Side }> = [];
  try {
    for (const size of [small, large]) {
      const stores: SqliteStores = createSqliteStores({ filename: path.join(dir, `scale-${size}.db`) });
      await stores.ledger.credit(USER_ID, BALANCE);
      const service = apiOnly({ store: stores.store, ledger: stores.ledger, apiKeys: stores.apiKeys, idempotency: stores.idempotency });
      await service.start();
      const ids: string[] = [];
      open.push({ stores, side: { service, ids } });
      const insertGen = stores.db.prepare(SQLITE_INSERT);
      // The stored history is finished work, as in real use: the in-flight cap keeps a user's unfinished rows few.
      const finishGen = stores.db.prepare(
        `UPDATE generations SET status = 'completed', result_text = 'ok', claims = 1, finished_at = @now, updated_at = @now WHERE id = @id`,
      );
      const insertReserve = stores.db.prepare(
        `INSERT INTO reserves (generation_id, user_id, amount, state, charged, created_at, settled_at)
         VALUES (@generationId, @userId, @amount, 'settled', @amount, @now, @now)`,
      );
      const settings = JSON.stringify(SETTINGS);
      const batch = stores.db.transaction((count: number) => {
        const now = Date.now();
        for (let i = 0; i < count; i++) {
          const id = randomBytes(16).toString('base64url');
          insertGen.run({ id, ownerId: USER_ID, modelId: MODEL_ID, settings, reserved: 1, createdAt: now });
          finishGen.run({ id, now });
          insertReserve.run({ generationId: id, userId: USER_ID, amount: 1, now });
          ids.push(id);
        }
      });
      while (ids.length < size) batch(Math.min(10_000, size - ids.length));
      stores.db.pragma('wal_checkpoint(TRUNCATE)');
    }
    const result = await alternateSizes(open[0]!.side, open[1]!.side, samples, { small, large });
    // As many pages as gets: both are one indexed read of one owner's rows.
    result.list = await alternateListPages(open[0]!.stores.store, open[1]!.stores.store, samples.gets);
    const ratio = result.list.large.p50Us / result.list.small.p50Us;
    console.log(
      `[scale] SQLite list page (limit ${LIST_PAGE}) p50: ${small} stored ${result.list.small.p50Us.toFixed(1)} µs, ` +
        `${large} stored ${result.list.large.p50Us.toFixed(1)} µs; ratio ${ratio.toFixed(2)} (target <= 1.2: ${ratio <= 1.2 ? 'met' : 'MISSED'})`,
    );
    return result;
  } finally {
    for (const o of open) {
      await o.side.service.stop({ timeoutMs: 1000 });
      await o.stores.close();
    }
  }
}

/**
 * Heap per retained generation in the in-memory store: heapUsed + arrayBuffers after gc, before and after `count` generations,
 * divided by `count`. `completed` runs them to completion first (runner on, no-op provider), so each also holds
 * its result text, lease and settled reserve.
 */
export async function memoryPerGeneration(count: number, completed: boolean): Promise<number> {
  // Counted from the user's account (lib/settled.ts): a replaced `settle` would take the service off the in-store path.
  const ledger = new MemoryLedger({ balances: { [USER_ID]: BALANCE } });
  const tokens = settledCount(ledger, USER_ID);
  // The host keeps the store it passes in (the service exposes no store getter).
  const store = new MemoryGenerationStore();
  const service = createGenerationService({
    // A million generations for one user: far past the default in-flight cap.
    limits: { inFlightPerUser: 100_000_000 },
    providers: [noopProvider],
    store,
    ledger,
    runner: { enabled: completed },
    recovery: { onStart: false, intervalMs: 0 },
  });
  await service.start();
  try {
    // One generation first, so that lazily built structures are not counted against the measured ones.
    await service.create(USER_ID, { modelId: MODEL_ID, settings: SETTINGS });
    for (let i = 0; i < 1000 && completed && (await tokens.settled()) < 1; i++) await new Promise((r) => setTimeout(r, 5));
    gc();
    // The heap and the array buffers beside it (the memory store keeps its timestamps in one Float64Array).
    const used = (): number => {
      const m = process.memoryUsage();
      return m.heapUsed + m.arrayBuffers;
    };
    const before = used();
    for (let i = 0; i < count; i++) await service.create(USER_ID, { modelId: MODEL_ID, settings: SETTINGS });
    if (completed) {
      for (let i = 0; i < 60_000 && (await tokens.settled()) < count + 1; i++) await new Promise((r) => setTimeout(r, 5));
      const settled = await tokens.settled();
      if (settled < count + 1) throw new Error(`memory: only ${settled} of ${count + 1} completed`);
    }
    gc();
    const after = used();
    const counts = await store.countByStatus();
    const expected = completed ? counts.completed : counts.pending;
    if (expected !== count + 1) throw new Error(`memory: store holds ${JSON.stringify(counts)}`);
    return (after - before) / count;
  } finally {
    await service.stop({ timeoutMs: 1000 });
  }
}
