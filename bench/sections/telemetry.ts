/**
 * What observability costs a request: `service.handle()` GET (a completed generation) and POST (a create, run to
 * completion by the in-process runner) with metrics and tracing on (a Prometheus MeterProvider recording every
 * instrument, the tracer the OpenTelemetry API gives without an SDK: no-op) against off (no SDK: every instrument a
 * no-op), in one process, in alternating rounds, CPU time per request (min of the rounds). In process there is no
 * framework or socket to hide the cost in, so this is the strictest comparison.
 */
import { createGenerationService, MemoryApiKeyStore, MemoryLedger, type GenerationService, type HttpRequest } from '@genservice/core';
import { createPrometheusMetrics } from '@genservice/metrics-prometheus';
import { API_KEY, BALANCE, RUNNER_CONCURRENCY, USER_ID, VALID_BODY, noopProvider } from '../lib/fixture.js';

export interface TelemetryResult {
  /** CPU µs per request. */
  get: { off: number; on: number };
  post: { off: number; on: number };
}

async function make(on: boolean): Promise<{ service: GenerationService; id: string; ledger: MemoryLedger; scrape?: () => Promise<string> }> {
  const apiKeys = new MemoryApiKeyStore();
  await apiKeys.addKey(API_KEY, USER_ID);
  const ledger = new MemoryLedger({ balances: { [USER_ID]: BALANCE } });
  const prom = on ? createPrometheusMetrics() : undefined;
  const service = createGenerationService({
    providers: [noopProvider],
    apiKeys,
    ledger,
    runner: { concurrency: RUNNER_CONCURRENCY },
    limits: { inFlightPerUser: 1_000_000 },
    ...(prom ? { telemetry: { meterProvider: prom.meterProvider } } : {}),
  });
  await service.start();
  const created = await service.handle(POST);
  const id = (JSON.parse(String(created.body)) as { generationId: string }).generationId;
  await drain(ledger);
  return { service, id, ledger, ...(prom ? { scrape: prom.scrape } : {}) };
}

const POST: HttpRequest = {
  method: 'POST',
  path: '/v1/generations',
  headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
  body: VALID_BODY,
};

/** Until every reserve of the ledger is settled (every accepted generation finished). */
async function drain(ledger: MemoryLedger): Promise<void> {
  for (;;) {
    if ((await ledger.account(USER_ID)).reserved === 0) return;
    await new Promise((r) => setImmediate(r));
  }
}

function cpuUs(): number {
  const u = process.cpuUsage();
  return u.user + u.system;
}

async function timeGets(service: GenerationService, id: string, n: number): Promise<number> {
  const req: HttpRequest = { method: 'GET', path: `/v1/generations/${id}`, headers: { authorization: `Bearer ${API_KEY}` } };
  const t0 = cpuUs();
  for (let i = 0; i < n; i++) {
    const r = await service.handle(req);
    if (r.status !== 200) throw new Error(`GET answered ${r.status}`);
  }
  return (cpuUs() - t0) / n;
}

async function timePosts(service: GenerationService, ledger: MemoryLedger, n: number): Promise<number> {
  const t0 = cpuUs();
  // In batches of the runner's concurrency and then some, so runs overlap as under load.
  for (let i = 0; i < n; i += 64) {
    const batch: Array<Promise<unknown>> = [];
    for (let j = 0; j < 64 && i + j < n; j++) {
      batch.push(
        service.handle(POST).then((r) => {
          if (r.status !== 201) throw new Error(`POST answered ${r.status}`);
        }),
      );
    }
    await Promise.all(batch);
  }
  await drain(ledger);
  return (cpuUs() - t0) / n;
}

export async function telemetryBench(options: { rounds: number; gets: number; posts: number }): Promise<TelemetryResult> {
  const off = await make(false);
  const on = await make(true);
  const out: TelemetryResult = { get: { off: Infinity, on: Infinity }, post: { off: Infinity, on: Infinity } };
  try {
    // Warm-up of both, then alternating rounds (off, on, on, off, ...) so drift in the machine's load hits both.
    await timeGets(off.service, off.id, options.gets / 4);
    await timeGets(on.service, on.id, options.gets / 4);
    await timePosts(off.service, off.ledger, options.posts / 4);
    await timePosts(on.service, on.ledger, options.posts / 4);
    for (let round = 0; round < options.rounds; round++) {
      const order = round % 2 === 0 ? ([['off', off], ['on', on]] as const) : ([['on', on], ['off', off]] as const);
      for (const [name, side] of order) {
        globalThis.gc?.();
        out.get[name] = Math.min(out.get[name], await timeGets(side.service, side.id, options.gets));
        globalThis.gc?.();
        out.post[name] = Math.min(out.post[name], await timePosts(side.service, side.ledger, options.posts));
      }
    }
    // The "on" side really recorded: its scrape has the requests.
    const text = await on.scrape!();
    if (!/genservice_http_requests_total\{route="\/v1\/generations\/\{id\}",status="200"\} [1-9]/.test(text)) throw new Error('telemetry bench: the metrics side recorded nothing');
  } finally {
    await off.service.stop();
    await on.service.stop();
  }
  return out;
}
