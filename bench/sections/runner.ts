/**
 * Runner: N no-op generations through the service API (`service.create` in a loop, the in-process runner on
 * p-queue, until every one is completed and settled) against the same work on raw p-queue at the same concurrency
 * (a Map set per generation, then a task that marks it processing, calls the same no-op provider and marks it
 * completed with the result). Alternated: ours, raw, ours, raw.
 */
import PQueue from 'p-queue';
import { randomBytes } from 'node:crypto';
import { createGenerationService, MemoryGenerationStore, MemoryLedger, type GenerationContext } from '@genservice/core';
import { BALANCE, MODEL, MODEL_ID, SETTINGS, USER_ID, noopProvider } from '../lib/fixture.js';
import { settledCount } from '../lib/settled.js';

export const CONCURRENCY = 8;

/** Generations per second through the service; throws unless every one ended `completed`. */
export async function oursRunner(n: number): Promise<number> {
  const ledger = new MemoryLedger({ balances: { [USER_ID]: BALANCE } });
  // Counted from the user's account (lib/settled.ts): a replaced `settle` would take the service off the path a host's takes.
  const count = settledCount(ledger, USER_ID);
  const store = new MemoryGenerationStore();
  const service = createGenerationService({
    providers: [noopProvider],
    // The bench queues far more than the default in-flight cap for its one user.
    limits: { inFlightPerUser: 10_000_000 },
    ledger,
    store,
    runner: { concurrency: CONCURRENCY },
    recovery: { onStart: false, intervalMs: 0 },
  });
  await service.start();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) await service.create(USER_ID, { modelId: MODEL_ID, settings: SETTINGS });
  const deadline = performance.now() + 600_000;
  while ((await count.settled()) < n) {
    if (performance.now() > deadline) throw new Error(`only ${await count.settled()}/${n} generations finished in 600 s`);
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  const seconds = (performance.now() - t0) / 1000;
  const counts = await store.countByStatus();
  await service.stop({ timeoutMs: 5000 });
  if (counts.completed !== n) throw new Error(`runner: expected ${n} completed, got ${JSON.stringify(counts)}`);
  return n / seconds;
}

interface RawRecord {
  id: string;
  ownerId: string;
  modelId: string;
  settings: Record<string, unknown>;
  status: 'pending' | 'processing' | 'completed';
  result?: string;
}

/** The same work on p-queue alone. */
export async function rawRunner(n: number): Promise<number> {
  const queue = new PQueue({ concurrency: CONCURRENCY });
  const records = new Map<string, RawRecord>();
  const ctx = {} as GenerationContext;
  let done = 0;
  const create = async (): Promise<{ generationId: string }> => {
    const id = randomBytes(16).toString('base64url');
    const rec: RawRecord = { id, ownerId: USER_ID, modelId: MODEL_ID, settings: { ...SETTINGS }, status: 'pending' };
    records.set(id, rec);
    void queue.add(async () => {
      rec.status = 'processing';
      const out = await noopProvider.generate({ model: MODEL, settings: rec.settings }, ctx);
      rec.status = 'completed';
      rec.result = 'text' in out ? out.text : undefined;
      done++;
    });
    return { generationId: id };
  };
  const t0 = performance.now();
  for (let i = 0; i < n; i++) await create();
  await queue.onIdle();
  const seconds = (performance.now() - t0) / 1000;
  if (done !== n) throw new Error(`raw runner: ${done}/${n} done`);
  return n / seconds;
}
