/**
 * What the three framework servers share: our service (in-memory store, no-op provider, runner disabled), the bare
 * side's data, the IPC protocol with the load process, and the CPU profiler the load process can switch on.
 *
 * A server is `node ... servers/<framework>.ts ours|bare`. It listens on 127.0.0.1 (a free port), then sends
 * `{ type: 'ready', port, id }` where `id` is the completed generation to GET.
 */
import { Session } from 'node:inspector/promises';
import { writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import {
  createGenerationService,
  MemoryApiKeyStore,
  MemoryGenerationStore,
  MemoryLedger,
  type GenerationService,
} from '@genservice/core';
import { API_KEY, BALANCE, BARE_ID, MODEL, MODEL_ID, RESULT_TEXT, SETTINGS, USER_ID, noopProvider } from '../lib/fixture.js';
import { childLifecycle, send } from '../lib/proc.js';

export type Variant = 'ours' | 'bare';

export function variantArg(): Variant {
  const v = process.argv[2];
  if (v !== 'ours' && v !== 'bare') throw new Error(`usage: servers/<framework>.ts ours|bare (got ${v})`);
  return v;
}

/**
 * Our service as the HTTP cases use it: every port in memory, the no-op provider, a balance that never runs out.
 * The runner is disabled (`runner.enabled: false`, an API-only instance): POST measures accepting a generation,
 * not running it. Periodic recovery is off too (`intervalMs: 0`), so no background scan runs during a case.
 * The generation the GET case reads is completed through the store and ledger ports, exactly as the executor
 * would (claim, complete, settle).
 */
export async function ourService(): Promise<{ service: GenerationService; id: string }> {
  const store = new MemoryGenerationStore();
  const ledger = new MemoryLedger({ balances: { [USER_ID]: BALANCE } });
  const service = createGenerationService({
    providers: [noopProvider],
    // The bench queues far more than the default in-flight cap for its one user.
    limits: { inFlightPerUser: 10_000_000 },
    apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: API_KEY, userId: USER_ID }] }),
    store,
    ledger,
    runner: { enabled: false },
    recovery: { onStart: false, intervalMs: 0 },
  });
  await service.start();
  const { generationId: id } = await service.create(USER_ID, { modelId: MODEL_ID, settings: SETTINGS });
  const now = Date.now();
  const claimed = await store.claim(id, { workerId: 'bench-seed', leaseMs: 3_600_000, now });
  if (!claimed) throw new Error('could not claim the seed generation');
  if (!(await store.complete(id, { workerId: 'bench-seed', price: 1, resultText: RESULT_TEXT, now }))) {
    throw new Error('could not complete the seed generation');
  }
  await ledger.settle(id, 1);
  return { service, id };
}

/** The bare side: a Map holding the same view ours answers with, and the same models JSON, serialised once. */
export function bareData(): { store: Map<string, unknown>; id: string; modelsJson: string } {
  const store = new Map<string, unknown>([[BARE_ID, { status: 'completed', result: RESULT_TEXT, price: 1 }]]);
  const models = [
    {
      modelId: MODEL.modelId,
      title: MODEL.title,
      resultType: MODEL.resultType,
      estimatedGenerationTime: MODEL.estimatedGenerationTime,
      settings: MODEL.settings.map((s) => ({ ...s })),
    },
  ];
  return { store, id: BARE_ID, modelsJson: JSON.stringify({ models }) };
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
export function serve(server: Server, id: string, close: () => Promise<void> = async () => {}): void {
  childLifecycle(async () => {
    server.closeAllConnections?.();
    await new Promise<void>((r) => server.close(() => r()));
    await close();
  });
  profilerHooks();
  const address = server.address();
  if (!address || typeof address === 'string') throw new Error('server is not listening on a TCP port');
  send({ type: 'ready', port: address.port, id });
}

export function fail(err: unknown): never {
  send({ type: 'error', message: err instanceof Error ? (err.stack ?? err.message) : String(err) });
  console.error(err);
  process.exit(1);
}
