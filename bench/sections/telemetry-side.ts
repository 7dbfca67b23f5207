/**
 * One side of the telemetry comparison (sections/telemetry.ts), in a process of its own:
 * `node --import tsx sections/telemetry-side.ts on|off <warm gets> <warm posts>` builds its service, warms it up and
 * sends `{ type: 'ready' }`; then, for each `{ type: 'chunk', kind: 'get' | 'post', n }` over IPC, runs n GETs or n
 * POSTs run to completion and answers `{ type: 'done', us }`, the CPU µs the chunk took (measured here, so the IPC
 * is not in it). The two sides' chunks alternate (the driver sends them in turn), so both run at the same moments.
 */
import { createGenerationService, MemoryApiKeyStore, MemoryLedger, type GenerationService, type HttpRequest } from '@genservice/core';
import { createPrometheusMetrics } from '@genservice/metrics-prometheus';
import { childLifecycle, send } from '../lib/proc.js';
import { API_KEY, BALANCE, RUNNER_CONCURRENCY, USER_ID, VALID_BODY, noopProvider } from '../lib/fixture.js';

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

async function main(): Promise<void> {
  childLifecycle();
  const [mode, getsArg, postsArg] = process.argv.slice(2);
  if (mode !== 'on' && mode !== 'off') throw new Error(`usage: telemetry-side.ts on|off <warm gets> <warm posts> (got ${mode})`);
  const side = await make(mode === 'on');
  process.on('message', (m: { type?: string; kind?: 'get' | 'post'; n?: number } | null) => {
    if (m?.type !== 'chunk') return;
    // One chunk at a time: the driver waits for each answer before it sends the next.
    const work = m.kind === 'get' ? timeGets(side.service, side.id, m.n!) : timePosts(side.service, side.ledger, m.n!);
    work.then(
      (perRequest) => send({ type: 'done', us: perRequest * m.n! }),
      (err: unknown) => send({ type: 'error', message: err instanceof Error ? (err.stack ?? err.message) : String(err) }),
    );
  });
  await timeGets(side.service, side.id, Number(getsArg));
  await timePosts(side.service, side.ledger, Number(postsArg));
  globalThis.gc?.();
  if (side.scrape) {
    // The "on" side really records: its scrape has the requests.
    const text = await side.scrape();
    if (!/genservice_http_requests_total\{route="\/v1\/generations\/\{id\}",status="200"\} [1-9]/.test(text) || !/genservice_generation_run_seconds_count\{model="[^"]+"\} [1-9]/.test(text)) {
      throw new Error('telemetry bench: the metrics side recorded nothing');
    }
  }
  send({ type: 'ready' });
}

main().catch((err: unknown) => {
  send({ type: 'error', message: err instanceof Error ? (err.stack ?? err.message) : String(err) });
  setTimeout(() => process.exit(1), 50);
});
