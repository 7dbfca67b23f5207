/**
 * What the three framework servers share: our service (in-memory store, no-op provider, runner on), the bare side's
 * data and work, the IPC protocol with the load process (`drain`: wait until every accepted generation completed),
 * and the CPU profiler the load process can switch on.
 *
 * A server is `node ... servers/<framework>.ts ours|bare [metrics]`. It listens on 127.0.0.1 (a free port), then sends
 * `{ type: 'ready', port, id }` where `id` is the completed generation to GET. With `metrics`, ours records every
 * metric through a Prometheus MeterProvider (tracing stays the API's no-op) and answers `{ type: 'scrape' }` with
 * `{ type: 'scraped', text }`.
 */
import { Session } from 'node:inspector/promises';
import { writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { hash, randomFillSync, randomUUID } from 'node:crypto';
import { createPrometheusMetrics } from '@genservice/metrics-prometheus';
import {
  createGenerationService,
  MemoryApiKeyStore,
  MemoryGenerationStore,
  MemoryLedger,
  type GenerationContext,
  type GenerationService,
} from '@genservice/core';
import { API_KEY, BALANCE, BARE_ID, MODEL, MODEL_ID, RESULT_TEXT, RUNNER_CONCURRENCY, SETTINGS, USER_ID, noopProvider } from '../lib/fixture.js';
import { childLifecycle, send } from '../lib/proc.js';
import { settledCount } from '../lib/settled.js';

export type Variant = 'ours' | 'bare';

export function variantArg(): Variant {
  const v = process.argv[2];
  if (v !== 'ours' && v !== 'bare') throw new Error(`usage: servers/<framework>.ts ours|bare (got ${v})`);
  return v;
}

/** What a server answers to `drain`: how long it took until every accepted generation had completed. */
export interface Drained {
  drainMs: number;
  created: number;
  completed: number;
  failed: number;
}

/**
 * Our service as the HTTP cases use it: every port in memory, the no-op provider, a balance that never runs out,
 * **the runner on** (in process, concurrency 8): a POST is measured until the generation it created has completed.
 * Periodic recovery is off (`intervalMs: 0`), so no background scan runs during a case. The generation the GET case
 * reads is created through the service and completed by the runner before the server reports ready.
 */
export async function ourService(): Promise<{ service: GenerationService; id: string; drain: () => Promise<Drained> }> {
  const store = new MemoryGenerationStore();
  const ledger = new MemoryLedger({ balances: { [USER_ID]: BALANCE } });
  // Counted from the user's account, not by overriding the ledger's methods (lib/settled.ts).
  const count = settledCount(ledger, USER_ID);
  const prom = process.argv[3] === 'metrics' ? createPrometheusMetrics() : undefined;
  if (prom) {
    process.on('message', (m: { type?: string } | null) => {
      if (m?.type === 'scrape') void prom.scrape().then((text) => send({ type: 'scraped', text }));
    });
  }
  const service = createGenerationService({
    ...(prom ? { telemetry: { meterProvider: prom.meterProvider } } : {}),
    providers: [noopProvider],
    // The bench queues far more than the default in-flight cap for its one user.
    limits: { inFlightPerUser: 10_000_000 },
    apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: API_KEY, userId: USER_ID }] }),
    store,
    ledger,
    runner: { concurrency: RUNNER_CONCURRENCY },
    recovery: { onStart: false, intervalMs: 0 },
  });
  await service.start();
  const { generationId: id } = await service.create(USER_ID, { modelId: MODEL_ID, settings: SETTINGS });
  await count.idle();
  const seed = await service.get(USER_ID, id);
  if (seed.status !== 'completed') throw new Error(`the seed generation is ${seed.status}, not completed`);
  let counted = 0;
  const drain = async (): Promise<Drained> => {
    const t0 = performance.now();
    await count.idle();
    const drainMs = performance.now() - t0;
    // Checked after the clock stopped: a scan of every stored generation is not part of the work measured.
    const counts = await store.countByStatus();
    const settled = await count.settled();
    const created = settled - counted;
    counted = settled;
    return { drainMs, created, completed: counts.completed, failed: counts.failed };
  };
  return { service, id, drain };
}

/** The bare side's generation, as a hand-written service would keep it. */
interface BareRecord {
  ownerId: string;
  modelId: string;
  settings: Record<string, string>;
  status: 'pending' | 'processing' | 'completed' | 'failed';
  price: number;
  result?: string;
}

export type BareAnswer = { status: number; body: unknown };

const NOT_FOUND = { error: { code: 'not_found', message: 'Generation not found.' } };
export const BARE_UNAUTHORIZED = { error: { code: 'unauthorized', message: 'A valid API key is required (Authorization: Bearer <key>).' } };
const BEARER = /^Bearer +(\S+)$/i;

/**
 * The headers ours puts on every answer besides the content type, set by the bare side too, so that both write the
 * same bytes (the comparison is of the work, not of how many headers go out): no caching of a per-user answer, no
 * MIME sniffing, and a request id (16 random bytes from a pool refilled a block at a time, as ours makes them).
 */
const barePool = Buffer.allocUnsafe(16 * 256);
let barePoolOffset = barePool.length;
export function bareHeaders(): Record<string, string> {
  if (barePoolOffset === barePool.length) {
    randomFillSync(barePool);
    barePoolOffset = 0;
  }
  const start = barePoolOffset;
  barePoolOffset += 16;
  return { 'cache-control': 'no-store', 'x-content-type-options': 'nosniff', 'x-request-id': barePool.toString('base64url', start, barePoolOffset) };
}

/**
 * The bare side: what a user would write by hand for the same work, framework-neutral so the three bare servers do
 * exactly the same. A Bearer key looked up by its SHA-256 digest in a Map; owner-scoped reads of a Map of records
 * answered with the same view ours gives; the same models JSON, serialised once; and a create that validates the body
 * (model, required and select settings, no undeclared ones), reserves the price, stores a record, answers 201 and runs
 * the same no-op provider on the next ticks (pending -> processing -> completed, then settles).
 */
export function bareData(): {
  id: string;
  modelsJson: string;
  auth: (authorization: string | undefined) => string | null;
  get: (userId: string, id: string) => BareAnswer;
  create: (userId: string, body: unknown) => BareAnswer;
  drain: () => Promise<Drained>;
} {
  const keys = new Map<string, string>([[hash('sha256', API_KEY, 'hex'), USER_ID]]);
  const records = new Map<string, BareRecord>([
    [BARE_ID, { ownerId: USER_ID, modelId: MODEL_ID, settings: { ...SETTINGS }, status: 'completed', price: 1, result: RESULT_TEXT }],
  ]);
  const balances = new Map<string, number>([[USER_ID, BALANCE]]);
  const models = [
    {
      modelId: MODEL.modelId,
      title: MODEL.title,
      resultType: MODEL.resultType,
      estimatedGenerationTime: MODEL.estimatedGenerationTime,
      settings: MODEL.settings.map((s) => ({ ...s })),
    },
  ];
  const declared = new Map(MODEL.settings.map((s) => [s.name, s]));
  let created = 0;
  let finished = 0;
  let completed = 0;
  let failed = 0;
  let waiters: Array<() => void> = [];
  const ctx = {} as GenerationContext;
  const run = async (rec: BareRecord): Promise<void> => {
    rec.status = 'processing';
    try {
      const out = await noopProvider.generate({ model: MODEL, settings: rec.settings }, ctx);
      rec.result = 'text' in out ? out.text : undefined;
      rec.status = 'completed';
      completed++;
    } catch {
      rec.status = 'failed';
      rec.price = 0;
      failed++;
    }
    finished++;
    if (finished >= created && waiters.length > 0) for (const w of waiters.splice(0)) w();
  };
  const invalid = (message: string): BareAnswer => ({ status: 400, body: { error: { code: 'invalid_settings', message } } });
  return {
    id: BARE_ID,
    modelsJson: JSON.stringify({ models }),
    auth: (authorization) => {
      const m = authorization === undefined ? null : BEARER.exec(authorization);
      return m ? (keys.get(hash('sha256', m[1]!, 'hex')) ?? null) : null;
    },
    get: (userId, id) => {
      const rec = records.get(id);
      if (!rec || rec.ownerId !== userId) return { status: 404, body: NOT_FOUND };
      const view = rec.status === 'completed' ? { status: rec.status, result: rec.result, price: rec.price } : rec.status === 'failed' ? { status: rec.status, price: rec.price } : { status: rec.status };
      return { status: 200, body: view };
    },
    create: (userId, body) => {
      if (body === null || typeof body !== 'object' || Array.isArray(body)) return { status: 400, body: { error: { code: 'invalid_request', message: 'The request body must be a JSON object.' } } };
      const { modelId, settings } = body as { modelId?: unknown; settings?: unknown };
      if (modelId !== MODEL_ID) return { status: 404, body: { error: { code: 'model_not_found', message: 'Model not found.' } } };
      if (settings === null || typeof settings !== 'object' || Array.isArray(settings)) return invalid('settings must be an object');
      const given = settings as Record<string, unknown>;
      for (const name of Object.keys(given)) {
        const def = declared.get(name);
        if (!def) return invalid(`${name} is not a setting of this model`);
        const v = given[name];
        if (typeof v !== 'string') return invalid(`${name} must be a string`);
        if (def.fieldType === 'select' && !def.options!.includes(v)) return invalid(`${name} must be one of the options`);
      }
      for (const def of MODEL.settings) if (def.required && given[def.name] === undefined) return invalid(`${def.name} is required`);
      const price = 1;
      const balance = balances.get(userId) ?? 0;
      if (balance < price) return { status: 402, body: { error: { code: 'insufficient_funds', message: 'The balance is too low.' } } };
      balances.set(userId, balance - price);
      const id = randomUUID();
      const rec: BareRecord = { ownerId: userId, modelId, settings: given as Record<string, string>, status: 'pending', price };
      records.set(id, rec);
      created++;
      setImmediate(run, rec);
      return { status: 201, body: { generationId: id } };
    },
    drain: async () => {
      const t0 = performance.now();
      if (finished < created) await new Promise<void>((resolve) => waiters.push(resolve));
      const drainMs = performance.now() - t0;
      const n = created;
      created = finished = 0;
      waiters = [];
      const out = { drainMs, created: n, completed, failed };
      return out;
    },
  };
}

let profiler: Session | undefined;

/** IPC: `profile-start` / `profile-stop { file }` drive the V8 CPU profiler (what --cpu-prof uses) over a load window. */
function profilerHooks(): void {
  process.on('message', (m: any) => {
    if (!m || typeof m !== 'object') return;
    if (m.type === 'profile-start') {
      void (async () => {
        profiler = new Session();
        profiler.connect();
        await profiler.post('Profiler.enable');
        await profiler.post('Profiler.setSamplingInterval', { interval: 100 });
        await profiler.post('Profiler.start');
        send({ type: 'profile-started' });
      })().catch((err: unknown) => send({ type: 'error', message: String(err) }));
    } else if (m.type === 'profile-stop') {
      void (async () => {
        if (!profiler) throw new Error('profiler not started');
        const { profile } = await profiler.post('Profiler.stop');
        profiler.disconnect();
        profiler = undefined;
        writeFileSync(String(m.file), JSON.stringify(profile));
        send({ type: 'profile-stopped', file: m.file });
      })().catch((err: unknown) => send({ type: 'error', message: String(err) }));
    }
  });
}

/** Wires the lifecycle, reports the port, and closes the server (and service) on exit. */
export function serve(server: Server, id: string, close: () => Promise<void>, drain: () => Promise<Drained>): void {
  childLifecycle(async () => {
    server.closeAllConnections?.();
    await new Promise<void>((r) => server.close(() => r()));
    await close();
  });
  profilerHooks();
  process.on('message', (m: { type?: string } | null) => {
    if (m?.type !== 'drain') return;
    drain().then(
      (d) => send({ type: 'drained', ...d }),
      (err: unknown) => send({ type: 'error', message: String(err) }),
    );
  });
  const address = server.address();
  if (!address || typeof address === 'string') throw new Error('server is not listening on a TCP port');
  send({ type: 'ready', port: address.port, id });
}

export function fail(err: unknown): never {
  send({ type: 'error', message: err instanceof Error ? (err.stack ?? err.message) : String(err) });
  console.error(err);
  process.exit(1);
}
